// ReadEach: many reads, each the load of Update (LoadNode_locked) under its
// chain's lock, with the lookups of the next items already under way.
//
// A read that waits for its own cache misses (the key-node heads, then the
// node) spends more time waiting than working once the store outgrows the
// cache. Here item i + kAhead is located and its heads are prefetched, and
// item i + kAhead / 2's matching slots (its heads arrived meanwhile), while
// item i is read: the misses of several items overlap. Each item is located
// once (its NodeKey and Location stay in the ring until it is read), where
// a caller prefetching through Prefetch and reading through Update would
// derive them three times.
#include <algorithm>
#include <cstring>

#include "store/chain_lock.h"
#include "store/store_impl.h"

namespace frs {

void Store::ReadEach(std::span<const ReadItem> items, uint32_t now_s, const ReadVisitor& fn) {
  // fn sees the copy once Update has returned: an Update that fails after
  // its mutator ran (a file that broke meanwhile) must not have shown it.
  alignas(8) uint8_t copy[kMaxStateBytes];
  for (size_t i = 0; i < items.size(); ++i) {
    NodeRef seen;
    Status s = Update(items[i].key, items[i].state_bytes, now_s, [&](NodeRef& node) {
      seen = node;
      std::memcpy(copy, node.state, std::min(node.state_bytes, kMaxStateBytes));
      seen.state = copy;
      return Commit::kNone;
    });
    if (s.ok()) {
      fn(i, s, seen);
    } else {
      NodeRef none;
      fn(i, s, none);
    }
  }
}

}  // namespace frs

namespace frs::store {

void StoreImpl::ReadEach(std::span<const ReadItem> items, uint32_t now_s, const ReadVisitor& fn) {
  constexpr size_t kAhead = 8;
  struct Located {
    NodeKey nk;
    Location loc;
  };
  Located ring[kAhead];
  const size_t n = items.size();
  auto locate = [&](size_t j) {
    if (j >= n) return;
    Located& l = ring[j % kAhead];
    l.nk = NodeKeyOf(items[j].key);
    l.loc = Locate(l.nk.place);
    if (const StoreFile* f = files_[l.loc.file].get(); !f->broken()) PrefetchHeads(f, l.loc);
  };
  auto prefetch_nodes = [&](size_t j) {
    if (j >= n) return;
    const Located& l = ring[j % kAhead];
    if (const StoreFile* f = files_[l.loc.file].get(); !f->broken()) PrefetchNodes(f, l.loc, l.nk.tag);
  };
  for (size_t j = 0; j < kAhead; ++j) locate(j);
  for (size_t j = 0; j < kAhead / 2; ++j) prefetch_nodes(j);

  alignas(8) uint8_t state[kMaxSpan * kSlotBytes];
  for (size_t i = 0; i < n; ++i) {
    const Located here = ring[i % kAhead];  // locate(i + kAhead) takes its place below
    const ReadItem& item = items[i];
    StoreFile* f = files_[here.loc.file].get();
    // As Update refuses: a read-only store, a file gone, an invalid item.
    Status s = read_only() ? ReadOnly() : FileUsable(f);
    if (s.ok()) s = CheckRequest(item.key, item.state_bytes);
    if (!s.ok()) {
      NodeRef none;
      fn(i, s, none);
    } else {
      NodeRef ref;
      bool whole = false;
      {
        LockSet locks(locks_, f);
        const Pos pos = LockAndFind(f, here.loc, here.nk, locks);
        LoadedNode node;
        LoadNode_locked(f, item.key, pos, item.state_bytes, now_s, state, &ref, &node);
        // The SIGBUS guard may have replaced the mapping mid-read: what was
        // read may then be its zero pages, not the node.
        whole = !f->broken();
        if (whole && pos.found) Touch_locked(HeaderAt(f->slot(pos.keynode, pos.slot)), node.heat, now_s);
      }
      // fn judges a private copy: it runs with the lock released.
      if (whole) {
        fn(i, Status::OK(), ref);
      } else {
        NodeRef none;
        fn(i, FileUsable(f), none);
      }
    }
    prefetch_nodes(i + kAhead / 2);
    locate(i + kAhead);
  }
}

}  // namespace frs::store
