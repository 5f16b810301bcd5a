// server/held_now.h: frs_leases_held and frs_reservations_held without a
// walk over the store in every scrape.
//
// What each biz holds now is known only by walking the store's chains (one
// chain locked at a time): about 20 ns a node, 45 ms for 2 M nodes, and the
// worker that answers /metrics answers nothing else meanwhile, so every
// scrape stalled a worker's connections for as long. The master serves no
// requests: it walks for the workers and publishes the figures in the
// metrics region (HeldNowShared), never more than a twentieth of its time
// (a walk of 100 ms is followed by 2 s without).
//
// When it walks follows the scrapes. Scrapes that come regularly, at least
// kHeldPeriodicMs apart (Prometheus: every 15 s), get one walk each, made
// kHeldLeadMs and a walk's length before the next one is due; scrapes that
// come more often, or not yet twice, get a walk a second while they come
// (one in the last kHeldWantedMs). A scrape serves the figures while they
// are fresh, else walks itself as before: the first two of a regular
// scraper, one after a reload, or one that comes off its beat. So the
// figures served are about a second old (more on a store whose walk takes
// over 50 ms); frs_held_age_seconds says how old.
//
// Thread safety: the master's publisher is single-threaded; any number of
// workers read beside it (metrics.h: HeldNowShared).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frs/admin_engine.h"
#include "frs/status.h"
#include "server/clock_util.h"
#include "server/metrics.h"

namespace frs::server {

// Scrapes more often than this (or not yet twice) get a walk a second while
// one came within kHeldWantedMs; scrapes this far apart or more, one walk
// each, kHeldLeadMs (and a walk's length) before the next is due.
inline constexpr int64_t kHeldPeriodicMs = 5000;
inline constexpr int64_t kHeldWantedMs = 10000;
inline constexpr int64_t kHeldLeadMs = 1000;
// The shortest interval between two of the master's walks, and how many
// walks' durations it is at least.
inline constexpr int64_t kHeldMinIntervalMs = 1000;
inline constexpr int64_t kHeldIntervalWalks = 20;
// The master's walk never waits longer for a chain's lock: a worker stuck
// holding one (stopped by a debugger, say) must not stop the master's
// supervision; the walk ends, and the scrapes walk themselves meanwhile.
inline constexpr uint32_t kHeldLockWaitMs = 100;
// A walk's figures are served this long past the master's next walk's due
// time (its tick comes up to a second late).
inline constexpr int64_t kHeldSlackMs = 1000;

// The master's side.
class HeldNowPublisher {
 public:
  // `clock_ns`: CLOCK_MONOTONIC nanoseconds (MonoNs; a test's own clock),
  // what a walk's duration is measured with.
  HeldNowPublisher(AdminEngine& engine, HeldNowShared& shared, int64_t (*clock_ns)() = MonoNs)
      : engine_(engine), shared_(shared), clock_ns_(clock_ns) {}

  // Walks the store and publishes what it found when a scrape wanted the
  // figures lately and the interval since the last walk is over; else
  // nothing. `now_ms`: CLOCK_MONOTONIC.
  void Tick(int64_t now_ms);
  // When the next walk is due while scrapes want them (CLOCK_MONOTONIC ms),
  // else -1: the master wakes for it.
  int64_t NextDueMs(int64_t now_ms) const;
  // The map changed: its figures are served no more (a biz may count
  // otherwise); the next scrape walks itself, and the next tick here.
  void Invalidate();

 private:
  void Publish(const std::vector<AdminEngine::BizHeldNow>& held, int64_t walked_ms, int64_t took_us,
               int64_t fresh_until_ms);

  // The scrapes' beat, from the asks seen (HeldNowShared::asked_ms).
  void ObserveAsk(int64_t asked);
  // When the next walk is due (CLOCK_MONOTONIC ms), or -1: none is wanted.
  int64_t DueMs(int64_t now_ms) const;

  AdminEngine& engine_;
  HeldNowShared& shared_;
  int64_t (*clock_ns_)();
  int64_t last_ask_ = 0;             // the last ask seen
  int64_t period_ = 0;               // the gap between the last two asks seen (0: not two yet)
  int64_t walked_for_ = 0;           // periodic: the ask whose next scrape the last walk was for
  int64_t last_walk_ms_ = 0;         // how long the last walk took
  std::vector<uint16_t> published_;  // the ids whose entries the last walk set
  int64_t next_ms_ = 0;
  bool failing_ = false;  // the last walk failed (logged once)
};

// What one scrape serves: each biz's figures, and where they came from.
struct HeldNowScrape {
  std::vector<AdminEngine::BizHeldNow> bizzes;  // empty: no biz counts either
  uint64_t age_ms = 0;                          // 0: walked by this scrape
  bool walked_here = false;
};

// The worker's side: the master's figures when fresh, else a walk of its
// own (counted in `counters->held_walks`, may be null). Marks the figures
// wanted, so that the master walks for the next scrapes.
Result<HeldNowScrape> ReadHeldNow(AdminEngine& engine, HeldNowShared& shared, WorkerCounters* counters, int64_t now_ms);

// Appends frs_leases_held{biz,id}, frs_reservations_held{biz,id} and the
// walks' own series (frs_held_age_seconds, frs_held_walks_total,
// frs_held_walk_seconds); nothing when no biz counts either. In
// metrics_render.cc, with the other series.
void RenderHeldNow(const HeldNowScrape& held, const Metrics& metrics, std::string* out);

}  // namespace frs::server
