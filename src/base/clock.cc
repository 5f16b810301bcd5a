#include "frs/clock.h"

#include <time.h>

namespace frs {

int64_t SystemClock::NowMs() const {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

const SystemClock* SystemClock::Default() {
  static const SystemClock clock;
  return &clock;
}

}  // namespace frs
