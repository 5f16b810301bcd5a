// The chain locks (store/chain_lock.h) on their own, over mapped files
// without a Store: a LockSet holds what it took until it ends, a read-only
// store takes none, a lock taken over from a dead owner has that owner's
// write undone first, and a reaped process's locks are released.
// (Killed processes, through a Store, are store_crash_test.cc's.)
#include "store/chain_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/store_files.h"
#include "store/writer_table.h"

namespace frs {
namespace {

using store::ChainLocks;
using store::LockSet;
using store::WriterTable;
using testing::DeadOwner;
using testing::OpenEntryWithImage;
using testing::PutNode;
using testing::StoreFiles;

uint64_t LockOwner(const store::StoreFile* f, uint32_t k) { return os::ShmOwner(f->lock(k)).word(); }
void HoldAs(store::StoreFile* f, uint32_t k, os::Owner o) {
  std::atomic_ref<uint64_t>(f->lock(k)->bits).store(o.word(), std::memory_order_release);
}

TEST(ChainLocks, ALockSetHoldsWhatItTookUntilItEnds) {
  StoreFiles s(1, 8, 64);
  WriterTable writers(s.files, s.geo, s.opts);
  ChainLocks locks(s.files, s.geo, writers, s.opts);
  store::StoreFile* f = s.file(0);
  {
    LockSet set(locks, f);
    set.Lock(3);
    set.Lock(5);
    EXPECT_TRUE(set.Holds(3));
    EXPECT_TRUE(set.Holds(5));
    EXPECT_FALSE(set.Holds(4));
    EXPECT_EQ(LockOwner(f, 3), os::Self().word());
    set.Unlock(3);
    EXPECT_FALSE(set.Holds(3));
    EXPECT_EQ(LockOwner(f, 3), 0u);
    set.Unlock(3);  // not held: nothing happens
    EXPECT_EQ(LockOwner(f, 5), os::Self().word());
  }
  EXPECT_EQ(LockOwner(f, 5), 0u) << "released when the set ends";
}

TEST(ChainLocks, AReadOnlyStoreTakesNoLocks) {
  StoreFiles s(1, 8, 64);
  s.opts.read_only = true;
  WriterTable writers(s.files, s.geo, s.opts);
  ChainLocks locks(s.files, s.geo, writers, s.opts);
  store::StoreFile* f = s.file(0);
  HoldAs(f, 2, DeadOwner());  // not even a dead owner's lock is taken over
  LockSet set(locks, f);
  set.Lock(1);
  set.Lock(2);
  EXPECT_TRUE(set.TryLock(4));
  EXPECT_TRUE(set.Holds(6)) << "everything counts as held";
  EXPECT_EQ(LockOwner(f, 1), 0u);
  EXPECT_EQ(LockOwner(f, 2), DeadOwner().word());
  EXPECT_EQ(f->header()->lock_recoveries, 0u);
}

TEST(ChainLocks, TryLockNeverWaitsOnAHeldChain) {
  StoreFiles s(1, 8, 64);
  WriterTable writers(s.files, s.geo, s.opts);
  ChainLocks locks(s.files, s.geo, writers, s.opts);
  store::StoreFile* f = s.file(0);
  std::mutex mu;
  std::condition_variable cv;
  bool locked = false, done = false;
  std::thread holder([&] {
    LockSet set(locks, f);
    set.Lock(4);
    std::unique_lock<std::mutex> g(mu);
    locked = true;
    cv.notify_all();
    cv.wait(g, [&] { return done; });
  });
  {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return locked; });
  }
  {
    LockSet set(locks, f);
    EXPECT_FALSE(set.TryLock(4));
    EXPECT_FALSE(set.Holds(4));
    EXPECT_TRUE(set.TryLock(5));
  }
  {
    std::lock_guard<std::mutex> g(mu);
    done = true;
  }
  cv.notify_all();
  holder.join();
  EXPECT_EQ(LockOwner(f, 4), 0u);
}

// A wait on a live owner is said through on_lock_wait with that owner's
// thread id, and its end with 0 (frsd's watch over hung workers reads it);
// a lock taken at once says nothing.
TEST(ChainLocks, AWaitOnALiveOwnerIsSaidWithItsThreadAndItsEnd) {
  StoreFiles s(1, 8, 64);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<uint32_t> said;
  s.opts.on_lock_wait = [&](uint32_t tid) {
    std::lock_guard<std::mutex> g(mu);
    said.push_back(tid);
    cv.notify_all();
  };
  WriterTable writers(s.files, s.geo, s.opts);
  ChainLocks locks(s.files, s.geo, writers, s.opts);
  store::StoreFile* f = s.file(0);
  {
    LockSet set(locks, f);
    set.Lock(4);  // free
  }
  EXPECT_TRUE(said.empty());
  bool locked = false, done = false;
  uint32_t holder_tid = 0;
  std::thread holder([&] {
    LockSet set(locks, f);
    set.Lock(4);
    std::unique_lock<std::mutex> g(mu);
    holder_tid = os::CurrentTid();
    locked = true;
    cv.notify_all();
    cv.wait(g, [&] { return done; });
  });
  {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return locked; });
  }
  std::thread waiter([&] {
    LockSet set(locks, f);
    set.Lock(4);
  });
  {
    std::unique_lock<std::mutex> g(mu);
    ASSERT_TRUE(cv.wait_for(g, std::chrono::seconds(10), [&] { return !said.empty(); }));
    EXPECT_EQ(said, std::vector<uint32_t>{holder_tid});
    done = true;
  }
  cv.notify_all();
  holder.join();
  waiter.join();
  EXPECT_EQ(said, (std::vector<uint32_t>{holder_tid, 0}));
  EXPECT_EQ(LockOwner(f, 4), 0u);
}

