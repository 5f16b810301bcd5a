// frs_leases_held and frs_reservations_held: the master walks for the
// scrapes while someone scrapes, a scrape serves its figures while they are
// fresh and walks itself otherwise (server/held_now.h). The engine is the
// fake one: each HeldNow call is a walk, counted.
#include "server/held_now.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "server/fake_engine.h"

namespace frs::server {
namespace {

using Biz = AdminEngine::BizHeldNow;

class HeldNowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_.held = {Biz{20, "inflight", 3, 0, true, false}, Biz{21, "tokens", 0, 5, false, true}};
  }
  HeldNowShared& shared() { return metrics_->master().held; }
  HeldNowScrape Scrape(int64_t now_ms) {
    Result<HeldNowScrape> s = ReadHeldNow(engine_, shared(), &metrics_->worker(0), now_ms);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : HeldNowScrape{};
  }

  // The publisher's clock: a walk takes no time unless a test says so.
  static int64_t clock_ns;
  static int64_t Clock() { return clock_ns; }

  testing::FakeEngine engine_;
  std::unique_ptr<Metrics> metrics_ = Metrics::Create(1).value();
  HeldNowPublisher master_{engine_, metrics_->master().held, &Clock};
};
int64_t HeldNowTest::clock_ns = 0;

TEST_F(HeldNowTest, TheMasterWalksOnlyWhileSomeoneScrapes) {
  master_.Tick(1'000'000);
  EXPECT_EQ(engine_.held_walks, 0);  // nobody asked
  EXPECT_EQ(master_.NextDueMs(1'000'000), -1);
  // The first scrape finds no figures of the master's: it walks itself.
  HeldNowScrape first = Scrape(1'000'000);
  EXPECT_TRUE(first.walked_here);
  EXPECT_EQ(first.age_ms, 0u);
  ASSERT_EQ(first.bizzes.size(), 2u);
  EXPECT_EQ(first.bizzes[0].leases, 3u);
  EXPECT_EQ(first.bizzes[1].reservations, 5u);
  EXPECT_EQ(CounterGet(metrics_->worker(0).held_walks), 1u);
  // Now the master does, and the next scrapes serve its figures.
  master_.Tick(1'000'010);
  EXPECT_EQ(engine_.held_walks, 2);
  EXPECT_EQ(CounterGet(shared().walks), 1u);
  HeldNowScrape second = Scrape(1'000'400);
  EXPECT_FALSE(second.walked_here);
  EXPECT_EQ(second.age_ms, 390u);
  EXPECT_EQ(second.bizzes[0].leases, 3u);
  EXPECT_EQ(second.bizzes[1].reservations, 5u);
  EXPECT_EQ(engine_.held_walks, 2);
  // Not again within a second of its walk: it wakes for the next then.
  master_.Tick(1'000'900);
  EXPECT_EQ(engine_.held_walks, 2);
  EXPECT_EQ(master_.NextDueMs(1'000'900), 1'000'010 + kHeldMinIntervalMs);
  // A scrape older than kHeldWantedMs stops it.
  master_.Tick(1'000'400 + kHeldWantedMs + 1);
  EXPECT_EQ(engine_.held_walks, 2);
  EXPECT_EQ(master_.NextDueMs(1'000'400 + kHeldWantedMs + 1), -1);
}

