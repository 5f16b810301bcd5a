// os/shm_lock.h: a lock word in shared memory that survives its owner's death
// and the reuse of its owner's pid.
//
// The word is 64 bits. The low half holds the owner's thread id (0 = free)
// and, in bit 31, "someone is sleeping"; it is the futex word. The high half
// holds the low 32 bits of the owner's start time (clock ticks since boot,
// field 22 of /proc/TID/stat). Both halves are set with one 64-bit
// compare-and-set. Lock: CAS 0 -> owner; on contention spin briefly, then
// sleep on the low half with futex(2) (the kernel primitive under POSIX
// semaphores; shared, so it works across processes on a MAP_SHARED file). A
// sleeper wakes at least every kLockCheckMs to ask whether the owner still
// lives; if not, it takes the word over (CAS dead -> self) and tells its
// caller, who must repair what the dead owner may have left half-done.
//
// "Lives" means: a task with that id exists, is not a zombie, and started at
// the recorded time. A pid handed by the kernel to an unrelated process
// after its owner died therefore no longer looks like the owner (before,
// kill(tid, 0) alone made every waiter block forever). A waiter that has
// waited kLockReportMs calls its report callback, and again each time the
// wait doubles, so a lock is never waited on silently.
//
// Thread safety: all functions are safe from any thread or process. The
// word is a capability of clang's thread-safety analysis: ShmLock and
// ShmTryLock acquire it and ShmUnlock releases it, so a caller holding one
// word, named by an expression, is checked. A set of words chosen at run
// time (store/chain_lock.h) is beyond what the analysis can name.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "base/thread_annotations.h"

namespace frs::os {

// The 64-bit lock word as it lies in the mapped file. A struct, not a bare
// integer, only so that the analysis can name a word as a lock; its layout
// is the integer's.
struct FRS_CAPABILITY("shared-memory lock") LockWord {
  uint64_t bits;
};
static_assert(sizeof(LockWord) == 8 && alignof(LockWord) == 8 && std::is_trivial_v<LockWord> &&
              std::is_standard_layout_v<LockWord>);
inline constexpr uint64_t kLockSleepers = 0x80000000u;
inline constexpr uint64_t kLockTidMask = 0x7fffffffu;
inline constexpr int kLockCheckMs = 10;
inline constexpr int kLockReportMs = 1000;

// Who owns a lock or a writer entry: a thread id and its start time.
// An owner's start as a lock word holds it: the low 32 bits of the task's
// start time in clock ticks since boot, never 0 (a read of 0 is held as 1)
// and never kUnknownStart (held as one less), which means "its own /proc
// read failed: compare the id only". A word whose start is 0 was written by
// no holder: damage (one flipped bit in a free word makes one whose id is
// init's or a kernel thread's), and its owner is taken for dead.
inline constexpr uint32_t kUnknownStart = 0xFFFFFFFFu;
inline uint32_t WordStart(uint64_t ticks) {
  const auto s = static_cast<uint32_t>(ticks);
  return s == 0 ? 1 : s == kUnknownStart ? kUnknownStart - 1 : s;
}

struct Owner {
  uint32_t tid = 0;
  uint32_t start = 0;  // WordStart of the start time (kUnknownStart: not read)
  bool operator==(const Owner&) const = default;
  uint64_t word() const { return uint64_t{start} << 32 | tid; }
  static Owner FromWord(uint64_t w) {
    return Owner{static_cast<uint32_t>(w & kLockTidMask), static_cast<uint32_t>(w >> 32)};
  }
};

// The calling thread (gettid and its start time), cached; refreshed after fork.
Owner Self();
inline uint32_t CurrentTid() { return Self().tid; }

// The start time of task `tid` (low 32 bits of its clock ticks since boot),
// or false when it does not exist or is a zombie.
bool TaskStart(uint32_t tid, uint32_t* start);
// False when `o` is certainly gone: no such task, a zombie, or a task with
// that id that started at another time (the id was reused). True when /proc
// cannot be read (no fd left): a live holder's lock is never taken on a
// guess, and a waiter asks again on its next check. An owner whose start
// is kUnknownStart (its own /proc read failed) is compared by id only; one
// whose start is 0 is no holder's (damage): gone.
bool OwnerAlive(Owner o);

// [[nodiscard]]: a caller that took a dead owner's lock over must repair
// what that owner may have left half done, so it may not ignore that it did.
struct [[nodiscard]] LockResult {
  bool took_over = false;  // the previous owner was dead
  Owner dead_owner;
};

// Called while a waiter waits on a live owner: after kLockReportMs, then
// each time the wait doubles. A plain function and its context, so that
// taking an uncontended lock costs no allocation.
struct LockWaitReport {
  void (*fn)(const void* ctx, Owner owner, int64_t waited_ms) = nullptr;
  const void* ctx = nullptr;
};

// Blocks until the word is ours.
LockResult ShmLock(LockWord* word, const LockWaitReport* report = nullptr) FRS_ACQUIRE(*word);
// Takes a free word; never waits and never takes over.
[[nodiscard]] bool ShmTryLock(LockWord* word) FRS_TRY_ACQUIRE(true, *word);
// Releases and wakes sleepers. REQUIRES: held by the caller (or taken over).
void ShmUnlock(LockWord* word) FRS_RELEASE(*word);
// If `owner` holds the word, releases it (waking sleepers) and returns true.
// Not FRS_RELEASE: it frees a dead owner's hold, never the caller's.
[[nodiscard]] bool ShmForceUnlock(LockWord* word, Owner owner);
// The owner recorded in the word (tid 0 = free).
inline Owner ShmOwner(const LockWord* word) {
  return Owner::FromWord(std::atomic_ref<uint64_t>(const_cast<LockWord*>(word)->bits).load(std::memory_order_acquire));
}

}  // namespace frs::os
