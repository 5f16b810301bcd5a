#include "os/shm_lock.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace frs::os {
namespace {

static_assert(std::endian::native == std::endian::little, "the futex word is the low half of the lock word");

std::atomic<uint32_t> g_fork_generation{1};

struct SelfCache {
  uint32_t generation = 0;
  Owner self;
};
thread_local SelfCache t_self;

[[maybe_unused]] const bool g_atfork_registered = [] {
  pthread_atfork(nullptr, nullptr, [] { g_fork_generation.fetch_add(1, std::memory_order_relaxed); });
  return true;
}();

long Futex(LockWord* word, int op, uint32_t val, const timespec* timeout) {
  // The low half of the 64-bit word (little-endian: its first 4 bytes).
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word->bits), op, val, timeout, nullptr, 0);
}

inline void CpuRelax() { __builtin_ia32_pause(); }

int64_t MonoMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

// What reading a task's /proc stat file told.
enum class Stat { kRead, kGone, kUnknown };

// Reads /proc/<path>/stat: the state and the start time (field 22). Only a
// missing file means the task is gone: any other failure (no fd left under
// a connection flood, no memory) says nothing about the task, and a caller
// that took it for death would take a live holder's lock.
Stat ReadStat(const char* path, char* state, uint64_t* start) {
  FILE* f = std::fopen(path, "re");
  if (!f) return (errno == ENOENT || errno == ESRCH) ? Stat::kGone : Stat::kUnknown;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  const bool failed = std::ferror(f) != 0;
  const int read_errno = errno;
  std::fclose(f);
  // A task that exits between the open and the read reads as ESRCH.
  if (failed) return read_errno == ESRCH ? Stat::kGone : Stat::kUnknown;
  if (n == 0) return Stat::kGone;
  buf[n] = '\0';
  const char* rparen = std::strrchr(buf, ')');  // the command name may hold spaces or parens
  if (!rparen || rparen[1] != ' ') return Stat::kUnknown;
  *state = rparen[2];
  // Field 3 is the state; skip to field 22.
  const char* p = rparen + 2;
  for (int field = 3; field < 22 && p; ++field) {
    p = std::strchr(p, ' ');
    if (p) ++p;
  }
  if (!p) return Stat::kUnknown;
  *start = std::strtoull(p, nullptr, 10);
  return Stat::kRead;
}

// The task's start time, or why there is none.
Stat ProbeTask(uint32_t tid, uint32_t* start) {
  if (tid == 0) return Stat::kGone;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%u/stat", tid);
  char state = 0;
  uint64_t st = 0;
  const Stat r = ReadStat(path, &state, &st);
  if (r != Stat::kRead) return r;
  // A killed child that its parent has not reaped yet is a zombie: it will
  // never release anything.
  if (state == 'Z' || state == 'X' || state == 'x') return Stat::kGone;
  *start = WordStart(st);
  return Stat::kRead;
}

}  // namespace

Owner Self() {
  const uint32_t gen = g_fork_generation.load(std::memory_order_relaxed);
  if (t_self.generation != gen) {
    Owner o;
    o.tid = static_cast<uint32_t>(syscall(SYS_gettid));
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/task/%u/stat", o.tid);
    char state = 0;
    uint64_t start = 0;
    // Unread (no fd left), the start is kUnknownStart, which OwnerAlive
    // takes as "compare the id only". It is not read again later: the word
    // must stay the same for as long as this thread holds anything under it.
    o.start = ReadStat(path, &state, &start) == Stat::kRead ? WordStart(start) : kUnknownStart;
    t_self.self = o;
    t_self.generation = gen;
  }
  return t_self.self;
}

bool TaskStart(uint32_t tid, uint32_t* start) { return ProbeTask(tid, start) == Stat::kRead; }

