// Time sources (frs/clock.h): the system's, and the tests' settable one.
#include "frs/clock.h"

#include <gtest/gtest.h>
#include <time.h>

namespace frs {
namespace {

// The bounds are read from the clock SystemClock reads. ::time() reads the
// kernel's coarse clock, which lags CLOCK_REALTIME by up to a tick (4 ms at
// HZ=250): a bound made from it once fell 4 ms below the clock it bounded.
int64_t RealtimeMs() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

TEST(Clock, SystemClockIsUnixMilliseconds) {
  const int64_t before = RealtimeMs();
  const int64_t now = SystemClock::Default()->NowMs();
  const int64_t after = RealtimeMs();
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
