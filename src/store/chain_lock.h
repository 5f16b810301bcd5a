// store/chain_lock.h: the chain locks of a store's files. ChainLocks takes
// a chain's lock over from a dead owner (recovering its writes first) and
// releases every lock of a reaped process; LockSet is the set of chain locks
// one operation holds in one file, released on destruction. Private to
// src/store.
//
// Thread safety: one ChainLocks may be used from many threads; a LockSet
// belongs to one thread.
//
// Clang's thread-safety analysis does not follow these locks: which chains
// an operation locks is chosen at run time from its key's hash (and grows
// as placement needs the alternate chain), and the analysis can only check
// locks named by an expression fixed at compile time. LockSet's methods are
// therefore outside it, and the chain data (mapped slots and tags, reached
// by pointer) carries no FRS_GUARDED_BY; the `_locked` suffix
// (store_impl.h) remains the discipline's statement.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "base/thread_annotations.h"
#include "frs/status.h"
#include "frs/store.h"
#include "os/shm_lock.h"
#include "store/store_file.h"
#include "store/writer_table.h"

namespace frs::store {

// The chain locks of a store's files, and what a dead owner of one left.
class ChainLocks {
 public:
  // `files`, `geo` (the group geometry), `writers` (over the same files) and
  // `opts` (read_only, on_recovery) are the caller's and must outlive this.
  ChainLocks(const std::vector<std::unique_ptr<StoreFile>>& files, const StoreGeometry& geo, WriterTable& writers,
             const StoreOptions& opts)
      : files_(files), geo_(geo), writers_(writers), opts_(opts), read_only_(opts.read_only) {}
  ChainLocks(const ChainLocks&) = delete;
  ChainLocks& operator=(const ChainLocks&) = delete;

  // A read-only store takes no locks (see StoreOptions::read_only).
  bool read_only() const { return read_only_; }
  // Waits for a chain's lock (its try-lock failed). The thread is about to
  // wait, in no write, so it first hands back every writer entry it keeps;
  // taking the lock over from a dead owner runs that owner's recovery first.
  // A wait on a live owner is reported through on_recovery after a second
  // and each time it doubles; its start and end through on_lock_wait.
  void Wait(StoreFile* f, uint32_t keynode) FRS_ACQUIRE(*f->lock(keynode));
  // Undoes the unfinished writes of every dead thread `pid` names and
  // releases every chain lock such a thread holds, in every file; returns how
  // many locks it released. REQUIRES: a writable store.
  Result<uint32_t> ReleaseDeadOwner(int32_t pid);

 private:
  void RecoverOwner_locked(StoreFile* f, os::Owner dead);  // REQUIRES: the chain lock taken over

  const std::vector<std::unique_ptr<StoreFile>>& files_;
  const StoreGeometry& geo_;
  WriterTable& writers_;
  const StoreOptions& opts_;
  const bool read_only_;
};

// The chain locks one operation holds in one file, released on destruction.
class LockSet {
 public:
  LockSet(ChainLocks& locks, StoreFile* f) : locks_(locks), f_(f) {}
  ~LockSet() { UnlockAll(); }
  LockSet(const LockSet&) = delete;
  LockSet& operator=(const LockSet&) = delete;

  void Lock(uint32_t k) FRS_NO_THREAD_SAFETY_ANALYSIS {
    if (locks_.read_only()) return;
    // About to wait: ChainLocks::Wait hands back every entry this thread
    // keeps, not only those a waiter wants now: the holder of the lock
    // waited for here may start waiting for an entry after that check, and
    // with every entry kept by threads waiting like this one it would wait
    // out writer_wait_ms and fail with Busy. Taking one again is one CAS.
    if (!os::ShmTryLock(f_->lock(k))) locks_.Wait(f_, k);
    held_.push_back(k);
  }
  [[nodiscard]] bool TryLock(uint32_t k) FRS_NO_THREAD_SAFETY_ANALYSIS {
    if (locks_.read_only()) return true;
    if (!os::ShmTryLock(f_->lock(k))) return false;
    held_.push_back(k);
    return true;
  }
  bool Holds(uint32_t k) const { return locks_.read_only() || std::find(held_.begin(), held_.end(), k) != held_.end(); }
  // Whether chain k's lock is held by a thread that is gone (Lock takes it
  // over, and repairs what that thread left).
  bool HolderGone(uint32_t k) const {
    const os::Owner o = os::ShmOwner(f_->lock(k));
    return o.tid != 0 && !os::OwnerAlive(o);
  }
  void Unlock(uint32_t k) FRS_NO_THREAD_SAFETY_ANALYSIS {
    auto it = std::find(held_.begin(), held_.end(), k);
    if (it == held_.end()) return;
    os::ShmUnlock(f_->lock(k));
    held_.erase(it);
  }
  void UnlockAll() FRS_NO_THREAD_SAFETY_ANALYSIS {
    for (auto it = held_.rbegin(); it != held_.rend(); ++it) os::ShmUnlock(f_->lock(*it));
    held_.clear();
  }
  StoreFile* file() const { return f_; }

 private:
  ChainLocks& locks_;
  StoreFile* f_;
  // Inline room for the usual one to three chains: no allocation per update.
  boost::container::small_vector<uint32_t, 4> held_;
};

}  // namespace frs::store
