// server/log_throttle.h: at most one log line per period for an event that
// may repeat without end (a refused TLS handshake, a call for an unknown
// domain), the occurrences in between summed into the next line. A worker
// must say that something is wrong without letting a client fill its log.
//
// Thread safety: one per thread (a worker's own).
#pragma once

#include <cstdint>

namespace frs::server {

class LogThrottle {
 public:
  explicit LogThrottle(int64_t period_ns = 60'000'000'000) : period_ns_(period_ns) {}

  // One occurrence at `now_ns` (CLOCK_MONOTONIC): true when it is to be
  // logged, with *count the occurrences since the last logged one, this
  // one included. The first occurrence is always logged.
  bool Note(int64_t now_ns, uint64_t* count) {
    ++unlogged_;
    if (logged_ && now_ns - logged_ns_ < period_ns_) return false;
    *count = unlogged_;
    unlogged_ = 0;
    logged_ = true;
    logged_ns_ = now_ns;
    return true;
  }

 private:
  int64_t period_ns_;
  bool logged_ = false;
  int64_t logged_ns_ = 0;
  uint64_t unlogged_ = 0;
};

}  // namespace frs::server
