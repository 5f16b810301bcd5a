#include "limit/fixed_window.h"

#include <gtest/gtest.h>

#include <random>

#include "limit/rule_harness.h"

namespace frs::limit {
namespace {

using testing::kDay0;
using testing::RuleHarness;

constexpr int64_t kT0 = kDay0 * 1000 + 250;  // a quarter second into kDay0

TEST(FixedWindow, OpensAtFirstUseAndEndsAfterInterval) {
  RuleHarness h(Algo::kFixed, 60, 2);
  EXPECT_TRUE(h.Acquire(kT0).allowed);
  EXPECT_TRUE(h.Acquire(kT0 + 1000).allowed);
  RuleResult denied = h.Acquire(kT0 + 2000);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.count, 2);
  EXPECT_EQ(denied.reset, kDay0 + 60);
  EXPECT_EQ(denied.retry_after, 58);
  // Just before the end (second 59), at it (60), just after (61).
  RuleResult before = h.Acquire(kDay0 * 1000 + 59999);
  EXPECT_FALSE(before.allowed);
  EXPECT_EQ(before.retry_after, 1);
  RuleResult at = h.Acquire(kDay0 * 1000 + 60000);
  EXPECT_TRUE(at.allowed);
  EXPECT_EQ(at.count, 0);  // the verdict is from before recording
  EXPECT_EQ(h.Query(kDay0 * 1000 + 60000).count, 1);
  EXPECT_EQ(h.Query(kDay0 * 1000 + 61000).reset, kDay0 + 120);
}

TEST(FixedWindow, NewWindowOpensAtTheNextUseNotAtTheOldEnd) {
  RuleHarness h(Algo::kFixed, 60, 1);
  EXPECT_TRUE(h.Acquire(kT0).allowed);
  EXPECT_TRUE(h.Acquire(kT0 + 90'000).allowed);  // opens [kDay0+90, kDay0+150)
  EXPECT_FALSE(h.Acquire(kT0 + 149'000).allowed);
  EXPECT_TRUE(h.Acquire(kT0 + 150'000).allowed);
}

TEST(FixedWindow, BorrowRunsOverAndTheNextWindowRepays) {
  RuleHarness h(Algo::kFixed, 60, 5, /*borrow=*/3);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(h.Acquire(kT0 + i).allowed) << i;
  RuleResult r = h.Acquire(kT0 + 10);
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.debt, 3);
  EXPECT_EQ(r.limit, 5);
  // The repaying window allows max - debt = 2 and borrows nothing.
  int64_t w2 = kT0 + 60'000;
  EXPECT_TRUE(h.Acquire(w2).allowed);
  RuleResult in_w2 = h.Query(w2);
  EXPECT_EQ(in_w2.limit, 2);
  EXPECT_EQ(in_w2.remaining, 1);
  EXPECT_TRUE(h.Acquire(w2 + 1).allowed);
  EXPECT_FALSE(h.Acquire(w2 + 2).allowed);
  // The window after it owes nothing: max + borrow again.
  int64_t w3 = w2 + 60'000;
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(h.Acquire(w3 + i).allowed) << i;
  EXPECT_FALSE(h.Acquire(w3 + 9).allowed);
}

TEST(FixedWindow, DebtIsForgivenAfterAnIdleInterval) {
  RuleHarness h(Algo::kFixed, 60, 5, 3);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(h.Acquire(kT0).allowed);
  EXPECT_EQ(h.Expire(kT0), kDay0 + 120);  // the debt matters until then
  RuleResult r = h.Query(kDay0 * 1000 + 119'999, 3);
  EXPECT_FALSE(r.allowed);  // a window opened now would owe 3: allows 2
  EXPECT_EQ(r.retry_after, 1);
  EXPECT_TRUE(h.Query(kDay0 * 1000 + 120'000, 8).allowed);
}

TEST(FixedWindow, DeniedRetryAfterCountsTheDebtOfTheNextWindow) {
  RuleHarness h(Algo::kFixed, 60, 5, 3);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(h.Acquire(kT0).allowed);
  // 3 more fit only in the window after the repaying one.
  EXPECT_EQ(h.Query(kT0, 3).retry_after, 120);
  EXPECT_EQ(h.Query(kT0, 2).retry_after, 60);
}

TEST(FixedWindow, ClockSteppingBackGrantsNothing) {
  RuleHarness h(Algo::kFixed, 60, 2);
  EXPECT_TRUE(h.Acquire(kT0).allowed);
  EXPECT_TRUE(h.Acquire(kT0).allowed);
  EXPECT_FALSE(h.Acquire(kT0 - 3'600'000).allowed);
  EXPECT_FALSE(h.Acquire(kT0 - 86'400'000).allowed);
  EXPECT_TRUE(h.Acquire(kT0 + 60'000).allowed);
}

TEST(FixedWindow, SetCountAndExpiry) {
  RuleHarness h(Algo::kFixed, 60, 5);
  EXPECT_EQ(h.Expire(kT0), 0);
  h.Set(kT0, 5);
  EXPECT_FALSE(h.Query(kT0).allowed);
  EXPECT_EQ(h.Expire(kT0), kDay0 + 60);
  h.Set(kT0, 0);
  EXPECT_TRUE(h.Query(kT0, 5).allowed);
}

TEST(FixedWindow, UpdateCountsPastTheLimitAndSaysSo) {
  RuleHarness h(Algo::kFixed, 60, 2);
  EXPECT_TRUE(h.Update(kT0, 2).allowed);
  EXPECT_FALSE(h.Update(kT0, 1).allowed);
  EXPECT_EQ(h.Query(kT0).count, 3);
  EXPECT_EQ(h.Query(kT0).remaining, 0);
}

// The reference: the whole history of windows, each window's debt derived
// from its predecessor by the contract's words.
class RefFixed {
 public:
  RefFixed(int64_t interval, int64_t max, int64_t borrow) : i_(interval), max_(max), k_(borrow) {}

  bool Use(int64_t t, int64_t n, bool unconditional, int64_t* count_before) {
    bool fresh = ws_.empty() || t >= ws_.back().start + i_;
    if (fresh) ws_.push_back({t, 0});
    int64_t allowance = Allowance(ws_.size() - 1);
    *count_before = ws_.back().count;
    bool allowed = ws_.back().count + n <= allowance;
    if (allowed || unconditional) ws_.back().count += n;
    else if (fresh) ws_.pop_back();  // a denied use opens no window
    return allowed;
  }

 private:
  struct W {
    int64_t start, count;
  };
  int64_t DebtIn(size_t k) const {
    if (k == 0 || ws_[k].start >= ws_[k - 1].start + 2 * i_) return 0;
    int64_t d = DebtIn(k - 1);
    int64_t base = d > 0 ? max_ - std::min(d, max_) : max_;
    return std::clamp<int64_t>(ws_[k - 1].count - base, 0, k_);
  }
  int64_t Allowance(size_t k) const {
    int64_t d = DebtIn(k);
    return d > 0 ? max_ - std::min(d, max_) : max_ + k_;
  }
  int64_t i_, max_, k_;
  std::vector<W> ws_;
};

TEST(FixedWindow, RandomSequencesMatchTheReference) {
  std::mt19937_64 rng(12345);
  for (int seq = 0; seq < 1500; ++seq) {
    const uint32_t interval = std::uniform_int_distribution<uint32_t>(1, 120)(rng);
    const int64_t max = std::uniform_int_distribution<int64_t>(1, 8)(rng);
    const int64_t borrow = rng() % 2 ? std::uniform_int_distribution<int64_t>(0, 6)(rng) : 0;
    RuleHarness h(Algo::kFixed, interval, max, borrow);
    RefFixed ref(interval, max, borrow);
    int64_t ms = kT0;
    for (int e = 0; e < 120; ++e) {
      ms = testing::NextRandomMs(rng, ms, 4, 3 * interval, 2);
      const std::string where = "seq " + std::to_string(seq) + " event " + std::to_string(e) +
                                " I=" + std::to_string(interval) + " max=" + std::to_string(max) +
                                " K=" + std::to_string(borrow);
      ASSERT_NO_FATAL_FAILURE(testing::ExpectUseAsTheReference(h, ref, rng, ms, where));
    }
  }
}

}  // namespace
}  // namespace frs::limit
