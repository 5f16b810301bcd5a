#include "limit/token_bucket.h"

#include <gtest/gtest.h>

#include <random>

#include "limit/rule_harness.h"

namespace frs::limit {
namespace {

using testing::kDay0;
using testing::RuleHarness;

constexpr int64_t kT0 = kDay0 * 1000;

TEST(TokenBucket, BurstThenSteadyRefill) {
  RuleHarness h(Algo::kTokenBucket, 1, 10, 0, /*burst=*/20);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(h.Acquire(kT0).allowed) << i;
  RuleResult r = h.Acquire(kT0);
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.retry_after, 1);
  EXPECT_EQ(r.remaining, 0);
  // 10 per second: one token each 100 ms; just before, at, just after.
  EXPECT_FALSE(h.Acquire(kT0 + 99).allowed);
  EXPECT_TRUE(h.Acquire(kT0 + 100).allowed);
  EXPECT_FALSE(h.Acquire(kT0 + 101).allowed);
  EXPECT_TRUE(h.Acquire(kT0 + 200).allowed);
}

// The largest bucket map.xml accepts still runs dry at burst (a larger one
// is refused there: MapConfig.ATokenBucketItsStateCannotHoldIsRefused),
// and a charge of 2^31-1 at once is denied whole, not clipped.
TEST(TokenBucket, TheLongestRefillMapXmlAcceptsStillDenies) {
  RuleHarness h(Algo::kTokenBucket, 2592000, 10, 0, /*burst=*/4000);
  EXPECT_TRUE(h.Acquire(kT0, 3999).allowed);
  EXPECT_TRUE(h.Acquire(kT0).allowed);
  RuleResult r = h.Acquire(kT0);
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.remaining, 0);
  EXPECT_EQ(r.retry_after, 259200);  // one token per 30 days / 10
  RuleHarness big(Algo::kTokenBucket, 1, 1, 0, /*burst=*/1099511627);
  EXPECT_FALSE(big.Acquire(kT0, 2147483647).allowed);
  EXPECT_TRUE(big.Acquire(kT0, 1099511627).allowed);
  EXPECT_FALSE(big.Acquire(kT0).allowed);
}

TEST(TokenBucket, FractionalRefillIsKept) {
  // 3 tokens per 10 s: one every 3333.33 ms, never rounded away.
  RuleHarness h(Algo::kTokenBucket, 10, 3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.Acquire(kT0).allowed);
  EXPECT_FALSE(h.Acquire(kT0 + 1000).allowed);
  EXPECT_FALSE(h.Acquire(kT0 + 3333).allowed);
  EXPECT_TRUE(h.Acquire(kT0 + 3334).allowed);
  // The 0.67 ms left over carries: the next token is due at 6666.67 ms.
  EXPECT_FALSE(h.Acquire(kT0 + 6666).allowed);
  EXPECT_TRUE(h.Acquire(kT0 + 6667).allowed);
  // 10 s after the burst all three are back in total.
  EXPECT_TRUE(h.Acquire(kT0 + 10000).allowed);
  EXPECT_FALSE(h.Acquire(kT0 + 10000).allowed);
}

TEST(TokenBucket, WeightsAndReportedFields) {
  RuleHarness h(Algo::kTokenBucket, 60, 60);
  EXPECT_TRUE(h.Acquire(kT0, 50).allowed);
  RuleResult r = h.Query(kT0, 20);
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.count, 50);
  EXPECT_EQ(r.limit, 60);
  EXPECT_EQ(r.remaining, 10);
  EXPECT_EQ(r.retry_after, 10);  // 10 more tokens at 1 per second
  EXPECT_EQ(r.reset, kDay0 + 1);
  EXPECT_EQ(h.Expire(kT0), kDay0 + 50);
  RuleView v = h.View(kT0 + 500);
  EXPECT_DOUBLE_EQ(v.tokens, 10.5);
}

TEST(TokenBucket, ClockSteppingBackGrantsNothing) {
  RuleHarness h(Algo::kTokenBucket, 1, 2);
  EXPECT_TRUE(h.Acquire(kT0).allowed);
  EXPECT_TRUE(h.Acquire(kT0).allowed);
  EXPECT_FALSE(h.Acquire(kT0 - 10'000).allowed);
  EXPECT_FALSE(h.Acquire(kT0 + 499).allowed);
  EXPECT_TRUE(h.Acquire(kT0 + 500).allowed);
}

TEST(TokenBucket, SetCountIsTokensInUse) {
  RuleHarness h(Algo::kTokenBucket, 1, 5);
  h.Set(kT0, 5);
  EXPECT_FALSE(h.Query(kT0).allowed);
  h.Set(kT0, 0);
  EXPECT_TRUE(h.Query(kT0, 5).allowed);
}

TEST(TokenBucket, ChangedMaxKeepsTheFullAgainInstant) {
  RuleHarness h(Algo::kTokenBucket, 10, 3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.Acquire(kT0).allowed);
  h.Respec(7, 0, 0, kT0);
  EXPECT_EQ(h.Expire(kT0), kDay0 + 10);
  EXPECT_FALSE(h.Query(kT0).allowed);  // still 10 s until full: 7 in use of 7
  EXPECT_TRUE(h.Query(kT0 + 10000, 7).allowed);
}

// Reference: the classic bucket. tokens (scaled by U = I*1000) refilled by
// max per elapsed ms, capped at burst.
TEST(TokenBucket, RandomSequencesMatchTheReference) {
  std::mt19937_64 rng(2024);
  for (int seq = 0; seq < 1500; ++seq) {
    const uint32_t interval = std::uniform_int_distribution<uint32_t>(1, 90)(rng);
    const int64_t max = std::uniform_int_distribution<int64_t>(1, 40)(rng);
    const int64_t burst = rng() % 2 ? max : std::uniform_int_distribution<int64_t>(1, 60)(rng);
    RuleHarness h(Algo::kTokenBucket, interval, max, 0, burst);
    const __int128 u = int64_t{interval} * 1000;
    __int128 tokens = burst * u;  // full
    int64_t last = kT0;
    int64_t ms = kT0;
    for (int e = 0; e < 150; ++e) {
      ms += rng() % 4 == 0 ? std::uniform_int_distribution<int64_t>(0, interval * 1000)(rng)
                           : std::uniform_int_distribution<int64_t>(0, 300)(rng);
      tokens = std::min<__int128>(burst * u, tokens + __int128{ms - last} * max);
      last = ms;
      const int64_t n = std::uniform_int_distribution<int64_t>(1, std::min<int64_t>(burst, 5))(rng);
      const bool update = rng() % 6 == 0;
      const bool want = tokens >= n * u;
      RuleResult got = update ? h.Update(ms, n) : h.Acquire(ms, n);
      ASSERT_EQ(got.allowed, want) << "seq " << seq << " event " << e;
      const __int128 used = burst * u - tokens;
      ASSERT_EQ(got.count, static_cast<int64_t>((used + u - 1) / u)) << "seq " << seq << " event " << e;
      if (!want) {
        int64_t wait_ms = static_cast<int64_t>((n * u - tokens + max - 1) / max);
        ASSERT_EQ(got.retry_after, std::max<int64_t>(1, (wait_ms + 999) / 1000));
      }
      if (want || update) tokens -= n * u;
    }
  }
}

}  // namespace
}  // namespace frs::limit
