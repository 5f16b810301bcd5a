// Statistics by key field and the table of recent denials from many threads
// over one mapping: what ThreadSanitizer checks (tools/test.sh's tsan stage)
// besides the store. Each test asserts the totals a single thread would get.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir.h"
#include "stats/daily_stats.h"
#include "stats/group_table.h"
#include "stats/recent_denials.h"

namespace frs::stats {
namespace {

constexpr int kThreads = 4;

template <typename Fn>
void RunThreads(Fn fn) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }
      fn(t);
    });
  for (auto& th : threads) th.join();
}

// stats.frs's body check at every open (frsctl's commands, a respawned
// worker) while others claim new bizzes and count: what they write is never
// taken for damage.
TEST(StatsThreads, DailyStatsOpensWhileOthersClaimAndCount) {
  frs::testing::TempDir dir;
  { ASSERT_TRUE(DailyStats::Open(dir.path()).ok()); }
  std::atomic<int> writers_done{0};
  std::atomic<int> opens{0}, refused{0};
  RunThreads([&](int t) {
    if (t == 0) {
      // The reader: opens read-only, and as a writer would, until the
      // writers finish (and 20 times at least: on a busy machine they may
      // finish before its first).
      for (int n = 0; n < 20 || writers_done.load() < kThreads - 1; ++n) {
        auto r = DailyStats::Open(dir.path(), /*read_only=*/opens.load() % 2 == 0);
        opens.fetch_add(1);
        if (!r.ok()) refused.fetch_add(1);
        EXPECT_TRUE(r.ok()) << r.status().ToString();
      }
      return;
    }
    auto w = DailyStats::Open(dir.path());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (uint32_t biz = static_cast<uint32_t>(t); biz <= 900; biz += kThreads - 1) {
      const int32_t slot = w.value()->SlotFor(static_cast<uint16_t>(biz));
      for (uint32_t day = 20000; day < 20010; ++day) w.value()->Add(slot, day, {1, 1, 0, 1});
    }
    writers_done.fetch_add(1);
  });
  EXPECT_GT(opens.load(), 0);
  EXPECT_EQ(refused.load(), 0);
  auto s = DailyStats::Open(dir.path());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  for (uint16_t biz = 1; biz <= 900; ++biz) {
    auto days = s.value()->Days(biz, 20009);
    ASSERT_EQ(days.size(), 8u) << biz;
    EXPECT_EQ(days[0].requests, 1u) << biz;
  }
}

// Threads adding to overlapping groups, creating them and their sketches
// (inline, sparse and dense tiers) at once: every count lands, each value's
// distinct users are the union.
TEST(StatsThreads, GroupTableAddsFromManyThreadsCountExactly) {
  frs::testing::TempDir dir;
  auto t = GroupTable::Open(dir / "d.frs", GroupTableShape{1000, 1}, GroupTable::Mode::kWrite);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  GroupTable& table = *t.value();
  constexpr int kAdds = 3000;
  RunThreads([&](int thread) {
    for (int i = 0; i < kAdds; ++i) {
      // Half the adds to "g0", each with its own user (1,500: its sketch
      // goes through every tier to dense while the threads race), the rest
      // over 19 groups of at most 50 users (exact).
      const bool big = i % 2 == 0;
      const std::string group = big ? "g0" : "g" + std::to_string(1 + i % 19);
      const uint32_t code = sketch::CodeOf("u" + std::to_string(big ? i : i % 50));
      table.Add(group, GroupCounts{1, thread % 2 == 0 ? 1u : 0u, thread % 2 == 0 ? 0u : 1u, 1}, &code);
    }
  });
  uint64_t requests = 0;
  for (const GroupRow& row : table.Rows()) {
    requests += row.counts.requests;
    ASSERT_EQ(row.distinct.size(), 1u);
    if (row.value == "g0") {
      EXPECT_FALSE(row.distinct[0].exact());
      EXPECT_NEAR(static_cast<double>(row.distinct[0].Count()), kAdds / 2.0, kAdds / 2.0 * 0.02);
    } else if (row.value != "~other") {
      EXPECT_LE(row.distinct[0].Count(), 50u) << row.value;
    }
  }
  EXPECT_EQ(requests, uint64_t{kThreads} * kAdds);
  EXPECT_EQ(table.lost(), 0u);
}

// Threads denying overlapping keys into one table of recent denials: each
// key's denials add up.
TEST(StatsThreads, RecentDenialsFromManyThreadsAddUp) {
  frs::testing::TempDir dir;
  auto d = RecentDenials::Open(dir.path(), false);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  constexpr int64_t kNow = 1795600020;
  RunThreads([&](int) {
    for (int i = 0; i < 2000; ++i) d.value()->Count(1, "key" + std::to_string(i % 40), kNow);
  });
  const auto rows = d.value()->Top(1, 0, 100, kNow);
  ASSERT_EQ(rows.size(), 40u);
  uint64_t total = 0;
  for (const auto& r : rows) total += r.denied;
  EXPECT_EQ(total, uint64_t{kThreads} * 2000);
}

}  // namespace
}  // namespace frs::stats
