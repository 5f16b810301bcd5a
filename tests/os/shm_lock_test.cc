// Who holds a lock (os/shm_lock.h): a thread's identity is its id and its
// start time, so a reused id is not its owner, and a probe that cannot read
// /proc does not make a live owner look dead.
#include "os/shm_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "common/wait_exit.h"

namespace frs {
namespace {

using testing::WaitExit;

// The suite name is the one these tests had beside the store's crash tests.
TEST(StoreCrash, TheIdentityCheckTellsAReusedIdFromItsOwner) {
  const os::Owner me = os::Self();
  EXPECT_EQ(me.tid, static_cast<uint32_t>(::gettid()));
  EXPECT_TRUE(os::OwnerAlive(me));
  EXPECT_FALSE(os::OwnerAlive(os::Owner{me.tid, me.start + 1})) << "same id, another start: not the owner";
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  // A zombie until reaped: wait for its exit without reaping it (a fixed
  // sleep did not make it one on a busy machine). kUnknownStart compares
  // the id only, so only the zombie state can make it read as gone.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_FALSE(os::OwnerAlive(os::Owner{static_cast<uint32_t>(child), os::kUnknownStart}));
  EXPECT_FALSE(os::OwnerAlive(os::Owner{static_cast<uint32_t>(child), me.start}));
  WaitExit(child);
  EXPECT_FALSE(os::OwnerAlive(os::Owner{static_cast<uint32_t>(child), me.start}));
}

// A process out of file descriptors (frsd under a connection flood) cannot
// read /proc; that must not make a live holder look dead, or its lock would
// be taken over mid-write.
TEST(StoreCrash, NoFdLeftDoesNotMakeALiveOwnerDead) {
  const os::Owner parent = os::Self();
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A thread whose identity is first asked for once no fd is left. It is
    // started before: the sanitizers' runtime needs descriptors to start one.
    std::atomic<int> stage{0};
    int rc = 0, fresh_rc = 0;
    std::thread fresh_thread([&] {
      stage.store(1);
      while (stage.load() != 2) std::this_thread::yield();
      const os::Owner fresh = os::Self();
      if (fresh.start != os::kUnknownStart) fresh_rc = 14;  // its read must have failed too
      else if (!os::OwnerAlive(fresh)) fresh_rc = 15;       // then it is compared by id only
      // It ends once fds are back: its end, too, needs the runtime's.
      stage.store(3);
      while (stage.load() != 4) std::this_thread::yield();
    });
    while (stage.load() != 1) std::this_thread::yield();
    const int base = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // stdin may be closed
    rlimit lim{64, 64};
    if (base < 0 || ::setrlimit(RLIMIT_NOFILE, &lim) != 0) rc = 10;
    int taken[64];
    int ntaken = 0;
    while (rc == 0 && ntaken < 64 && (taken[ntaken] = ::dup(base)) >= 0) ++ntaken;
    if (rc == 0 && errno != EMFILE) rc = 11;
    uint32_t start = 0;
    if (rc == 0 && os::TaskStart(parent.tid, &start)) rc = 12;  // the probe really failed
    if (rc == 0 && !os::OwnerAlive(parent)) rc = 13;
    stage.store(2);
    while (stage.load() != 3) std::this_thread::yield();
    for (int i = 0; i < ntaken; ++i) ::close(taken[i]);
    stage.store(4);
    fresh_thread.join();
    ::_exit(rc != 0 ? rc : fresh_rc);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10 setrlimit, 11 not EMFILE, 12 probe did not fail, 13 parent judged dead, "
                                       "14 fresh start read, 15 fresh thread judged dead";
}

// A lock word no holder wrote: one flipped bit in a free word gives an id
// (1: init, 2: kthreadd, ...) of a task that lives for good, with start 0.
// Taken for alive, it hung every waiter; no holder writes start 0.
TEST(StoreCrash, AWordWithStartZeroIsDamageNotALiveOwner) {
  EXPECT_FALSE(os::OwnerAlive(os::Owner{1, 0}));
  EXPECT_FALSE(os::OwnerAlive(os::Owner{os::Self().tid, 0}));
  EXPECT_TRUE(os::OwnerAlive(os::Owner{os::Self().tid, os::kUnknownStart}));
  EXPECT_NE(os::Self().start, 0u);
  EXPECT_EQ(os::WordStart(0), 1u);
  EXPECT_EQ(os::WordStart(uint64_t{1} << 32), 1u);
  EXPECT_EQ(os::WordStart(os::kUnknownStart), os::kUnknownStart - 1);
  EXPECT_EQ(os::WordStart(12345), 12345u);
}

}  // namespace
}  // namespace frs
