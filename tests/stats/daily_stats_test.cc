#include "stats/daily_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "common/temp_dir.h"
#include "stats/statistics.h"

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

// The body behind a good header: what no run writes is refused, naming the
// slot and the fault; what runs write (many bizzes, every day of the ring,
// days past 65,535) opens, and so does what a power loss can leave (a page
// of the file kept and the next lost): counters in a free slot, a biz
// claiming a second slot past one whose claim was lost.
TEST(DailyStats, RefusesABodyNoRunWrites) {
  frs::testing::TempDir dir;
  const uint32_t today = 65530;  // the 16-bit day tag wraps within the ring
  {
    auto s = DailyStats::Open(dir.path());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    for (uint16_t biz = 1; biz <= 40; ++biz) {
      const int32_t slot = s.value()->SlotFor(biz);
      for (uint32_t day = today; day < today + 12; ++day) s.value()->Add(slot, day, {3, 2, 1, 1});
    }
  }
  ASSERT_TRUE(DailyStats::Open(dir.path()).ok());
  const std::string path = dir / "stats.frs";
  std::string good;
  {
    std::ifstream in(path, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_EQ(good.size(), 64u + DailyStats::kSlots * 264u);
  auto slot_of = [&](uint16_t biz) -> size_t {
    for (size_t i = 0; i < DailyStats::kSlots; ++i) {
      uint32_t b;
      std::memcpy(&b, good.data() + 64 + i * 264, 4);
      if (b == biz) return i;
    }
    return DailyStats::kSlots;
  };
  const size_t s7 = slot_of(7), s9 = slot_of(9);
  ASSERT_LT(s7, DailyStats::kSlots);
  ASSERT_LT(s9, DailyStats::kSlots);
  const size_t free_slot = slot_of(0);
  ASSERT_LT(free_slot, DailyStats::kSlots);
  const struct {
    size_t at;
    uint64_t value;
    size_t bytes;
    std::string says;
  } faults[] = {
      {64 + s7 * 264, 70000, 4, "slot " + std::to_string(s7) + ": biz id 70000 is not one"},
      // Entry 2 of biz 7's ring, given day 65531's tag (which is entry 3's).
      {64 + s7 * 264 + 8 + 2 * 32, (uint64_t{65531} << 48) | 4, 8,
       "slot " + std::to_string(s7) + ": entry 2 of its days holds day 65531"},
  };
  for (const auto& f : faults) {
    std::string bad = good;
    std::memcpy(bad.data() + f.at, &f.value, f.bytes);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bad;
    for (const bool read_only : {false, true}) {
      auto s = DailyStats::Open(dir.path(), read_only);
      ASSERT_FALSE(s.ok()) << f.says;
      EXPECT_EQ(s.status().code(), Status::Code::kCorruption) << s.status().ToString();
      EXPECT_NE(s.status().message().find("stats.frs: damaged counters: "), std::string::npos) << s.status().ToString();
      EXPECT_NE(s.status().message().find(f.says), std::string::npos) << s.status().ToString();
    }
    // An engine's open does not check it (the start's check does): a worker
    // respawned over a file damaged while frsd ran stopped, and the server
    // with it.
    EXPECT_TRUE(DailyStats::Open(dir.path(), false, /*check_body=*/false).ok()) << f.says;
    EXPECT_TRUE(Statistics::Open(dir.path(), false, nullptr).ok()) << f.says;
  }
  // What a power loss can leave opens.
  const struct {
    size_t at;
    uint64_t value;
    size_t bytes;
  } survivable[] = {
      {64 + free_slot * 264 + 8 + 8 * 5, (uint64_t{65529} << 48) | 3, 8},  // entry 1 of a free slot (65529 % 8 == 1)
      {64 + s9 * 264, 7, 4},                                               // biz 7 in a second slot
  };
  for (const auto& f : survivable) {
    std::string left = good;
    std::memcpy(left.data() + f.at, &f.value, f.bytes);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << left;
    auto s = DailyStats::Open(dir.path());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
  }
}

}  // namespace
}  // namespace frs::stats
