#include "stats/daily_stats.h"

#include <gtest/gtest.h>

#include <thread>

#include "common/temp_dir.h"

namespace frs::stats {
namespace {

TEST(DailyStats, CountsPerDayAndSurvivesReopen) {
  frs::testing::TempDir dir;
  const uint32_t today = 20414;
  {
    auto s = DailyStats::Open(dir.path());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    int32_t slot = s.value()->SlotFor(7);
    ASSERT_NE(slot, DailyStats::kNoSlot);
    s.value()->Add(slot, today - 1, {5, 4, 1, 2});
    s.value()->Add(slot, today, {3, 3, 0, 1});
    s.value()->Add(slot, today, {1, 0, 1, 0});
  }
  auto s = DailyStats::Open(dir.path());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto days = s.value()->Days(7, today);
  ASSERT_EQ(days.size(), 2u);
  EXPECT_EQ(days[0].day, today);
  EXPECT_EQ(days[0].requests, 4u);
  EXPECT_EQ(days[0].allowed, 3u);
  EXPECT_EQ(days[0].denied, 1u);
  EXPECT_EQ(days[0].new_keys, 1u);
  EXPECT_EQ(days[1].day, today - 1);
  EXPECT_EQ(days[1].requests, 5u);
  EXPECT_TRUE(s.value()->Days(8, today).empty());
}

TEST(DailyStats, KeepsTheLastEightDaysAndRestartsAReusedEntry) {
  auto s = DailyStats::Open("");
  ASSERT_TRUE(s.ok());
  int32_t slot = s.value()->SlotFor(1);
  for (uint32_t d = 100; d < 110; ++d) s.value()->Add(slot, d, {d, 0, 0, 0});
  auto days = s.value()->Days(1, 109);
  ASSERT_EQ(days.size(), 8u);
  EXPECT_EQ(days.front().day, 109u);
  EXPECT_EQ(days.front().requests, 109u);
  EXPECT_EQ(days.back().day, 102u);
  EXPECT_EQ(days.back().requests, 102u);
}

TEST(DailyStats, ConcurrentAddsAreNotLost) {
  auto s = DailyStats::Open("");
  ASSERT_TRUE(s.ok());
  DailyStats* stats = s.value().get();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([stats] {
      int32_t slot = stats->SlotFor(3);
      for (int i = 0; i < 10000; ++i) stats->Add(slot, 500, {1, 1, 0, 0});
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(stats->Days(3, 500).at(0).requests, 40000u);
}

TEST(DailyStats, RefusesAFileOfAnotherFormat) {
  frs::testing::TempDir dir;
  { ASSERT_TRUE(DailyStats::Open(dir.path()).ok()); }
  FILE* f = std::fopen((dir / "stats.frs").c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fwrite("XXXX", 1, 4, f);
  std::fclose(f);
  auto s = DailyStats::Open(dir.path());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("bad magic"), std::string::npos);
}

}  // namespace
}  // namespace frs::stats
