// frs/clock.h: the time source of the rule engine, injectable for tests.
//
// Times are unix milliseconds. A clock may step backwards (NTP, an operator);
// the engine clamps (a negative elapsed time counts as zero), so a step back
// never grants extra uses.
//
// Thread safety: SystemClock is stateless; FakeClock is atomic.
#pragma once

#include <atomic>
#include <cstdint>

namespace frs {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowMs() const override;
  static const SystemClock* Default();
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t now_ms) : now_(now_ms) {}
  int64_t NowMs() const override { return now_.load(std::memory_order_relaxed); }
  void Set(int64_t ms) { now_.store(ms, std::memory_order_relaxed); }
  void Advance(int64_t ms) { now_.fetch_add(ms, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace frs
