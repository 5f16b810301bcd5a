#include "store/store_impl.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "frs/ring.h"
#include "os/shm_lock.h"
#include "os/stop_request.h"
#include "store/test_hooks.h"
#include "store/txn.h"

namespace frs::store {
namespace {

std::atomic<uint64_t> g_instances{1};

template <class T>
inline void AtomicAdd(T& field, int64_t delta) {
  std::atomic_ref<T>(field).fetch_add(static_cast<T>(delta), std::memory_order_relaxed);
}
template <class T>
inline T AtomicLoad(const T& field) {
  return std::atomic_ref<T>(const_cast<T&>(field)).load(std::memory_order_relaxed);
}

// Per-thread cache of claimed writer entries: (store instance, file) -> entry.
struct WriterCacheEntry {
  uint64_t instance;
  uint32_t file;
  uint32_t tid;
  WriterEntryHeader* w;
};
thread_local std::vector<WriterCacheEntry> t_writers;

// Paces a walk over the chains (see Store::Filter::busy_percent).
class WalkPacer {
 public:
  explicit WalkPacer(uint32_t busy_percent) : busy_(std::clamp<uint32_t>(busy_percent, 1, 100)) {}
  void Chain() {
    if (busy_ >= 100 || ++chains_ < kStretch) return;
    chains_ = 0;
    const auto now = std::chrono::steady_clock::now();
    const auto worked = now - since_;
    std::this_thread::sleep_for(worked * (100 - busy_) / busy_);
    since_ = std::chrono::steady_clock::now();
  }

 private:
  static constexpr uint32_t kStretch = 256;
  uint32_t busy_;
  uint32_t chains_ = 0;
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
};

}  // namespace

void StoreImpl::NoteDamage(StoreFile* f, uint32_t keynode, uint32_t slot) const {
  if (!opts_.read_only) AtomicAdd(f->header()->damaged_nodes, 1);
  // Logged once per node and process: a lookup meets it on every request.
  const uint64_t where = (uint64_t{keynode} << 8) | slot;
  std::lock_guard<std::mutex> g(damage_mu_);
  if (!damage_logged_.insert({f->path(), where}).second || damage_logged_.size() > 4096) return;
  if (opts_.on_recovery)
    opts_.on_recovery(f->path() + ": keynode " + std::to_string(keynode) + " slot " + std::to_string(slot) +
                      ": damaged node ignored (its key counts as absent; `frsctl verify --repair` clears it)");
}

StoreImpl::StoreImpl(StoreOptions opts, std::vector<std::unique_ptr<StoreFile>> files)
    : opts_(std::move(opts)), geo_(opts_.geometry), files_(std::move(files)), instance_(g_instances.fetch_add(1)) {
  live_ = std::make_shared<const std::vector<bool>>(65536, true);
}

StoreImpl::~StoreImpl() {
  // Hand back the writer entries this process claimed (not a parent's, after fork).
  std::lock_guard<std::mutex> g(claimed_mu_);
  const pid_t me = ::getpid();
  for (const Claimed& c : claimed_) {
    if (c.pid != me) continue;
    WriterEntryHeader* w = files_[c.file]->writer(c.entry);
    if (AtomicLoad(w->active) == 0) {
      uint64_t expected = c.owner;
      std::atomic_ref<uint64_t>(w->owner).compare_exchange_strong(expected, 0);
    }
  }
}

uint32_t StoreImpl::SpanFor(uint32_t state_bytes, uint32_t key_len) { return NodeSlots(state_bytes, key_len); }

bool StoreImpl::IsStale(const NodeHeader* h, uint32_t now_s, const std::vector<bool>& live) {
  return (h->expire_s != 0 && h->expire_s <= now_s) || !live[h->biz];
}

void StoreImpl::SetLiveBizzes(std::vector<bool> live) {
  live.resize(65536, false);
  auto p = std::make_shared<const std::vector<bool>>(std::move(live));
  std::lock_guard<std::mutex> g(live_mu_);
  live_ = std::move(p);
}

Status StoreImpl::CheckRequest(const KeyRef& key, uint32_t state_bytes, uint32_t* span) const {
  if (key.key_len == 0) return Status::InvalidArgument("key is empty");
  if (key.bytes.size() > key.key_len) return Status::InvalidArgument("key bytes longer than key_len");
  if (state_bytes > kMaxStateBytes)
    return Status::InvalidArgument("node state of " + std::to_string(state_bytes) + " bytes exceeds the maximum " +
                                   std::to_string(kMaxStateBytes));
  *span = SpanFor(state_bytes, key.key_len);
  if (*span > geo_.chain)
    return Status::InvalidArgument("a node of " + std::to_string(state_bytes) + " state bytes needs " +
                                   std::to_string(*span) + " slots but chains hold " + std::to_string(geo_.chain));
  return Status::OK();
}

// ---------------------------------------------------------------- locking

WriterEntryHeader* StoreImpl::MyWriter(uint32_t file_index) {
  const os::Owner self = os::Self();
  for (const WriterCacheEntry& e : t_writers)
    if (e.instance == instance_ && e.file == file_index && e.tid == self.tid) return e.w;
  StoreFile* f = files_[file_index].get();
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < kWriterEntries; ++i) {
      WriterEntryHeader* w = f->writer(i);
      std::atomic_ref<uint64_t> owner(w->owner);
      uint64_t cur = owner.load(std::memory_order_acquire);
      if (cur == self.word()) {
        // A previous Store object of this thread left it claimed; reuse it.
      } else if (cur != 0) {
        if (pass == 0 || os::OwnerAlive(os::Owner::FromWord(cur))) continue;
        // A dead thread's entry: undo whatever it left, then take it.
        RecoverDeadWriters(os::Owner::FromWord(cur));
        cur = 0;
        if (!owner.compare_exchange_strong(cur, self.word())) continue;
      } else if (!owner.compare_exchange_strong(cur, self.word())) {
        continue;
      }
      w->active = 0;
      w->count = 0;
      t_writers.push_back({instance_, file_index, self.tid, w});
      std::lock_guard<std::mutex> g(claimed_mu_);
      claimed_.push_back({file_index, i, self.word(), ::getpid()});
      return w;
    }
  }
  return nullptr;
}

