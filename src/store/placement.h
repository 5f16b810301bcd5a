// store/placement.h: where a key's node may live, and which of its two
// chains a new node prefers. Private to src/store (and to frsbench, whose
// fill simulations must place keys exactly as the store does).
//
// The place hash (identity.h: biz, key form and 64-bit identity mixed) picks
// the file and two key-nodes A (primary) and B (alternate) in it; the node
// lives in one of those two key-nodes' groups (frs/store.h KeynodeGroup),
// in its own key-node's chain while that has room. Below the placement
// code, "key-node" and "chain" mean a group and its slots. Lookups lock
// A and look there first; B is locked too only when the node is not in A or
// something must be inserted (store_impl.h). How Place finds room when
// neither chain has a free run is in StoreImpl::Place_locked (placement.cc).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "frs/key.h"
#include "frs/store.h"
#include "store/format.h"
#include "store/identity.h"

namespace frs::store {

// h * n / 2^64: a uniform 64-bit hash mapped onto [0, n) without a division.
inline uint32_t FastRange(uint64_t h, uint32_t n) {
  return static_cast<uint32_t>((static_cast<unsigned __int128>(h) * n) >> 64);
}

struct Location {
  // a, b: the key's two key-node groups in the file (a != b unless the file
  // has a single group); home_a, home_b: the first slot, inside each group,
  // of the key's own key-node's chain, where its node goes while that chain
  // has room (so a lookup usually finds it in the first tag word it scans).
  uint32_t file, a, b;
  uint32_t home_a = 0, home_b = 0;
};

// The file alone (what Update checks for breakage before it locks anything):
// the place hash's top bits.
inline uint32_t FileOf(uint64_t place_hash, const StoreGeometry& g) { return FastRange(place_hash, g.files); }

// A from the bits below the file's (the hash rotated), B from a second mix;
// neither uses the low byte, which is the tag (format.h TagOf). `g` is the
// configured geometry: the key-nodes are picked as format 4 picked them,
// then their groups (of `group` key-nodes) are where the node may live.
inline Location Locate(uint64_t place_hash, const StoreGeometry& g, uint32_t group) {
  Location l;
  l.file = FileOf(place_hash, g);
  uint32_t a = FastRange(place_hash << 20 | place_hash >> 44, g.keynodes);
  const uint64_t h2 = (place_hash >> 8) * 0x9E3779B97F4A7C15ull;
  uint32_t b = FastRange(h2 ^ (h2 >> 29), g.keynodes);
  if (b / group == a / group && g.keynodes > group) b = (b + group) % g.keynodes;
  l.a = a / group;
  l.b = b / group;
  l.home_a = a % group * g.chain;
  l.home_b = b % group * g.chain;
  return l;
}

// Two-choice balancing, the first step of placement: of the key's chains
// that have room for the node (`fits`), the one with the most free slots, A
// on a tie. `ncand` is 1 when A and B are one chain. -1: neither has room.
inline int LessLoaded(const bool fits[2], const uint32_t free_slots[2], int ncand) {
  int best = -1;
  for (int c = 0; c < ncand; ++c)
    if (fits[c] && (best < 0 || free_slots[c] > free_slots[best])) best = c;
  return best;
}

}  // namespace frs::store
