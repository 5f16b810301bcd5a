// frs/store.h: the counter store, a cluster of mmap files of key-nodes.
//
// Geometry: `files` files under one directory, each holding `keynodes`
// key-nodes; a key-node is the head of a conflict chain of `chain` slots of
// 32 bytes, and consecutive key-nodes form groups of up to 64 slots whose
// chains take each other's overflow (KeynodeGroup below). A node is 1..16
// consecutive slots of one group: a 24-byte header
// (64-bit identity, biz, expiry, last access, route position), then either
// a 16-byte one-rule state packed into 8 bytes (a compact node: one slot),
// or the state's and key's lengths, the state bytes and as many key bytes as
// the node keeps (docs/store.md, "Bytes per key"). A key may live in the group of
// either of its two key-nodes (both in one file, picked by the fingerprint):
// lookups scan at most those two groups; inserts move a resident node to its
// other key-node's group to make room (one cuckoo step) before evicting anything.
//
// Eviction: a node whose expiry has passed, or whose biz is no longer live,
// is stale and is reused first; when no room can be made, the least recently
// used live node of the two groups goes. Both are counted in the file headers.
//
// Concurrency: one Store object may be used from many threads, and any number
// of processes may open the same directory at once (frsd workers, frsctl, a
// program linking this library). Each key-node group has a lock word holding
// the owner's thread id; waiters spin, then sleep on a futex (the kernel
// semaphore). A waiter that finds the owner dead takes the lock over and
// first undoes the dead owner's half-done writes from its journal, so nobody
// ever sees a torn node and no completed update is lost. Mutators run under
// the chain lock: they must be short and must not call back into the store.
//
// Persistence: the files are shared mappings: a completed update is in the
// page cache and survives the death of every process. What an OS crash can
// take is bounded by the kernel's writeback (vm.dirty_expire_centisecs), or
// by Flush() when called more often (frsd's <flush interval_ms>).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "frs/key.h"
#include "frs/status.h"

