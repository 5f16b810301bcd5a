// Time sources (frs/clock.h): the system's, and the tests' settable one.
#include "frs/clock.h"

#include <gtest/gtest.h>
#include <time.h>

namespace frs {
namespace {

TEST(Clock, SystemClockIsUnixMilliseconds) {
  const int64_t before = int64_t{::time(nullptr)} * 1000;
  const int64_t now = SystemClock::Default()->NowMs();
  const int64_t after = int64_t{::time(nullptr)} * 1000 + 999;
  EXPECT_GE(now, before);
  EXPECT_LE(now, after);
  EXPECT_EQ(SystemClock::Default(), SystemClock::Default()) << "one shared clock";
}

TEST(Clock, FakeClockMovesOnlyWhenTold) {
  FakeClock c(5000);
  const Clock& as_clock = c;
  EXPECT_EQ(as_clock.NowMs(), 5000);
  EXPECT_EQ(as_clock.NowMs(), 5000);
  c.Advance(250);
  EXPECT_EQ(as_clock.NowMs(), 5250);
  c.Set(1000);  // a step back, as NTP may make
  EXPECT_EQ(as_clock.NowMs(), 1000);
  c.Advance(-1);
  EXPECT_EQ(as_clock.NowMs(), 999);
}

}  // namespace
}  // namespace frs
