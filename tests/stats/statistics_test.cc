// What an engine counts of its decisions, as one object (stats/statistics.h).
#include "stats/statistics.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/temp_dir.h"

namespace frs::stats {
namespace {

constexpr uint32_t kDay = 20000;  // 2024-10-04
constexpr int64_t kNow = int64_t{kDay} * 86400 + 3600;

// A biz keyed "app:user" with one table of statistics, by app. Not to be
// copied: `keys` refers to the members before it.
struct ByApp {
  ByApp() {
    specs[0].by = {0};
    specs[0].by_text = "app";
  }
  ByApp(const ByApp&) = delete;
  const std::vector<std::string> fields = {"app", "user"};
  std::vector<StatsSpec> specs = std::vector<StatsSpec>(1);
  const KeyShape keys{fields, ':', specs};
};

TEST(Statistics, OneCountReachesTheDailyTotalsTheDenialsAndTheTablesByField) {
  frs::testing::TempDir d;
  auto s = Statistics::Open(d.path(), /*read_only=*/false, nullptr);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const ByApp shape;
  const KeyShape& keys = shape.keys;
  const BizCounters b = (*s)->Attach(7, keys);
  ASSERT_NE(b.slot, DailyStats::kNoSlot);
  ASSERT_EQ(b.tables.size(), 1u);

  (*s)->Count(b, 7, keys, "shop:u1", Counted{.allowed = true, .created = true, .units = 2}, kDay, kNow);
  (*s)->Count(b, 7, keys, "shop:u2", Counted{.allowed = false, .denial = true}, kDay, kNow);
  {
    StatsTally tally((*s)->daily());
    (*s)->Count(b, 7, keys, "shop:u3", Counted{.allowed = true}, kDay, kNow, &tally);
  }

  const std::vector<BizStatsDay> days = (*s)->Days(7, kDay);
  ASSERT_EQ(days.size(), 1u);
  EXPECT_EQ(days[0].requests, 3u);
  EXPECT_EQ(days[0].allowed, 2u);
  EXPECT_EQ(days[0].denied, 1u);
  EXPECT_EQ(days[0].new_keys, 1u);

  auto denials = RecentDenials::Open(d.path(), /*read_only=*/true);
  ASSERT_TRUE(denials.ok());
  const auto top = (*denials)->Top(10, 7, 10, kNow);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].key, "shop:u2");

  GroupStatsQuery q;
  q.by = "app";
  q.day = kDay;
  auto by = (*s)->ReadBy(b, "login", keys, q, kDay);
  ASSERT_TRUE(by.ok()) << by.status().ToString();
  ASSERT_EQ(by->rows.size(), 1u);
  EXPECT_EQ(by->rows[0].value, "shop");
  EXPECT_EQ(by->rows[0].requests, 3u);
  EXPECT_EQ(by->rows[0].units, 2u);
  EXPECT_TRUE(std::filesystem::exists(d / "stats/7/app/2024-10-04.frs"));

  q.by = "user";
  auto none = (*s)->ReadBy(b, "login", keys, q, kDay);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "biz 'login' keeps no <stats by=\"user\"> (it keeps by=\"app\")");
}

// A day file that cannot be made (a file where its directory goes: refused
// even to root): the decisions are counted in the daily totals, their
// statistics by field are not, said once and counted (frs_stats_unstored_total).
TEST(Statistics, ByFieldUpdatesThatFindNoDayFileAreSaidOnceAndCounted) {
  frs::testing::TempDir d;
  std::vector<std::string> said;
  auto s = Statistics::Open(d.path(), /*read_only=*/false, [&](const std::string& w) { said.push_back(w); });
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const ByApp shape;
  const KeyShape& keys = shape.keys;
  const BizCounters b = (*s)->Attach(7, keys);
  std::filesystem::create_directories(d / "stats/7");
  std::ofstream(d / "stats/7/app") << "not a directory";
  EXPECT_EQ((*s)->FieldUnstored(), 0u);
  for (int i = 0; i < 3; ++i)
    (*s)->Count(b, 7, keys, "shop:u" + std::to_string(i), Counted{.allowed = true}, kDay, kNow);
  EXPECT_EQ((*s)->FieldUnstored(), 3u);
  EXPECT_EQ((*s)->Days(7, kDay).at(0).requests, 3u);
  ASSERT_EQ(said.size(), 1u) << "said at each retry";
  EXPECT_EQ(said[0].rfind("statistics by field not counted: ", 0), 0u) << said[0];
}

// Without a store directory: counted in memory, nothing by field, no file.
TEST(Statistics, WithoutADirectoryNothingIsWrittenAndByFieldIsNotKept) {
  auto s = Statistics::Open("", false, nullptr);
  ASSERT_TRUE(s.ok());
  const std::vector<std::string> fields = {"app"};
  StatsSpec spec;
  spec.by = {0};
  spec.by_text = "app";
  const std::vector<StatsSpec> specs = {spec};
  const KeyShape keys{fields, ':', specs};
  const BizCounters b = (*s)->Attach(3, keys);
  EXPECT_TRUE(b.tables.empty());
  (*s)->Count(b, 3, keys, "a", Counted{.allowed = true}, kDay, kNow);
  ASSERT_EQ((*s)->Days(3, kDay).size(), 1u);
  GroupStatsQuery q;
  q.by = "app";
  EXPECT_EQ((*s)->ReadBy(b, "x", keys, q, kDay).status().code(), Status::Code::kUnavailable);
}

// A damaged stats.frs is the open's error, naming the fault; a read-only
// open of a directory without the files creates none.
TEST(Statistics, ADamagedDailyFileIsAnErrorAndReadOnlyCreatesNothing) {
  frs::testing::TempDir d;
  auto ro = Statistics::Open(d.path(), /*read_only=*/true, nullptr);
  ASSERT_TRUE(ro.ok());
  EXPECT_FALSE(std::filesystem::exists(d / "stats.frs"));
  EXPECT_FALSE(std::filesystem::exists(d / "denials.frs"));
  ASSERT_TRUE(Statistics::Open(d.path(), false, nullptr).ok());
  std::filesystem::resize_file(d / "stats.frs", 10);
  auto bad = Statistics::Open(d.path(), false, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), d / "stats.frs" + ": shorter than its header");
}

}  // namespace
}  // namespace frs::stats
