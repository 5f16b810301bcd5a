#include "os/shm_lock.h"

#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

namespace frs::os {
namespace {

std::atomic<uint32_t> g_fork_generation{1};

struct TidCache {
  uint32_t generation = 0;
  uint32_t tid = 0;
};
thread_local TidCache t_tid;

[[maybe_unused]] const bool g_atfork_registered = [] {
  pthread_atfork(nullptr, nullptr, [] { g_fork_generation.fetch_add(1, std::memory_order_relaxed); });
  return true;
}();

long Futex(uint32_t* word, int op, uint32_t val, const timespec* timeout) {
  return syscall(SYS_futex, word, op, val, timeout, nullptr, 0);
}

inline void CpuRelax() { __builtin_ia32_pause(); }

}  // namespace

uint32_t CurrentTid() {
  uint32_t gen = g_fork_generation.load(std::memory_order_relaxed);
  if (t_tid.generation != gen) {
    t_tid.tid = static_cast<uint32_t>(syscall(SYS_gettid));
    t_tid.generation = gen;
  }
  return t_tid.tid;
}

bool TaskAlive(uint32_t tid) {
  if (tid == 0) return false;
  if (::kill(static_cast<pid_t>(tid), 0) != 0 && errno == ESRCH) return false;
  // A killed child that its parent has not reaped yet is a zombie: it still
  // answers kill(0) but will never release anything.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%u/stat", tid);
  FILE* f = std::fopen(path, "re");
  if (!f) return errno != ENOENT;
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* rparen = std::strrchr(buf, ')');  // the command name may hold spaces or parens
  if (!rparen || rparen[1] != ' ') return true;
  char state = rparen[2];
  return state != 'Z' && state != 'X' && state != 'x';
}

bool ShmTryLock(uint32_t* word) {
  std::atomic_ref<uint32_t> w(*word);
  uint32_t expected = 0;
  return w.compare_exchange_strong(expected, CurrentTid(), std::memory_order_acquire, std::memory_order_relaxed);
}

LockResult ShmLock(uint32_t* word) {
  std::atomic_ref<uint32_t> w(*word);
  const uint32_t me = CurrentTid();
  uint32_t cur = 0;
  if (w.compare_exchange_strong(cur, me, std::memory_order_acquire, std::memory_order_relaxed)) return {};

  // Short spin: critical sections are a few hundred nanoseconds.
  for (int i = 0; i < 128; ++i) {
    CpuRelax();
    cur = w.load(std::memory_order_relaxed);
    if (cur == 0 && w.compare_exchange_weak(cur, me, std::memory_order_acquire, std::memory_order_relaxed)) return {};
  }

  const timespec timeout{0, kLockCheckMs * 1000000L};
  for (;;) {
    cur = w.load(std::memory_order_relaxed);
    if ((cur & kLockOwnerMask) == 0) {
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
    long rc = Futex(word, FUTEX_WAIT, cur, &timeout);
    if (rc != 0 && errno == ETIMEDOUT) {
      uint32_t now = w.load(std::memory_order_relaxed);
      uint32_t owner = now & kLockOwnerMask;
      if (owner != 0 && owner == (cur & kLockOwnerMask) && !TaskAlive(owner)) {
        if (w.compare_exchange_strong(now, me | (now & kLockSleepers), std::memory_order_acquire,
                                      std::memory_order_relaxed))
          return LockResult{true, owner};
      }
    }
  }
}

void ShmUnlock(uint32_t* word) {
  std::atomic_ref<uint32_t> w(*word);
  uint32_t old = w.exchange(0, std::memory_order_release);
  if (old & kLockSleepers) Futex(word, FUTEX_WAKE, INT_MAX, nullptr);
}

bool ShmForceUnlock(uint32_t* word, uint32_t owner) {
  std::atomic_ref<uint32_t> w(*word);
  uint32_t cur = w.load(std::memory_order_acquire);
  while ((cur & kLockOwnerMask) == owner && owner != 0) {
    if (w.compare_exchange_weak(cur, 0, std::memory_order_release, std::memory_order_relaxed)) {
      if (cur & kLockSleepers) Futex(word, FUTEX_WAKE, INT_MAX, nullptr);
      return true;
    }
  }
  return false;
}

}  // namespace frs::os
