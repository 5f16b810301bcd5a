// store/nodes.h: writing one node's slots and tags in a mapped file, each
// change journaled first in a Txn. Private to src/store. Functions of the
// file and the chain alone (the chain length is the file's, StoreFile::chain),
// shared by the store's operations (store_impl.h), the placer (placer.h) and
// Verify.
//
// Thread safety: every `_locked` function REQUIRES the lock of the chain it
// writes (a LockSet), and the Txn's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "store/format.h"
#include "store/journal.h"
#include "store/store_file.h"

namespace frs::store {

// A tag byte written for lock-free readers (PeekTag reads them unlocked).
inline void StoreTag(uint8_t* p, uint8_t v) { std::atomic_ref<uint8_t>(*p).store(v, std::memory_order_relaxed); }

// The tags of a node's slots: `tag` at its first, kContTag at the others
// (tag 0 at every slot: free). SaveTags_locked journals the key-node's tags
// when they would change (false: the journal refused); SetTags_locked then
// writes them, and the node's check byte (node_check.h), from the node as it
// now is in its slots: call it after writing them.
[[nodiscard]] bool SaveTags_locked(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot, uint32_t span, uint8_t tag);
void SetTags_locked(StoreFile* f, uint32_t keynode, uint32_t slot, uint32_t span, uint8_t tag);
// Journals, then clears the node at (keynode, slot): the extent its tags
// vouch for, so a damaged node never takes a neighbour with it; counts it
// off the txn's counters. False (nothing cleared) when the journal refused.
[[nodiscard]] bool ClearNode_locked(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot);

// Whether a node may be reclaimed before any live one: expired at `now_s`,
// or of a biz no longer configured (`live`: biz id -> configured).
inline bool IsStale(const NodeHeader* h, uint32_t now_s, const std::vector<bool>& live) {
  return (h->expire_s != 0 && h->expire_s <= now_s) || !live[h->biz];
}

}  // namespace frs::store
