#include "limit/sliding_window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "limit/rule_harness.h"

namespace frs::limit {
namespace {

using testing::kDay0;
using testing::RuleHarness;

TEST(SlidingWindow, BlockSizes) {
  // Wide (intervals of 65,536 s and more): 32-bit timestamps.
  EXPECT_EQ(SlidingWindow::Bytes(1, 86400), 16u);
  EXPECT_EQ(SlidingWindow::Bytes(2, 86400), 16u);
  EXPECT_EQ(SlidingWindow::Bytes(3, 86400), 32u);
  EXPECT_EQ(SlidingWindow::Bytes(22, 65536), 96u);
  // Narrow (shorter intervals): 16-bit offsets, half the bytes per use.
  EXPECT_EQ(SlidingWindow::Bytes(3, 3600), 16u);
  EXPECT_EQ(SlidingWindow::Bytes(4, 65535), 16u);
  EXPECT_EQ(SlidingWindow::Bytes(10, 3600), 32u);
  EXPECT_EQ(SlidingWindow::Bytes(22, 60), 64u);
  // Bucketed above kExactMax, whatever the interval.
  EXPECT_EQ(SlidingWindow::Bytes(23, 60), 112u);
  EXPECT_EQ(SlidingWindow::Bytes(1000000, 86400), 112u);
}

// The narrow form keeps every use exactly, up to its interval's end, at the
// edge of what 16 bits hold (65,535 s).
TEST(SlidingWindow, TheNarrowFormIsExactToTheSecondAtItsLongestInterval) {
  RuleHarness h(Algo::kSliding, 65535, 3);
  const int64_t t0 = kDay0;
  EXPECT_TRUE(h.Acquire(t0 * 1000).allowed);
  EXPECT_TRUE(h.Acquire((t0 + 30000) * 1000).allowed);
  EXPECT_TRUE(h.Acquire((t0 + 65534) * 1000).allowed);
  const RuleResult full = h.Acquire((t0 + 65534) * 1000 + 999);
  EXPECT_FALSE(full.allowed);
  EXPECT_EQ(full.retry_after, 1);  // the first use leaves at t0 + 65535
  EXPECT_TRUE(h.Acquire((t0 + 65535) * 1000).allowed);
  EXPECT_FALSE(h.Acquire((t0 + 65535) * 1000).allowed);
  EXPECT_EQ(h.Expire((t0 + 65535) * 1000), t0 + 65535 + 65535);
  EXPECT_TRUE(h.Acquire((t0 + 30000 + 65535) * 1000).allowed);
}

// A block of the wide form (what a format-4 store or an older export holds
// for a short interval) is read as wide and rewritten narrow, keeping every
// use: its tag says its form.
TEST(SlidingWindow, AWideBlockOfAShortIntervalIsReadAndConvertedKeepingItsUses) {
  RuleHarness h(Algo::kSliding, 3600, 10);
  RuleSpec wide = h.spec();
  wide.bytes = 48;  // 8 + 4 * 10, as format 4 laid it out
  wide.tag = MakeTag(Algo::kSliding, 3600, wide.bytes);
  std::vector<uint8_t> old(wide.bytes, 0);
  const int64_t t0 = kDay0;
  for (int i = 0; i < 7; ++i) Record(wide, old.data(), h.At((t0 + 100 * i) * 1000), 1);
  ASSERT_FALSE(TagNarrow(Load32(old.data())));
  std::vector<uint8_t> now(h.spec().bytes, 0);
  ASSERT_EQ(now.size(), 32u);
  ASSERT_TRUE(ConvertBlock(h.spec(), old, now.data(), h.At((t0 + 700) * 1000)));
  ASSERT_TRUE(TagNarrow(Load32(now.data())));
  RuleResult r;
  Evaluate(h.spec(), now.data(), h.At((t0 + 700) * 1000), 1, &r);
  EXPECT_EQ(r.count, 7);
  Evaluate(h.spec(), now.data(), h.At((t0 + 3600) * 1000), 1, &r);
  EXPECT_EQ(r.count, 6) << "the use at t0 left the window at t0 + 3600, each other one stays to the second";
  EXPECT_EQ(ExpireS(h.spec(), now.data(), h.At((t0 + 700) * 1000)), t0 + 600 + 3600);
}

TEST(SlidingWindow, AUseCountsForExactlyIntervalSeconds) {
  RuleHarness h(Algo::kSliding, 3600, 1);
  EXPECT_TRUE(h.Acquire(kDay0 * 1000 + 500).allowed);
  RuleResult before = h.Acquire((kDay0 + 3599) * 1000 + 999);
  EXPECT_FALSE(before.allowed);
  EXPECT_EQ(before.retry_after, 1);
  EXPECT_EQ(before.reset, kDay0 + 3600);
  EXPECT_TRUE(h.Acquire((kDay0 + 3600) * 1000).allowed);
  EXPECT_FALSE(h.Acquire((kDay0 + 3601) * 1000).allowed);
}

// The fuzzer's find: more uses than max asked of an empty exact window read
// ts[-1] (UBSan). Such a request is denied, counts nothing, and says to wait
// a whole interval; the same with uses in the window and in bucketed form.
TEST(SlidingWindow, MoreThanMaxOnAnEmptyWindowIsDeniedWithoutReadingOutside) {
  for (int64_t max : {1, 2, 22, 23, 1000}) {
    RuleHarness h(Algo::kSliding, 3600, max);
    RuleResult r = h.Acquire(kDay0 * 1000, max + 1);
    EXPECT_FALSE(r.allowed) << max;
    EXPECT_EQ(r.count, 0) << max;
    // No wait can cure n above max: no retry time is promised.
    EXPECT_EQ(r.retry_after, kNeverCurable) << max;
    EXPECT_TRUE(h.Acquire(kDay0 * 1000 + 1, 1).allowed) << max;
    r = h.Acquire(kDay0 * 1000 + 2, max + 1);
    EXPECT_FALSE(r.allowed) << max;
    EXPECT_EQ(r.retry_after, kNeverCurable) << max;
    // n = max waits for the use just made to leave the window.
    r = h.Query(kDay0 * 1000 + 2, max);
    EXPECT_FALSE(r.allowed) << max;
    EXPECT_GE(r.retry_after, 1) << max;
  }
}

TEST(SlidingWindow, ThreeADayIsThreeInAny24Hours) {
  RuleHarness h(Algo::kSliding, 86400, 3);
  EXPECT_TRUE(h.Acquire(kDay0 * 1000).allowed);
  EXPECT_TRUE(h.Acquire((kDay0 + 3600) * 1000).allowed);
  EXPECT_TRUE(h.Acquire((kDay0 + 7200) * 1000).allowed);
  RuleResult r = h.Acquire((kDay0 + 80000) * 1000);
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.retry_after, 86400 - 80000);
  EXPECT_TRUE(h.Acquire((kDay0 + 86400) * 1000).allowed);
  EXPECT_FALSE(h.Acquire((kDay0 + 86401) * 1000).allowed);
  // Two more need the two oldest uses gone.
  EXPECT_EQ(h.Query((kDay0 + 86401) * 1000, 2).retry_after, 86400 + 7200 - 86401);
}

TEST(SlidingWindow, WeightedUsesAndTheClockSteppingBack) {
  RuleHarness h(Algo::kSliding, 600, 10);
  EXPECT_TRUE(h.Acquire(kDay0 * 1000, 7).allowed);
  EXPECT_FALSE(h.Acquire(kDay0 * 1000, 4).allowed);
  EXPECT_TRUE(h.Acquire(kDay0 * 1000, 3).allowed);
  EXPECT_FALSE(h.Acquire((kDay0 - 10000) * 1000).allowed);  // stepped back: still full
  EXPECT_TRUE(h.Acquire((kDay0 + 600) * 1000, 10).allowed);
}

TEST(SlidingWindow, ChangingMaxAcrossTheExactBoundKeepsUses) {
  RuleHarness h(Algo::kSliding, 1000, 5);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(h.Acquire((kDay0 + i) * 1000).allowed);
  h.Respec(50, 0, 0, (kDay0 + 10) * 1000);  // exact -> buckets
  EXPECT_EQ(h.Query((kDay0 + 10) * 1000).count, 5);
  h.Respec(3, 0, 0, (kDay0 + 10) * 1000);  // buckets -> exact, the newest 3 kept
  EXPECT_EQ(h.Query((kDay0 + 10) * 1000).count, 3);
  EXPECT_FALSE(h.Query((kDay0 + 10) * 1000).allowed);
  // Bucketed uses become exact at their bucket's end: never earlier than truth.
  EXPECT_FALSE(h.Query((kDay0 + 1004) * 1000).allowed);
}

// Reference: every use kept until it can never count again; count = uses at
// seconds u with now - I < u. The random sequences' clocks never step back,
// so a use at u <= t - I (t the newest use) counts at no later second: pruning
// it keeps each query's cost to the uses of one interval, not of the whole
// sequence (the retry search is quadratic in them).
class RefSliding {
 public:
  explicit RefSliding(int64_t interval) : i_(interval) {}
  int64_t Count(int64_t t) const {
    int64_t c = 0;
    for (auto [u, n] : uses_) c += u > t - i_ ? n : 0;
    return c;
  }
  void Add(int64_t t, int64_t n) {
    if (!uses_.empty() && t < uses_.back().first) ADD_FAILURE() << "the reference's clock stepped back";
    std::erase_if(uses_, [&](const auto& use) { return use.first <= t - i_; });
    uses_.push_back({t, n});
  }
  // Earliest second at which count + n <= max (n <= max).
  int64_t RetryAt(int64_t t, int64_t n, int64_t max) const {
    std::vector<int64_t> times{t};
    for (auto [u, k] : uses_) times.push_back(std::max(t, u + i_));
    std::sort(times.begin(), times.end());
    for (int64_t x : times) {
      if (Count(x) + n <= max) return x;
    }
    return -1;
  }

