#include "limit/calendar_window.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "limit/rule_harness.h"

namespace frs::limit {
namespace {

using testing::kDay0;
using testing::RuleHarness;

std::shared_ptr<const TimeZone> Zone(const char* name) {
  auto z = TimeZone::Load(name);
  EXPECT_TRUE(z.ok()) << z.status().ToString();
  return z.value();
}

TEST(CalendarWindow, DayResetsAtLocalMidnightInShanghai) {
  // Asia/Shanghai is UTC+8: its 00:00 is 16:00 UTC.
  auto sh = Zone("Asia/Shanghai");
  RuleHarness h(Algo::kCalendar, 86400, 3, 0, 0, sh);
  const int64_t midnight = kDay0 + 16 * 3600;  // 2026-11-23 00:00 in Shanghai
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.Acquire((midnight - 10) * 1000).allowed);
  RuleResult before = h.Acquire((midnight - 1) * 1000 + 999);
  EXPECT_FALSE(before.allowed);
  EXPECT_EQ(before.reset, midnight);
  EXPECT_EQ(before.retry_after, 1);
  EXPECT_TRUE(h.Acquire(midnight * 1000).allowed);
  EXPECT_EQ(h.Query(midnight * 1000 + 1000).count, 1);
  EXPECT_EQ(h.Query(midnight * 1000 + 1000).reset, midnight + 86400);
}

TEST(CalendarWindow, ZoneUtcAlignsToTheEpochWhateverTheEngineZone) {
  // Asia/Kolkata is UTC+5:30: its own hours start at :30 UTC; zone="UTC"
  // (Envoy's windows: unit - now % unit) starts them at :00 UTC.
  RuleHarness h(Algo::kCalendar, 3600, 1, 0, 0, Zone("Asia/Kolkata"));
  h.spec().utc = true;
  const int64_t t = kDay0 + 7 * 3600 + 1234;
  RuleResult r = h.Acquire(t * 1000);
  ASSERT_TRUE(r.allowed);
  EXPECT_EQ(r.reset, t + (3600 - t % 3600));
  EXPECT_FALSE(h.Acquire((t + 100) * 1000).allowed);
  EXPECT_TRUE(h.Acquire((r.reset) * 1000).allowed);
}

TEST(CalendarWindow, ARulesOwnZoneBeatsTheEngines) {
  // An engine in New York, a rule in Asia/Kolkata (UTC+5:30): its day ends
  // at 18:30 UTC, not at New York's 05:00 UTC.
  RuleHarness h(Algo::kCalendar, 86400, 2, 0, 0, Zone("America/New_York"));
  h.spec().zone = Zone("Asia/Kolkata");
  const int64_t kolkata_midnight = kDay0 + 18 * 3600 + 1800;  // 2026-11-23 18:30 UTC
  ASSERT_TRUE(h.Acquire((kolkata_midnight - 60) * 1000).allowed);
  ASSERT_TRUE(h.Acquire((kolkata_midnight - 30) * 1000).allowed);
  RuleResult full = h.Acquire((kolkata_midnight - 1) * 1000);
  EXPECT_FALSE(full.allowed);
  EXPECT_EQ(full.reset, kolkata_midnight);
  EXPECT_TRUE(h.Acquire(kolkata_midnight * 1000).allowed);
  EXPECT_EQ(h.Query(kolkata_midnight * 1000).reset, kolkata_midnight + 86400);
}

// A day's 3 uses, then the rule moved to another zone by a reload, at
// 2026-11-23 20:00 UTC (Kolkata's 24th, New York's 23rd), in both ways:
// Kolkata to New York, whose day holds the Kolkata day's start; New York to
// Kolkata, whose day began at 18:30 UTC, after New York's (05:00 UTC), a
// start that is no boundary of Kolkata's: that day, taken as a day long,
// reaches into it. The new day carries the 3 either way.
TEST(CalendarWindow, ARuleMovedToAnotherZoneKeepsItsCount) {
  const char* zones[][2] = {{"Asia/Kolkata", "America/New_York"}, {"America/New_York", "Asia/Kolkata"}};
  for (const auto& [from, to] : zones) {
    RuleHarness h(Algo::kCalendar, 86400, 3, 0, 0, Zone("UTC"));
    h.spec().zone = Zone(from);
    const int64_t t = kDay0 + 20 * 3600;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.Acquire(t * 1000).allowed) << from;
    h.spec().zone = Zone(to);
    RuleResult r = h.Acquire((t + 60) * 1000);
    EXPECT_FALSE(r.allowed) << from << " to " << to;
    EXPECT_EQ(r.count, 3) << from << " to " << to;
  }
}