namespace frs {

inline constexpr uint32_t kSlotBytes = 32;
inline constexpr uint32_t kNodeHeaderBytes = 24;     // every node
inline constexpr uint32_t kGeneralHeaderBytes = 28;  // a general node: plus state and key lengths
inline constexpr uint32_t kMaxSpan = 16;             // slots per node
inline constexpr uint32_t kMaxStateBytes = kMaxSpan * kSlotBytes - kGeneralHeaderBytes;

// Slots a general node takes: its header, `state_bytes` of state and the
// `kept_key_bytes` it must keep (a biz with keys="keep": the whole key). A
// compact node (a 16-byte state that packs) takes one. A geometry whose
// GroupSlots (below) is under this for some biz cannot hold that biz's nodes.
inline constexpr uint32_t NodeSlots(uint32_t state_bytes, uint32_t kept_key_bytes) {
  return (kGeneralHeaderBytes + state_bytes + kept_key_bytes + kSlotBytes - 1) / kSlotBytes;
}

struct StoreGeometry {
  uint32_t files = 2;
  uint32_t keynodes = 65536;
  uint32_t chain = 8;
  uint64_t slots() const { return uint64_t{files} * keynodes * chain; }
  friend bool operator==(const StoreGeometry&, const StoreGeometry&) = default;
};

// Key-node groups (store format 5). Consecutive key-nodes form groups of at
// most 64 slots that share one lock and one head of tags: a key's node
// lives in one of its two key-nodes' groups, a one-slot node in its own
// key-node's chain while that has room, a longer one where it fits best. So nodes of several slots (sliding windows,
// two rules) pack as densely as one-slot nodes: a chain of 8 alone holds two nodes of 3 slots, a group of 64 slots
// holds 21 (docs/store.md). The group is the largest count of key-nodes that divides `keynodes` and keeps the group
// within 64 slots (8 key-nodes of chain 8, 4 of chain 16, 1 of 64).
inline uint32_t KeynodeGroup(const StoreGeometry& g) {
  if (g.chain == 0 || g.keynodes == 0) return 1;
  uint32_t n = 64 / g.chain < g.keynodes ? 64 / g.chain : g.keynodes;
  for (; n > 1; --n)
    if (g.keynodes % n == 0) return n;
  return 1;
}
// The most slots a node may take in a store of this geometry: a group's.
inline uint32_t GroupSlots(const StoreGeometry& g) { return KeynodeGroup(g) * g.chain; }

// Derives the key's identity in the store once (KeyRef::prepared), and its
// fingerprint only when the identity needs one (a key that does not fit 64
// bits): a caller that builds a KeyRef from key text and hands it to the
// store more than once calls this instead of FingerprintOf.
void PrepareKey(KeyRef* key);

struct StoreOptions {
  std::string dir;
  StoreGeometry geometry;
  bool create_if_missing = true;  // false: a missing store is NotFound
  // A store is created only whole: when some of its files exist and others
  // do not, Open refuses and names the missing ones (their counts are gone
  // unless restored). This creates them empty instead (frsctl init
  // --recreate-missing, an operator's explicit choice).
  bool recreate_missing_files = false;
  // Maps the files read-only (a store on a read-only file system, or files
  // this user may not write): reads take no locks, since a lock word cannot
  // be written, and so may see a chain that a writer elsewhere is changing
  // at that instant; every write is refused (Unavailable).
  bool read_only = false;
  // How long a write waits for a writer entry when every entry of its file
  // is held (Store::ReleaseIdleWriters) before it fails with Busy.
  uint32_t writer_wait_ms = 5000;
  // Each file has 32 writer entries (undo journals), shared by every
  // process and thread that writes it. false (the default, what an
  // in-process program gets): a thread takes an entry for each write and
  // hands it back at the end of that write, so a thread that stops writing
  // holds none and cannot lock another opener (frsd) out. true: a thread
  // keeps its entry between writes (one claim less per write), hands it
  // back at the end of a write when someone waits for one, and must call
  // Store::ReleaseIdleWriters while it idles (frsd's workers, whose loop
  // does so once a second).
  bool keep_writer_entries = false;
  // Called (rarely) with what the store recovered from or worked around, as
  // one sentence: a dead owner's lock taken over, a long wait on a live
  // owner, a damaged node ignored. May be empty.
  std::function<void(const std::string& what)> on_recovery;
  // Called when a write begins to wait for a chain lock that a live thread
  // holds (that thread's id; its try and its short spin failed), and with 0
  // when the wait ends. frsd's workers publish it, so that the master's
  // watch over hung workers tells a worker that waits for another from one
  // that is stuck itself. May be empty.
  std::function<void(uint32_t owner_tid)> on_lock_wait;
};

// What the mutator sees and may change. `state` is a private copy: it is
// written back only when the mutator returns kWrite.
struct NodeRef {
  bool exists = false;              // false: a new node, state zeroed
  uint8_t* state = nullptr;         // state_bytes writable bytes
  uint32_t state_bytes = 0;         // as requested by the caller
  uint32_t stored_state_bytes = 0;  // what the node held before (0 when new)
  uint32_t expire_s = 0;            // node becomes stale at this unix second (in/out)
};

enum class Commit : uint8_t { kNone, kWrite, kErase };

// One node as seen by iteration and Get.
struct NodeInfo {
  uint32_t file = 0, keynode = 0, slot = 0, span = 0;
  bool in_alternate = false;  // lives in its second key-node
  bool compact = false;       // one slot, its state packed
  uint16_t biz = 0;
  // The node's identity: fp.lo (the store keeps the fingerprint's low half;
  // fp.hi is 0), or, for a key kept in its identity, the fingerprint of
  // (biz, key) recomputed.
  Fingerprint fp;
  uint8_t key_len = 0;  // full key length; 0: not kept (fp.lo identifies the node)
  std::string key;      // stored key bytes (a prefix when shorter than key_len)
  uint32_t expire_s = 0, last_access_s = 0;
  uint32_t route_pos = 0;  // the route's ring position (frs/ring.h)
  bool route_known = false;
  std::vector<uint8_t> state;
};

struct FileStats {
  uint64_t nodes_used = 0;  // nodes (not slots)
  uint64_t slots_used = 0;
  uint64_t evictions_stale = 0;
  uint64_t evictions_live = 0;
  uint64_t cuckoo_moves = 0;
  uint64_t lock_recoveries = 0;
  uint64_t damaged_nodes = 0;  // damaged nodes met and ignored (verify --repair clears them)
  uint64_t created_unix = 0;
};

struct StoreStats {
  StoreGeometry geometry;
  uint64_t slots = 0;
  uint64_t bytes_mapped = 0;
  FileStats total;
  std::vector<FileStats> per_file;
};

struct UpdateResult {
  bool found = false;    // the node existed before
  bool created = false;  // a node was created
  bool evicted_live = false;
  bool evicted_stale = false;
};

class Store {
 public:
  using Mutator = std::function<Commit(NodeRef&)>;
  using Visitor = std::function<void(const NodeInfo&)>;

