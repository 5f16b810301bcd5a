// limit/token_bucket.h: capacity `burst`, refilled at max/interval per second.
//
// Kept as GCRA (the "theoretical arrival time" form of a token bucket): the
// block holds TAT, the instant at which the bucket would be full again, in
// exact units of 1/max ms (whole ms plus a fraction numerator), so
// fractional refill is kept without rounding drift and a clock stepping back
// only makes the bucket look emptier. With U = interval * 1000 ms (the time
// `max` tokens take to refill) and D = max(0, TAT - now) in 1/max ms, the
// tokens in use are D / U:
//   n more fit  <=>  D + n*U <= burst*U;   recording n: TAT = max(TAT, now) + n*U/max.
// Block: 16 bytes (tag, TAT ms: 48 bits, max check: 16 bits, fraction: 32 bits).
// A reload that changes max keeps the stricter of two readings of the state:
// the instant the bucket is full again (a raised max: more tokens in use) and
// the tokens in use (a lowered max), the sub-millisecond fraction rounded up.
//
// Thread safety: plain functions over caller-owned bytes; the store's chain
// lock serializes access to one node (limit/rule_block.h).
#pragma once

#include "limit/rule_block.h"

namespace frs::limit {

struct TokenBucket {
  static constexpr uint32_t kBytes = 16;
  // Unconditional updates can push TAT at most this far past now (~34 years).
  static constexpr int64_t kMaxAheadMs = int64_t{1} << 40;

  static void Evaluate(const RuleSpec& spec, const uint8_t* block, const Now& now, int64_t n, RuleResult* out);
  static void Record(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t n);
  static void SetCount(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t count);
  static int64_t ExpireS(const RuleSpec& spec, const uint8_t* block);
  static void Explain(const RuleSpec& spec, const uint8_t* block, const Now& now, RuleView* out);
  // Handoff: the tokens both buckets have in use are in use in the merged
  // one (TAT = now + both leads over now), so neither shard's uses are lost.
  static void Merge(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now);
  // A reload changed the interval or max: the tokens in use under the old
  // rule (its interval, `old_max`) stay in use, refilling at the new rate;
  // a raised max also keeps the instant the bucket is full again.
  static void Convert(const RuleSpec& spec, const uint8_t* old_block, uint8_t* block, const Now& now, int64_t old_max);
  // A settled reservation, `estimate` tokens taken at `taken_ms`, gives back
  // k of them: only those the refill has not already replaced since (at
  // most estimate less what the rate refilled in the time since taken_ms),
  // the bucket at most full. Tokens a reservation held that refilled while
  // it was held were used as fresh ones by others; giving them back too let
  // a bucket of burst 10 grant 20 at one instant. The refill is counted from
  // taken_ms, the earliest the reservation's tokens could start refilling
  // (a reservation keeps its second whole): fewer go back than exactly, by
  // up to one second's refill and by what earlier uses still had to refill
  // when it was taken; never more.
  static int64_t GiveBack(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t k, int64_t taken_ms,
                          int64_t estimate);
  // The low 16 bits of the max the block was written under (0: not known),
  // and whether that is spec's.
  static int64_t WrittenMaxBits(const uint8_t* block) { return Load32(block + 8) >> 16; }
  static bool WrittenFor(const RuleSpec& spec, const uint8_t* block) {
    return WrittenMaxBits(block) == (spec.max & 0xffff);
  }
};

}  // namespace frs::limit
