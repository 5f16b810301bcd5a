// The writer table: each thread that writes a file claims one of its
// kWriterEntries entries for each write and hands it back at its end; with
// StoreOptions::keep_writer_entries (frsd's workers) it keeps it between
// writes (a per-thread cache), handing it back when another writer waits
// for one (FileHeader::writer_waiters); batches take one of kBatchEntries
// batch entries per batch. Entries of dead owners are recovered through RecoverDeadWriters
// (journal.cc) before they are reused. docs/store.md, "Writer entries".
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "os/shm_lock.h"
#include "store/journal.h"
#include "store/store_impl.h"

namespace frs::store {
namespace {

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

WriterEntryHeader* StoreImpl::ClaimWriter(uint32_t file_index) {
  const os::Owner self = os::Self();
  if (!opts_.keep_writer_entries) {
    // Taken for this write, handed back by AfterWrite at its end: nothing
    // to remember between writes.
    StoreFile* f = files_[file_index].get();
    if (t_hint == kNoHint) t_hint = self.tid % kWriterEntries;
    WriterEntryHeader* w = TakeFreeWriter(f, self, t_hint);
    if (!w) w = WaitForWriter(f, self);
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
  if (!w) w = WaitForWriter(f, self);
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

WriterEntryHeader* StoreImpl::WaitForWriter(StoreFile* f, os::Owner self) {
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
    ForEachDeadWriter(f, [&](uint32_t i, os::Owner dead, bool) {
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

void StoreImpl::ReleaseWriter(uint32_t file_index, WriterEntryHeader* w) {
  // Only a closed entry: an open journal stays with its owner (or, dead, for
  // recovery).
  if (AtomicLoad(w->active) != 0) return;
  const os::Owner self = os::Self();
  if (!opts_.keep_writer_entries) {
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

void StoreImpl::ReleaseIdleWriters() { ReleaseKeptWriters(/*only_if_wanted=*/true); }

void StoreImpl::ReleaseKeptWriters(bool only_if_wanted) {
  if (!opts_.keep_writer_entries) return;  // no entry outlives its write
  const os::Owner self = os::Self();
  for (uint32_t fi = 0; fi < files_.size(); ++fi) {
    StoreFile* f = files_[fi].get();
    if (only_if_wanted && std::atomic_ref<uint64_t>(f->header()->writer_waiters).load(std::memory_order_relaxed) == 0)
      continue;
    for (const WriterCacheEntry& e : t_writers) {
      if (e.instance == instance_ && e.file == fi && e.tid == self.tid) {
        ReleaseWriter(fi, e.w);
        break;  // ReleaseWriter changed t_writers
      }
    }
  }
}

WriterEntryHeader* StoreImpl::ClaimBatchWriter(uint32_t file_index) {
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
    ForEachDeadWriter(f, [&](uint32_t i, os::Owner dead, bool) {
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

void StoreImpl::ReleaseBatchWriter(StoreFile* f, WriterEntryHeader* w) {
  // Closed by the Txn's commit or rollback before this runs; an entry still
  // active (it cannot be, short of a bug) stays for recovery.
  (void)f;
  if (AtomicLoad(w->active) != 0) return;
  uint64_t expected = os::Self().word();
  std::atomic_ref<uint64_t>(w->owner).compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
}

void StoreImpl::ReleaseClaimedWriters() {
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

}  // namespace frs::store
