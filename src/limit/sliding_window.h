// limit/sliding_window.h: at most `max` uses in any `interval` seconds
// ending now (second resolution: a use at second u counts while now < u + I).
//
// Exact for max <= kExactMax: the block keeps the timestamps (unix s,
// ascending) of the last `max` counted uses, enough to decide exactly (when
// fewer than `max` are in the window, every use in it is kept). Two forms,
// each rounded up to 16 bytes:
//   - narrow, for intervals below 65,536 s (a day is 86,400: an hour, ten
//     minutes, a login limit are narrow): tag, the oldest kept use, then
//     max 16-bit offsets from it (0xFFFF: none). 16 bytes for max 1..4, 32
//     for 5..12, 48 for 13..20, 64 for 21..22. Every use it keeps is in the
//     window of the newest, so the offsets are below the interval.
//   - wide, for longer intervals: tag, used, then max 32-bit timestamps: 16
//     bytes for max 1..2, 96 for max 22.
// The tag says which (rule_state.h kNarrowTag).
//
// Above it, a bucketed approximation: kBuckets ring counters of width
// w = ceil(I / (kBuckets - 1)) seconds, aligned to unix time. A use is
// counted until its whole bucket has left the span, so the limiter counts the
// uses of the last I + w - 1 seconds at most and of the last I at least:
//   - it never admits more than `max` uses in any I seconds (never too lax);
//   - whatever an exact limiter over I + w - 1 seconds would admit, it admits;
// i.e. a use is held at most w - 1 < I / 25 seconds longer than exact.
// Block: 112 bytes (tag, newest bucket index, 26 counters).
//
// Thread safety: plain functions over caller-owned bytes; the store's chain
// lock serializes access to one node (limit/rule_block.h).
#pragma once

#include <span>

#include "limit/rule_block.h"

namespace frs::limit {

struct SlidingWindow {
  static constexpr int64_t kExactMax = 22;
  static constexpr uint32_t kBuckets = 26;
  static constexpr uint32_t kApproxBytes = 8 + 4 * kBuckets;
  static_assert(kApproxBytes % kBlockUnit == 0 && kApproxBytes <= kMaxBlockBytes);

  static bool Exact(int64_t max) { return max <= kExactMax; }
  static bool Narrow(int64_t max, uint32_t interval) { return Exact(max) && interval < 65536; }
  static uint32_t Bytes(int64_t max, uint32_t interval);
  static bool BytesAreExact(uint32_t bytes) { return bytes < kApproxBytes; }
  static uint32_t BucketWidth(uint32_t interval) { return (interval + kBuckets - 2) / (kBuckets - 1); }

  static void Evaluate(const RuleSpec& spec, const uint8_t* block, const Now& now, int64_t n, RuleResult* out);
  static void Record(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t n);
  static void SetCount(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t count);
  static int64_t ExpireS(const RuleSpec& spec, const uint8_t* block);
  // The second of the newest use `block` (any sliding layout, its own tag
  // saying which) holds: the second its newest bucket begins, when
  // bucketed; 0 when it holds none.
  static int64_t NewestS(std::span<const uint8_t> block);
  static void Explain(const RuleSpec& spec, const uint8_t* block, const Now& now, RuleView* out);
  // Handoff: exact blocks keep the newest `max` of both shards' uses in the
  // window (the older ones could not change a verdict while those are in
  // it); bucketed blocks add their counters bucket by bucket.
  static void Merge(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now);
  // Rebuilds the block for a changed max (exact <-> bucketed when it crosses
  // kExactMax). Bucketed uses become exact ones at the end of their bucket,
  // which never grants extra uses.
  static void Convert(const RuleSpec& spec, std::span<const uint8_t> old_block, uint8_t* block, const Now& now);
  // A settled reservation gives back up to k of the uses recorded at
  // `at_s` (exact: those timestamps; bucketed: its bucket's counter while
  // the bucket is kept); returns how many.
  static int64_t GiveBack(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t at_s, int64_t k);
};

}  // namespace frs::limit
