#include "limit/time_zone.h"

#include <gtest/gtest.h>

namespace frs::limit {
namespace {

std::shared_ptr<const TimeZone> Zone(const char* name) {
  auto z = TimeZone::Load(name);
  EXPECT_TRUE(z.ok()) << z.status().ToString();
  return z.value();
}

TEST(TimeZone, UtcNeedsNoFile) {
  auto z = TimeZone::Load("UTC");
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z.value()->OffsetAt(1795305600), 0);
  EXPECT_EQ(z.value()->LocalDay(1795305600), 1795305600 / 86400);
}

TEST(TimeZone, ShanghaiIsEightHoursAhead) {
  auto sh = Zone("Asia/Shanghai");
  EXPECT_EQ(sh->OffsetAt(1795305600), 8 * 3600);
  // Local midnight of 2026-11-23 is 2026-11-22 16:00 UTC.
  EXPECT_EQ(sh->DayStart(1795305600 / 86400 + 1), 1795305600 + 16 * 3600);
}

TEST(TimeZone, NewYorkDstTransitions) {
  auto ny = Zone("America/New_York");
  const int64_t spring = 1772953200;  // 2026-03-08 07:00 UTC = 02:00 EST -> 03:00 EDT
  EXPECT_EQ(ny->OffsetAt(spring - 1), -5 * 3600);
  EXPECT_EQ(ny->OffsetAt(spring), -4 * 3600);
  const int64_t fall = 1793512800;  // 2026-11-01 06:00 UTC = 02:00 EDT -> 01:00 EST
  EXPECT_EQ(ny->OffsetAt(fall - 1), -4 * 3600);
  EXPECT_EQ(ny->OffsetAt(fall), -5 * 3600);
  // 02:30 on the spring day never happens: the gap's end.
  const int64_t mar8_local = (1772946000 - 5 * 3600);  // 2026-03-08 00:00 local, as local seconds
  EXPECT_EQ(ny->LocalToUtc(mar8_local + 2 * 3600 + 1800), spring);
  // 01:30 on the fall day happens twice: the first one (EDT).
  const int64_t nov1_local = 1793505600 - 4 * 3600;
  EXPECT_EQ(ny->LocalToUtc(nov1_local + 3600 + 1800), fall - 1800);
  EXPECT_EQ(ny->DayStart(ny->LocalDay(fall)), 1793505600);
  EXPECT_EQ(ny->DayStart(ny->LocalDay(fall) + 1) - ny->DayStart(ny->LocalDay(fall)), 25 * 3600);
}

TEST(TimeZone, FooterRuleCoversYearsPastTheTable) {
  auto ny = Zone("America/New_York");
  // 2100-07-01 12:00 UTC: summer time by the POSIX rule.
  EXPECT_EQ(ny->OffsetAt(4118155200), -4 * 3600);
  // 2100-01-01 12:00 UTC: winter.
  EXPECT_EQ(ny->OffsetAt(4102488000), -5 * 3600);
}

TEST(TimeZone, RejectsUnknownAndUnsafeNames) {
  EXPECT_TRUE(TimeZone::Load("Mars/Olympus_Mons").status().IsNotFound());
  EXPECT_FALSE(TimeZone::Load("../etc/passwd").ok());
  EXPECT_FALSE(TimeZone::Load("/etc/localtime").ok());
  EXPECT_FALSE(TimeZone::FromTzif("x", "not a tzif file at all, clearly not").ok());
}

}  // namespace
}  // namespace frs::limit
