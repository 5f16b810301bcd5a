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
// something must be inserted (store_impl.h). How room is found when
// neither chain has a free run is the Placer's (placer.h).
//
// Locate, LessLoaded and FreeRunIn are the placement's decisions as pure
// functions of a key's hash and the chains' maps: no store state, each
// tested alone (tests/store/placement_test.cc). The steps that act on them
// (evict, move) are the Placer's (placer.h, tests/store/placer_test.cc).
//
// Thread safety: pure functions.
#pragma once

#include <bit>
#include <cstdint>

#include "frs/key.h"
#include "frs/store.h"
#include "store/chain_map.h"
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

// h * n / 2^64 and, from the bits below it, a second uniform pick in
// [0, m): the product's fraction times m. Two multiplications, no division.
inline void FastRange2(uint64_t h, uint32_t n, uint32_t m, uint32_t* hi, uint32_t* lo) {
  const unsigned __int128 p = static_cast<unsigned __int128>(h) * n;
  *hi = static_cast<uint32_t>(p >> 64);
  *lo = static_cast<uint32_t>((static_cast<unsigned __int128>(static_cast<uint64_t>(p)) * m) >> 64);
}

// A from the bits below the file's (the hash rotated), B from a second mix;
// neither uses the low byte, which is the tag (format.h TagOf). `g` is the
// configured geometry and `group` its key-nodes per group: each pick is a
// group, then the key's own key-node (its chain) inside it.
inline Location Locate(uint64_t place_hash, const StoreGeometry& g, uint32_t group) {
  Location l;
  l.file = FileOf(place_hash, g);
  const uint32_t groups = g.keynodes / group;
  uint32_t in_a, in_b;
  FastRange2(place_hash << 20 | place_hash >> 44, groups, group, &l.a, &in_a);
  const uint64_t h2 = (place_hash >> 8) * 0x9E3779B97F4A7C15ull;
  FastRange2(h2 ^ (h2 >> 29), groups, group, &l.b, &in_b);
  if (l.b == l.a && groups > 1) l.b = l.a + 1 == groups ? 0 : l.a + 1;
  l.home_a = in_a * g.chain;
  l.home_b = in_b * g.chain;
  return l;
}

// Two-choice balancing, the first step of placement: of the key's chains
// that have room for the node (`fits`), A while it has kSpacious free slots
// or more, else the one with the most free slots (A on a tie). `ncand` is 1
// when A and B are one chain. -1: neither has room.
//
// A node in A is found under one lock, in the first chain a lookup scans;
// one in B costs a scan of A's 64 tags (a false match one time in five at
// 85 % fill: a node header read for nothing) and a second lock. Balancing
// matters only as groups fill up, so A is taken until it is nearly full.
inline constexpr uint32_t kSpacious = 16;
inline int LessLoaded(const bool fits[2], const uint32_t free_slots[2], int ncand) {
  if (fits[0] && free_slots[0] >= kSpacious) return 0;
  int best = -1;
  for (int c = 0; c < ncand; ++c)
    if (fits[c] && (best < 0 || free_slots[c] > free_slots[best])) best = c;
  return best;
}

// First slot of a free run of `need` slots in `m`, or -1.
//
// A one-slot node takes the free slot nearest after `home` (the key's own
// chain in its group, wrapping round), so it stays in its key-node's chain
// while that has room and a lookup finds it in the first tag word it scans.
// A longer node takes the start of the shortest free run that holds it
// (best fit; among equals, the one nearest after `home`): placed at home
// instead, nodes of 3 slots left holes of 1 and 2 between them and a group
// filled to 80 % instead of 97 % before the first live eviction.
inline int FreeRunIn(const ChainMap& m, uint32_t need, uint32_t home = 0) {
  uint64_t f = m.free;
  if (f == 0) return -1;
  if (need == 1) {
    const uint64_t after = home < 64 ? f & (~uint64_t{0} << home) : 0;
    return std::countr_zero(after ? after : f);
  }
  int best = -1;
  uint32_t best_len = UINT32_MAX;
  bool best_after_home = false;
  while (f != 0) {
    const uint32_t i = static_cast<uint32_t>(std::countr_zero(f));
    const uint64_t rest = f >> i;  // bit 0 set: the run starts here
    const uint32_t len = ~rest == 0 ? 64 - i : static_cast<uint32_t>(std::countr_one(rest));
    if (len >= need) {
      const bool after_home = i >= home;
      if (len < best_len || (len == best_len && after_home && !best_after_home)) {
        best = static_cast<int>(i);
        best_len = len;
        best_after_home = after_home;
      }
    }
    f = i + len >= 64 ? 0 : f & (~uint64_t{0} << (i + len));
  }
  return best;
}

}  // namespace frs::store
