// store/store_impl.h: the Store implementation over a cluster of StoreFiles.
//
// Placement: the fingerprint picks the file and two key-nodes A (primary) and
// B (alternate) in it (placement.h). Lookups lock A and look there first, so
// the common case (a node in its primary chain) takes one lock; B is locked
// too only when the node is not in A or something must be inserted. Locks are
// always taken in increasing key-node order, or with try-lock, so no two
// writers deadlock.
//
// Writes are journaled: before a slot changes, its old image goes into this
// thread's writer entry of that file. If the writer dies, whoever takes its
// lock over restores the images, so the chain is exactly as before the
// interrupted critical section.
//
// StoreImpl composes its collaborators, each a class of its own over the
// mapped files, geometry and options it is given at construction, with its
// own test (tests/store/<name>_test.cc), none a friend:
//   WriterTable   writer_table.h   writer entries: claimed, kept between
//                                  writes, handed to waiters; batch entries;
//                                  the one recovery of dead writers
//   ChainLocks    chain_lock.h     chain locks (LockSet: one operation's),
//                                  take-over of a dead owner's lock
//   Placer        placer.h         room for a node: free run, stale reclaim,
//                                  cuckoo step, LRU eviction; the live bizzes
// An operation's undo journal is a Txn (journal.h) in an entry of the
// writer table.
// The operations are defined by concept in:
//   nodes.h, nodes.cc       one node: find, write, clear, tags, copy out
//   placement.h             Locate and the placement's pure decisions
//   update.cc               Update and UpdateBatch over one node load and one
//                           node write-back
//   read_each.cc            ReadEach: reads on the same load, pipelined
//   chain_map.h             a chain's extents, and the one walk over its
//                           nodes (WalkChain)
//   chain_walk.cc           the one walk over many chains (WalkChains), and
//                           ForEach and EraseIf on it
//   store_verify.cc         Verify (on both walks)
//   store_impl.cc           construction and the small operations
//
// Names: a function whose name ends in `_locked` REQUIRES the lock of every
// chain it reads or writes, held by the caller (a LockSet), or a read-only
// store (which takes no locks).
//
// Thread safety: one StoreImpl may be used from many threads (frs/store.h).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "frs/store.h"
#include "os/shm_lock.h"
#include "store/chain_lock.h"
#include "store/chain_map.h"
#include "store/journal.h"
#include "store/placement.h"
#include "store/placer.h"
#include "store/store_file.h"
#include "store/tag_match.h"
#include "store/writer_table.h"

namespace frs::store {

class StoreImpl final : public Store {
 public:
  StoreImpl(StoreOptions opts, std::vector<std::unique_ptr<StoreFile>> files);
  ~StoreImpl() override;

  const StoreGeometry& geometry() const override { return user_geo_; }
  Status Update(const KeyRef& key, uint32_t state_bytes, uint32_t now_s, const Mutator& fn,
                UpdateResult* result) override;
  Status UpdateBatch(std::span<const BatchItem> items, uint32_t now_s, const BatchMutator& fn,
                     std::vector<UpdateResult>* results) override;
  void ReadEach(std::span<const ReadItem> items, uint32_t now_s, const ReadVisitor& fn) override;
  void Prefetch(const KeyRef& key, Prefetching what) const override;
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
  void ReleaseIdleWriters() override { writers_.ReleaseKept(/*only_if_wanted=*/true); }
  Result<VerifyReport> Verify(bool repair) override;
  // See store/test_hooks.h.
  void SetTestHook(std::function<void(int)> hook) { hook_ = std::move(hook); }

  Location Locate(uint64_t place_hash) const { return store::Locate(place_hash, user_geo_, group_); }

 private:
  struct Pos {
    uint32_t keynode = 0, slot = 0;
    bool found = false;
    uint32_t span = 0;  // found: the slots the node covers (its extent)
  };
  // Where a written node says its route lies (see RouteFor).
  struct RouteMark {
    uint32_t pos = 0;
    bool known = false;
  };
  // What finding and placing a key's node needs, computed once per request
  // (identity.h).
  struct NodeKey {
    uint16_t biz = 0;
    Identity ident;
    uint64_t place = 0;  // LocationHash under place_key_: its file and key-nodes
    uint8_t tag = 0;     // TagOf(PlaceHash)
  };
  NodeKey NodeKeyOf(const KeyRef& key) const;
  void LocateKey(KeyRef* key) const override;
  // A node composed in private, then copied into its slots whole.
  struct NodeImage {
    alignas(8) uint8_t bytes[kMaxSpan * kSlotBytes];
    uint32_t span = 0;
    uint8_t tag = 0;
  };