void StoreImpl::UndoEntry(StoreFile* f, WriterEntryHeader* w) {
  JournalRecord* recs = f->records(w);
  uint32_t n = std::min<uint32_t>(AtomicLoad(w->count), JournalCapacity(f->header()->chain));
  // Newest first, so a slot saved twice ends with its oldest image.
  for (uint32_t i = n; i-- > 0;) {
    if (recs[i].keynode >= geo_.keynodes) continue;
    if (recs[i].slot == kTagsRecord) {
      uint8_t* tags = f->tags(recs[i].keynode);
      for (uint32_t k = 0; k < geo_.chain; ++k) StoreTag(tags + k, recs[i].image[k]);
      continue;
    }
    if (recs[i].slot >= geo_.chain) continue;
    std::memcpy(f->slot(recs[i].keynode, recs[i].slot), recs[i].image, kSlotBytes);
  }
  std::atomic_ref<uint32_t>(w->count).store(0, std::memory_order_release);
  std::atomic_ref<uint32_t>(w->active).store(0, std::memory_order_release);
}

uint32_t StoreImpl::RecoverDeadWriters(os::Owner dead) {
  // The one place a dead writer's journals are undone, in every file at
  // once: a batch across files is kept or undone as a whole, decided by its
  // coordinator entry before any entry is touched. The recovery locks (taken
  // in file order) serialize this against anyone else recovering the same
  // owner. It is safe without the dead owner's chain locks: they stay held by
  // the dead owner until someone takes them over, and every take-over runs
  // this first.
  for (auto& f : files_) {
    os::LockResult lr = os::ShmLock(&f->header()->recovery_lock);
    (void)lr;  // a dead holder of a recovery lock left nothing half-done: it only guards this
  }
  struct Act {
    StoreFile* f;
    WriterEntryHeader* w;
    bool undo;
  };
  std::vector<Act> acts;
  for (auto& fp : files_) {
    StoreFile* f = fp.get();
    for (uint32_t i = 0; i < kWriterEntries; ++i) {
      WriterEntryHeader* w = f->writer(i);
      if (AtomicLoad(w->owner) != dead.word()) continue;
      bool undo = AtomicLoad(w->active) != 0;
      const uint64_t batch = AtomicLoad(w->batch);
      if (undo && batch != 0 && w->coord_file < files_.size() && w->coord_entry < kWriterEntries) {
        const WriterEntryHeader* c = files_[w->coord_file]->writer(w->coord_entry);
        undo = !(AtomicLoad(c->owner) == dead.word() && AtomicLoad(c->committed) == batch);
      }
      acts.push_back({f, w, undo});
    }
  }
  uint32_t undone = 0;
  for (const Act& a : acts) {
    if (a.undo) {
      UndoEntry(a.f, a.w);
      ++undone;
    }
  }
  for (const Act& a : acts) {
    std::atomic_ref<uint32_t>(a.w->count).store(0, std::memory_order_relaxed);
    std::atomic_ref<uint32_t>(a.w->active).store(0, std::memory_order_release);
    std::atomic_ref<uint64_t>(a.w->batch).store(0, std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(a.w->committed).store(0, std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(a.w->owner).store(0, std::memory_order_release);
  }
  for (auto it = files_.rbegin(); it != files_.rend(); ++it) os::ShmUnlock(&(*it)->header()->recovery_lock);
  return undone;
}

void StoreImpl::RecoverOwnerLocked(StoreFile* f, os::Owner dead) {
  const uint32_t undone = RecoverDeadWriters(dead);
  AtomicAdd(f->header()->lock_recoveries, 1);
  if (opts_.on_recovery)
    opts_.on_recovery("recovered a lock of dead owner " + std::to_string(dead.tid) + " in " + f->path() +
                      (undone ? " and undid its unfinished write" : ""));
}

void StoreImpl::LockChain(StoreFile* f, uint32_t keynode) {
  if (opts_.read_only) return;  // a lock word cannot be written: read without it
  // A wait on a live owner is reported (through on_recovery) after a second
  // and each time it doubles: a lock is never waited on silently. The
  // context lives on this frame: the uncontended path allocates nothing.
  struct WaitContext {
    const StoreImpl* store;
    const StoreFile* file;
    uint32_t keynode;
  } ctx{this, f, keynode};
  os::LockWaitReport report;
  report.ctx = &ctx;
  report.fn = [](const void* p, os::Owner owner, int64_t waited_ms) {
    const auto* c = static_cast<const WaitContext*>(p);
    if (c->store->opts_.on_recovery)
      c->store->opts_.on_recovery("waited " + std::to_string(waited_ms) + " ms for the lock of keynode " +
                                  std::to_string(c->keynode) + " in " + c->file->path() + ", held by live thread " +
                                  std::to_string(owner.tid));
  };
  os::LockResult r = os::ShmLock(f->lock(keynode), &report);
  if (r.took_over) RecoverOwnerLocked(f, r.dead_owner);
}

Result<uint32_t> StoreImpl::RecoverDeadOwner(int32_t pid) {
  if (pid <= 0) return Status::InvalidArgument("pid must be positive");
  if (opts_.read_only) return ReadOnly();
  const uint32_t tid = static_cast<uint32_t>(pid);
  uint32_t released = 0;
  for (auto& fp : files_) {
    StoreFile* f = fp.get();
    bool touched = false;
    // Only identities that are really gone: if the kernel already gave the
    // pid to another process (of frsctl, say) its start time differs and it
    // is left alone.
    for (uint32_t i = 0; i < kWriterEntries; ++i) {
      const os::Owner o = os::Owner::FromWord(AtomicLoad(f->writer(i)->owner));
      if (o.tid == tid && !os::OwnerAlive(o)) touched |= RecoverDeadWriters(o) > 0;
    }
    for (uint32_t k = 0; k < geo_.keynodes; ++k) {
      const os::Owner o = os::ShmOwner(f->lock(k));
      if (o.tid != tid || os::OwnerAlive(o)) continue;
      RecoverDeadWriters(o);  // before the chain is released: its journals first
      if (os::ShmForceUnlock(f->lock(k), o)) {
        ++released;
        touched = true;
      }
    }
    if (touched) AtomicAdd(f->header()->lock_recoveries, 1);
  }
  return released;
}

// ---------------------------------------------------------------- nodes

bool StoreImpl::FindInChain(StoreFile* f, uint32_t keynode, uint16_t biz, const Fingerprint& fp,
                            uint32_t* slot) const {
  const uint8_t* tags = f->tags(keynode);
  const uint8_t t = TagOf(fp.hi);
  for (uint32_t i = 0; i < geo_.chain; ++i) {
    if (tags[i] != t) continue;
    const NodeHeader* h = HeaderAt(f->slot(keynode, i));
    if (h->fp_lo == fp.lo && h->fp_hi == fp.hi && h->biz == biz && h->key_len != 0) {
      if (ExtentAt(f->slot(keynode, 0), tags, geo_.chain, i).damaged) {
        // Its key acts as absent: nothing is read from or written into a
        // node whose fields cannot be trusted.
        NoteDamage(f, keynode, i);
        continue;
      }
      *slot = i;
      return true;
    }
  }
  return false;
}

bool StoreImpl::PeekTag(StoreFile* f, uint32_t keynode, uint8_t tag) const {
  uint8_t* tags = f->tags(keynode);
  bool any = false;
  for (uint32_t i = 0; i < geo_.chain; ++i)
    any |= std::atomic_ref<uint8_t>(tags[i]).load(std::memory_order_relaxed) == tag;
  return any;
}

void StoreImpl::SetTags(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot, uint32_t span, uint8_t tag) {
  uint8_t* tags = f->tags(keynode);
  // Rewriting a node in place (the common update) leaves its tags as they are.
  bool same = tags[slot] == tag;
  for (uint32_t k = 1; same && k < span; ++k) same = tags[slot + k] == 0;
  if (same) return;
  txn.Save(keynode, kTagsRecord);
  StoreTag(tags + slot, tag);
  for (uint32_t k = 1; k < span; ++k) StoreTag(tags + slot + k, 0);
}

void StoreImpl::ClearNode(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot) {
  // The extent the tags vouch for, not the header's span: clearing a
  // damaged node must not clear a neighbour.
  const uint32_t span = ExtentAt(f->slot(keynode, 0), f->tags(keynode), geo_.chain, slot).span;
  txn.SaveRange(keynode, slot, span);
  for (uint32_t k = 0; k < span; ++k) std::memset(f->slot(keynode, slot + k), 0, kSlotBytes);
  SetTags(f, txn, keynode, slot, span, 0);
  txn.nodes -= 1;
  txn.slots -= span;
}

StoreImpl::RouteMark StoreImpl::RouteFor(const KeyRef& key, const NodeHeader* existing) {
  if (key.route_known) return {key.route_pos, true};
  if (existing) return {existing->route_pos, (existing->route_flags & kRouteKnown) != 0};
  if (!key.bytes.empty() && key.bytes.size() == key.key_len) return {Ring::HashRoute(Ring::RouteOf(key.bytes, {})), true};
  return {};
}

void StoreImpl::WriteNode(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot, uint32_t span, const KeyRef& key,
                          RouteMark route, bool alternate, uint8_t heat, const uint8_t* state, uint32_t state_bytes, const uint8_t* key_bytes,
                          uint32_t key_stored, uint32_t expire_s, uint32_t now_s) {
  txn.SaveRange(keynode, slot, span);
  // Compose the node privately, then copy it in: the slots are contiguous.
  alignas(8) uint8_t img[kMaxSpan * kSlotBytes];
  std::memset(img, 0, span * kSlotBytes);
  NodeHeader* h = HeaderAt(img);
  h->fp_lo = key.fp.lo;
  h->fp_hi = key.fp.hi;
  h->biz = key.biz;
  h->key_len = key.key_len;
  h->span = static_cast<uint8_t>(span);
  h->state_len = static_cast<uint16_t>(state_bytes);
  uint32_t room = span * kSlotBytes - kNodeHeaderBytes - state_bytes;
  key_stored = std::min(key_stored, room);
  h->key_stored = static_cast<uint8_t>(key_stored);
  h->flags = NodeFlags(alternate, heat);
  h->expire_s = expire_s;
  h->last_access_s = now_s;
  h->route_pos = route.pos;
  h->route_flags = route.known ? kRouteKnown : 0;
  std::memcpy(img + kNodeHeaderBytes, state, state_bytes);
  if (key_stored) std::memcpy(img + kNodeHeaderBytes + state_bytes, key_bytes, key_stored);
  if (hook_) {
    std::memcpy(f->slot(keynode, slot), img, 16);
    hook_(1);
  }
  std::memcpy(f->slot(keynode, slot), img, span * kSlotBytes);
  SetTags(f, txn, keynode, slot, span, TagOf(key.fp.hi));
}

void StoreImpl::FillInfo(uint32_t file, uint32_t keynode, uint32_t slot, const uint8_t* p, NodeInfo* out) const {
  const NodeHeader* h = HeaderAt(p);
  out->file = file;
  out->keynode = keynode;
  out->slot = slot;
  out->span = h->span;
  out->in_alternate = h->flags & kNodeInAlternate;
  out->biz = h->biz;
  out->fp = Fingerprint{h->fp_lo, h->fp_hi};
  out->key_len = h->key_len;
  uint32_t cap = std::clamp<uint32_t>(h->span, 1, kMaxSpan) * kSlotBytes - kNodeHeaderBytes;
  uint32_t sl = std::min<uint32_t>(h->state_len, cap);
  uint32_t ks = std::min<uint32_t>(h->key_stored, cap - sl);
  out->key.assign(reinterpret_cast<const char*>(p + kNodeHeaderBytes + sl), ks);
  out->expire_s = h->expire_s;
  out->last_access_s = h->last_access_s;
  out->route_pos = h->route_pos;
  out->route_known = (h->route_flags & kRouteKnown) != 0;
  out->state.assign(p + kNodeHeaderBytes, p + kNodeHeaderBytes + sl);
}

StoreImpl::Placement StoreImpl::Place(StoreFile* f, Txn& txn, const Location& loc, uint32_t span, uint32_t now_s,
                                      LockSet& locks, const std::vector<std::pair<uint32_t, uint32_t>>* pinned,
                                      UpdateResult* r) {
  const uint32_t chain = geo_.chain;
  const uint32_t cands[2] = {loc.a, loc.b};
  const int ncand = loc.a == loc.b ? 1 : 2;
  ChainMap maps[2];
  for (int c = 0; c < ncand; ++c) maps[c].Build(f->slot(cands[c], 0), f->tags(cands[c]), chain);
  auto is_pinned = [&](uint32_t keynode, uint32_t slot) {
    if (!pinned) return false;
    for (auto& p : *pinned)
      if (p.first == keynode && p.second == slot) return true;
    return false;
  };
  std::shared_ptr<const std::vector<bool>> live_snapshot;
  {
    std::lock_guard<std::mutex> g(live_mu_);
    live_snapshot = live_;
  }
  const std::vector<bool>& live = *live_snapshot;
  // Clears every node overlapping the window, counting each as stale or live.
  auto evict_window = [&](int c, uint32_t s) {
    const ChainMap& m = maps[c];
    uint8_t last = ChainMap::kFree;
    for (uint32_t k = s; k < s + span; ++k) {
      if (m.start[k] == ChainMap::kFree || m.start[k] == last) continue;
      last = m.start[k];
      bool stale = IsStale(HeaderAt(f->slot(cands[c], last)), now_s, live);
      ClearNode(f, txn, cands[c], last);
      (stale ? txn.evict_stale : txn.evict_live) += 1;
      if (r) (stale ? r->evicted_stale : r->evicted_live) = true;
    }
  };
  auto free_run = [&](const ChainMap& m, uint32_t need) -> int {
    uint32_t run = 0;
    for (uint32_t i = 0; i < m.n; ++i) {
      run = m.start[i] == ChainMap::kFree ? run + 1 : 0;
      if (run == need) return static_cast<int>(i + 1 - need);
    }
    return -1;
  };

  // 1. Free slots: the less loaded of the two chains (two-choice balancing).
  int runs[2] = {-1, -1};
  bool fits[2] = {false, false};
  uint32_t free_slots[2] = {0, 0};
  for (int c = 0; c < ncand; ++c) {
    runs[c] = free_run(maps[c], span);
    fits[c] = runs[c] >= 0;
    free_slots[c] = maps[c].FreeSlots();
  }
  if (int best = LessLoaded(fits, free_slots, ncand); best >= 0)
    return {cands[best], static_cast<uint32_t>(runs[best]), true};

  // 2. Stale nodes (expired, or of a removed biz) are reused before anything live.
  for (int c = 0; c < ncand; ++c) {
    for (uint32_t s = 0; s + span <= chain; ++s) {
      bool ok = true;
      for (uint32_t k = s; k < s + span && ok; ++k) {
        uint8_t st = maps[c].start[k];
        if (st == ChainMap::kFree) continue;
        ok = IsStale(HeaderAt(f->slot(cands[c], st)), now_s, live) && !is_pinned(cands[c], st);
      }
      if (!ok) continue;
      evict_window(c, s);
      return {cands[c], s, true};
    }
  }

  // 3. One cuckoo step: move a resident of A or B to its other key-node when
  // that frees a run long enough here.
  for (int c = 0; c < ncand; ++c) {
    const ChainMap& m = maps[c];
    for (uint32_t s = 0; s < chain; ++s) {
      if (m.start[s] != s || m.IsDamaged(s) || is_pinned(cands[c], s)) continue;
      uint32_t nspan = m.SpanOf(s);
      ChainMap without = m;
      for (uint32_t k = s; k < s + nspan; ++k) without.start[k] = ChainMap::kFree;
      int here = free_run(without, span);
      if (here < 0) continue;
      const NodeHeader* h = HeaderAt(f->slot(cands[c], s));
      Location nl = Locate(Fingerprint{h->fp_lo, h->fp_hi});
      if (nl.a == nl.b) continue;
      uint32_t other = (h->flags & kNodeInAlternate) ? nl.a : nl.b;
      if (other == cands[c]) continue;
      bool locked_here = false;
      if (!locks.Holds(other)) {
        if (!locks.TryLock(other)) continue;
        locked_here = true;
      }
      ChainMap om;
      om.Build(f->slot(other, 0), f->tags(other), chain);
      int dest = free_run(om, nspan);
      if (dest >= 0) {
        alignas(8) uint8_t img[kMaxSpan * kSlotBytes];
        std::memcpy(img, f->slot(cands[c], s), nspan * kSlotBytes);
        NodeHeader* nh = HeaderAt(img);
        nh->flags = static_cast<uint8_t>((nh->flags & ~kNodeInAlternate) | (other == nl.b ? kNodeInAlternate : 0));
        txn.SaveRange(other, static_cast<uint32_t>(dest), nspan);
        std::memcpy(f->slot(other, static_cast<uint32_t>(dest)), img, nspan * kSlotBytes);
        SetTags(f, txn, other, static_cast<uint32_t>(dest), nspan, TagOf(nh->fp_hi));
        txn.SaveRange(cands[c], s, nspan);
        for (uint32_t k = 0; k < nspan; ++k) std::memset(f->slot(cands[c], s + k), 0, kSlotBytes);
        SetTags(f, txn, cands[c], s, nspan, 0);
        txn.cuckoo += 1;
        if (locked_here) locks.Unlock(other);
        return {cands[c], static_cast<uint32_t>(here), true};
      }
      if (locked_here) locks.Unlock(other);
    }
  }

  // 4. Evict: the window whose most recently used live occupant is oldest.
  int ev_c = -1;
  uint32_t ev_s = 0;
  uint64_t ev_cost = UINT64_MAX;
  for (int c = 0; c < ncand; ++c) {
    const ChainMap& m = maps[c];
    for (uint32_t s = 0; s + span <= chain; ++s) {
      uint64_t cost = 0;
      bool ok = true;
      for (uint32_t k = s; k < s + span && ok; ++k) {
        if (m.start[k] == ChainMap::kFree) continue;
        if (is_pinned(cands[c], m.start[k])) {
          ok = false;
          break;
        }
        const NodeHeader* h = HeaderAt(f->slot(cands[c], m.start[k]));
        cost = std::max<uint64_t>(cost, RecencyOf(h->last_access_s, h->flags) + 1);
      }
      if (ok && cost < ev_cost) {
        ev_cost = cost;
        ev_c = c;
        ev_s = s;
      }
    }
  }
  if (ev_c < 0) return {};
  evict_window(ev_c, ev_s);
  return {cands[ev_c], ev_s, true};
}

// ---------------------------------------------------------------- operations

Status StoreImpl::FileUsable(const StoreFile* f) {
  if (!f->broken()) return Status::OK();
  return Status::Unavailable(f->path() +
                             " was deleted, truncated or failed while in use: frsd no longer answers from it "
                             "(nothing was recorded); restore the file and restart");
}

Status StoreImpl::CheckFiles() {
  Status first;
  for (const auto& f : files_) {
    if (f->broken()) {
      if (first.ok()) first = FileUsable(f.get());
      continue;
    }
    if (Status s = f->CheckStillThere(); !s.ok() && first.ok()) first = s;
  }
  return first;
}

Status StoreImpl::ReadOnly() const {
  return Status::Unavailable(opts_.dir + ": the store is open read-only (its file system is read-only, or this user "
                                         "may not write it); nothing was changed");
}

Status StoreImpl::Update(const KeyRef& key, uint32_t state_bytes, uint32_t now_s, const Mutator& fn,
                         UpdateResult* result) {
  if (opts_.read_only) return ReadOnly();
  // A file that is gone is not touched; one that broke during the operation
  // (its mapping replaced with zero pages by the SIGBUS guard) makes the
  // operation fail rather than be acknowledged.
  StoreFile* f = files_[FileOf(key.fp, geo_)].get();
  if (f->broken()) return FileUsable(f);
  Status s = UpdateImpl(key, state_bytes, now_s, fn, result);
  if (f->broken()) return FileUsable(f);
  return s;
}

Status StoreImpl::UpdateImpl(const KeyRef& key, uint32_t state_bytes, uint32_t now_s, const Mutator& fn,
                             UpdateResult* result) {
  uint32_t span_new = 0;
  if (Status s = CheckRequest(key, state_bytes, &span_new); !s.ok()) return s;
  const Location loc = Locate(key.fp);
  StoreFile* f = files_[loc.file].get();
  UpdateResult local;
  UpdateResult* r = result ? result : &local;
  *r = UpdateResult{};

  alignas(8) uint8_t buf[kMaxSpan * kSlotBytes];
  alignas(8) uint8_t keybuf[kMaxKeyBytes];
  LockSet locks(this, f);
  const bool both = loc.a == loc.b;
  // A peek at both chains' tags without locks (their misses overlap) says
  // where the node probably is. One that sits in B alone is updated under B's
  // lock alone: a node moves between its chains only under both locks, so
  // finding it in B once B is held is proof. Everything else takes A first.
  __builtin_prefetch(f->lock(loc.a), 1, 3);
  if (!both) __builtin_prefetch(f->lock(loc.b), 1, 3);
  Pos hinted;
  if (!both) {
    const uint8_t t = TagOf(key.fp.hi);
    if (PeekTag(f, loc.b, t) && !PeekTag(f, loc.a, t)) {
      locks.Lock(loc.b);
      if (FindInChain(f, loc.b, key.biz, key.fp, &hinted.slot)) {
        hinted = {loc.b, hinted.slot, true};
      } else {
        locks.UnlockAll();
      }
    }
  }
  if (!hinted.found) locks.Lock(loc.a);
  for (;;) {
    Pos pos;
    if (hinted.found) {
      pos = hinted;
      hinted.found = false;  // a retry below looks again under both locks
    } else {
      pos = FindWithA(f, loc, key, locks);
    }

    NodeRef ref;
    ref.state = buf;
    ref.state_bytes = state_bytes;
    std::memset(buf, 0, state_bytes);
    uint32_t old_span = 0, key_stored = 0;
    uint8_t heat = 1;  // a new node's first use
    RouteMark route = RouteFor(key, nullptr);
    const uint8_t* key_src = reinterpret_cast<const uint8_t*>(key.bytes.data());
    key_stored = static_cast<uint32_t>(key.bytes.size());
    if (pos.found) {
      const uint8_t* p = f->slot(pos.keynode, pos.slot);
      const NodeHeader* h = HeaderAt(p);
      ref.exists = true;
      ref.stored_state_bytes = h->state_len;
      ref.expire_s = h->expire_s;
      route = RouteFor(key, h);
      heat = NextHeat(HeatOf(h->flags), h->last_access_s, now_s);
      old_span = ExtentAt(f->slot(pos.keynode, 0), f->tags(pos.keynode), geo_.chain, pos.slot).span;
      std::memcpy(buf, p + kNodeHeaderBytes, std::min<uint32_t>(h->state_len, state_bytes));
      if (key.bytes.size() < h->key_stored) {
        // An import by fingerprint: keep the key bytes the node already has.
        key_stored = h->key_stored;
        std::memcpy(keybuf, p + kNodeHeaderBytes + h->state_len, key_stored);
        key_src = keybuf;
      }
    }
    r->found = pos.found;

    Commit c = fn(ref);
    if (hook_) hook_(0);

    if (c == Commit::kNone) {
      if (pos.found) Touch(HeaderAt(f->slot(pos.keynode, pos.slot)), heat, now_s);
      return Status::OK();
    }
    Txn txn(this, f, loc.file);
    if (!txn.Open()) return WritersBusy(f);
    if (c == Commit::kErase) {
      if (pos.found) ClearNode(f, txn, pos.keynode, pos.slot);
      return Status::OK();
    }
    // kWrite
    if (pos.found) {
      bool fits = span_new <= old_span;
      if (!fits) {
        ChainMap m;
        m.Build(f->slot(pos.keynode, 0), f->tags(pos.keynode), geo_.chain);
        fits = pos.slot + span_new <= geo_.chain;
        for (uint32_t k = pos.slot + old_span; fits && k < pos.slot + span_new; ++k) fits = m.start[k] == ChainMap::kFree;
      }
      if (fits) {
        if (span_new < old_span) {
          txn.SaveRange(pos.keynode, pos.slot + span_new, old_span - span_new);
          for (uint32_t k = span_new; k < old_span; ++k) std::memset(f->slot(pos.keynode, pos.slot + k), 0, kSlotBytes);
        }
        txn.slots += static_cast<int64_t>(span_new) - old_span;
        WriteNode(f, txn, pos.keynode, pos.slot, span_new, key, route, pos.keynode != loc.a, heat, buf, state_bytes, key_src,
                  key_stored, ref.expire_s, now_s);
        return Status::OK();
      }
      if (!both && !(locks.Holds(loc.a) && locks.Holds(loc.b))) {
        // Growing needs the other chain too; take both in order and redo.
        locks.UnlockAll();
        if (loc.a < loc.b) {
          locks.Lock(loc.a);
          locks.Lock(loc.b);
        } else {
          locks.Lock(loc.b);
          locks.Lock(loc.a);
        }
        continue;
      }
      ClearNode(f, txn, pos.keynode, pos.slot);
    }
    Placement pl = Place(f, txn, loc, span_new, now_s, locks, nullptr, r);
    if (!pl.ok) return Status::Busy("no room in the key's chains");
    WriteNode(f, txn, pl.keynode, pl.slot, span_new, key, route, pl.keynode != loc.a, heat, buf, state_bytes, key_src, key_stored,
              ref.expire_s, now_s);
    if (!pos.found) r->created = true;
    txn.nodes += 1;
    txn.slots += span_new;
    return Status::OK();
  }
}

Status StoreImpl::UpdateBatch(std::span<const BatchItem> items, uint32_t now_s, const BatchMutator& fn,
                              std::vector<UpdateResult>* results) {
  if (opts_.read_only) return ReadOnly();
  for (const BatchItem& it : items)
    if (Status s = FileUsable(files_[Locate(it.key.fp).file].get()); !s.ok()) return s;
  Status s = UpdateBatchImpl(items, now_s, fn, results);
  for (const BatchItem& it : items)
    if (StoreFile* f = files_[Locate(it.key.fp).file].get(); f->broken()) return FileUsable(f);
  return s;
}

Status StoreImpl::UpdateBatchImpl(std::span<const BatchItem> items, uint32_t now_s, const BatchMutator& fn,
                                  std::vector<UpdateResult>* results) {
  const size_t n = items.size();
  if (n == 0) return Status::OK();
  if (n > kMaxBatch) return Status::InvalidArgument("a batch holds at most " + std::to_string(kMaxBatch) + " members");
  std::vector<uint32_t> spans(n);
  std::vector<Location> locs(n);
  for (size_t i = 0; i < n; ++i) {
    if (Status s = CheckRequest(items[i].key, items[i].state_bytes, &spans[i]); !s.ok()) return s;
    locs[i] = Locate(items[i].key.fp);
  }
  // Every chain of every member, per file, locked in (file, key-node) order.
  std::vector<std::unique_ptr<LockSet>> lockset(files_.size());
  {
    std::vector<std::pair<uint32_t, uint32_t>> chains;
    for (const Location& l : locs) {
      chains.emplace_back(l.file, l.a);
      chains.emplace_back(l.file, l.b);
    }
    std::sort(chains.begin(), chains.end());
    chains.erase(std::unique(chains.begin(), chains.end()), chains.end());
    for (auto& [file, k] : chains) {
      if (!lockset[file]) lockset[file] = std::make_unique<LockSet>(this, files_[file].get());
      lockset[file]->Lock(k);
    }
  }

  // Find each member; members naming one node share the first one's buffer.
  std::vector<Pos> pos(n);
  std::vector<size_t> owner(n);
  std::vector<NodeRef> refs(n);
  std::vector<Commit> commits(n, Commit::kNone);
  std::vector<std::array<uint8_t, kMaxSpan * kSlotBytes>> bufs(n);
  std::vector<uint32_t> old_span(n, 0);
  std::vector<uint8_t> heat(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const KeyRef& key = items[i].key;
    owner[i] = i;
    for (size_t j = 0; j < i; ++j)
      if (items[j].key.biz == key.biz && items[j].key.fp == key.fp) {
        owner[i] = j;
        break;
      }
    if (owner[i] != i) {
      refs[i] = refs[owner[i]];
      continue;
    }
    StoreFile* f = files_[locs[i].file].get();
    uint32_t slot;
    if (FindInChain(f, locs[i].a, key.biz, key.fp, &slot)) pos[i] = {locs[i].a, slot, true};
    else if (FindInChain(f, locs[i].b, key.biz, key.fp, &slot)) pos[i] = {locs[i].b, slot, true};
    NodeRef& ref = refs[i];
    ref.state = bufs[i].data();
    ref.state_bytes = items[i].state_bytes;
    std::memset(ref.state, 0, ref.state_bytes);
    if (pos[i].found) {
      const uint8_t* p = f->slot(pos[i].keynode, pos[i].slot);
      const NodeHeader* h = HeaderAt(p);
      ref.exists = true;
      ref.stored_state_bytes = h->state_len;
      ref.expire_s = h->expire_s;
      heat[i] = NextHeat(HeatOf(h->flags), h->last_access_s, now_s);
      old_span[i] = ExtentAt(f->slot(pos[i].keynode, 0), f->tags(pos[i].keynode), geo_.chain, pos[i].slot).span;
      std::memcpy(ref.state, p + kNodeHeaderBytes, std::min<uint32_t>(h->state_len, ref.state_bytes));
    }
  }
  fn(std::span<NodeRef>(refs), std::span<Commit>(commits));
  if (hook_) hook_(0);
  // Shared members: the owner's node takes the strongest commit asked of it.
  for (size_t i = 0; i < n; ++i) {
    if (owner[i] == i) continue;
    refs[owner[i]].expire_s = refs[i].expire_s;
    if (commits[i] == Commit::kWrite || (commits[i] == Commit::kErase && commits[owner[i]] == Commit::kNone))
      commits[owner[i]] = commits[i];
  }
  if (results) results->assign(n, UpdateResult{});

  std::vector<std::unique_ptr<Txn>> txns(files_.size());
  auto txn_for = [&](uint32_t file) -> Txn& {
    if (!txns[file]) txns[file] = std::make_unique<Txn>(this, files_[file].get(), file);
    return *txns[file];
  };
  // A batch across files is one transaction: every file's journal is opened
  // now, in file order, and joins the batch before anything is written; the
  // first is its coordinator (see WriterEntryHeader).
  std::vector<uint32_t> batch_files;
  for (size_t i = 0; i < n; ++i)
    if (owner[i] == i && commits[i] != Commit::kNone) batch_files.push_back(locs[i].file);
  std::sort(batch_files.begin(), batch_files.end());
  batch_files.erase(std::unique(batch_files.begin(), batch_files.end()), batch_files.end());
  uint64_t batch_no = 0;
  if (batch_files.size() > 1) {
    static std::atomic<uint64_t> batches{0};
    batch_no = (os::Self().word() * 0x9E3779B97F4A7C15ull) ^ (batches.fetch_add(1) + 1);
    if (batch_no == 0) batch_no = 1;
    for (uint32_t file : batch_files) {
      if (!txn_for(file).Open()) {
        for (auto& t : txns)
          if (t) t->Rollback();
        return WritersBusy(files_[file].get());
      }
    }
    const uint32_t coord_file = batch_files.front();
    const uint32_t coord_entry = txns[coord_file]->entry_index();
    for (uint32_t file : batch_files) txns[file]->JoinBatch(batch_no, coord_file, coord_entry);
  }
  // Nodes found or placed by this batch must survive its later insertions.
  std::vector<std::pair<uint32_t, uint32_t>> pinned;
  for (size_t i = 0; i < n; ++i)
    if (owner[i] == i && pos[i].found) pinned.emplace_back(pos[i].keynode, pos[i].slot);

  bool failed = false;
  int64_t busy_file = -1;  // the file whose writer entries were all taken
  for (size_t i = 0; i < n && !failed; ++i) {
    if (owner[i] != i) continue;
    StoreFile* f = files_[locs[i].file].get();
    Txn& txn = txn_for(locs[i].file);
    if (!txn.Open()) {
      failed = true;
      busy_file = static_cast<int64_t>(locs[i].file);
      break;
    }
    const KeyRef& key = items[i].key;
    UpdateResult* r = results ? &(*results)[i] : nullptr;
    if (r) r->found = pos[i].found;
    if (commits[i] == Commit::kNone) {
      if (pos[i].found) Touch(HeaderAt(f->slot(pos[i].keynode, pos[i].slot)), heat[i], now_s);
      continue;
    }
    if (commits[i] == Commit::kErase) {
      if (pos[i].found) ClearNode(f, txn, pos[i].keynode, pos[i].slot);
      continue;
    }
    alignas(8) uint8_t keybuf[kMaxKeyBytes];
    const uint8_t* key_src = reinterpret_cast<const uint8_t*>(key.bytes.data());
    uint32_t key_stored = static_cast<uint32_t>(key.bytes.size());
    RouteMark route = RouteFor(key, nullptr);
    if (pos[i].found) {
      const uint8_t* p = f->slot(pos[i].keynode, pos[i].slot);
      const NodeHeader* h = HeaderAt(p);
      route = RouteFor(key, h);
      if (key.bytes.size() < h->key_stored) {
        key_stored = h->key_stored;
        std::memcpy(keybuf, p + kNodeHeaderBytes + h->state_len, key_stored);
        key_src = keybuf;
      }
      if (spans[i] <= old_span[i]) {
        if (spans[i] < old_span[i]) {
          txn.SaveRange(pos[i].keynode, pos[i].slot + spans[i], old_span[i] - spans[i]);
          for (uint32_t k = spans[i]; k < old_span[i]; ++k)
            std::memset(f->slot(pos[i].keynode, pos[i].slot + k), 0, kSlotBytes);
        }
        txn.slots += static_cast<int64_t>(spans[i]) - old_span[i];
        WriteNode(f, txn, pos[i].keynode, pos[i].slot, spans[i], key, route, pos[i].keynode != locs[i].a, heat[i], refs[i].state,
                  refs[i].state_bytes, key_src, key_stored, refs[i].expire_s, now_s);
        continue;
      }
      std::memcpy(keybuf, key_src, key_stored);
      key_src = keybuf;
      ClearNode(f, txn, pos[i].keynode, pos[i].slot);
      std::erase(pinned, std::make_pair(pos[i].keynode, pos[i].slot));
    }
    Placement pl = Place(f, txn, locs[i], spans[i], now_s, *lockset[locs[i].file], &pinned, r);
    if (!pl.ok) {
      failed = true;
      break;
    }
    WriteNode(f, txn, pl.keynode, pl.slot, spans[i], key, route, pl.keynode != locs[i].a, heat[i], refs[i].state, refs[i].state_bytes,
              key_src, key_stored, refs[i].expire_s, now_s);
    pinned.emplace_back(pl.keynode, pl.slot);
    if (r && !pos[i].found) r->created = true;
    txn.nodes += 1;
    txn.slots += spans[i];
  }
  if (failed) {
    // Put every touched slot back: the batch is all or nothing.
    for (auto& t : txns)
      if (t) t->Rollback();
    if (busy_file >= 0) return WritersBusy(files_[static_cast<size_t>(busy_file)].get());
    return Status::Busy("the batch's members crowd one chain; nothing was recorded");
  }
  if (batch_no != 0) {
    // Every file is written. One store commits the whole batch; then the
    // participants close their journals, then the coordinator. A death
    // before the commit point undoes every file; after it, keeps every file.
    if (hook_) hook_(2);
    txns[batch_files.front()]->MarkCommitted(batch_no);
    if (hook_) hook_(3);
    for (size_t k = 1; k < batch_files.size(); ++k) txns[batch_files[k]]->End();
    if (hook_) hook_(4);
    txns[batch_files.front()]->End();
  }
  return Status::OK();
}

StoreImpl::Pos StoreImpl::FindWithA(StoreFile* f, const Location& loc, const KeyRef& key, LockSet& locks) {
  uint32_t slot;
  if (FindInChain(f, loc.a, key.biz, key.fp, &slot)) return {loc.a, slot, true};
  if (loc.a == loc.b) return {};
  if (!locks.Holds(loc.b)) {
    if (loc.b > loc.a) {
      locks.Lock(loc.b);
    } else if (!locks.TryLock(loc.b)) {
      // Keep the global order: release A, take B then A, and look in A again.
      locks.UnlockAll();
      locks.Lock(loc.b);
      locks.Lock(loc.a);
      if (FindInChain(f, loc.a, key.biz, key.fp, &slot)) return {loc.a, slot, true};
    }
  }
  // A node moves between its chains only under both locks, so a node absent
  // from A and found in B while both are held is really there.
  if (FindInChain(f, loc.b, key.biz, key.fp, &slot)) return {loc.b, slot, true};
  return {};
}

Result<NodeInfo> StoreImpl::Get(const KeyRef& key) {
  const Location loc = Locate(key.fp);
  StoreFile* f = files_[loc.file].get();
  if (Status s = FileUsable(f); !s.ok()) return s;
  LockSet locks(this, f);
  locks.Lock(loc.a);
  Pos pos = FindWithA(f, loc, key, locks);
  if (!pos.found) return Status::NotFound("no such node");
  NodeInfo info;
  FillInfo(loc.file, pos.keynode, pos.slot, f->slot(pos.keynode, pos.slot), &info);
  return info;
}

Status StoreImpl::Erase(const KeyRef& key) {
  bool found = false;
  Status s = Update(key, 0, 0, [&](NodeRef& n) {
    found = n.exists;
    return n.exists ? Commit::kErase : Commit::kNone;
  }, nullptr);
  if (!s.ok()) return s;
  return found ? Status::OK() : Status::NotFound("no such node");
}

Status StoreImpl::ForEach(const Filter& filter, const Visitor& visit) {
  std::vector<NodeInfo> batch;
  WalkPacer pacer(filter.busy_percent);
  for (uint32_t fi = 0; fi < files_.size(); ++fi) {
    if (filter.file >= 0 && filter.file != fi) continue;
    StoreFile* f = files_[fi].get();
    for (uint32_t k = 0; k < geo_.keynodes; ++k) {
      if (filter.keynode >= 0 && filter.keynode != k) continue;
      if (os::StopRequested()) return Status::Unavailable("interrupted between chains; nothing is half done");
      if (Status s = FileUsable(f); !s.ok()) return s;
      batch.clear();
      {
        // The chain is copied out under its lock and visited after: a slow
        // visitor (a terminal, a pipe) never holds a lock the server needs.
        LockChain(f, k);
        uint32_t i = 0;
        while (i < geo_.chain) {
          const NodeHeader* h = HeaderAt(f->slot(k, i));
          if (h->key_len == 0) {
            ++i;
            continue;
          }
          NodeExtent e = ExtentAt(f->slot(k, 0), f->tags(k), geo_.chain, i);
          if (e.damaged) {
            NoteDamage(f, k, i);
          } else if (filter.biz < 0 || filter.biz == h->biz) {
            batch.emplace_back();
            FillInfo(fi, k, i, f->slot(k, i), &batch.back());
          }
          i += e.span;
        }
        if (!opts_.read_only) os::ShmUnlock(f->lock(k));
      }
      for (const NodeInfo& n : batch) visit(n);
      pacer.Chain();
    }
  }
  return Status::OK();
}

Result<uint64_t> StoreImpl::EraseIf(const Filter& filter, const std::function<bool(const NodeInfo&)>& pred) {
  if (opts_.read_only) return ReadOnly();
  uint64_t erased = 0;
  NodeInfo info;
  WalkPacer pacer(filter.busy_percent);
  for (uint32_t fi = 0; fi < files_.size(); ++fi) {
    if (filter.file >= 0 && filter.file != fi) continue;
    StoreFile* f = files_[fi].get();
    for (uint32_t k = 0; k < geo_.keynodes; ++k) {
      if (filter.keynode >= 0 && filter.keynode != k) continue;
      if (os::StopRequested())
        return Status::Unavailable("interrupted between chains after erasing " + std::to_string(erased) +
                                   " node(s); nothing is half done");
      if (Status s = FileUsable(f); !s.ok()) return s;
      LockSet locks(this, f);
      locks.Lock(k);
      Txn txn(this, f, fi);
      uint32_t i = 0;
      while (i < geo_.chain) {
        const NodeHeader* h = HeaderAt(f->slot(k, i));
        if (h->key_len == 0) {
          ++i;
          continue;
        }
        NodeExtent e = ExtentAt(f->slot(k, 0), f->tags(k), geo_.chain, i);
        const uint32_t span = e.span;
        if (e.damaged) {
          NoteDamage(f, k, i);  // left for verify --repair, which reports it
        } else if (filter.biz < 0 || filter.biz == h->biz) {
          FillInfo(fi, k, i, f->slot(k, i), &info);
          if (!pred || pred(info)) {
            if (!txn.Open()) return WritersBusy(f);
            ClearNode(f, txn, k, i);
            ++erased;
          }
        }
        i += span;
      }
      pacer.Chain();
    }
  }
  return erased;
}

StoreStats StoreImpl::Stats() const {
  StoreStats s;
  s.geometry = geo_;
  s.slots = geo_.slots();
  for (const auto& f : files_) {
    const FileHeader* h = f->header();
    FileStats fs;
    fs.nodes_used = AtomicLoad(h->nodes_used);
    fs.slots_used = AtomicLoad(h->slots_used);
    fs.evictions_stale = AtomicLoad(h->evictions_stale);
    fs.evictions_live = AtomicLoad(h->evictions_live);
    fs.cuckoo_moves = AtomicLoad(h->cuckoo_moves);
    fs.lock_recoveries = AtomicLoad(h->lock_recoveries);
    fs.damaged_nodes = AtomicLoad(h->damaged_nodes);
    fs.created_unix = h->created_unix;
    s.bytes_mapped += f->bytes();
    s.total.nodes_used += fs.nodes_used;
    s.total.slots_used += fs.slots_used;
    s.total.evictions_stale += fs.evictions_stale;
    s.total.evictions_live += fs.evictions_live;
    s.total.cuckoo_moves += fs.cuckoo_moves;
    s.total.lock_recoveries += fs.lock_recoveries;
    s.total.damaged_nodes += fs.damaged_nodes;
    if (s.total.created_unix == 0) s.total.created_unix = fs.created_unix;
    s.per_file.push_back(fs);
  }
  return s;
}

Status StoreImpl::WritersBusy(StoreFile* f) {
  return Status::Busy(f->path() + ": all " + std::to_string(kWriterEntries) +
                      " writer entries are held by live threads; nothing was written");
}

Status StoreImpl::Reserve() {
  if (opts_.read_only) return ReadOnly();
  // Compare first, allocate after: on a disk too small, nothing is allocated
  // (before, a failed start left ext4 100 % full).
  uint64_t need = 0;
  for (const auto& f : files_) {
    Result<uint64_t> n = f->BytesToReserve();
    if (!n.ok()) return n.status();
    need += n.value();
  }
  if (need > 0) {
    struct statvfs vfs;
    if (::statvfs(opts_.dir.c_str(), &vfs) != 0) return Status::FromErrno(opts_.dir + ": statvfs", errno);
    const uint64_t avail = uint64_t{vfs.f_bavail} * vfs.f_frsize;
    if (need > avail)
      return Status::Unavailable(opts_.dir + ": the store needs " + std::to_string(need) +
                                 " more bytes on its disk and only " + std::to_string(avail) +
                                 " are free; nothing was allocated (free space, or a smaller <store> geometry)");
  }
  for (const auto& f : files_)
    if (Status s = f->Reserve(); !s.ok()) return s;
  return Status::OK();
}

void SetTestHookInCriticalSection(Store* store, std::function<void(int phase)> hook) {
  auto* impl = dynamic_cast<StoreImpl*>(store);
  if (!impl) std::abort();  // a test handed in a store that Store::Open did not make
  impl->SetTestHook(std::move(hook));
}

Status StoreImpl::Flush(bool sync) {
  for (const auto& f : files_)
    if (Status s = f->Sync(sync); !s.ok()) return s;
  return Status::OK();
}

}  // namespace frs::store
