// frs/store_placement.h: where the store may put a key, as pure functions
// of the key and the geometry, for simulations that must place keys exactly
// as the store does (frsbench store --fill compares the store's fill with
// placement without moves). The store itself calls the same code.
//
// A key of a biz may live in two key-node groups of one file (frs/store.h:
// KeynodeGroup key-nodes form a group of GroupSlots slots); a new node goes
// to the first, `a`, while it has room to spare, else to the one with more
// free slots (PlacementChoice). When neither has room the store moves a
// resident node to its other group or evicts one; these functions do not.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "frs/store.h"

namespace frs {

struct KeyPlacement {
  uint32_t file = 0;
  // The key's two groups in the file, 0 .. keynodes / KeynodeGroup(g) - 1;
  // a == b only when the file has a single group.
  uint32_t a = 0, b = 0;
};

// Where the key whose whole text is `key`, of biz `biz`, may live in a store
// of geometry `g` (g.files, g.keynodes and g.chain non-zero) and placement
// key (k0, k1): a store of format 6 has a random one of its own in its
// files' headers (kept from every client, which could otherwise choose keys
// that share a chain); (0, 0) places as a store of format 5 does. Either
// spreads keys alike, which is all a simulation needs.
KeyPlacement PlacementOf(const StoreGeometry& g, uint16_t biz, std::string_view key, uint64_t k0 = 0, uint64_t k1 = 0);

// Which of the key's groups a new node takes: fits[i] says whether group i
// (0: a, 1: b) has room for it and free_slots[i] how many slots it has free;
// `candidates` is 1 when a == b (or to simulate a single choice), else 2.
// Returns 0 or 1, or -1 when none of the candidates has room.
int PlacementChoice(const bool fits[2], const uint32_t free_slots[2], int candidates);

}  // namespace frs
