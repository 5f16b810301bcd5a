// store/chain_map.h: which slots of one chain each node covers.
//
// Built by walking a chain's node headers (a node's first slot says its
// span); everything the placement logic asks ("is there a free run of n
// slots", "which nodes would this window evict") is answered from it.
// REQUIRES: the chain's lock held while building and using it.
#pragma once

#include <cstdint>
#include <cstring>

#include "store/format.h"

namespace frs::store {

inline const NodeHeader* HeaderAt(const uint8_t* slot) { return reinterpret_cast<const NodeHeader*>(slot); }
inline NodeHeader* HeaderAt(uint8_t* slot) { return reinterpret_cast<NodeHeader*>(slot); }

struct ChainMap {
  static constexpr uint8_t kFree = 0xFF;
  uint32_t n = 0;
  uint8_t start[64];  // for each slot: first slot of the node covering it, or kFree

  // `slot0` points at the chain's first slot.
  void Build(const uint8_t* slot0, uint32_t chain) {
    n = chain;
    uint32_t i = 0;
    while (i < chain) {
      const NodeHeader* h = HeaderAt(slot0 + uint64_t{i} * kSlotBytes);
      if (h->key_len == 0) {
        start[i++] = kFree;
        continue;
      }
      uint32_t span = h->span == 0 ? 1 : h->span;  // a torn span is repaired by verify; never loop forever
      if (span > chain - i) span = chain - i;
      for (uint32_t k = 0; k < span; ++k) start[i + k] = static_cast<uint8_t>(i);
      i += span;
    }
  }
  uint32_t FreeSlots() const {
    uint32_t f = 0;
    for (uint32_t i = 0; i < n; ++i) f += start[i] == kFree;
    return f;
  }
  bool IsNodeStart(uint32_t i) const { return start[i] == i; }
  uint32_t SpanOf(uint32_t s) const {
    uint32_t k = s;
    while (k < n && start[k] == s) ++k;
    return k - s;
  }
};

}  // namespace frs::store
