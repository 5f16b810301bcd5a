// Handoff's merge of one rule's blocks (MergeBlock): two shards counted one
// key (the old owner before a re-sharding, the new one meanwhile); the merged
// block must allow exactly what one server that saw every use would allow,
// or less, never more.
#include <gtest/gtest.h>

#include "limit/rule_harness.h"
#include "limit/window_counter.h"

namespace frs::limit::testing {
namespace {

constexpr int64_t kMs = kDay0 * 1000;

// `a` absorbs `b` (same rule) at `ms`.
void Merge(RuleHarness& a, const RuleHarness& b, int64_t ms) {
  std::vector<uint8_t> in = const_cast<RuleHarness&>(b).block();
  MergeBlock(a.spec(), a.block().data(), in.data(), a.At(ms));
}

int64_t Allowed(RuleHarness& h, int64_t ms, int tries = 50) {
  int64_t n = 0;
  for (int i = 0; i < tries; ++i) n += h.Acquire(ms).allowed;
  return n;
}

TEST(Merge, FixedWindowsBothCurrentKeepBothCounts) {
  RuleHarness old_owner(Algo::kFixed, 60, 10), new_owner(Algo::kFixed, 60, 10);
  for (int i = 0; i < 4; ++i) old_owner.Acquire(kMs);
  for (int i = 0; i < 3; ++i) new_owner.Acquire(kMs + 20000);
  Merge(new_owner, old_owner, kMs + 30000);
  EXPECT_EQ(Allowed(new_owner, kMs + 30000), 3);  // 10 - 4 - 3
  // The later window (opened at +20 s) holds them: still denied at +70 s, open again at +80 s.
  EXPECT_FALSE(new_owner.Query(kMs + 70000).allowed);
  EXPECT_TRUE(new_owner.Query(kMs + 80000).allowed);
}

TEST(Merge, FixedWindowOverContributesOnlyItsBorrowDebt) {
  RuleHarness old_owner(Algo::kFixed, 60, 10, /*borrow=*/5), new_owner(Algo::kFixed, 60, 10, 5);
  for (int i = 0; i < 14; ++i) old_owner.Acquire(kMs);  // borrowed 4
  for (int i = 0; i < 2; ++i) new_owner.Acquire(kMs + 65000);
  Merge(new_owner, old_owner, kMs + 66000);
  // The current window repays the 4 borrowed: 10 - 4 - 2 = 4 left.
  EXPECT_EQ(Allowed(new_owner, kMs + 66000), 4);
  // Nothing to merge on either side changes nothing.
  RuleHarness empty(Algo::kFixed, 60, 10, 5);
  std::vector<uint8_t> before = new_owner.block();
  Merge(new_owner, empty, kMs + 66000);
  EXPECT_EQ(new_owner.block(), before);
}

// Found in review: each side's debt is at most `borrow`, and their sum was
// written whole: past 2^31 - 1 for a borrow past 2^30, a block export,
// import and a merge then refused. It stops at 2^31 - 1, what a debt may
// be, and not at this rule's max (a reload that raised max granted the rest
// again): a max below 2^31 - 1 tells the two apart.
TEST(Merge, TwoDebtsSumToAtMostWhatADebtMayBe) {
  constexpr int64_t kMax = 1500000000, kBorrow = 1200000000;
  RuleHarness a(Algo::kFixed, 60, kMax, kBorrow), b(Algo::kFixed, 60, kMax, kBorrow);
  for (RuleHarness* h : {&a, &b}) {
    ASSERT_TRUE(h->Acquire(kMs, kMax).allowed);
    ASSERT_TRUE(h->Acquire(kMs, kBorrow).allowed);  // all of it borrowed from the next window
    ASSERT_TRUE(h->Acquire(kMs + 61000).allowed);   // which opens owing it
  }
  Merge(a, b, kMs + 62000);
  EXPECT_EQ(BlockProblem(Algo::kFixed, a.block(), kDay0 + 62), "");
  EXPECT_FALSE(a.Query(kMs + 62000).allowed);  // the window owes more than its max
  EXPECT_EQ(limit::CounterBlock::Load(a.block().data()).debt, static_cast<uint32_t>(kMaxUses));
  EXPECT_TRUE(a.Query(kMs + 122000).allowed);
}

TEST(Merge, CalendarWindowsAddUp) {
  RuleHarness a(Algo::kCalendar, 86400, 3), b(Algo::kCalendar, 86400, 3);
  a.Acquire(kMs + 1000);
  b.Acquire(kMs + 3600000);
  Merge(a, b, kMs + 7200000);
  EXPECT_EQ(Allowed(a, kMs + 7200000), 1);
}

TEST(Merge, SlidingExactKeepsTheNewestUses) {
  RuleHarness a(Algo::kSliding, 3600, 3), b(Algo::kSliding, 3600, 3);
  a.Acquire(kMs);
  a.Acquire(kMs + 1000000);
  b.Acquire(kMs + 2000000);
  b.Acquire(kMs + 2500000);
  Merge(a, b, kMs + 2600000);
  EXPECT_FALSE(a.Query(kMs + 2600000).allowed);  // 4 uses in the hour: full
  // The newest 3 are kept (1000 s, 2000 s, 2500 s): the next use fits once the oldest leaves.
  EXPECT_FALSE(a.Query(kMs + 4599000).allowed);
  EXPECT_TRUE(a.Query(kMs + 4600000).allowed);
}

TEST(Merge, SlidingBucketedAddsBuckets) {
  RuleHarness a(Algo::kSliding, 3600, 100), b(Algo::kSliding, 3600, 100);
  for (int i = 0; i < 60; ++i) a.Acquire(kMs);
  for (int i = 0; i < 30; ++i) b.Acquire(kMs + 600000);
  Merge(a, b, kMs + 700000);
  EXPECT_EQ(Allowed(a, kMs + 700000, 20), 10);
}

TEST(Merge, TokenBucketsAddWhatEachHasInUse) {
  RuleHarness a(Algo::kTokenBucket, 60, 6, 0, /*burst=*/10), b(Algo::kTokenBucket, 60, 6, 0, 10);
  for (int i = 0; i < 4; ++i) a.Acquire(kMs);
  for (int i = 0; i < 3; ++i) b.Acquire(kMs);
  Merge(a, b, kMs);
  EXPECT_EQ(Allowed(a, kMs), 3);  // 10 - 4 - 3
}

}  // namespace
}  // namespace frs::limit::testing
