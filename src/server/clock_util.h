// server/clock_util.h: the monotonic clock the server measures with.
//
// Thread safety: a plain function over the clock; safe anywhere.
#pragma once

#include <time.h>

#include <cstdint>

namespace frs::server {

// Monotonic nanoseconds (vDSO, no syscall): latencies and timeouts.
inline int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace frs::server
