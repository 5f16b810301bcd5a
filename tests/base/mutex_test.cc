// The annotated mutex (base/mutex.h): MutexLock holds it for a scope.
#include "base/mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>

namespace frs {
namespace {

TEST(Mutex, MutexLockExcludesAnotherThread) {
  struct Counter {
    Mutex mu;
    // Not atomic on purpose: only the lock keeps the increments whole.
    uint64_t n FRS_GUARDED_BY(mu) = 0;
  } c;
  constexpr int kEach = 100000;
  auto add = [&c] {
    for (int i = 0; i < kEach; ++i) {
      MutexLock l(&c.mu);
      uint64_t v = c.n;
      std::atomic_signal_fence(std::memory_order_seq_cst);  // a read-modify-write in two steps
      c.n = v + 1;
    }
  };
  std::thread a(add), b(add);
  a.join();
  b.join();
  MutexLock l(&c.mu);
  EXPECT_EQ(c.n, 2u * kEach);
}

TEST(Mutex, TryLockFailsWhileHeldAndUnlockFreesIt) {
  Mutex mu;
  auto try_from_another_thread = [&mu] {
    bool took = false;
    std::thread([&] {
      if (mu.TryLock()) {
        took = true;
        mu.Unlock();
      }
    }).join();
    return took;
  };
  {
    MutexLock l(&mu);
    EXPECT_FALSE(try_from_another_thread());
  }
  EXPECT_TRUE(try_from_another_thread()) << "MutexLock released it at scope end";
  mu.lock();
  EXPECT_FALSE(try_from_another_thread());
  mu.unlock();
  EXPECT_TRUE(try_from_another_thread());
}

}  // namespace
}  // namespace frs
