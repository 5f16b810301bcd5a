// The master's watch over hung workers (server/stall_watch.h): which worker
// it kills, which wait it only reports, and what a gap in its own turns
// forgives.
#include "server/stall_watch.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <map>
#include <thread>
#include <vector>

namespace frs::server {
namespace {

// A watch of 2 s (below what srv.xml takes, to keep the numbers small); the
// master turns every second, as it does, unless a test says otherwise.
constexpr uint32_t kStallMs = 2000;

// Thread ids as the test's fake /proc has them: tid -> process.
class FakeProc {
 public:
  void Add(uint32_t tid, pid_t pid) { owners_[tid] = pid; }
  StallWatch::OwnerPid fn() const {
    return [this](uint32_t tid) {
      auto it = owners_.find(tid);
      return it == owners_.end() ? pid_t{0} : it->second;
    };
  }

 private:
  std::map<uint32_t, pid_t> owners_;
};

std::vector<uint32_t> Killed(const std::vector<StallVerdict>& v) {
  std::vector<uint32_t> out;
  for (const StallVerdict& x : v)
    if (x.kind == StallVerdict::Kind::kKill) out.push_back(x.slot);
  return out;
}

TEST(StallWatch, KillsOnceTheWorkerWhoseLoopStoppedAndLeavesTheOthers) {
  StallWatch w;
  FakeProc proc;
  std::vector<WorkerBeat> slots = {{100, 0}, {101, 0}};
  EXPECT_TRUE(w.Judge(0, kStallMs, slots, proc.fn()).empty());
  // Worker 1 turns every second; worker 0 stopped at 0.
  for (int64_t t = 1000; t < 2000; t += 1000) {
    slots[1].beat_ms = t;
    EXPECT_TRUE(w.Judge(t, kStallMs, slots, proc.fn()).empty()) << t;
  }
  slots[1].beat_ms = 2000;
  const auto v = w.Judge(2000, kStallMs, slots, proc.fn());
  ASSERT_EQ(Killed(v), std::vector<uint32_t>{0});
  EXPECT_EQ(v[0].stalled_ms, 2000);
  // Not again while the same pid lingers (a sleep that cannot be interrupted).
  slots[1].beat_ms = 3000;
  EXPECT_TRUE(w.Judge(3000, kStallMs, slots, proc.fn()).empty());
  // Its successor is judged on its own turns.
  slots[0] = {102, 3000};
  EXPECT_TRUE(w.Judge(4000, kStallMs, slots, proc.fn()).empty());
  slots[1].beat_ms = 5000;
  EXPECT_EQ(Killed(w.Judge(5000, kStallMs, slots, proc.fn())), std::vector<uint32_t>{0});
}

TEST(StallWatch, OffJudgesNothingAndASwitchOnGivesAWholePeriod) {
  StallWatch w;
  FakeProc proc;
  std::vector<WorkerBeat> slots = {{100, 0}};
  for (int64_t t = 0; t <= 10000; t += 1000) EXPECT_TRUE(w.Judge(t, 0, slots, proc.fn()).empty());
  // Switched on (a reload) with the worker long stopped: a whole period first.
  EXPECT_TRUE(w.Judge(11000, kStallMs, slots, proc.fn()).empty());
  EXPECT_TRUE(w.Judge(12000, kStallMs, slots, proc.fn()).empty());
  EXPECT_EQ(Killed(w.Judge(13000, kStallMs, slots, proc.fn())), std::vector<uint32_t>{0});
}

TEST(StallWatch, AReloadThatChangesThePeriodCountsFromTheReload) {
  // Stopped at 0 under a 10 s watch; at 5 s a reload makes it 3 s: killed
  // 3 s after the reload, not at once (it had not turned for 5 s).
  StallWatch w;
  FakeProc proc;
  std::vector<WorkerBeat> slots = {{100, 0}};
  for (int64_t t = 0; t <= 4000; t += 1000) EXPECT_TRUE(w.Judge(t, 10000, slots, proc.fn()).empty()) << t;
  for (int64_t t = 5000; t < 8000; t += 1000) EXPECT_TRUE(w.Judge(t, 3000, slots, proc.fn()).empty()) << t;
  EXPECT_EQ(Killed(w.Judge(8000, 3000, slots, proc.fn())), std::vector<uint32_t>{0});
  // And lengthened: 3 s -> 10 s at 1 s, the worker stopped at 0: killed
  // 10 s after the reload.
  StallWatch x;
  EXPECT_TRUE(x.Judge(0, 3000, slots, proc.fn()).empty());
  for (int64_t t = 1000; t < 11000; t += 1000) EXPECT_TRUE(x.Judge(t, 10000, slots, proc.fn()).empty()) << t;
  EXPECT_EQ(Killed(x.Judge(11000, 10000, slots, proc.fn())), std::vector<uint32_t>{0});
}

TEST(StallWatch, AGapInTheMastersOwnTurnsForgivesTheWorkers) {
  // The whole process group stopped (SIGSTOP, ^Z) and continued: every
  // worker's last turn is old, and none of them is hung.
  StallWatch w;
  FakeProc proc;
  std::vector<WorkerBeat> slots = {{100, 1000}, {101, 1000}};
  EXPECT_TRUE(w.Judge(1000, kStallMs, slots, proc.fn()).empty());
  const int64_t back = 1000 + StallWatch::kMasterGapMs + 60000;
  EXPECT_TRUE(w.Judge(back, kStallMs, slots, proc.fn()).empty());
  // Worker 1 turns again; worker 0 does not, and gets a whole period.
  slots[1].beat_ms = back + 1000;
  EXPECT_TRUE(w.Judge(back + 1000, kStallMs, slots, proc.fn()).empty());
  slots[1].beat_ms = back + 2000;
  EXPECT_EQ(Killed(w.Judge(back + 2000, kStallMs, slots, proc.fn())), std::vector<uint32_t>{0});
}

TEST(StallWatch, AFreezeJustPastTheGapIsForgivenAndNoneShorterReachesTheLeastWatch) {
  // The group stopped for just over kMasterGapMs, the worker's last turn a
  // second before: forgiven.
  StallWatch w;
  FakeProc proc;
  const uint32_t least = StallWatch::kMinStallMs;
  std::vector<WorkerBeat> slots = {{100, 0}};
  EXPECT_TRUE(w.Judge(1000, least, slots, proc.fn()).empty());
  const int64_t back = 1000 + StallWatch::kMasterGapMs + 1;
  EXPECT_TRUE(w.Judge(back, least, slots, proc.fn()).empty());
  EXPECT_TRUE(w.Judge(back + least - 1, least, slots, proc.fn()).empty());
  // A freeze just short of the gap: the master's turns stay 1.5 s apart, and
  // an idle loop's second plus that stays under the least watch allowed.
  StallWatch v;
  std::vector<WorkerBeat> idle = {{100, 0}};
  EXPECT_TRUE(v.Judge(1000, least, idle, proc.fn()).empty());
  EXPECT_TRUE(v.Judge(1000 + StallWatch::kMasterGapMs, least, idle, proc.fn()).empty());
  EXPECT_LT(1000 + StallWatch::kMasterGapMs, int64_t{least});
}

TEST(StallWatch, AWorkerThatNeverBeginsToServeIsJudgedFromItsStart) {
  StallWatch w;
  FakeProc proc;
  std::vector<WorkerBeat> slots = {{100, 0}};
  slots[0].serving = false;  // its start at 0 is its only turn
  for (int64_t t = 0; t < StallWatch::kStartMs; t += 1000)
    EXPECT_TRUE(w.Judge(t, kStallMs, slots, proc.fn()).empty()) << t;
  const auto v = w.Judge(StallWatch::kStartMs, kStallMs, slots, proc.fn());
  ASSERT_EQ(Killed(v), std::vector<uint32_t>{0});
  EXPECT_FALSE(v[0].serving);
  // A watch longer than kStartMs is the bound for a start too.
  StallWatch x;
  const uint32_t longer = 60000;
  for (int64_t t = 0; t < longer; t += 1000) EXPECT_TRUE(x.Judge(t, longer, slots, proc.fn()).empty()) << t;
  EXPECT_EQ(Killed(x.Judge(longer, longer, slots, proc.fn())), std::vector<uint32_t>{0});
}

TEST(StallWatch, AWorkerWaitingForAnotherWorkersLockIsSparedAndTheHolderKilled) {
  StallWatch w;
  FakeProc proc;
  proc.Add(100, 100);
  proc.Add(101, 101);
  std::vector<WorkerBeat> slots = {{100, 0}, {101, 0, 100, 500}};  // 1 waits for 0's lock
  for (int64_t t = 0; t < 2000; t += 1000) EXPECT_TRUE(w.Judge(t, kStallMs, slots, proc.fn()).empty()) << t;
  EXPECT_EQ(Killed(w.Judge(2000, kStallMs, slots, proc.fn())), std::vector<uint32_t>{0});
}

TEST(StallWatch, WaitsThatGoRoundAreBrokenAtTheirLowestSlot) {
  // 1 waits for 2, 2 for 1 (two writes that took their locks in opposite
  // orders); 0 waits for 1, outside the round.
  StallWatch w;
  FakeProc proc;
  proc.Add(100, 100);
  proc.Add(101, 101);
  proc.Add(102, 102);
  std::vector<WorkerBeat> slots = {{100, 0, 101, 0}, {101, 0, 102, 0}, {102, 0, 101, 0}};
  for (int64_t t = 0; t < 2000; t += 1000) EXPECT_TRUE(w.Judge(t, kStallMs, slots, proc.fn()).empty()) << t;
  EXPECT_EQ(Killed(w.Judge(2000, kStallMs, slots, proc.fn())), std::vector<uint32_t>{1});
}

TEST(StallWatch, AWorkerWaitingForItsOwnLockIsHung) {
  StallWatch w;
  FakeProc proc;
  proc.Add(100, 100);
  std::vector<WorkerBeat> slots = {{100, 0, 100, 0}};
  for (int64_t t = 0; t < 2000; t += 1000) EXPECT_TRUE(w.Judge(t, kStallMs, slots, proc.fn()).empty()) << t;
  EXPECT_EQ(Killed(w.Judge(2000, kStallMs, slots, proc.fn())), std::vector<uint32_t>{0});
}

TEST(StallWatch, AWaitForAnotherProcessIsSaidOncePerWaitAndNothingIsKilled) {
  StallWatch w;
  FakeProc proc;
  proc.Add(777, 700);  // a thread of frsctl, say
  std::vector<WorkerBeat> slots = {{100, 0, 777, 100}};
  for (int64_t t = 0; t < 2000; t += 1000) EXPECT_TRUE(w.Judge(t, kStallMs, slots, proc.fn()).empty()) << t;
  auto v = w.Judge(2000, kStallMs, slots, proc.fn());
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, StallVerdict::Kind::kForeignWait);
  EXPECT_EQ(v[0].owner_tid, 777u);
  EXPECT_EQ(v[0].owner_pid, 700);
  EXPECT_EQ(v[0].stalled_ms, 1900);
  for (int64_t t = 3000; t < 10000; t += 1000) EXPECT_TRUE(w.Judge(t, kStallMs, slots, proc.fn()).empty()) << t;
  // The wait ended and another began: said again.
  slots[0].wait_since_ms = 9500;
  v = w.Judge(10000, kStallMs, slots, proc.fn());
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, StallVerdict::Kind::kForeignWait);
  // The owner went: the waiter takes the lock over itself; nothing to do.
  slots[0].wait_tid = 778;
  EXPECT_TRUE(w.Judge(11000, kStallMs, slots, proc.fn()).empty());
}

TEST(StallWatch, ASlotWithoutAServingWorkerIsNotJudged) {
  StallWatch w;
  FakeProc proc;
  std::vector<WorkerBeat> slots = {{0, 0}};
  EXPECT_TRUE(w.Judge(0, kStallMs, slots, proc.fn()).empty());
  EXPECT_TRUE(w.Judge(60000, kStallMs, slots, proc.fn()).empty());
}

TEST(StallWatch, ThreadGroupOfNamesTheProcessOfAThread) {
  EXPECT_EQ(ThreadGroupOf(static_cast<uint32_t>(getpid())), getpid());
  pid_t seen = 0;
  std::thread t([&] { seen = ThreadGroupOf(static_cast<uint32_t>(syscall(SYS_gettid))); });
  t.join();
  EXPECT_EQ(seen, getpid());
  EXPECT_EQ(ThreadGroupOf(0x7ffffff0u), 0);  // above pid_max: no such thread
  EXPECT_FALSE(ProcessName(getpid()).empty());
}

}  // namespace
}  // namespace frs::server
