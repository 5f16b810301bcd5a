// store/chain_map.h: which slots of one chain each node covers.
//
// Built by walking a chain's node headers (a node's first slot says its
// span); everything the placement logic asks ("is there a free run of n
// slots", "which nodes would this window evict") is answered from it.
// REQUIRES: the chain's lock held while building and using it.
//
// Thread safety: the chain's slots and tags are shared memory that writers
// change in place, hence the lock (a read-only store takes none and may see a
// chain mid-change: frs/store.h). A ChainMap is a value, used by the thread
// that holds the lock.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "store/format.h"
#include "store/identity.h"
#include "store/node_check.h"

namespace frs::store {

inline const NodeHeader* HeaderAt(const uint8_t* slot) { return reinterpret_cast<const NodeHeader*>(slot); }
inline NodeHeader* HeaderAt(uint8_t* slot) { return reinterpret_cast<NodeHeader*>(slot); }
inline Identity IdentityOfNode(const NodeHeader* h) { return Identity{h->id, static_cast<KeyForm>(KindOf(h))}; }
// The hash its tag derives from (unkeyed), and what its place derives from
// in a store of placement key `k` (identity.h).
inline uint64_t PlaceHashOf(const NodeHeader* h) { return PlaceHash(h->biz, IdentityOfNode(h)); }
inline uint64_t LocationOf(const PlaceKey& k, const NodeHeader* h) {
  return LocationHash(k, h->biz, IdentityOfNode(h));
}
// Whether a node's own fields describe a node of `span` slots (a compact
// node is one slot; a general one holds its header, state and key bytes).
inline bool FieldsFit(const NodeHeader* h, uint32_t span) {
  if (IsCompact(h)) return span == 1;
  const GeneralExt* x = ExtOf(h);
  return uint32_t{kGeneralHeaderBytes} + x->state_len + x->key_stored <= span * kSlotBytes &&
         (x->key_len == 0 ? x->key_stored == 0 : x->key_stored <= x->key_len);
}

// How many slots the node starting at slot `i` really covers. Nothing read
// from the mapping is trusted: the header's span counts only when it is in
// range, the state and key bytes fit it, the node's tag matches its
// fingerprint, its check byte its contents (node_check.h), and every other
// slot it covers is tagged as a continuation.
// Otherwise the node is damaged, and its extent is its own slot plus the
// continuation (or untagged, non-free) slots after it (at most kMaxSpan): damage never
// reaches a neighbour that the tags vouch for, and a damaged node can be
// cleared without touching anything else.
struct NodeExtent {
  uint32_t span = 1;
  bool damaged = false;
};
// `tag_is_its_own`: the caller has matched the header's identity against a
// key whose tag is tags[i] (a lookup), so the tag needs no hashing here.
inline NodeExtent ExtentAt(const uint8_t* slot0, const uint8_t* tags, uint32_t chain, uint32_t i,
                           bool tag_is_its_own = false) {
  const NodeHeader* h = HeaderAt(slot0 + uint64_t{i} * kSlotBytes);
  const uint32_t span = SpanOf(h);
  bool ok = span >= 1 && span <= kMaxSpan && span <= chain - i && FieldsFit(h, span) &&
            (tag_is_its_own || tags[i] == TagOf(PlaceHashOf(h))) &&
            ChecksOf(tags, chain)[i] == NodeCheck(slot0 + uint64_t{i} * kSlotBytes, span);
  for (uint32_t k = 1; ok && k < span; ++k) ok = tags[i + k] == kContTag;
  if (ok) return {span, false};
  // Damaged: its own slot and the slots after it that claim to continue a
  // node (or that carry no tag but are not free).
  uint32_t n = 1;
  while (n < kMaxSpan && i + n < chain &&
         (tags[i + n] == kContTag || (tags[i + n] == 0 && !IsFree(HeaderAt(slot0 + uint64_t{i + n} * kSlotBytes)))))
    ++n;
  return {n, true};
}

// The one walk over a chain's nodes: calls fn(slot, extent) for each node,
// in slot order from `from` (a node's first slot), damaged ones included
// (extent.damaged), and on_free(slot) for each free slot. The extent is
// taken before fn runs, so fn may clear the node it is given.
// ChainMap::Build, ForEach, EraseIf and Verify all walk through it.
// REQUIRES: the chain's lock.
struct SkipFreeSlots {
  void operator()(uint32_t) const {}
};
template <class Fn, class FreeFn = SkipFreeSlots>
inline void WalkChain(const uint8_t* slot0, const uint8_t* tags, uint32_t chain, uint32_t from, Fn&& fn,
                      FreeFn&& on_free = {}) {
  uint32_t i = from;
  while (i < chain) {
    // Free: a free header that no tag vouches for. A tagged slot whose header
    // reads free is a damaged node (ExtentAt), not room.
    if (IsFree(HeaderAt(slot0 + uint64_t{i} * kSlotBytes)) && tags[i] == 0) {
      on_free(i++);
      continue;
    }
    const NodeExtent e = ExtentAt(slot0, tags, chain, i);
    fn(i, e);
    i += e.span;
  }
}

struct ChainMap {
  static constexpr uint8_t kFree = 0xFF;
  uint32_t n = 0;
  uint8_t start[64];     // for each slot: first slot of the node covering it, or kFree
  uint64_t damaged = 0;  // bit s: the node starting at s is damaged (see ExtentAt)
  uint64_t free = 0;     // bit s: start[s] == kFree (placement searches runs in it)

  void MarkFree(uint32_t s) {
    start[s] = kFree;
    free |= uint64_t{1} << s;
  }

  // `slot0` points at the chain's first slot, `tags` at its tags.
  void Build(const uint8_t* slot0, const uint8_t* tags, uint32_t chain) {
    n = chain;
    damaged = 0;
    free = 0;
    WalkChain(
        slot0, tags, chain, 0,
        [&](uint32_t i, NodeExtent e) {
      if (e.damaged) damaged |= uint64_t{1} << i;
      for (uint32_t k = 0; k < e.span; ++k) start[i + k] = static_cast<uint8_t>(i);
        },
        [&](uint32_t i) { MarkFree(i); });
  }
  // The same from the tags alone (format.h ChainHead): 64 bytes instead of
  // every node header. Nothing is validated: what placement then writes
  // over or clears is checked first (a run's slots must read free, a node
  // its extent: ExtentAt), and a run that does not read free sends it back
  // to Build. A continuation tag with no node before it is a node of its
  // own, marked damaged.
  void FromTags(const uint8_t* tags, uint32_t chain) {
    n = chain;
    damaged = 0;
    free = 0;
    uint8_t cur = kFree;
    uint32_t cur_span = 0;
    for (uint32_t i = 0; i < chain; ++i) {
      const uint8_t t = tags[i];
      if (t == 0) {
        MarkFree(i);
        cur = kFree;
      } else if (t == kContTag && cur != kFree && cur_span < kMaxSpan) {
        start[i] = cur;
        ++cur_span;
      } else {
        if (t == kContTag) damaged |= uint64_t{1} << i;
        start[i] = cur = static_cast<uint8_t>(i);
        cur_span = 1;
      }
    }
  }
  bool IsDamaged(uint32_t s) const { return (damaged >> s) & 1; }
  uint32_t FreeSlots() const { return static_cast<uint32_t>(std::popcount(free)); }
  bool IsNodeStart(uint32_t i) const { return start[i] == i; }
  uint32_t SpanOf(uint32_t s) const {
    uint32_t k = s;
    while (k < n && start[k] == s) ++k;
    return k - s;
  }
};

}  // namespace frs::store