  // ---- one node (nodes.cc)
  // Looks only at slots whose tag matches; a damaged match counts as absent.
  // Found: `pos` says where, and the extent the damage check measured.
  // `home`: the key's own chain in the group, scanned first.
  bool FindInChain_locked(StoreFile* f, uint32_t keynode, uint32_t home, const NodeKey& nk, Pos* pos) const;
  // Without the lock: whether any slot carries `tag` (a hint). Inline: two
  // of these start every update.
  bool PeekTag(StoreFile* f, uint32_t keynode, uint8_t tag) const {
    return AnyTagged(f->tags(keynode), geo_.chain, tag);
  }
  // The same for the tag word of slot `home` alone.
  bool HomeTagged(StoreFile* f, uint32_t keynode, uint32_t home, uint8_t tag) const {
    return TagWordMatches(f->tags(keynode), home / 8, geo_.chain, tag) != 0;
  }
  // Writing a node's tags and clearing a node: nodes.h.
  // Composes a node: compact when its state packs and its key text need not
  // be kept, else general (format.h). `key_bytes` are the key bytes at hand
  // (`key_avail` of them).
  static void ComposeNode(const NodeKey& nk, const KeyRef& key, RouteMark route, uint8_t heat, const uint8_t* state,
                          uint32_t state_bytes, const uint8_t* key_bytes, uint32_t key_avail, uint32_t expire_s,
                          uint32_t now_s, NodeImage* out);
  // Journals, then writes a composed node at (keynode, slot), marked as
  // living in the key's alternate key-node or not. False (nothing written)
  // when the journal refused.
  [[nodiscard]] bool WriteNode_locked(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot, NodeImage& img,
                                      bool alternate);
  // A read that changes nothing else still records the use (last second and
  // heat) for eviction. Not journaled: losing it in a crash loses nothing.
  // Written only when it changes, so that reads of a node used within the
  // same second, at full heat, leave its page clean.
  static void Touch_locked(NodeHeader* h, uint8_t heat, uint32_t now_s) {
    const uint8_t hk = static_cast<uint8_t>((h->heat_kind & ~kMaxHeat) | (heat & kMaxHeat));
    if (h->last_access_s != now_s) h->last_access_s = now_s;
    if (h->heat_kind != hk) h->heat_kind = hk;
  }
  void FillInfo_locked(uint32_t file, uint32_t keynode, uint32_t slot, const uint8_t* p, NodeInfo* out) const;
  // A group's slot as the configured geometry names it: the key-node whose
  // chain holds it, and its place in that chain.
  struct UserPos {
    uint32_t keynode, slot;
  };
  UserPos UserPosOf(uint32_t group, uint32_t slot) const {
    return {group * group_ + slot / user_geo_.chain, slot % user_geo_.chain};
  }
  // "keynode K slot S" in the configured geometry, for messages.
  std::string Where(uint32_t group, uint32_t slot) const;
  // Whether a walk's filter selects the node starting at (group, slot).
  bool Selects(const Filter& filter, uint32_t group, uint32_t slot) const {
    return filter.keynode < 0 || UserPosOf(group, slot).keynode == filter.keynode;
  }
  // The caller's route, else the node's own (`existing`, may be null), else
  // the one the whole key implies.
  static RouteMark RouteFor(const KeyRef& key, const RouteMark* existing);
  // Counts a damaged node met by a lookup or a walk, and logs it once.
  void NoteDamage(StoreFile* f, uint32_t keynode, uint32_t slot) const;

