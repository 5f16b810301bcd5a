// store/packed_state.h: a one-rule 16-byte state and its node's expiry in 64 bits.
//
// The compact node (issue 13) has a 24-byte header, which keeps the node's
// `expire_s`, and 8 bytes of state. A biz with one rule of algo fixed,
// calendar or token_bucket has a 16-byte state (one block of the format
// documented in limit/rule_state.h). This codec stores such a block in one
// 64-bit word, leaving out what `expire_s` already says. It reads the block
// as bytes only; it neither includes nor links the rule engine.
//
// ## The block (input; little-endian u32 fields at byte offsets 0, 4, 8, 12)
//
//   tag:   bits 0..24 interval I (s), 25..26 algo (0 fixed, 1 calendar,
//          2 sliding, 3 token_bucket), 27..31 length in 16-byte units (must
//          be 1 here). A zero tag (with zero fields) is a rule never used.
//   fixed, calendar:  start_s, count, debt
//   token_bucket:     TAT ms bits 0..31; TAT ms bits 32..47 | check << 16;
//                     frac (TAT's sub-millisecond numerator over max;
//                     check = max & 0xffff)
//
// ## What expire_s implies (the engine writes expire_s = min(ExpireS, 2^32-1))
//
//   fixed:      ExpireS = start_s + I, or start_s + 2I when the window ends
//               in debt (borrow), 0 when start_s == 0. So start_s = expire_s
//               - L where L = k*I, k in {0, 1, 2}: start_s is not stored
//               (only near the clock's end, where expire_s is clamped, is L
//               less than I).
//   calendar:   ExpireS = the end of the calendar window holding start_s (or
//               of the next one, when in debt). L = expire_s - start_s is
//               the window length: I itself except across a UTC-offset
//               change (DST: I +- 3600 in Europe/Berlin, America/New_York),
//               in the spring-forward gap (a boundary that falls inside the
//               gap happens at the gap's end, so the window starting or
//               ending there is I - x long, 0 < x <= gap; x is a whole number
//               of quarter hours when I is), and at the clock's end (expire_s
//               clamped to 2^32-1). Only L - k*I, which is small, is stored.
//               start_s == 0 (a window opened at or before the epoch) has
//               expire_s 0: L = 0, k = 0.
//   token_bucket: ExpireS = ceil((TAT_ms + (frac > 0)) / 1000), so
//               delta = expire_s*1000 - TAT_ms is in 0..1000: TAT's 48 bits
//               become 10.
//   The debt is not stored: a packed window owes nothing (debt == 0).
//
// ## The word (bit 0 = least significant)
//
//   bits 0..1 code
//
//   code 0 (kWindow), fixed or calendar, L a multiple of I; and the empty state
//     bit   2      algo: 0 fixed, 1 calendar
//     bits  3..27  I (25 bits); I == 0: the all-zero block (word 0)
//     bits 28..29  k: start_s = expire_s - k*I
//     bits 30..31  0 (reserved; ignored when unpacking)
//     bits 32..63  count
//
//   code 1 (kShortWindow), fixed or calendar, I < 2^13, any L in I-2^15..I+2^15-1
//     bit   2      algo: 0 fixed, 1 calendar
//     bits  3..15  I (13 bits)
//     bits 16..31  s = L - I (16-bit two's complement): start_s = expire_s - (I + s)
//     bits 32..63  count
//
//   code 2 (kShiftedCalendar), calendar, L = I + s, s not 0
//     bit   2      form
//     bits  3..27  I (25 bits)
//     form 0:  bits 28..31  f: s = 900*m, m = f - 8 for f 0..7 (m -8..-1),
//              m = f - 7 for f 8..15 (m 1..8): s is a nonzero whole number
//              of quarter hours, -7200..+7200 (UTC-offset changes since
//              1970 are: 1 h in most zones, 30 min on Lord Howe, 2 h at
//              Troll; an hour window in a repeated hour is 2 h long)
//              bits 32..63  count
//     form 1:  bits 28..41  s (14-bit two's complement, -8192..8191): any
//              shift to the second, e.g. a long odd interval whose boundary
//              falls inside a DST gap
//              bits 42..63  count (22 bits: < 4194304)
//
//   code 3 (kTokenBucket), I < 2^20
//     bits  2..21  I (20 bits)
//     bits 22..37  check (the low 16 bits of max, never 0: max < 65536 packs,
//                  a multiple of 65536 never does)
//     bits 38..53  frac (16 bits; frac < max)
//     bits 54..63  delta (10 bits): TAT_ms = expire_s*1000 - delta
//
// PackState picks the first code that fits, in the order 0, 1, 2 (form 0,
// then 1), 3, and says true only after UnpackState gave back the very
// bytes: a state is either stored exactly or refused (the caller keeps it in
// a general node). UnpackState is total: any word and any expire_s give a
// block with a valid tag (length 1, algo fixed, calendar or token_bucket)
// or the all-zero block; all arithmetic is modulo 2^32 (2^48 for TAT).
//
// What does not pack: a debt (borrow in use), a token bucket with I >= 2^20,
// or a check of 0 (max a multiple of 65536), or frac >= 65536 (possible
// only for max > 65536: such a bucket packs only while its fraction
// happens to fit, so callers should not count on it), a sliding
// window, a block longer than 16 bytes (several rules, which never reach
// the codec as one block), and windows whose length the word cannot say:
// a fixed window of I >= 2^13 s whose end was clamped to 2^32-1 (its last
// interval before 2106-02-07), a calendar window of I >= 2^13 s whose
// length is I + s with s neither a multiple of 900 in -7200..7200 nor
// (count < 2^22 and s in -8192..8191): a window of an odd interval (not a
// multiple of 900) with a boundary inside a DST gap, counting 2^22 or more.
// That cannot be helped in 64 bits: such a word would need I (25 bits),
// count (32) and the cut (12, up to an hour to the second).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

