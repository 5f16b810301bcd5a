// tests/limit/rule_harness.h: one rule's block driven directly, without a store.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "limit/rule_state.h"
#include "limit/time_zone.h"

namespace frs::limit::testing {

class RuleHarness {
 public:
  RuleHarness(Algo algo, uint32_t interval, int64_t max, int64_t borrow = 0, int64_t burst = 0,
              std::shared_ptr<const TimeZone> tz = TimeZone::Utc())
      : tz_(std::move(tz)) {
    spec_.algo = algo;
    spec_.interval = interval;
    spec_.max = max;
    spec_.borrow = borrow;
    spec_.burst = burst > 0 ? burst : max;
    spec_.bytes = BlockBytes(algo, max, interval);
    spec_.tag = BlockTag(algo, max, interval);
    block_.assign(spec_.bytes, 0);
  }

  Now At(int64_t ms) const { return Now::At(ms, tz_.get()); }
  // acquire: records n only when allowed.
  RuleResult Acquire(int64_t ms, int64_t n = 1) {
    RuleResult r = Query(ms, n);
    if (r.allowed) Record(spec_, block_.data(), At(ms), n);
    return r;
  }
  // update: records n regardless; returns the verdict from before.
  RuleResult Update(int64_t ms, int64_t n = 1) {
    RuleResult r = Query(ms, n);
    Record(spec_, block_.data(), At(ms), n);
    return r;
  }
  RuleResult Query(int64_t ms, int64_t n = 1) const {
    RuleResult r;
    Evaluate(spec_, block_.data(), At(ms), n, &r);
    return r;
  }
  void Set(int64_t ms, int64_t count) { SetCount(spec_, block_.data(), At(ms), count); }
  int64_t Expire(int64_t ms) const { return ExpireS(spec_, block_.data(), At(ms)); }
  RuleView View(int64_t ms) const {
    RuleView v;
    Explain(spec_, block_.data(), At(ms), &v);
    return v;
  }
  // A reload changing max / borrow / burst: same block, new spec (the block
  // converted when its length changes).
  void Respec(int64_t max, int64_t borrow, int64_t burst, int64_t ms) {
    RuleSpec next = spec_;
    next.max = max;
    next.borrow = borrow;
    next.burst = burst > 0 ? burst : max;
    next.bytes = BlockBytes(next.algo, max, next.interval);
    next.tag = BlockTag(next.algo, max, next.interval);
    std::vector<uint8_t> converted(next.bytes, 0);
    if (Load32(block_.data()) != 0) ConvertBlock(next, block_, converted.data(), At(ms));
    spec_ = next;
    block_ = std::move(converted);
  }

  const RuleSpec& spec() const { return spec_; }
  RuleSpec& spec() { return spec_; }
  std::vector<uint8_t>& block() { return block_; }

 private:
  RuleSpec spec_;
  std::vector<uint8_t> block_;
  std::shared_ptr<const TimeZone> tz_;
};

// A fixed point in time that is a whole UTC day: 2026-11-22 00:00:00 UTC.
inline constexpr int64_t kDay0 = 1795305600;

// The next time of a random sequence after `ms`: in one step of `one_in` a
// gap of up to `long_s` seconds, else one of up to `short_s`, plus under a
// second.
template <class Rng>
int64_t NextRandomMs(Rng& rng, int64_t ms, int one_in, int64_t long_s, int64_t short_s) {
  const int64_t gap_s = rng() % one_in == 0 ? std::uniform_int_distribution<int64_t>(0, long_s)(rng)
                                            : std::uniform_int_distribution<int64_t>(0, short_s)(rng);
  return ms + gap_s * 1000 + std::uniform_int_distribution<int64_t>(0, 999)(rng);
}

// One random use at `ms` (1 to 3 at once, an update one time in five) of
// `h` and of a reference model of its algorithm, whose
// Use(t, n, update, &count) says what `h` must answer: they must agree.
template <class Ref, class Rng>
void ExpectUseAsTheReference(RuleHarness& h, Ref& ref, Rng& rng, int64_t ms, const std::string& where) {
  const int64_t n = std::uniform_int_distribution<int64_t>(1, 3)(rng);
  const bool update = rng() % 5 == 0;
  int64_t ref_count;
  const bool want = ref.Use(ms / 1000, n, update, &ref_count);
  const RuleResult got = update ? h.Update(ms, n) : h.Acquire(ms, n);
  ASSERT_EQ(got.allowed, want) << where;
  ASSERT_EQ(got.count, ref_count) << where;
}

}  // namespace frs::limit::testing
