// store/store_impl.h: the Store implementation over a cluster of StoreFiles.
//
// Placement: the fingerprint picks the file and two key-nodes A (primary) and
// B (alternate) in it. Lookups lock A and look there first, so the common case
// (a node in its primary chain) takes one lock; B is locked too only when the
// node is not in A or something must be inserted. Locks are always taken in
// increasing key-node order, or with try-lock, so no two writers deadlock.
//
// Writes are journaled: before a slot changes, its old image goes into this
// thread's writer entry of that file. If the writer dies, whoever takes its
// lock over restores the images, so the chain is exactly as before the
// interrupted critical section.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "frs/store.h"
#include "os/shm_lock.h"
#include "store/chain_map.h"
#include "store/placement.h"
#include "store/store_file.h"

namespace frs::store {

class StoreImpl final : public Store {
 public:
  StoreImpl(StoreOptions opts, std::vector<std::unique_ptr<StoreFile>> files);
  ~StoreImpl() override;

  const StoreGeometry& geometry() const override { return geo_; }
  Status Update(const KeyRef& key, uint32_t state_bytes, uint32_t now_s, const Mutator& fn,
                UpdateResult* result) override;
  Status UpdateBatch(std::span<const BatchItem> items, uint32_t now_s, const BatchMutator& fn,
                     std::vector<UpdateResult>* results) override;
  Result<NodeInfo> Get(const KeyRef& key) override;
  Status Erase(const KeyRef& key) override;
  Status ForEach(const Filter& filter, const Visitor& visit) override;
  Result<uint64_t> EraseIf(const Filter& filter, const std::function<bool(const NodeInfo&)>& pred) override;
  void SetLiveBizzes(std::vector<bool> live) override;
  Status CheckFiles() override;
  StoreStats Stats() const override;
  Status Flush(bool sync) override;
  Status Reserve() override;
  Result<uint32_t> RecoverDeadOwner(int32_t pid) override;
  Result<VerifyReport> Verify(bool repair) override;
  // See store/test_hooks.h.
  void SetTestHook(std::function<void(int)> hook) { hook_ = std::move(hook); }

  Location Locate(const Fingerprint& fp) const { return store::Locate(fp, geo_); }

 private:
  class Txn;
  class LockSet;
  struct Pos {
    uint32_t keynode = 0, slot = 0;
    bool found = false;
  };
  struct Placement {
    uint32_t keynode = 0, slot = 0;
    bool ok = false;
  };

  // Lock helpers; take-over of a dead owner runs recovery before returning.
  void LockChain(StoreFile* f, uint32_t keynode);
  void RecoverOwnerLocked(StoreFile* f, os::Owner dead);  // REQUIRES: the chain lock taken over
  // Undoes (or, for a committed batch across files, keeps) and frees every
  // writer entry of `dead` in every file; returns how many were undone. The
  // only copy of that loop.
  uint32_t RecoverDeadWriters(os::Owner dead);
  void UndoEntry(StoreFile* f, WriterEntryHeader* w);
  WriterEntryHeader* MyWriter(uint32_t file_index);

  // REQUIRES: A's lock. Finds the key's node in A, else (taking B's lock in
  // order, possibly retaking A) in B. On return A, and B unless found in A, are held.
  Pos FindWithA(StoreFile* f, const Location& loc, const KeyRef& key, LockSet& locks);
  // REQUIRES: the key-node's lock. Looks only at slots whose tag matches.
  bool FindInChain(StoreFile* f, uint32_t keynode, uint16_t biz, const Fingerprint& fp, uint32_t* slot) const;
  // Without the lock: whether any slot carries `tag` (a hint).
  bool PeekTag(StoreFile* f, uint32_t keynode, uint8_t tag) const;
  // Journals, then sets the tags of a node's slots (tag 0 = free).
  void SetTags(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot, uint32_t span, uint8_t tag);
  static void StoreTag(uint8_t* p, uint8_t v) { std::atomic_ref<uint8_t>(*p).store(v, std::memory_order_relaxed); }
  static bool IsStale(const NodeHeader* h, uint32_t now_s, const std::vector<bool>& live);
  static uint32_t SpanFor(uint32_t state_bytes, uint32_t key_len);

  // Finds room for a node of `span` slots in chain A or B (both locked),
  // reclaiming stale nodes, moving one resident to its other chain, or
  // evicting the least recently used, in that order. `pinned` nodes (a batch's
  // members) are never moved or evicted.
  Placement Place(StoreFile* f, Txn& txn, const Location& loc, uint32_t span, uint32_t now_s, LockSet& locks,
                  const std::vector<std::pair<uint32_t, uint32_t>>* pinned, UpdateResult* r);
  // Where a written node says its route lies: the caller's, else the node's
  // own (`existing`, may be null), else the one its whole key implies.
  struct RouteMark {
    uint32_t pos = 0;
    bool known = false;
  };
  static RouteMark RouteFor(const KeyRef& key, const NodeHeader* existing);
  void WriteNode(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot, uint32_t span, const KeyRef& key,
                 RouteMark route, bool alternate, uint8_t heat, const uint8_t* state, uint32_t state_bytes, const uint8_t* key_bytes,
                 uint32_t key_stored, uint32_t expire_s, uint32_t now_s);
  void ClearNode(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot);
  // A read that changes nothing else still records the use (last second and
  // heat) for eviction. Not journaled: losing it in a crash loses nothing.
  static void Touch(NodeHeader* h, uint8_t heat, uint32_t now_s) {
    h->last_access_s = now_s;
    h->flags = NodeFlags(h->flags & kNodeInAlternate, heat);
  }
  void FillInfo(uint32_t file, uint32_t keynode, uint32_t slot, const uint8_t* p, NodeInfo* out) const;

  static Status WritersBusy(StoreFile* f);
  static Status FileUsable(const StoreFile* f);
  Status ReadOnly() const;
  bool read_only() const { return opts_.read_only; }
  Status UpdateImpl(const KeyRef& key, uint32_t state_bytes, uint32_t now_s, const Mutator& fn, UpdateResult* result);
  Status UpdateBatchImpl(std::span<const BatchItem> items, uint32_t now_s, const BatchMutator& fn,
                         std::vector<UpdateResult>* results);
  // Counts a damaged node met by a lookup or a walk, and logs it once.
  void NoteDamage(StoreFile* f, uint32_t keynode, uint32_t slot) const;
  Status CheckRequest(const KeyRef& key, uint32_t state_bytes, uint32_t* span) const;

  StoreOptions opts_;
  StoreGeometry geo_;
  std::vector<std::unique_ptr<StoreFile>> files_;
  const uint64_t instance_;
  std::shared_ptr<const std::vector<bool>> live_;  // biz id -> live; guarded by live_mu_
  mutable std::mutex live_mu_;
  std::function<void(int)> hook_;
  std::mutex claimed_mu_;
  struct Claimed {
    uint32_t file, entry;
    uint64_t owner;  // os::Owner::word()
    pid_t pid;
  };
  std::vector<Claimed> claimed_;
  mutable std::mutex damage_mu_;
  mutable std::set<std::pair<std::string, uint64_t>> damage_logged_;
};

}  // namespace frs::store
