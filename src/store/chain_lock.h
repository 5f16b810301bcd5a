// store/chain_lock.h: the set of chain locks one operation holds in one
// file (LockSet), released on destruction. Private to src/store; taking a
// lock over from a dead owner (and recovering its writes) is in
// chain_lock.cc.
//
// Thread safety: a LockSet belongs to one thread.
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

#include <boost/container/small_vector.hpp>

#include "base/thread_annotations.h"
#include "os/shm_lock.h"
#include "store/store_impl.h"

namespace frs::store {

// The chain locks one operation holds in one file, released on destruction.
class LockSet {
 public:
  LockSet(StoreImpl* s, StoreFile* f) : s_(s), f_(f) {}
  ~LockSet() { UnlockAll(); }
  LockSet(const LockSet&) = delete;
  LockSet& operator=(const LockSet&) = delete;

  // A read-only store takes no locks (see StoreOptions::read_only).
  void Lock(uint32_t k) FRS_NO_THREAD_SAFETY_ANALYSIS {
    if (s_->read_only()) return;
    if (!os::ShmTryLock(f_->lock(k))) {
      // About to wait: this thread is in no write (a write holds its locks
      // before it takes a writer entry), so every entry it keeps goes back,
      // not only those a waiter wants now: the holder of the lock waited
      // for here may start waiting for an entry after that check, and with
      // every entry kept by threads waiting like this one it would wait out
      // writer_wait_ms and fail with Busy. Taking one again is one CAS.
      s_->ReleaseKeptWriters(/*only_if_wanted=*/false);
      s_->LockChain(f_, k);
    }
    held_.push_back(k);
  }
  [[nodiscard]] bool TryLock(uint32_t k) FRS_NO_THREAD_SAFETY_ANALYSIS {
    if (s_->read_only()) return true;
    if (!os::ShmTryLock(f_->lock(k))) return false;
    held_.push_back(k);
    return true;
  }
  bool Holds(uint32_t k) const { return s_->read_only() || std::find(held_.begin(), held_.end(), k) != held_.end(); }
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
  StoreImpl* s_;
  StoreFile* f_;
  // Inline room for the usual one to three chains: no allocation per update.
  boost::container::small_vector<uint32_t, 4> held_;
};

}  // namespace frs::store
