// Reservations under many concurrent clients: 10^6 engine operations
// (acquire with reserve, settle) by 8 threads on 4 keys of one store, the
// clock moved to a new window between phases. At every answer, what a key
// counts (settled + held) is within the limit; between phases, with every
// thread stopped, the engine's count of each key equals what the clients
// were told they took, gave back and overran, window by window.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir.h"
#include "frs/admin_engine.h"
#include "frs/store.h"
#include "limit/lease_id.h"
#include "limit/rule_harness.h"

namespace frs {
namespace {

using limit::testing::kDay0;

// Rule 1 never passes its limit (overrun="limit"); rule 2 may, by what the
// settles above their estimates charged (overrun="charge", the default).
constexpr int64_t kMax = 200000;
constexpr const char* kMap = R"(<map>
  <biz id="1" name="tokens" reservations="8">
    <rule algo="fixed" interval="60" max="200000" overrun="limit"/>
    <rule algo="calendar" interval="60" max="200000" name="charged"/>
  </biz>
</map>)";

constexpr int kThreads = 8;
constexpr int kKeys = 4;
constexpr int64_t kOps = 1'000'000;
constexpr int kPhases = 50;

struct Held {
  std::string id;
  int64_t estimate = 0;
  int64_t window = 0;  // rule 1's reset when taken: names its window
};

// What clients were told, per key and window (rule 1 and rule 2 alike
// count the estimate; rule 2 adds its own overrun).
struct Ledger {
  std::mutex mu;
  std::map<std::pair<int, int64_t>, int64_t> limited, charged, excess;  // (key, window) -> units
  void Add(int key, int64_t window, int64_t limited_units, int64_t charged_units, int64_t over = 0) {
    std::lock_guard<std::mutex> l(mu);
    limited[{key, window}] += limited_units;
    charged[{key, window}] += charged_units;
    excess[{key, window}] += over;
  }
};

TEST(ReservationThreads, SettledPlusHeldNeverPassesTheLimit) {
  testing::TempDir dir;
  std::ofstream(dir / "map.xml") << kMap;
  StoreOptions so;
  so.dir = dir / "store";
  so.geometry = StoreGeometry{1, 256, 8};
  auto store = Store::Open(so);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  FakeClock clock(kDay0 * 1000);
  EngineOptions eo;
  eo.map_path = dir / "map.xml";
  eo.store = store.value().get();
  eo.stats_dir = dir / "store";
  eo.clock = &clock;
  auto opened = AdminEngine::Open(eo);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  AdminEngine& engine = *opened.value();

  const std::string keys[kKeys] = {"k0", "k1", "k2", "k3"};
  Ledger ledger;
  std::atomic<int64_t> over_limit{0}, errors{0}, taken{0}, settled{0}, late{0}, overran{0}, full{0};
  int64_t worst_charged_excess = 0;  // written by the completion step only
  std::atomic<int> phase_errors{0};

  // Between phases, every thread stopped: the engine agrees with the
  // ledger for the window in force, then the clock moves to the next.
  auto between = [&]() noexcept {
    for (int k = 0; k < kKeys; ++k) {
      Decision g = engine.Execute(Request{.cmd = Cmd::kGet, .biz = "tokens", .key = keys[k]});
      if (!g.ok() || g.nrules != 2) {
        ++phase_errors;
        continue;
      }
      const int64_t w = g.rules[0].reset;
      std::lock_guard<std::mutex> l(ledger.mu);
      const int64_t want1 = ledger.limited[{k, w}], want2 = ledger.charged[{k, w}];
      if (g.rules[0].count != want1 || g.rules[1].count != want2) ++phase_errors;
      // Rule 1 within its limit; rule 2 within it but for what settles
      // above their estimates charged beyond them in this window.
      if (g.rules[0].count > kMax || g.rules[1].count > kMax + ledger.excess[{k, w}]) ++phase_errors;
      worst_charged_excess = std::max<int64_t>(worst_charged_excess, g.rules[1].count - kMax);
    }
    clock.Advance(60'000);
  };
  std::barrier sync(kThreads, between);

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1234 + t);
      std::vector<std::pair<int, Held>> held;
      const int64_t per_phase = kOps / kThreads / kPhases;
      for (int phase = 0; phase < kPhases; ++phase) {
        for (int64_t op = 0; op < per_phase; ++op) {
          // Settle when holding enough (or at random), else reserve.
          if (!held.empty() && (held.size() >= 6 || rng() % 2 == 0)) {
            const size_t i = rng() % held.size();
            const auto [k, h] = held[i];
            held[i] = held.back();
            held.pop_back();
            // Mostly below the estimate, sometimes above it, sometimes 0.
            const uint64_t pick = rng() % 16;
            const int64_t real = pick == 0   ? 0
                                 : pick == 1 ? h.estimate + 1 + static_cast<int64_t>(rng() % 500)
                                             : static_cast<int64_t>(rng() % (h.estimate + 1));
            Decision s = engine.Execute(
                Request{.cmd = Cmd::kSettle, .biz = "tokens", .key = keys[k], .n = real, .reservation = h.id});
            if (!s.ok() || !s.settled) {
              ++errors;
              continue;
            }
            ++settled;
            if (s.rules[0].count > kMax) ++over_limit;
            // The window the answer counts in is the reservation's, or it was
            // late. Both rules say so: a fixed window that ended as the clock
            // moved on still reports its end as its reset (with count 0) until
            // a use opens the next, where the calendar rule's has moved on.
            const bool in_window = s.rules[0].reset == h.window && s.rules[1].reset == h.window;
            if (!in_window) {
              ++late;
              continue;
            }
            // Rule 1 (limit) and rule 2 (charge) share the window and the
            // give-back; only their overrun differs.
            int64_t back = real < h.estimate ? h.estimate - real : 0;
            int64_t extra = real > h.estimate ? real - h.estimate : 0;
            overran += extra > 0;
            // s.res_returned sums both rules; each gave back the same.
            if (s.res_returned != 2 * back) ++errors;
            const int64_t limited_extra = s.res_overrun - extra;  // rule 2 charged all of it
            if (limited_extra < 0 || limited_extra > extra) ++errors;
            ledger.Add(k, h.window, limited_extra - back, extra - back, extra);
            continue;
          }
          const int k = static_cast<int>(rng() % kKeys);
          const int64_t estimate = 1 + static_cast<int64_t>(rng() % 2000);
          Decision d = engine.Execute(
              Request{.cmd = Cmd::kAcquire, .biz = "tokens", .key = keys[k], .n = estimate, .reserve = 600});
          if (!d.ok()) {
            ++errors;
            continue;
          }
          if (d.rules[0].count > kMax) ++over_limit;
          if (!d.allowed) {
            full += d.reservations_full;
            continue;
          }
          ++taken;
          const Held h{limit::LeaseIdText(d.res_serial, d.res_mac), estimate, d.rules[0].reset};
          ledger.Add(k, h.window, estimate, estimate);
          held.emplace_back(k, h);
        }
        // One reservation of a key of its own, taken as the window ends
        // and settled in the next one: late, it changes nothing there.
        const std::string own = "late" + std::to_string(t);
        Decision last =
            engine.Execute(Request{.cmd = Cmd::kAcquire, .biz = "tokens", .key = own, .n = 5, .reserve = 600});
        sync.arrive_and_wait();
        Decision s = engine.Execute(Request{.cmd = Cmd::kSettle,
                                            .biz = "tokens",
                                            .key = own,
                                            .n = 0,
                                            .reservation = limit::LeaseIdText(last.res_serial, last.res_mac)});
        if (!last.allowed || !s.settled || s.res_returned != 0 || s.rules[0].count != 0) ++errors;
        ++late;
      }
      // Left held: settled late (the last step moved the clock on), they
      // change no window.
      for (const auto& [k, h] : held) {
        Decision s =
            engine.Execute(Request{.cmd = Cmd::kSettle, .biz = "tokens", .key = keys[k], .n = 0, .reservation = h.id});
        if (!s.ok() || s.res_returned != 0) ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(over_limit.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(phase_errors.load(), 0);
  // The run did what it is meant to: keys filled to their limits, held
  // reservations denied, settles gave back, overran and came late.
  EXPECT_GT(taken.load(), 10000);
  EXPECT_GT(settled.load(), 10000);
  EXPECT_GT(late.load(), 0);
  EXPECT_GT(overran.load(), 500);
  EXPECT_GT(full.load(), 0);
  std::printf("taken %lld, settled %lld (late %lld, overran %lld), denied as full %lld, worst excess %lld\n",
              static_cast<long long>(taken.load()), static_cast<long long>(settled.load()),
              static_cast<long long>(late.load()), static_cast<long long>(overran.load()),
              static_cast<long long>(full.load()), static_cast<long long>(worst_charged_excess));
}

}  // namespace
}  // namespace frs
