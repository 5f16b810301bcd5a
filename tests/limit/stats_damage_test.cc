// Statistics day files damaged or cut short under a running engine, and
// clocks that jump: nothing of it may kill the process, empty a day without
// a word, or delete the days kept.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "frs/admin_engine.h"
#include "limit/rule_harness.h"
#include "os/sigbus_guard.h"
#include "stats/group_table.h"

namespace frs {
namespace stats_damage_test {

using limit::testing::kDay0;

const std::string kMap = R"(<map>
  <biz id="3" name="api" fields="app,user" separator=":">
    <rule interval="60" max="100000"/>
    <stats by="app" distinct="user" days="3"/>
  </biz>
</map>)";

class StatsDamageTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    StoreOptions so;
    so.dir = dir_.path();
    so.geometry = StoreGeometry{1, 4096, 8};
    auto s = Store::Open(so);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s.value());
    auto e = AdminEngine::Open(EngineOptions{.map_path = dir_ / "map.xml",
                                             .map_text = kMap,
                                             .timezone = "UTC",
                                             .store = store_.get(),
                                             .stats_dir = dir_.path(),
                                             .clock = &clock_,
                                             .on_problem = [this](const std::string& what) { said_ += what + "\n"; },
                                             .lease_key_file = {}});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e.value());
  }
  void Count(int n, const std::string& app = "web") {
    for (int i = 0; i < n; ++i)
      ASSERT_TRUE(
          engine_->Execute(Request{.cmd = Cmd::kAcquire, .biz = "api", .key = app + ":u" + std::to_string(i)}).ok());
  }
  Result<GroupStats> Stats(int64_t day = -1) {
    return engine_->StatsBy(
        GroupStatsQuery{.biz = "api", .by = "app", .day = day, .value = "", .top = 0, .sketches = false});
  }
  uint64_t Requests(const GroupStats& g) {
    uint64_t n = 0;
    for (const GroupStat& r : g.rows) n += r.requests;
    return n;
  }
  std::string TableDir() const { return dir_ / "stats/3/app+user"; }
  std::string DayPath(uint32_t day) const { return TableDir() + "/" + DayText(day) + ".frs"; }
  std::vector<std::string> Aside(uint32_t day) const {
    std::vector<std::string> v;
    for (const auto& e : std::filesystem::directory_iterator(TableDir()))
      if (e.path().filename().string().starts_with(DayText(day) + ".frs.damaged-")) v.push_back(e.path());
    return v;
  }

  std::string said_;  // what the engine reported
  testing::TempDir dir_;
  FakeClock clock_{kDay0 * 1000 + 123};
  std::unique_ptr<Store> store_;
  std::unique_ptr<AdminEngine> engine_;
};

// A day file truncated under the engine (an operator's `: > file`, a
// restore gone wrong): the process lives, the damage is counted in `lost`,
// and later decisions count in a fresh file.
TEST_F(StatsDamageTest, ADayFileTruncatedUnderTheEngineNeitherKillsNorStopsCounting) {
  const uint32_t day = kDay0 / 86400;
  Count(20);
  ASSERT_EQ(::truncate(DayPath(day).c_str(), 0), 0);
  Count(5);  // touches pages past the file's new end
  Count(7, "api2");
  auto g = Stats();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_GT(g->lost, 0u) << "the damage is not counted";
  EXPECT_FALSE(Aside(day).empty()) << "the damaged file is not set aside";
  EXPECT_NE(said_.find("is damaged"), std::string::npos) << said_;
  // The counts before the damage are gone with the file; what follows counts.
  Count(4, "late");
  g = Stats();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  bool late = false;
  for (const GroupStat& r : g->rows)
    if (r.value == "late") late = r.requests == 4;
  EXPECT_TRUE(late) << "decisions after the damage are not counted";
}