TEST(CalendarWindow, ARuleMovedToAnotherZoneAndIntervalCarriesItsWholeOldWindow) {
  // Kolkata's day of the 24th (18:30 UTC on the 23rd to 18:30 on the 24th)
  // holds 3; a reload makes the rule 12 hours in New York. At 06:00 UTC on
  // the 24th New York's 12 hours began at 05:00 UTC, while the Kolkata day
  // still ran: they carry its 3 (read in New York's day, that day ended at
  // 05:00 and carried nothing).
  RuleHarness h(Algo::kCalendar, 86400, 3, 0, 0, Zone("UTC"));
  h.spec().zone = Zone("Asia/Kolkata");
  const int64_t t = kDay0 + 20 * 3600;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.Acquire(t * 1000).allowed);
  RuleSpec next = h.spec();
  next.zone = Zone("America/New_York");
  next.interval = 43200;
  next.bytes = BlockBytes(next.algo, next.max, next.interval);
  next.tag = BlockTag(next.algo, next.max, next.interval);
  const Now later = h.At((kDay0 + 30 * 3600) * 1000);
  std::vector<uint8_t> converted(next.bytes, 0);
  ConvertBlock(next, h.block(), converted.data(), later);
  RuleResult r;
  Evaluate(next, converted.data(), later, 1, &r);
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.count, 3);
}

TEST(CalendarWindow, HourWindowsAlignToTheClockNotToTheFirstUse) {
  RuleHarness h(Algo::kCalendar, 3600, 1);
  EXPECT_TRUE(h.Acquire((kDay0 + 3599) * 1000).allowed);
  EXPECT_TRUE(h.Acquire((kDay0 + 3600) * 1000).allowed);  // a new hour began
  EXPECT_FALSE(h.Acquire((kDay0 + 7199) * 1000).allowed);
}

TEST(CalendarWindow, NewYorkDaysAcrossDstAre23And25Hours) {
  auto ny = Zone("America/New_York");
  int64_t s, e;
  // 2026-03-08: clocks spring forward; midnight EST is 05:00 UTC.
  const int64_t mar8 = 1772946000;  // 2026-03-08 05:00 UTC
  CalendarWindow::WindowOf(*ny, 86400, mar8 + 12 * 3600, &s, &e);
  EXPECT_EQ(s, mar8);
  EXPECT_EQ(e - s, 23 * 3600);
  // 2026-11-01: clocks fall back; midnight EDT is 04:00 UTC.
  const int64_t nov1 = 1793505600;  // 2026-11-01 04:00 UTC
  CalendarWindow::WindowOf(*ny, 86400, nov1 + 20 * 3600, &s, &e);
  EXPECT_EQ(s, nov1);
  EXPECT_EQ(e - s, 25 * 3600);

  // A daily cap of 2 resets at local midnight after the 25-hour day.
  RuleHarness h(Algo::kCalendar, 86400, 2, 0, 0, ny);
  EXPECT_TRUE(h.Acquire((nov1 + 1) * 1000).allowed);
  EXPECT_TRUE(h.Acquire((nov1 + 24 * 3600) * 1000).allowed);  // 23:00 EST, same local day
  EXPECT_FALSE(h.Acquire((nov1 + 25 * 3600 - 1) * 1000).allowed);
  EXPECT_TRUE(h.Acquire((nov1 + 25 * 3600) * 1000).allowed);
}

TEST(CalendarWindow, WindowsTileTimeThroughDstChanges) {
  auto ny = Zone("America/New_York");
  for (uint32_t interval : {60u, 900u, 1800u, 3600u, 7200u, 86400u, 604800u}) {
    for (int64_t day : {int64_t{1772946000}, int64_t{1793505600}}) {
      int64_t s, e;
      CalendarWindow::WindowOf(*ny, interval, day - 7200, &s, &e);
      int64_t prev_end = e;
      for (int64_t t = day - 7200; t < day + 30 * 3600; t += 30) {
        CalendarWindow::WindowOf(*ny, interval, t, &s, &e);
        ASSERT_LE(s, t) << interval << " " << t;
        ASSERT_GT(e, t) << interval << " " << t;
        if (s >= prev_end) {
          ASSERT_EQ(s, prev_end) << "gap before " << s << ", interval " << interval;
        }
        prev_end = e;
      }
    }
  }
}