namespace frs::store {

enum class PackedCode : uint8_t { kWindow = 0, kShortWindow = 1, kShiftedCalendar = 2, kTokenBucket = 3 };

namespace packed {
// Field widths and positions of the word (see above).
inline constexpr int kCodeBits = 2;
inline constexpr int kIntervalBits = 25;        // the tag's interval field
inline constexpr int kShortIntervalBits = 13;   // code 1
inline constexpr int kBucketIntervalBits = 20;  // code 3
inline constexpr int kCountShift = 32;          // codes 0, 1, 2 form 0
inline constexpr int kSmallCountShift = 42;     // code 2 form 1
inline constexpr int kSmallCountBits = 64 - kSmallCountShift;
inline constexpr int kShiftUnit = 900;    // code 2 form 0: s = 900 * m
inline constexpr int kMaxShiftUnits = 8;  // m in -8..-1, 1..8
inline constexpr int kBucketDeltaBits = 10;
inline constexpr uint32_t kMaxBucketDeltaMs = 1000;  // what ExpireS's rounding leaves

// Every layout fills at most 64 bits.
static_assert(kCodeBits + 1 + kIntervalBits + 2 + 2 <= kCountShift);    // code 0
static_assert(kCodeBits + 1 + kShortIntervalBits + 16 == kCountShift);  // code 1
static_assert(kCodeBits + 1 + kIntervalBits + 4 == kCountShift);        // code 2 form 0
static_assert(kCodeBits + 1 + kIntervalBits + 14 == kSmallCountShift);  // code 2 form 1
static_assert(kCountShift + 32 == 64);
static_assert(kCodeBits + kBucketIntervalBits + 16 + 16 + kBucketDeltaBits == 64);  // code 3
static_assert(kMaxBucketDeltaMs < (1u << kBucketDeltaBits));
// The tag's interval field fits code 0's and code 2's; the largest interval
// map.xml accepts (a year, 31536000 s) is below 2^25.
static_assert(31536000 < (1u << kIntervalBits));
// Whole quarter hours of offset change up to two hours either way fit form
// 0's 4 bits (m is never 0: that length is code 0's k = 1).
static_assert(2 * kMaxShiftUnits == 16 && kMaxShiftUnits * kShiftUnit == 7200);
}  // namespace packed

// Packs a 16-byte one-rule state (limit/rule_state.h block) and the node's
// expiry into 64 bits. False when this state cannot be packed losslessly;
// the caller then keeps it in a general node. True only after checking that
// UnpackState gives back exactly `state`.
[[nodiscard]] bool PackState(std::span<const uint8_t, 16> state, uint32_t expire_s, uint64_t* word);
// The inverse: writes the 16 bytes that PackState was given.
void UnpackState(uint64_t word, uint32_t expire_s, std::span<uint8_t, 16> state);

}  // namespace frs::store
