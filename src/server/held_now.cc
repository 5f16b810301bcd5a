#include "server/held_now.h"

#include <algorithm>
#include <atomic>

#include "server/clock_util.h"
#include "server/logger.h"

namespace frs::server {
namespace {

constexpr int64_t kNsPerMs = 1000000;

std::atomic_ref<uint64_t> Word(uint64_t& w) { return std::atomic_ref<uint64_t>(w); }
uint64_t Relaxed(uint64_t& w) { return Word(w).load(std::memory_order_relaxed); }

}  // namespace

void HeldNowPublisher::ObserveAsk(int64_t asked) {
  if (asked == last_ask_) return;
  if (last_ask_ != 0 && asked > last_ask_) period_ = asked - last_ask_;
  last_ask_ = asked;
}

int64_t HeldNowPublisher::DueMs(int64_t now_ms) const {
  if (last_ask_ == 0) return -1;
  if (period_ >= kHeldPeriodicMs) {
    // One walk per scrape, just before the next: none once the scraper
    // has missed two beats, none again for a scrape already walked for.
    if (now_ms - last_ask_ > 2 * period_ + kHeldLeadMs || walked_for_ == last_ask_) return -1;
    return std::max(next_ms_, last_ask_ + period_ - kHeldLeadMs - last_walk_ms_);
  }
  if (now_ms - last_ask_ > kHeldWantedMs) return -1;
  return next_ms_;
}

void HeldNowPublisher::Tick(int64_t now_ms) {
  ObserveAsk(static_cast<int64_t>(Relaxed(shared_.asked_ms)));
  const int64_t due = DueMs(now_ms);
  if (due < 0 || now_ms < due) return;
  const bool periodic = period_ >= kHeldPeriodicMs;
  const int64_t t0 = clock_ns_();
  Result<std::vector<AdminEngine::BizHeldNow>> held = engine_.HeldNow(kHeldLockWaitMs);
  const int64_t took_ns = clock_ns_() - t0;
  last_walk_ms_ = took_ns / kNsPerMs;
  const int64_t interval_ms = std::max(kHeldMinIntervalMs, kHeldIntervalWalks * last_walk_ms_);
  next_ms_ = now_ms + last_walk_ms_ + interval_ms;
  if (periodic) walked_for_ = last_ask_;
  // Served until the next walk is due and a second more; for a regular
  // scraper, until its next scrape is well past (a quarter of its beat).
  const int64_t fresh_until =
      periodic ? now_ms + last_walk_ms_ + kHeldLeadMs + kHeldSlackMs + period_ / 4 : next_ms_ + kHeldSlackMs;
  // A walk that failed (a chain locked past kHeldLockWaitMs, a damaged
  // node) leaves the scrapes to walk themselves; said once, until a walk
  // succeeds again.
  if (!held.ok()) {
    if (!failing_)
      FRS_LOG(
          "frs_leases_held: the master's walk over the store failed (%s); scrapes walk it themselves until it "
          "succeeds",
          held.status().ToString().c_str());
    failing_ = true;
    Publish({}, 0, took_ns / 1000, 0);
    return;
  }
  failing_ = false;
  Publish(*held, now_ms, took_ns / 1000, fresh_until);
}

int64_t HeldNowPublisher::NextDueMs(int64_t now_ms) const {
  // A new ask is seen at the next tick (a second at most): due then.
  if (static_cast<int64_t>(Relaxed(shared_.asked_ms)) != last_ask_) return std::max(next_ms_, now_ms);
  const int64_t due = DueMs(now_ms);
  return due < 0 ? -1 : std::max(due, now_ms);
}

void HeldNowPublisher::Invalidate() {
  next_ms_ = 0;
  walked_for_ = 0;
  Publish({}, 0, static_cast<int64_t>(Relaxed(shared_.walk_us)), 0);
}

void HeldNowPublisher::Publish(const std::vector<AdminEngine::BizHeldNow>& held, int64_t walked_ms, int64_t took_us,
                               int64_t fresh_until_ms) {
  // One writer: odd while the figures change, then the next even value
  // released with them (a seqlock).
  const uint64_t seq = Relaxed(shared_.seq);
  Word(shared_.seq).store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (uint16_t id : published_) {
    Word(shared_.leases[id]).store(0, std::memory_order_relaxed);
    Word(shared_.reservations[id]).store(0, std::memory_order_relaxed);
  }
  published_.clear();
  for (const AdminEngine::BizHeldNow& b : held) {
    Word(shared_.leases[b.biz_id]).store(b.leases, std::memory_order_relaxed);
    Word(shared_.reservations[b.biz_id]).store(b.reservations, std::memory_order_relaxed);
    published_.push_back(b.biz_id);
  }
  Word(shared_.walked_ms).store(static_cast<uint64_t>(walked_ms), std::memory_order_relaxed);
  Word(shared_.fresh_until_ms).store(static_cast<uint64_t>(fresh_until_ms), std::memory_order_relaxed);
  Word(shared_.walk_us).store(static_cast<uint64_t>(took_us), std::memory_order_relaxed);
  if (walked_ms != 0) Word(shared_.walks).store(Relaxed(shared_.walks) + 1, std::memory_order_relaxed);
  Word(shared_.seq).store(seq + 2, std::memory_order_release);
}

Result<HeldNowScrape> ReadHeldNow(AdminEngine& engine, HeldNowShared& shared, WorkerCounters* counters,
                                  int64_t now_ms) {
  HeldNowScrape out;
  out.bizzes = engine.HeldBizzes();
  if (out.bizzes.empty()) return out;
  Word(shared.asked_ms).store(static_cast<uint64_t>(now_ms), std::memory_order_relaxed);
  // The master's writes take microseconds: a few tries, then a walk.
  for (int attempt = 0; attempt < 4; ++attempt) {
    const uint64_t seq = Word(shared.seq).load(std::memory_order_acquire);
    if (seq & 1) continue;
    const uint64_t walked = Relaxed(shared.walked_ms);
    if (walked == 0 || static_cast<uint64_t>(now_ms) > Relaxed(shared.fresh_until_ms)) break;
    for (AdminEngine::BizHeldNow& b : out.bizzes) {
      b.leases = b.has_leases ? Relaxed(shared.leases[b.biz_id]) : 0;
      b.reservations = b.has_reservations ? Relaxed(shared.reservations[b.biz_id]) : 0;
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (Word(shared.seq).load(std::memory_order_relaxed) != seq) continue;
    out.age_ms = static_cast<uint64_t>(now_ms) > walked ? static_cast<uint64_t>(now_ms) - walked : 0;
    return out;
  }
  Result<std::vector<AdminEngine::BizHeldNow>> held = engine.HeldNow(0);
  if (!held.ok()) return held.status();
  if (counters) CounterAdd(counters->held_walks);
  out.bizzes = std::move(*held);
  out.age_ms = 0;
  out.walked_here = true;
  return out;
}

}  // namespace frs::server