bool OwnerAlive(Owner o) {
  uint32_t start = 0;
  switch (ProbeTask(o.tid, &start)) {
    case Stat::kGone: return false;
    case Stat::kUnknown: return true;  // cannot tell: a waiter asks again on its next check
    case Stat::kRead: break;
  }
  return o.start == kUnknownStart || (o.start != 0 && start == o.start);
}

// The primitives themselves are beyond the analysis: to it, taking the lock
// is a compare-and-set on an integer.
bool ShmTryLock(LockWord* word) FRS_NO_THREAD_SAFETY_ANALYSIS {
  std::atomic_ref<uint64_t> w(word->bits);
  uint64_t expected = 0;
  return w.compare_exchange_strong(expected, Self().word(), std::memory_order_acquire, std::memory_order_relaxed);
}

LockResult ShmLock(LockWord* word, const LockWaitReport* report) FRS_NO_THREAD_SAFETY_ANALYSIS {
  std::atomic_ref<uint64_t> w(word->bits);
  const uint64_t me = Self().word();
  uint64_t cur = 0;
  if (w.compare_exchange_strong(cur, me, std::memory_order_acquire, std::memory_order_relaxed)) return {};

  // Short spin: critical sections are a few hundred nanoseconds.
  for (int i = 0; i < 128; ++i) {
    CpuRelax();
    cur = w.load(std::memory_order_relaxed);
    if (cur == 0 && w.compare_exchange_weak(cur, me, std::memory_order_acquire, std::memory_order_relaxed)) return {};
  }

  const timespec timeout{0, kLockCheckMs * 1000000L};
  const int64_t began = MonoMs();
  int64_t next_report = kLockReportMs;
  for (;;) {
    cur = w.load(std::memory_order_relaxed);
    if ((cur & kLockTidMask) == 0) {
      // Free: keep the sleepers bit, since others may still sleep on the word.
      if (w.compare_exchange_weak(cur, me | (cur & kLockSleepers), std::memory_order_acquire,
                                  std::memory_order_relaxed))
        return {};
      continue;
    }
    if (!(cur & kLockSleepers)) {
      if (!w.compare_exchange_weak(cur, cur | kLockSleepers, std::memory_order_relaxed, std::memory_order_relaxed))
        continue;
      cur |= kLockSleepers;
    }
    long rc = Futex(word, FUTEX_WAIT, static_cast<uint32_t>(cur), &timeout);
    if (rc != 0 && errno == ETIMEDOUT) {
      uint64_t now = w.load(std::memory_order_relaxed);
      const Owner owner = Owner::FromWord(now);
      if (owner.tid != 0 && (now & ~kLockSleepers) == (cur & ~kLockSleepers) && !OwnerAlive(owner)) {
        if (w.compare_exchange_strong(now, me | (now & kLockSleepers), std::memory_order_acquire,
                                      std::memory_order_relaxed))
          return LockResult{true, owner};
      }
      const int64_t waited = MonoMs() - began;
      if (report && report->fn && waited >= next_report && owner.tid != 0) {
        report->fn(report->ctx, owner, waited);
        next_report *= 2;
      }
    }
  }
}

void ShmUnlock(LockWord* word) FRS_NO_THREAD_SAFETY_ANALYSIS {
  std::atomic_ref<uint64_t> w(word->bits);
  uint64_t old = w.exchange(0, std::memory_order_release);
  if (old & kLockSleepers) Futex(word, FUTEX_WAKE, INT_MAX, nullptr);
}

bool ShmForceUnlock(LockWord* word, Owner owner) {
  std::atomic_ref<uint64_t> w(word->bits);
  uint64_t cur = w.load(std::memory_order_acquire);
  while (owner.tid != 0 && Owner::FromWord(cur) == owner) {
    if (w.compare_exchange_weak(cur, 0, std::memory_order_release, std::memory_order_relaxed)) {
      if (cur & kLockSleepers) Futex(word, FUTEX_WAKE, INT_MAX, nullptr);
      return true;
    }
  }
  return false;
}

}  // namespace frs::os