  // ---- Update and UpdateBatch (update.cc), and ReadEach (read_each.cc)
  // What LoadNode_locked read from the node, for StoreNode_locked.
  struct LoadedNode {
    Pos pos;                // where the node is (pos.found false: a new one)
    uint32_t old_span = 0;  // the extent it covers now
    uint8_t heat = 1;       // its heat with this use (a new node's first use)
    RouteMark route;        // the route it was written under
    // The key bytes to store: the caller's, unless the node holds more of them
    // (an import by fingerprint), which are then kept.
    bool keep_key = false;
    uint32_t key_stored = 0;
    uint8_t kept_key[kMaxKeyBytes];
    const uint8_t* key_bytes(const KeyRef& key) const {
      return keep_key ? kept_key : reinterpret_cast<const uint8_t*>(key.bytes.data());
    }
  };
  enum class WriteBack { kWritten, kNeedBothLocks, kNoRoom, kJournalFull };
  // Takes the key's lock(s) and finds its node: by a peek at both chains'
  // tags, under B's lock alone when the node lives in B only, else as
  // FindWithA_locked.
  Pos LockAndFind(StoreFile* f, const Location& loc, const NodeKey& nk, LockSet& locks);
  // REQUIRES: A's lock. Finds the key's node in A, else (taking B's lock in
  // order, possibly retaking A) in B. On return A, and B unless found in A, are held.
  Pos FindWithA_locked(StoreFile* f, const Location& loc, const NodeKey& nk, LockSet& locks);
  // What a mutator sees of the node at `pos` (or of a new one), and what
  // writing it back must keep.
  void LoadNode_locked(StoreFile* f, const KeyRef& key, const Pos& pos, uint32_t state_bytes, uint32_t now_s,
                       uint8_t* state, NodeRef* ref, LoadedNode* out) const;
  // Writes a loaded node back: in place when it fits, else moved or created
  // by Place_locked. kNeedBothLocks (nothing written): growing needs both
  // chains' locks.
  WriteBack StoreNode_locked(StoreFile* f, Txn& txn, const Location& loc, const NodeKey& nk, const KeyRef& key,
                             const LoadedNode& node, const NodeRef& ref, uint32_t now_s, LockSet& locks, Pins* pins,
                             UpdateResult* r);
  Status UpdateImpl(const KeyRef& key, const NodeKey& nk, uint32_t state_bytes, uint32_t now_s, const Mutator& fn,
                    UpdateResult* result);
  Status UpdateBatchImpl(std::span<const BatchItem> items, std::span<const NodeKey> nks, std::span<const Location> locs,
                         uint32_t now_s, const BatchMutator& fn, std::vector<UpdateResult>* results);
  // A batch entry of each file `locs` names (in file order), then every
  // chain of every member locked, in (file, key-node) order.
  Status ClaimAndLockBatch(std::span<const Location> locs, std::vector<BatchWriterClaim>& claims,
                           std::vector<std::unique_ptr<LockSet>>& lockset);
  // Members naming one node (owner[i]: the first of them) share its buffer:
  // the owner's node takes the strongest commit asked of it.
  static void MergeSharedCommits(std::span<const size_t> owner, std::span<NodeRef> refs, std::span<Commit> commits);
  Status CheckRequest(const KeyRef& key, uint32_t state_bytes) const;
  // Prefetch's two steps on a located key (store_impl.cc): the key-node
  // heads (lock words and tags) of both chains, and, once those are in
  // cache, the slots whose tags match.
  void PrefetchHeads(const StoreFile* f, const Location& loc) const;
  void PrefetchNodes(const StoreFile* f, const Location& loc, uint8_t tag) const;

  // ---- walks (chain_walk.cc)
  using ChainFn = std::function<Status(uint32_t file_index, StoreFile* f, uint32_t keynode)>;
  // Calls `chain` for every chain `filter` selects, in file and key-node
  // order, with no lock held: between two chains it stops (Unavailable) on a
  // stop request, saying `done_so_far()`, or on a broken file, and paces
  // itself to filter.busy_percent. The first error `chain` returns ends it.
  Status WalkChains(const Filter& filter, const ChainFn& chain,
                    const std::function<std::string()>& done_so_far = nullptr);
  // Calls fn(slot, extent) for each node of one chain (WalkChain, chain_map.h).
  template <class Fn>
  void WalkChain_locked(StoreFile* f, uint32_t keynode, Fn&& fn, uint32_t from = 0) const {
    WalkChain(f->slot(keynode, 0), f->tags(keynode), geo_.chain, from, std::forward<Fn>(fn));
  }

  // ---- Verify (store_verify.cc)
  // Checks (and with `repair` fixes) one chain; counts its intact nodes and
  // their slots. A repair that cannot be journaled is not made; the report
  // says so.
  void VerifyChain(StoreFile* f, uint32_t file_index, uint32_t keynode, bool repair, VerifyReport* rep, uint64_t* nodes,
                   uint64_t* slots);

  // ---- statuses
  static Status WritersBusy(StoreFile* f);
  static Status JournalFull(StoreFile* f);
  static Status FileUsable(const StoreFile* f);
  Status ReadOnly() const;
  bool read_only() const { return opts_.read_only; }

  StoreOptions opts_;
  // The configured geometry, which the files' headers, the tools and every
  // message speak of; and the one laid out and locked (placement.h
  // GroupGeometry): geo_.keynodes groups of geo_.chain slots. Every
  // "keynode" below is a group, every "slot" a slot of one.
  StoreGeometry user_geo_;
  uint32_t group_;
  StoreGeometry geo_;
  std::vector<std::unique_ptr<StoreFile>> files_;
  // The collaborators, over files_ and the geometry above (declared after
  // them: they are built from them, and gone before them).
  WriterTable writers_;
  ChainLocks locks_;
  Placer placer_;
  const PlaceKey place_key_;  // every file's (Store::Open checks they agree)
  const uint64_t instance_;   // NextInstance(): tells KeyRef::located_by this open store from any other
  std::function<void(int)> hook_;
  mutable Mutex damage_mu_;
  mutable std::set<std::pair<std::string, uint64_t>> damage_logged_ FRS_GUARDED_BY(damage_mu_);
};

}  // namespace frs::store
