// frs/calendar.h: the public face of calendar windows gives what a
// calendar rule counts (limit/calendar_window.h), zones loaded by name.
#include "frs/calendar.h"

#include <gtest/gtest.h>

#include "limit/calendar_window.h"
#include "limit/time_zone.h"

namespace frs {
namespace {

TEST(CalendarZone, NewYorkDaysAcrossDstAre23And25Hours) {
  auto ny = CalendarZone::Load("America/New_York");
  ASSERT_TRUE(ny.ok()) << ny.status().ToString();
  int64_t s, e;
  const int64_t mar8 = 1772946000;  // 2026-03-08 05:00 UTC, midnight EST: clocks spring forward
  ny.value().WindowOf(86400, mar8 + 12 * 3600, &s, &e);
  EXPECT_EQ(s, mar8);
  EXPECT_EQ(e - s, 23 * 3600);
  const int64_t nov1 = 1793505600;  // 2026-11-01 04:00 UTC, midnight EDT: clocks fall back
  ny.value().WindowOf(86400, nov1 + 20 * 3600, &s, &e);
  EXPECT_EQ(s, nov1);
  EXPECT_EQ(e - s, 25 * 3600);
}

TEST(CalendarZone, AgreesWithTheRulesOwnWindows) {
  auto pub = CalendarZone::Load("Asia/Kolkata");
  auto own = limit::TimeZone::Load("Asia/Kolkata");
  ASSERT_TRUE(pub.ok() && own.ok());
  for (uint32_t interval : {60u, 3600u, 86400u, 7u * 86400u}) {
    for (int64_t t = 1767225600; t < 1767225600 + 40 * 86400; t += 7919) {
      int64_t s1, e1, s2, e2;
      pub.value().WindowOf(interval, t, &s1, &e1);
      limit::CalendarWindow::WindowOf(*own.value(), interval, t, &s2, &e2);
      ASSERT_EQ(s1, s2) << interval << " " << t;
      ASSERT_EQ(e1, e2) << interval << " " << t;
      ASSERT_LE(s1, t);
      ASSERT_LT(t, e1);
    }
  }
}

TEST(CalendarZone, UnknownZoneIsAnErrorNamingIt) {
  auto z = CalendarZone::Load("Mars/Olympus_Mons");
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find("Mars/Olympus_Mons"), std::string::npos) << z.status().ToString();
}

TEST(CalendarZone, UtcNeedsNoFile) {
  auto utc = CalendarZone::Load("UTC");
  ASSERT_TRUE(utc.ok());
  int64_t s, e;
  utc.value().WindowOf(3600, 7200 + 59, &s, &e);
  EXPECT_EQ(s, 7200);
  EXPECT_EQ(e, 10800);
}

}  // namespace
}  // namespace frs