  // Opens the store in opts.dir, creating its files (sparse, mode 0600) when
  // missing. A store of another geometry or format version, or with a
  // damaged header, is refused with a message naming the file and the field.
  static Result<std::unique_ptr<Store>> Open(const StoreOptions& opts);

  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  virtual const StoreGeometry& geometry() const = 0;

  // Find/Create/Update/Erase in one primitive: runs `fn` under the lock of
  // the key's chain(s) on a copy of the node's state (zeroed when absent),
  // then writes back, creates (evicting if needed) or erases as it returns.
  // `now_s` decides staleness and the LRU order.
  virtual Status Update(const KeyRef& key, uint32_t state_bytes, uint32_t now_s, const Mutator& fn,
                        UpdateResult* result = nullptr) = 0;

  // Several nodes updated atomically: every chain of every key is locked (in
  // one global order) before `fn` sees any node, and all writes happen before
  // any lock is released. Items naming the same node share one state buffer.
  // `commits[i]` says what to do with node i. At most kMaxBatch items.
  struct BatchItem {
    KeyRef key;
    uint32_t state_bytes = 0;
  };
  static constexpr size_t kMaxBatch = 64;
  using BatchMutator = std::function<void(std::span<NodeRef> nodes, std::span<Commit> commits)>;
  virtual Status UpdateBatch(std::span<const BatchItem> items, uint32_t now_s, const BatchMutator& fn,
                             std::vector<UpdateResult>* results = nullptr) = 0;

  // Reads many nodes and changes none of their states: fn(i, status, node)
  // is called exactly once for each item, in order. With status OK, `node`
  // is a private copy of items[i]'s state (zeroed, node.exists false, when
  // absent), taken under that node's chain lock; the read records the use
  // (last access and heat) for eviction, as a mutator answering kNone does.
  // Else status says why the item was not read (its file is unusable or
  // broke while it was read, the item is invalid, the store is read-only as
  // for Update) and `node` is empty. One lock at a time: the items are not
  // read as one snapshot. fn must be short and must not call the store (it
  // may run under the lock; StoreImpl's runs after it). The store works several items ahead of fn, so
  // that the cache misses of their lookups overlap: a run of reads (a
  // batch's `query` members) costs less here than through Update one by
  // one. This default reads each item through Update.
  struct ReadItem {
    KeyRef key;
    uint32_t state_bytes = 0;
  };
  using ReadVisitor = std::function<void(size_t i, const Status& status, NodeRef& node)>;
  virtual void ReadEach(std::span<const ReadItem> items, uint32_t now_s, const ReadVisitor& fn);

  // A hint before a lookup: starts loading what the lookup of `key` will
  // touch, so that its cache and TLB misses overlap other work (a batch's
  // other members, a request's own set-up) instead of following one
  // another. Takes no lock and changes nothing; a store may ignore it.
  enum class Prefetching : uint8_t {
    kHeads,          // the key's key-node heads (lock words and tags)
    kNodes,          // the slots whose tags match (once the heads are in cache)
    kHeadsAndChain,  // the heads and every line of the key's first chain,
                     // where a node that was not moved lives: a lone
                     // lookup, which has no time to wait for the tags
  };
  virtual void Prefetch(const KeyRef& key, Prefetching what) const {
    (void)key;
    (void)what;
  }
  // Works out once where this store places a prepared key (KeyRef::location),
  // so that its looks at the key do not hash it again; for this store only.
  // A store that places by the key alone has nothing to keep.
  virtual void LocateKey(KeyRef* key) const { (void)key; }