// One flipped bit in a free lock word: owner 1 (init, alive for good) with
// start 0, which no holder writes. It is damage, taken over at once; it was
// taken for a live owner and every locker waited forever.
TEST(ChainLocks, AFlippedBitInAFreeLockIsTakenOverNotWaitedOn) {
  StoreFiles s(1, 8, 64);
  WriterTable writers(s.files, s.geo, s.opts);
  ChainLocks locks(s.files, s.geo, writers, s.opts);
  store::StoreFile* f = s.file(0);
  for (uint32_t tid : {1u, 2u}) {
    HoldAs(f, 4, os::Owner{tid, 0});
    LockSet set(locks, f);
    set.Lock(4);
    EXPECT_EQ(LockOwner(f, 4), os::Self().word()) << tid;
  }
  EXPECT_EQ(f->header()->lock_recoveries, 2u);
}

TEST(ChainLocks, TakingOverADeadOwnersLockUndoesItsWriteFirst) {
  StoreFiles s(1, 8, 64);
  std::vector<std::string> said;
  s.opts.on_recovery = [&](const std::string& what) { said.push_back(what); };
  WriterTable writers(s.files, s.geo, s.opts);
  ChainLocks locks(s.files, s.geo, writers, s.opts);
  store::StoreFile* f = s.file(0);
  PutNode(f, 6, 1, 4242, 1, 1000);
  // A writer that died inside its critical section: chain 6 locked, its
  // slot 1 half rewritten, the old image in its journal.
  const os::Owner dead = DeadOwner();
  HoldAs(f, 6, dead);
  OpenEntryWithImage(f, 2, dead, 6, 1);
  std::memset(f->slot(6, 1), 0x5A, 16);
  {
    LockSet set(locks, f);
    set.Lock(6);
    EXPECT_EQ(LockOwner(f, 6), os::Self().word());
    EXPECT_EQ(store::HeaderAt(f->slot(6, 1))->id, 4242u) << "the chain is as before the dead write";
    EXPECT_EQ(store::AtomicLoad(f->writer(2)->owner), 0u);
  }
  EXPECT_EQ(f->header()->lock_recoveries, 1u);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("recovered a lock of dead owner " + std::to_string(dead.tid)), std::string::npos) << said[0];
  EXPECT_NE(said[0].find("undid its unfinished write"), std::string::npos) << said[0];
}

// About to wait for a lock, a thread hands back the writer entries it keeps:
// the lock's holder may be waiting for one of them.
TEST(ChainLocks, AWaitHandsBackTheEntriesThisThreadKeeps) {
  StoreFiles s(1, 8, 64);
  s.opts.keep_writer_entries = true;
  WriterTable writers(s.files, s.geo, s.opts);
  ChainLocks locks(s.files, s.geo, writers, s.opts);
  store::StoreFile* f = s.file(0);
  store::WriterEntryHeader* kept = writers.Claim(0);
  ASSERT_NE(kept, nullptr);
  writers.AfterWrite(0, kept);
  ASSERT_EQ(store::AtomicLoad(kept->owner), os::Self().word());
  {
    LockSet set(locks, f);
    set.Lock(0);  // free: no wait, the entry stays
    EXPECT_EQ(store::AtomicLoad(kept->owner), os::Self().word());
  }
  HoldAs(f, 0, DeadOwner());
  LockSet set(locks, f);
  set.Lock(0);
  EXPECT_EQ(store::AtomicLoad(kept->owner), 0u);
}

TEST(ChainLocks, ReleasingADeadOwnerFreesOnlyItsLocks) {
  StoreFiles s(2, 8, 64);
  WriterTable writers(s.files, s.geo, s.opts);
  ChainLocks locks(s.files, s.geo, writers, s.opts);
  EXPECT_EQ(locks.ReleaseDeadOwner(0).status().code(), Status::Code::kInvalidArgument);
  const os::Owner dead = DeadOwner();  // this pid's, with another start time: a reaped worker's
  HoldAs(s.file(0), 1, dead);
  HoldAs(s.file(1), 7, dead);
  PutNode(s.file(1), 7, 0, 31, 1, 1000);
  OpenEntryWithImage(s.file(1), 0, dead, 7, 0);
  std::memset(s.file(1)->slot(7, 0), 0, kSlotBytes);
  LockSet mine(locks, s.file(0));
  mine.Lock(2);  // a live holder with the same pid: left alone
  Result<uint32_t> released = locks.ReleaseDeadOwner(static_cast<int32_t>(::getpid()));
  ASSERT_TRUE(released.ok()) << released.status().ToString();
  EXPECT_EQ(released.value(), 2u);
  EXPECT_EQ(LockOwner(s.file(0), 1), 0u);
  EXPECT_EQ(LockOwner(s.file(1), 7), 0u);
  EXPECT_EQ(LockOwner(s.file(0), 2), os::Self().word());
  EXPECT_EQ(store::HeaderAt(s.file(1)->slot(7, 0))->id, 31u) << "its journal was undone before the chain was freed";
  EXPECT_EQ(locks.ReleaseDeadOwner(static_cast<int32_t>(::getpid())).value(), 0u);
}

}  // namespace
}  // namespace frs