 private:
  int64_t i_;
  std::vector<std::pair<int64_t, int64_t>> uses_;
};

TEST(SlidingWindow, ExactRandomSequencesMatchTheReference) {
  std::mt19937_64 rng(4242);
  for (int seq = 0; seq < 1500; ++seq) {
    const uint32_t interval = std::uniform_int_distribution<uint32_t>(1, 300)(rng);
    const int64_t max = std::uniform_int_distribution<int64_t>(1, SlidingWindow::kExactMax)(rng);
    RuleHarness h(Algo::kSliding, interval, max);
    RefSliding ref(interval);
    int64_t ms = kDay0 * 1000;
    for (int e = 0; e < 100; ++e) {
      ms = testing::NextRandomMs(rng, ms, 5, 2 * interval, interval / 8 + 1);
      const int64_t t = ms / 1000;
      const int64_t n = std::uniform_int_distribution<int64_t>(1, std::min<int64_t>(max, 4))(rng);
      const bool update = rng() % 6 == 0;
      const int64_t count = ref.Count(t);
      const bool want = count + n <= max;
      RuleResult got = update ? h.Update(ms, n) : h.Acquire(ms, n);
      ASSERT_EQ(got.allowed, want) << "seq " << seq << " event " << e << " I=" << interval << " max=" << max;
      // Past max (unconditional updates) only the newest max uses are kept.
      ASSERT_EQ(got.count, std::min(count, max)) << "seq " << seq << " event " << e;
      if (!want) {
        ASSERT_EQ(got.retry_after, std::max<int64_t>(1, ref.RetryAt(t, n, max) - t));
      }
      if (want || update) ref.Add(t, n);
    }
  }
}

TEST(SlidingWindow, BucketedStaysWithinTheDocumentedBound) {
  // Counted uses are sandwiched: exact over I <= approx <= exact over I + w - 1.
  // So an approximate "allowed" is exactly allowed, and whatever the exact
  // limiter over I + w - 1 allows, the approximation allows too.
  std::mt19937_64 rng(99);
  int64_t disagreements = 0;
  for (int seq = 0; seq < 1000; ++seq) {
    const uint32_t interval = std::uniform_int_distribution<uint32_t>(1, 5000)(rng);
    const int64_t max = std::uniform_int_distribution<int64_t>(SlidingWindow::kExactMax + 1, 80)(rng);
    const int64_t w = SlidingWindow::BucketWidth(interval);
    ASSERT_LE((w - 1) * 25, int64_t{interval});
    RuleHarness h(Algo::kSliding, interval, max);
    RefSliding exact(interval), loose(interval + w - 1);
    int64_t ms = kDay0 * 1000;
    for (int e = 0; e < 150; ++e) {
      ms = testing::NextRandomMs(rng, ms, 5, 2 * interval, interval / 20 + 1);
      const int64_t t = ms / 1000;
      const int64_t n = std::uniform_int_distribution<int64_t>(1, 6)(rng);
      RuleResult got = h.Query(ms, n);
      const int64_t lo = exact.Count(t), hi = loose.Count(t);
      ASSERT_LE(lo, got.count) << "seq " << seq << " event " << e;
      ASSERT_LE(got.count, hi) << "seq " << seq << " event " << e;
      if (got.allowed) {
        ASSERT_LE(lo + n, max);
      }
      if (hi + n <= max) {
        ASSERT_TRUE(got.allowed);
      }
      disagreements += got.allowed != (lo + n <= max);
      h.Update(ms, n);
      exact.Add(t, n);
      loose.Add(t, n);
    }
  }
  RecordProperty("disagreements_with_exact", static_cast<int>(disagreements));
}

}  // namespace
}  // namespace frs::limit