// A scraper on a beat (Prometheus: every 15 s) gets one walk per scrape,
// a second before it comes, and is served; a second a second would be
// 15 walks for one scrape's figures.
TEST_F(HeldNowTest, ARegularScraperGetsOneWalkPerScrapeJustBeforeIt) {
  const int64_t t = 8'000'000;
  EXPECT_TRUE(Scrape(t).walked_here);  // the first: nothing published yet
  for (int64_t ms = t + 10; ms < t + 15'000; ms += 500) master_.Tick(ms);
  const int walks_first_beat = engine_.held_walks;
  EXPECT_LE(walks_first_beat, 1 + 12);          // a walk a second while it came lately (10 s), then none
  EXPECT_TRUE(Scrape(t + 15'000).walked_here);  // the second: the master did not know its beat yet
  const int before = engine_.held_walks;
  for (int64_t ms = t + 15'000; ms < t + 30'000; ms += 100) master_.Tick(ms);
  EXPECT_EQ(engine_.held_walks, before + 1);                                     // one walk for the next scrape
  EXPECT_EQ(CounterGet(shared().walked_ms), static_cast<uint64_t>(t + 29'000));  // a second before it
  HeldNowScrape third = Scrape(t + 30'000);
  EXPECT_FALSE(third.walked_here);
  EXPECT_EQ(third.age_ms, 1000u);
  // And so on, each beat: one walk, the scrape served.
  for (int64_t ms = t + 30'000; ms < t + 45'000; ms += 100) master_.Tick(ms);
  EXPECT_EQ(engine_.held_walks, before + 2);
  EXPECT_FALSE(Scrape(t + 45'000).walked_here);
  // The scraper stops: after two missed beats, no walk at all.
  const int stopped = engine_.held_walks;
  for (int64_t ms = t + 45'010; ms < t + 120'000; ms += 500) master_.Tick(ms);
  EXPECT_LE(engine_.held_walks, stopped + 1);
  EXPECT_EQ(master_.NextDueMs(t + 120'000), -1);
}

TEST_F(HeldNowTest, AScrapeServesTheMastersFiguresOnlyWhileFresh) {
  Scrape(2'000'000);
  master_.Tick(2'000'000);
  // A change after the master's walk is not seen until its next one...
  engine_.held[0].leases = 4;
  EXPECT_EQ(Scrape(2'000'500).bizzes[0].leases, 3u);
  master_.Tick(2'000'000 + kHeldMinIntervalMs);
  HeldNowScrape after = Scrape(2'000'000 + kHeldMinIntervalMs + 1);
  EXPECT_EQ(after.bizzes[0].leases, 4u);
  EXPECT_FALSE(after.walked_here);
  // ... and a master late past its next walk and the slack serves nothing
  // stale: the scrape walks.
  engine_.held[0].leases = 6;
  HeldNowScrape late = Scrape(2'000'000 + 3 * kHeldMinIntervalMs + kHeldSlackMs);
  EXPECT_TRUE(late.walked_here);
  EXPECT_EQ(late.bizzes[0].leases, 6u);
}

TEST_F(HeldNowTest, ALongWalkSpacesTheNextOut) {
  // A walk of no time: the next is due a second later, and its figures are
  // served until then and the slack after it.
  Scrape(3'000'000);
  master_.Tick(3'000'000);
  EXPECT_EQ(CounterGet(shared().walked_ms), 3'000'000u);
  EXPECT_EQ(CounterGet(shared().fresh_until_ms), 3'000'000u + kHeldMinIntervalMs + kHeldSlackMs);
  // A walk of 80 ms: the master then waits 20 of them (1.6 s) after it
  // before the next, so it walks a twentieth of its time.
  engine_.on_held_walk = [] { clock_ns += 80'000'000; };
  const int64_t t = 3'000'000 + kHeldMinIntervalMs;
  master_.Tick(t);
  EXPECT_EQ(CounterGet(shared().walk_us), 80'000u);
  const int64_t next = t + 80 + kHeldIntervalWalks * 80;
  EXPECT_EQ(static_cast<int64_t>(CounterGet(shared().fresh_until_ms)), next + kHeldSlackMs);
  master_.Tick(next - 1);
  EXPECT_EQ(CounterGet(shared().walks), 2u);
  master_.Tick(next);
  EXPECT_EQ(CounterGet(shared().walks), 3u);
}

TEST_F(HeldNowTest, AReloadServesTheOldMapsFiguresNoMore) {
  Scrape(4'000'000);
  master_.Tick(4'000'000);
  master_.Invalidate();
  // The biz that counted leases is gone from the map; another counts them.
  engine_.held = {Biz{22, "downloads", 7, 0, true, false}};
  HeldNowScrape s = Scrape(4'000'100);
  EXPECT_TRUE(s.walked_here);
  ASSERT_EQ(s.bizzes.size(), 1u);
  EXPECT_EQ(s.bizzes[0].leases, 7u);
  // The master's next tick walks at once, and leaves no figure of the
  // old biz behind.
  master_.Tick(4'000'200);
  EXPECT_EQ(CounterGet(shared().leases[20]), 0u);
  EXPECT_EQ(CounterGet(shared().reservations[21]), 0u);
  EXPECT_EQ(CounterGet(shared().leases[22]), 7u);
  EXPECT_FALSE(Scrape(4'000'300).walked_here);
}

TEST_F(HeldNowTest, AFailedWalkIsNotServedAndTheScrapeFailsVisibly) {
  Scrape(5'000'000);
  master_.Tick(5'000'000);
  engine_.held_fails = true;
  master_.Tick(5'000'000 + kHeldMinIntervalMs);
  Result<HeldNowScrape> s = ReadHeldNow(engine_, shared(), nullptr, 5'000'000 + kHeldMinIntervalMs + 1);
  EXPECT_FALSE(s.ok());
}

TEST_F(HeldNowTest, NoBizThatCountsMeansNoWalkAtAll) {
  engine_.held.clear();
  HeldNowScrape s = Scrape(6'000'000);
  EXPECT_TRUE(s.bizzes.empty());
  master_.Tick(6'000'000);
  EXPECT_EQ(engine_.held_walks, 0);
  std::string out;
  RenderHeldNow(s, *metrics_, &out);
  EXPECT_EQ(out, "");
}

TEST_F(HeldNowTest, TheSeriesSayWhoWalkedAndWhen) {
  Scrape(7'000'000);
  master_.Tick(7'000'000);
  std::string out;
  RenderHeldNow(Scrape(7'001'250), *metrics_, &out);
  EXPECT_NE(out.find("frs_leases_held{biz=\"inflight\",id=\"20\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("frs_reservations_held{biz=\"tokens\",id=\"21\"} 5\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("frs_leases_held{biz=\"tokens\""), std::string::npos) << out;
  EXPECT_NE(out.find("frs_held_age_seconds 1.25\n"), std::string::npos) << out;
  EXPECT_NE(out.find("frs_held_walks_total{by=\"master\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("frs_held_walks_total{by=\"scrape\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("frs_held_walk_seconds "), std::string::npos) << out;
}

}  // namespace
}  // namespace frs::server
