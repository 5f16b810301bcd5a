// base/mutex.h: a mutex the thread-safety analysis knows.
//
// std::mutex carries no capability attributes in libstdc++, so clang could
// not tell which lock a FRS_GUARDED_BY field names. Mutex is std::mutex
// with them; MutexLock holds one for a scope (std::lock_guard's job).
//
// Thread safety: a mutex.
#pragma once

#include <mutex>

#include "base/thread_annotations.h"

namespace frs {

class FRS_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() FRS_ACQUIRE() { mu_.lock(); }
  void Unlock() FRS_RELEASE() { mu_.unlock(); }
  bool TryLock() FRS_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // The BasicLockable names, for std::condition_variable_any, which waits
  // on any lock with lock() and unlock() (held by a MutexLock meanwhile).
  void lock() FRS_ACQUIRE() { mu_.lock(); }
  void unlock() FRS_RELEASE() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

class FRS_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) FRS_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() FRS_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace frs