TEST(CalendarWindow, WeeksStartOnMondayAtLocalMidnight) {
  int64_t s, e;
  CalendarWindow::WindowOf(*TimeZone::Utc(), 604800, kDay0, &s, &e);  // kDay0 is a Sunday
  EXPECT_EQ(s, kDay0 - 6 * 86400);
  EXPECT_EQ(e, kDay0 + 86400);
}

TEST(CalendarWindow, BorrowIsOwedToTheNextWindowOnly) {
  RuleHarness h(Algo::kCalendar, 3600, 3, 2);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(h.Acquire(kDay0 * 1000).allowed);
  EXPECT_EQ(h.Query(kDay0 * 1000).debt, 2);
  EXPECT_EQ(h.Expire(kDay0 * 1000), kDay0 + 7200);
  EXPECT_EQ(h.Query((kDay0 + 3600) * 1000).limit, 1);
  // Skipping the repaying hour clears the debt.
  EXPECT_TRUE(h.Query((kDay0 + 7200) * 1000, 5).allowed);
}

TEST(CalendarWindow, ClockSteppingBackStaysInTheNewestWindow) {
  RuleHarness h(Algo::kCalendar, 60, 1);
  EXPECT_TRUE(h.Acquire((kDay0 + 120) * 1000).allowed);
  EXPECT_FALSE(h.Acquire((kDay0 + 30) * 1000).allowed);
  EXPECT_TRUE(h.Acquire((kDay0 + 180) * 1000).allowed);
}

// Reference: one counter per window index (local multiples of I in a
// fixed-offset zone); the debt of window w comes from window w - 1 only.
class RefCalendar {
 public:
  RefCalendar(int64_t interval, int64_t offset, int64_t max, int64_t borrow)
      : i_(interval), off_(offset), max_(max), k_(borrow) {}
  bool Use(int64_t t, int64_t n, bool unconditional, int64_t* count_before) {
    int64_t local = t + off_;
    int64_t w = (local >= 0 ? local : local - i_ + 1) / i_;
    int64_t d = DebtIn(w);
    int64_t allowance = d > 0 ? max_ - std::min(d, max_) : max_ + k_;
    *count_before = counts_[w];
    bool allowed = counts_[w] + n <= allowance;
    if (allowed || unconditional) counts_[w] += n;
    return allowed;
  }

 private:
  int64_t DebtIn(int64_t w) {
    auto it = counts_.find(w - 1);
    if (it == counts_.end() || it->second == 0) return 0;
    int64_t d = DebtIn(w - 1);
    int64_t base = d > 0 ? max_ - std::min(d, max_) : max_;
    return std::clamp<int64_t>(it->second - base, 0, k_);
  }
  int64_t i_, off_, max_, k_;
  std::map<int64_t, int64_t> counts_;
};

TEST(CalendarWindow, RandomSequencesMatchTheReference) {
  auto sh = Zone("Asia/Shanghai");
  std::mt19937_64 rng(777);
  const uint32_t intervals[] = {1, 7, 60, 300, 3600, 7200, 86400, 100000};
  for (int seq = 0; seq < 1200; ++seq) {
    const uint32_t interval = intervals[rng() % std::size(intervals)];
    const int64_t max = std::uniform_int_distribution<int64_t>(1, 8)(rng);
    const int64_t borrow = rng() % 2 ? std::uniform_int_distribution<int64_t>(0, 5)(rng) : 0;
    RuleHarness h(Algo::kCalendar, interval, max, borrow, 0, sh);
    RefCalendar ref(interval, 8 * 3600, max, borrow);
    int64_t ms = kDay0 * 1000 + std::uniform_int_distribution<int64_t>(0, 86'400'000)(rng);
    for (int e = 0; e < 120; ++e) {
      ms = testing::NextRandomMs(rng, ms, 4, 3 * interval, interval / 4 + 1);
      const std::string where =
          "seq " + std::to_string(seq) + " event " + std::to_string(e) + " I=" + std::to_string(interval);
      ASSERT_NO_FATAL_FAILURE(testing::ExpectUseAsTheReference(h, ref, rng, ms, where));
    }
  }
}

}  // namespace
}  // namespace frs::limit