// A process holding more mappings than the SIGBUS guard can watch (a worker
// of 140 bizzes with 8 tables each): a day file it cannot guard is not
// mapped, so its truncation cannot kill the process.
TEST(StatsDamage, ATruncatedDayFileNeverKillsAProcessWhoseGuardIsFull) {
  testing::TempDir dir;
  const std::string path = dir / "day.frs";
  EXPECT_EXIT(
      {
        os::InstallSigbusGuard();
        static std::atomic<bool> broken{false};
        static uint8_t page[64];
        while (os::RegisterGuardedMapping(page, sizeof page, &broken) >= 0) {
        }
        auto t = stats::GroupTable::Open(path, stats::GroupTableShape{10, 0}, stats::GroupTable::Mode::kWrite);
        if (t.ok()) {
          if (::truncate(path.c_str(), 0) != 0) std::_Exit(2);
          t.value()->Add("a", stats::GroupCounts{1, 1, 0, 1}, nullptr);
          t.value()->Rows();
        } else if (t.status().message().find(path) == std::string::npos) {
          std::_Exit(3);  // the refusal must name the file
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// A file cut to 300 bytes (a header and a bit): /stats answers, and the day
// goes on in a fresh file, instead of an error for the rest of the day.
TEST_F(StatsDamageTest, ADayFileCutTo300BytesIsSetAsideAndTheDayGoesOn) {
  const uint32_t day = kDay0 / 86400;
  Count(10);
  engine_.reset();
  ASSERT_EQ(::truncate(DayPath(day).c_str(), 300), 0);
  Open();
  auto g = Stats();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Count(3, "after");
  g = Stats();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(Requests(*g), 3u);
  EXPECT_GT(g->lost, 0u) << "the damage is not counted";
  EXPECT_EQ(Aside(day).size(), 1u);
  EXPECT_NE(said_.find("truncated"), std::string::npos) << said_;
}

// Damage inside the index (an offset pointing outside the pool): the day is
// not silently emptied: counted as lost, set aside, and counting goes on.
TEST_F(StatsDamageTest, DamagedIndexOffsetsAreReportedAndTheDayStartsAfresh) {
  const uint32_t day = kDay0 / 86400;
  Count(10);
  engine_.reset();
  {
    // The index follows the 256-byte header; Header::index_slots is at 16.
    const int fd = ::open(DayPath(day).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    uint32_t index_slots = 0;
    ASSERT_EQ(::pread(fd, &index_slots, 4, 16), 4);
    std::vector<uint32_t> slots(index_slots);
    ASSERT_EQ(::pread(fd, slots.data(), slots.size() * 4, 256), static_cast<ssize_t>(slots.size() * 4));
    bool damaged = false;
    for (size_t i = 0; i < slots.size() && !damaged; ++i) {
      if (slots[i] == 0) continue;
      const uint32_t far = 0x7fffff00u;
      ASSERT_EQ(::pwrite(fd, &far, 4, 256 + 4 * i), 4);
      damaged = true;
    }
    ::close(fd);
    ASSERT_TRUE(damaged);
  }
  Open();
  Count(6, "after");
  auto g = Stats();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_GT(g->lost, 0u) << "the damage is not counted";
  EXPECT_EQ(Aside(day).size(), 1u);
  bool after = false;
  for (const GroupStat& r : g->rows)
    if (r.value == "after") after = r.requests == 6;
  EXPECT_TRUE(after) << "decisions after the damage are not counted";
  // The check that found it, on its own, names the file and what is wrong.
  const Status check = stats::CheckDayFile(Aside(day).at(0));
  EXPECT_EQ(check.code(), Status::Code::kCorruption) << check.ToString();
  EXPECT_TRUE(stats::CheckDayFile(DayPath(day)).ok());
}

// One decision under a clock 400 days ahead (a bad NTP step, a test clock
// left behind) must not delete the days kept; nor must a +31-day step.
TEST_F(StatsDamageTest, AClockJumpAheadNeverDeletesTheDaysKept) {
  const uint32_t day = kDay0 / 86400;
  Count(5);
  clock_.Set((kDay0 + 86400) * 1000);
  Count(6);
  ASSERT_TRUE(std::filesystem::exists(DayPath(day)));
  ASSERT_TRUE(std::filesystem::exists(DayPath(day + 1)));
  for (int64_t ahead : {400, 31}) {
    clock_.Set((kDay0 + (1 + ahead) * 86400) * 1000);
    Count(1);
    EXPECT_TRUE(std::filesystem::exists(DayPath(day))) << "a step of " << ahead << " days deleted day 0";
    EXPECT_TRUE(std::filesystem::exists(DayPath(day + 1))) << "a step of " << ahead << " days deleted day 1";
    clock_.Set((kDay0 + 86400) * 1000 + 500);  // the clock comes back
    Count(1);
    auto g = Stats(day);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(Requests(*g), 5u);
  }
  // Days in order still go when they are older than `days`.
  for (int d = 2; d <= 4; ++d) {
    clock_.Set((kDay0 + d * 86400) * 1000);
    Count(1);
  }
  EXPECT_FALSE(std::filesystem::exists(DayPath(day)));
  EXPECT_FALSE(std::filesystem::exists(DayPath(day + 1)));
  EXPECT_TRUE(std::filesystem::exists(DayPath(day + 2)));
}

}  // namespace stats_damage_test
}  // namespace frs
