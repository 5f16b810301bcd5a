// os/shm_lock.h: a lock word in shared memory that survives its owner's death.
//
// The word holds the owner's thread id (0 = free) and, in bit 31, "someone is
// sleeping". Lock: compare-and-set 0 -> tid; on contention spin briefly, then
// sleep on the word with futex(2) (the kernel primitive under POSIX
// semaphores; shared, not private, so it works across processes on a
// MAP_SHARED file). A sleeper wakes at least every kCheckMs to ask whether the
// owner still lives; if not, it takes the word over (CAS dead -> self) and
// tells its caller, who must repair what the dead owner may have left
// half-done before touching the protected data.
//
// Thread ids are cached per thread and reset after fork(). A recycled pid can
// make a dead owner look alive; the frsd master closes that gap by
// force-releasing a worker's locks as soon as it reaps it.
//
// Thread safety: all functions are safe from any thread or process.
#pragma once

#include <atomic>
#include <cstdint>

namespace frs::os {

inline constexpr uint32_t kLockSleepers = 0x80000000u;
inline constexpr uint32_t kLockOwnerMask = 0x7fffffffu;
inline constexpr int kLockCheckMs = 10;

// The calling thread's id (gettid), cached.
uint32_t CurrentTid();

// True unless `tid` is certainly gone (no such task, or a zombie).
bool TaskAlive(uint32_t tid);

struct LockResult {
  bool took_over = false;     // the previous owner was dead
  uint32_t dead_owner = 0;
};

// Blocks until the word is ours.
LockResult ShmLock(uint32_t* word);
// Takes a free word; never waits and never takes over.
bool ShmTryLock(uint32_t* word);
// Releases and wakes sleepers. REQUIRES: held by the caller (or taken over).
void ShmUnlock(uint32_t* word);
// If `owner` holds the word, releases it (waking sleepers) and returns true.
bool ShmForceUnlock(uint32_t* word, uint32_t owner);
// The owner recorded in the word (0 = free).
inline uint32_t ShmOwner(const uint32_t* word) {
  return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(word)).load(std::memory_order_acquire) & kLockOwnerMask;
}

}  // namespace frs::os