  // Writer entries: each file has a table of them (an undo journal each).
  // With StoreOptions::keep_writer_entries, a thread keeps the entry it took
  // between its writes; when every entry is held, a writer waits
  // (StoreOptions::writer_wait_ms, then Busy), and holders hand theirs back
  // at the end of their next write. Such a thread that may stop writing for
  // long calls this from time to time (frsd's workers: once a second), so
  // that a waiter is never kept waiting by an idle thread: it hands this
  // thread's entries back when someone waits. Cheap when nobody does; a
  // no-op without keep_writer_entries (no entry outlives its write).
  virtual void ReleaseIdleWriters() {}
  // Copies one node out; NotFound when absent.
  virtual Result<NodeInfo> Get(const KeyRef& key) = 0;
  virtual Status Erase(const KeyRef& key) = 0;

  // Visits every node (optionally of one file / key-node / biz), one chain
  // locked at a time; the visitor runs with no lock held.
  struct Filter {
    int64_t file = -1, keynode = -1;
    int32_t biz = -1;
    // A walk beside a busy server: after each stretch of chains, sleep for
    // as long as the stretch took times (100 - busy_percent) / busy_percent,
    // so the walk uses at most about busy_percent of a core and its chain
    // locks and memory traffic leave room for the server (100: no pauses).
    uint32_t busy_percent = 100;
    // > 0: a chain whose lock stays held this many milliseconds ends the
    // walk with Busy, nothing visited of that chain (a walk that must never
    // wait behind a stuck holder: frsd's master). 0: wait as long as it
    // takes, taking a dead holder's lock over.
    uint32_t lock_wait_ms = 0;
  };
  virtual Status ForEach(const Filter& filter, const Visitor& visit) = 0;
  // Erases every node for which `pred` is true, one chain locked at a time.
  // Returns the number erased.
  virtual Result<uint64_t> EraseIf(const Filter& filter, const std::function<bool(const NodeInfo&)>& pred) = 0;

  // Bizs for which `live` is false are stale: their nodes are reclaimed by
  // eviction (a reload removed them). Ids are 1..65535.
  virtual void SetLiveBizzes(std::vector<bool> live) = 0;

  virtual StoreStats Stats() const = 0;

  // Backs every page of the files with disk blocks now (fallocate) and maps
  // them in (writable when the files had holes): a full disk is then an error at
  // start-up instead of a SIGBUS at some later first write into a hole of
  // the sparse files, and requests do not pay first-touch page faults.
  // frsd calls it once when it starts; Unavailable names the file when the
  // disk has no room.
  virtual Status Reserve() = 0;
  // Whether every file is still the one mapped: a file deleted or truncated
  // while in use is marked broken, and every later operation on it fails
  // (Unavailable, naming the file) instead of writing into a lost inode or
  // dying of SIGBUS. Returns the first problem. frsd's workers call it about
  // once a second; a process that installs the SIGBUS guard
  // (frs/sigbus_guard.h) is also covered between two calls against a
  // truncation. A deleted file is seen only here: a long-running program of
  // its own calls it as often (frs::Service's store).
  virtual Status CheckFiles() = 0;

  // Writes every file's dirty pages back: `sync` waits for the disk (msync
  // MS_SYNC); else the writeback is started and Flush returns at once.
  virtual Status Flush(bool sync) = 0;

  // Releases every lock held by `pid` (a dead process), undoing its
  // half-done writes. Returns the number of locks released.
  virtual Result<uint32_t> RecoverDeadOwner(int32_t pid) = 0;

  // Integrity check of every header and chain; `repair` fixes what it can.
  // Each problem is one line naming file, key-node and slot.
  struct VerifyReport {
    std::vector<std::string> problems;
    std::vector<std::string> repairs;
    // What a process's death left and the next locker recovers by itself
    // (a dead owner's chain lock and its unfinished write): recovered here
    // as that locker would, on a store this process may write, or, read
    // without locks, listed as recoverable. Neither is a problem.
    std::vector<std::string> recovered;
    uint64_t nodes = 0, chains = 0;
    // Per file, the nodes found in a chain their identity does not map to
    // (among the problems): a file swapped with another, or copied over it,
    // has all of its nodes so.
    std::vector<uint64_t> misplaced;
  };
  virtual Result<VerifyReport> Verify(bool repair) = 0;

 protected:
  Store() = default;
};

}  // namespace frs
