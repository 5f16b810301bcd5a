// The writer table (writer_table.h): taking and handing back entries, and
// the recovery of dead writers' entries, the only place a dead writer's
// journal is undone.
#include "store/writer_table.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "os/shm_lock.h"
#include "store/nodes.h"

namespace frs::store {
namespace {

std::atomic<uint64_t> g_instances{1};
// Per-thread cache of claimed writer entries: (store instance, file) -> entry.
struct WriterCacheEntry {
  uint64_t instance;
  uint32_t file;
  uint32_t tid;
  WriterEntryHeader* w;
};
thread_local std::vector<WriterCacheEntry> t_writers;
// Where this thread looks first for a free entry (without kept entries):
// the one it took last, likely free again and in its cache; at first an
// entry picked by its thread id, so that threads do not all try entry 0.
constexpr uint32_t kNoHint = ~0u;
thread_local uint32_t t_hint = kNoHint;

// Takes a free entry of `f` for `self` (or the one `self` already owns: a
// previous Store object of this thread left it claimed), looking from
// entry `first` on; null when every entry is owned by someone else.
WriterEntryHeader* TakeFreeWriter(StoreFile* f, os::Owner self, uint32_t first = 0) {
  for (uint32_t n = 0; n < kWriterEntries; ++n) {
    WriterEntryHeader* w = f->writer((first + n) % kWriterEntries);
    std::atomic_ref<uint64_t> owner(w->owner);
    uint64_t cur = owner.load(std::memory_order_acquire);
    if (cur == self.word() || (cur == 0 && owner.compare_exchange_strong(cur, self.word()))) return w;
  }
  return nullptr;
}

}  // namespace

WriterTable::WriterTable(const std::vector<std::unique_ptr<StoreFile>>& files, const StoreGeometry& geo,
                         const StoreOptions& opts)
    : files_(files), geo_(geo), opts_(opts), keep_(opts.keep_writer_entries), instance_(g_instances.fetch_add(1)) {}

WriterTable::~WriterTable() { ReleaseClaimed(); }

WriterEntryHeader* WriterTable::Claim(uint32_t file_index) {
  const os::Owner self = os::Self();
  if (!keep_) {
    // Taken for this write, handed back by AfterWrite at its end: nothing
    // to remember between writes.
    StoreFile* f = files_[file_index].get();
    if (t_hint == kNoHint) t_hint = self.tid % kWriterEntries;
    WriterEntryHeader* w = TakeFreeWriter(f, self, t_hint);
    if (!w) w = WaitFor(f, self);
    if (!w) return nullptr;
    t_hint = f->writer_index(w);
    std::atomic_ref<uint32_t>(w->active).store(0, std::memory_order_relaxed);
    std::atomic_ref<uint32_t>(w->count).store(0, std::memory_order_relaxed);
    return w;
  }
  for (const WriterCacheEntry& e : t_writers)
    if (e.instance == instance_ && e.file == file_index && e.tid == self.tid) return e.w;
  StoreFile* f = files_[file_index].get();
  WriterEntryHeader* w = TakeFreeWriter(f, self);
  if (!w) w = WaitFor(f, self);
  if (!w) return nullptr;
  // Atomic stores: a thread scanning for dead writers may read these of an
  // entry it saw owned by someone else a moment ago.
  std::atomic_ref<uint32_t>(w->active).store(0, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(w->count).store(0, std::memory_order_relaxed);
  t_writers.push_back({instance_, file_index, self.tid, w});
  MutexLock g(&claimed_mu_);
  claimed_.push_back({file_index, f->writer_index(w), self.word(), ::getpid()});
  return w;
}

WriterEntryHeader* WriterTable::WaitFor(StoreFile* f, os::Owner self) {
  // Every entry is taken. Those of dead threads are recovered (whatever
  // they left is undone) and freed. Live holders see the waiter count and
  // hand theirs back at the end of their next write, or within a second
  // when idle (ReleaseIdleWriters). Before, a thread kept its entry for its
  // life, and with <workers>40</workers> 454 of 2,400 updates were answered
  // 503 for good.
  //
  // Waiting cannot deadlock: an entry is taken only once the chain locks
  // of the write are held, and a thread in a write takes no lock it would
  // wait for (a cuckoo move's is tried, never waited on), so every holder
  // finishes its write.
  std::atomic_ref<uint64_t> waiters(f->header()->writer_waiters);
  waiters.fetch_add(1, std::memory_order_relaxed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.writer_wait_ms);
  WriterEntryHeader* w = nullptr;
  for (uint32_t round = 0;; ++round) {
    ForEachDead(f, [&](uint32_t i, os::Owner dead, bool) {
      if (i < kWriterEntries) RecoverDeadWriters(dead);
    });
    if ((w = TakeFreeWriter(f, self)) != nullptr) break;
    if (std::chrono::steady_clock::now() > deadline) break;
    if (round < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(round < 1024 ? 50 : 1000));
    }
  }
  waiters.fetch_sub(1, std::memory_order_relaxed);
  return w;
}

void WriterTable::Release(uint32_t file_index, WriterEntryHeader* w) {
  // Only a closed entry: an open journal stays with its owner (or, dead, for
  // recovery).
  if (AtomicLoad(w->active) != 0) return;
  const os::Owner self = os::Self();
  if (!keep_) {
    uint64_t expected = self.word();
    std::atomic_ref<uint64_t>(w->owner).compare_exchange_strong(expected, 0, std::memory_order_release);
    return;
  }
  std::erase_if(t_writers, [&](const WriterCacheEntry& e) {
    return e.instance == instance_ && e.file == file_index && e.tid == self.tid;
  });
  {
    MutexLock g(&claimed_mu_);
    std::erase_if(claimed_, [&](const Claimed& c) { return c.file == file_index && c.owner == self.word(); });
  }
  uint64_t expected = self.word();
  std::atomic_ref<uint64_t>(w->owner).compare_exchange_strong(expected, 0, std::memory_order_release);
}

void WriterTable::ReleaseKept(bool only_if_wanted) {
  if (!keep_) return;  // no entry outlives its write
  const os::Owner self = os::Self();
  for (uint32_t fi = 0; fi < files_.size(); ++fi) {
    StoreFile* f = files_[fi].get();
    if (only_if_wanted && std::atomic_ref<uint64_t>(f->header()->writer_waiters).load(std::memory_order_relaxed) == 0)
      continue;
    for (const WriterCacheEntry& e : t_writers) {
      if (e.instance == instance_ && e.file == fi && e.tid == self.tid) {
        Release(fi, e.w);
        break;  // ReleaseWriter changed t_writers
      }
    }
  }
}

WriterEntryHeader* WriterTable::ClaimBatch(uint32_t file_index) {
  StoreFile* f = files_[file_index].get();
  const os::Owner self = os::Self();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (uint32_t round = 0;; ++round) {
    for (uint32_t i = kWriterEntries; i < kAllWriterEntries; ++i) {
      WriterEntryHeader* w = f->writer(i);
      std::atomic_ref<uint64_t> owner(w->owner);
      uint64_t cur = owner.load(std::memory_order_acquire);
      if (cur == 0 && owner.compare_exchange_strong(cur, self.word())) {
        std::atomic_ref<uint32_t>(w->active).store(0, std::memory_order_relaxed);
        std::atomic_ref<uint32_t>(w->count).store(0, std::memory_order_relaxed);
        return w;
      }
    }
    // All held: a dead holder's entry is recovered (its batch undone or
    // kept) and freed; live holders finish their batch in microseconds.
    bool recovered = false;
    ForEachDead(f, [&](uint32_t i, os::Owner dead, bool) {
      if (i >= kWriterEntries) {
        RecoverDeadWriters(dead);
        recovered = true;
      }
    });
    if (recovered) continue;
    if (std::chrono::steady_clock::now() > deadline) return nullptr;
    if (round < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void WriterTable::ReleaseBatch(WriterEntryHeader* w) {
  // Closed by the Txn's commit or rollback before this runs; an entry still
  // active (it cannot be, short of a bug) stays for recovery.
  if (AtomicLoad(w->active) != 0) return;
  uint64_t expected = os::Self().word();
  std::atomic_ref<uint64_t>(w->owner).compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
}

void WriterTable::ReleaseClaimed() {
  // Only this process's entries (not a parent's, after fork), and only
  // closed ones: an open journal stays for recovery.
  MutexLock g(&claimed_mu_);
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

void WriterTable::ForEachDead(const StoreFile* f, const std::function<void(uint32_t, os::Owner, bool)>& fn) const {
  for (uint32_t i = 0; i < kAllWriterEntries; ++i) {
    const WriterEntryHeader* w = f->writer(i);
    const os::Owner owner = os::Owner::FromWord(AtomicLoad(w->owner));
    if (owner.tid == 0 || os::OwnerAlive(owner)) continue;
    fn(i, owner, AtomicLoad(w->active) != 0);
  }
}

void WriterTable::Undo(StoreFile* f, WriterEntryHeader* w) const {
  JournalRecord* recs = f->records(w);
  const uint32_t n = std::min<uint32_t>(AtomicLoad(w->count), f->capacity(f->writer_index(w)));
  // Newest first, so a slot saved twice ends with its oldest image.
  for (uint32_t i = n; i-- > 0;) {
    if (recs[i].keynode >= geo_.keynodes) continue;
    if (IsTagsRecord(recs[i].slot)) {
      const uint32_t first = (recs[i].slot - kTagsRecord) * kSlotBytes;
      if (first >= geo_.chain) continue;
      uint8_t* tags = f->tags(recs[i].keynode) + first;
      for (uint32_t k = 0; k < std::min(kSlotBytes, geo_.chain - first); ++k) StoreTag(tags + k, recs[i].image[k]);
      continue;
    }
    const uint32_t slot = recs[i].slot & kRecordSlotMask;
    if (slot >= geo_.chain) continue;
    std::memcpy(f->slot(recs[i].keynode, slot), recs[i].image, kSlotBytes);
    // The slot's check byte with it (format.h JournalRecord).
    if (recs[i].slot & kRecordHasCheck)
      ChecksOf(f->tags(recs[i].keynode), geo_.chain)[slot] = static_cast<uint8_t>(recs[i].slot >> 8);
  }
  std::atomic_ref<uint32_t>(w->count).store(0, std::memory_order_release);
  std::atomic_ref<uint32_t>(w->active).store(0, std::memory_order_release);
}

// Outside the thread-safety analysis: it takes one recovery lock per file in
// a loop, a set the analysis cannot name.
uint32_t WriterTable::RecoverDeadWriters(os::Owner dead) FRS_NO_THREAD_SAFETY_ANALYSIS {
  // In every file at once: a batch across files is kept or undone as a
  // whole, decided by its coordinator entry before any entry is touched. The
  // recovery locks (taken in file order) serialize this against anyone else
  // recovering the same owner. It is safe without the dead owner's chain
  // locks: they stay held by the dead owner until someone takes them over,
  // and every take-over runs this first.
  //
  // A recovery lock taken over from a dead holder means a recovery died
  // half done: the writer it was undoing is still active, owned by a dead
  // thread whose chain locks that holder had already taken over, so no
  // take-over will ever name it again. This pass then finishes the recovery
  // of every dead writer, not only `dead`'s (undoing again is harmless: the
  // images are the same).
  bool interrupted = false;
  for (auto& f : files_) {
    const os::LockResult lr = os::ShmLock(&f->header()->recovery_lock);
    if (!lr.took_over) continue;
    interrupted = true;
    std::atomic_ref<uint64_t>(f->header()->lock_recoveries).fetch_add(1, std::memory_order_relaxed);
    if (opts_.on_recovery)
      opts_.on_recovery("took over the recovery lock of dead owner " + std::to_string(lr.dead_owner.tid) + " in " +
                        f->path() + ": its interrupted recovery is finished now");
  }
  // And, whether or not a recovery lock was taken over, every other dead
  // owner's open journal: a thread that took over a dead holder's chain lock
  // and died before its first recovery lock left that holder's journal
  // open with no recovery interrupted to say so; the next taker recovered
  // only the second, wrote, and a later recovery of the first put its old
  // images back over those writes (a review of the store's crash safety).
  // An open journal of a dead owner is never one someone wrote after: every
  // take-over of its locks runs this first. Only open ones are asked about
  // (a /proc read each): a write is open for microseconds.
  auto recovered = [&](const WriterEntryHeader* w, uint64_t owner) {
    if (owner == dead.word()) return true;
    if (owner == 0 || (!interrupted && AtomicLoad(w->active) == 0)) return false;
    return !os::OwnerAlive(os::Owner::FromWord(owner));
  };
  struct Act {
    StoreFile* f;
    WriterEntryHeader* w;
    bool undo;
  };
  std::vector<Act> acts;
  for (auto& fp : files_) {
    StoreFile* f = fp.get();
    for (uint32_t i = 0; i < kAllWriterEntries; ++i) {
      WriterEntryHeader* w = f->writer(i);
      const uint64_t owner = AtomicLoad(w->owner);
      if (!recovered(w, owner)) continue;
      bool undo = AtomicLoad(w->active) != 0;
      const uint64_t batch = AtomicLoad(w->batch);
      if (undo && batch != 0 && w->coord_file < files_.size() && w->coord_entry < kAllWriterEntries) {
        const WriterEntryHeader* c = files_[w->coord_file]->writer(w->coord_entry);
        undo = !(AtomicLoad(c->owner) == owner && AtomicLoad(c->committed) == batch);
      }
      acts.push_back({f, w, undo});
    }
  }
  uint32_t undone = 0;
  for (const Act& a : acts) {
    if (a.undo) {
      Undo(a.f, a.w);
      ++undone;
    }
  }
  // Cleared in reverse file order, so a batch's coordinator (its lowest
  // file) goes last, as a live commit closes it: cleared first, a recovery
  // killed before the other files' entries left them active with no
  // coordinator saying committed, and the next recovery undid a committed
  // batch's part (a replicated batch's receipt kept while its nodes went
  // back, or the reverse: a count lost, or counted twice).
  for (auto it = acts.rbegin(); it != acts.rend(); ++it) {
    const Act& a = *it;
    std::atomic_ref<uint32_t>(a.w->count).store(0, std::memory_order_relaxed);
    std::atomic_ref<uint32_t>(a.w->active).store(0, std::memory_order_release);
    std::atomic_ref<uint64_t>(a.w->batch).store(0, std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(a.w->committed).store(0, std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(a.w->owner).store(0, std::memory_order_release);
  }
  for (auto it = files_.rbegin(); it != files_.rend(); ++it) os::ShmUnlock(&(*it)->header()->recovery_lock);
  return undone;
}

}  // namespace frs::store
