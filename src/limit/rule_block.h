// limit/rule_block.h: how a biz's rules keep their state in a store node.
//
// A node's state is a sequence of blocks, one per rule, in the order of the
// rules in map.xml. Every block starts with a 4-byte little-endian tag:
//
//   bits  0..24  interval in seconds (1..31536000 < 2^25)
//   bits 25..26  algo
//   bits 27..30  block length in 16-byte units (1..15; a concurrency
//                block's in 32-byte units, below)
//   bit  31      a narrow sliding block, or with the token bucket's algo
//                bits a concurrency block (below, kNarrowTag)
//
// A zero tag means "never used" (a new node is all zeros, and a valid tag is
// never zero since interval >= 1). The tag lets a reload match old blocks to
// new rules by (algo, interval) even when rules were reordered, added or
// removed, and lets an export carry states to another store.
//
// Algorithms see `Now`: the clock in milliseconds and seconds, and the zone
// for calendar windows. All state is little-endian (explicit byte order, so
// exports are portable).
//
// This is the algorithms' own vocabulary (each algorithm's file includes it,
// and nothing above them); limit/rule_state.h applies a rule of any
// algorithm to its block.
//
// Thread safety: plain functions over caller-owned bytes; the store's chain
// lock serializes access to one node.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>

#include "frs/decision.h"
#include "frs/store.h"
#include "limit/time_zone.h"

namespace frs::limit {

inline constexpr uint32_t kBlockUnit = 16;
inline constexpr uint32_t kMaxInterval = 31536000;  // a year
inline constexpr uint32_t kMaxBlockBytes = 112;     // kMaxRulesPerBiz blocks fit in kMaxStateBytes
                                                    // (a concurrency block may be larger: kMaxLeaseBlockBytes)
static_assert(kMaxRulesPerBiz * kMaxBlockBytes <= kMaxStateBytes);

// An (algo, interval) identity a rule of the same name had in an earlier
// map, with the max it had then (limit/rule_history.h): a node's block of
// that identity is this rule's state, converted.
struct RulePast {
  uint32_t identity = 0;
  int64_t max = 0;
};
inline constexpr size_t kRulePasts = 8;

// What a settle charges beyond its reservation's estimate (limit/reservation.h):
// all of it, even past the limit (charge, the default: the uses happened);
// as much as the limit leaves (limit); nothing (estimate).
enum class Overrun : uint8_t { kCharge, kLimit, kEstimate };

struct RuleSpec {
  Algo algo = Algo::kFixed;
  uint32_t interval = 0;
  int64_t max = 0;
  int64_t burst = 0;   // token_bucket capacity (map.xml default: max)
  int64_t borrow = 0;  // fixed, calendar
  // concurrency: `interval` is the lease in seconds (map.xml's lease=),
  // `max` the leases held at once.
  // zone="UTC" (calendar only): windows aligned in UTC whatever the engine's
  // <timezone> says, i.e. to the Unix epoch for every interval dividing a
  // day. Envoy's rate limit service aligns its windows so
  // (docs/integrations.md); an hour in Asia/Kolkata would start at :30.
  bool utc = false;
  // zone="epoch": UTC, and weeks aligned to the Unix epoch (a Thursday), not
  // to Monday: every window a multiple of `interval` since 1970-01-01, as
  // envoyproxy/ratelimit computes its week, month (30 days) and year (365).
  bool epoch = false;
  // zone="Asia/Kolkata" (calendar only, any IANA name): windows aligned in
  // that zone whatever <timezone> says, so that one map holds caps in
  // several zones; null: <timezone>'s (or UTC, above).
  std::shared_ptr<const TimeZone> zone;
  Overrun overrun = Overrun::kCharge;
  uint32_t offset = 0;  // of this rule's block in the node state
  uint32_t bytes = 0;   // block length
  uint32_t tag = 0;
  int line = 0;  // in map.xml, for messages
  // The policy's name in the RateLimit header fields: <rule name=...>, else
  // "BIZ_N" (N: the rule's position from 1). NUL-terminated.
  char name[kRuleNameBytes] = {};
  bool named = false;              // map.xml gave the name (else it follows the place)
  RulePast past[kRulePasts] = {};  // newest first; filled by the engine, not by map.xml
  uint32_t npast = 0;
};

struct Now {
  int64_t ms = 0;
  int64_t s = 0;  // floor(ms / 1000)
  const TimeZone* tz = nullptr;
  // The serials a lease or a reservation granted at this instant draws
  // (frs/decision.h): the request's, carried with its time to the blocks.
  SerialHalf serial_half = SerialHalf::kAll;
  static Now At(int64_t ms, const TimeZone* tz) { return Now{ms, ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000), tz}; }
};

// `serial`, or the first serial after it in `half`: `after` steps one on,
// wrapping to 1 after the sequence's last serial, which is odd (so that at
// most two steps reach either half).
template <typename After>
constexpr uint32_t SerialInHalf(uint32_t serial, SerialHalf half, After after) {
  while ((half == SerialHalf::kOdd && serial % 2 == 0) || (half == SerialHalf::kEven && serial % 2 != 0))
    serial = after(serial);
  return serial;
}

// A block whose time is ahead of the clock (a clock stepped back, or a
// state written by a clock ahead) is judged at its own time `t`, held
// there until the clock reaches it: a denied request's wait counts from
// t, the client's Retry-After from now (it said 61 s for a lease that
// freed in an hour: found from outside).
inline void WaitFromNow(RuleResult* r, int64_t t, int64_t now_s) {
  if (!r->allowed && r->retry_after > 0 && t > now_s) r->retry_after += t - now_s;
}

// Tag bits: 0..24 interval, 25..26 algo, 27..30 length in kBlockUnit
// units, 31 a sliding block whose exact uses are 16-bit offsets from a base
// second (SlidingWindow: the narrow form, interval below 65,536 s). The
// block says its own form, so a block of either form is read as what it is
// whatever the rule now asks for (a rule change, a store of format 4).
//
// A concurrency block (limit/concurrency.h) has no algo value of its own in
// two bits: it is bit 31 with the token bucket's algo bits (a token bucket
// is never narrow), its interval field the lease in seconds, and its length
// in units of kLeaseBlockUnit (32 bytes: up to 480, the most leases a node
// can hold). A build before concurrency rules reads such a block as a token
// bucket of the wrong length: it must not open a store whose map has them.
inline constexpr uint32_t kNarrowTag = 1u << 31;
inline constexpr uint32_t kLeaseBlockUnit = 32;
inline constexpr uint32_t kMaxLeaseBlockBytes = 15 * kLeaseBlockUnit;
inline bool TagIsConcurrency(uint32_t tag) { return (tag & kNarrowTag) != 0 && ((tag >> 25) & 3) == 3; }
inline uint32_t MakeTag(Algo algo, uint32_t interval, uint32_t bytes, bool narrow = false) {
  if (algo == Algo::kConcurrency) return interval | 3u << 25 | (bytes / kLeaseBlockUnit) << 27 | kNarrowTag;
  return interval | static_cast<uint32_t>(algo) << 25 | (bytes / kBlockUnit) << 27 | (narrow ? kNarrowTag : 0);
}
inline Algo TagAlgo(uint32_t tag) {
  return TagIsConcurrency(tag) ? Algo::kConcurrency : static_cast<Algo>((tag >> 25) & 3);
}
inline uint32_t TagInterval(uint32_t tag) { return tag & ((1u << 25) - 1); }
inline uint32_t TagBytes(uint32_t tag) {
  return ((tag >> 27) & 15) * (TagIsConcurrency(tag) ? kLeaseBlockUnit : kBlockUnit);
}
inline bool TagNarrow(uint32_t tag) { return (tag & kNarrowTag) != 0 && !TagIsConcurrency(tag); }

// The (algo, interval) identity of a rule state, without its length (a
// sliding block's form is not part of it; a concurrency block's mark is).
inline uint32_t TagIdentity(uint32_t tag) {
  return (tag & ((1u << 27) - 1)) | (TagIsConcurrency(tag) ? kNarrowTag : 0);
}

// Fixed and calendar windows keep the same block (limit/window_counter.h),
// so a reload may carry one's count into the other.
inline bool IsWindowAlgo(Algo algo) { return algo == Algo::kFixed || algo == Algo::kCalendar; }

// Little-endian loads and stores at byte offsets of a block.
inline uint32_t Load32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

inline void Store32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}

// Saturating helpers: counts live in 32 bits; unconditional updates stop at
// the top instead of wrapping.
inline uint32_t SatAdd32(uint32_t a, int64_t n) {
  uint64_t s = uint64_t{a} + static_cast<uint64_t>(n < 0 ? 0 : n);
  return s > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(s);
}
inline uint32_t Clamp32(int64_t v) {
  return v < 0 ? 0 : v > int64_t{UINT32_MAX} ? UINT32_MAX : static_cast<uint32_t>(v);
}
inline int64_t CeilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
inline int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Visits the tagged blocks of a node's state in order, `f(offset, tag,
// bytes)`, until f returns false or a tag's length does not fit. A rule
// the key never used is a block of zeros, its length a multiple of
// kBlockUnit that no tag says: it is stepped over a unit at a time. The
// walks stopped there, so a node whose first rule a reload added, written
// since only by a settle or a release, was exported without its other
// rules' counts and its reservations, and a later reload's migration
// started those rules from zero.
template <typename F>
void ForEachTaggedBlock(std::span<const uint8_t> state, F&& f) {
  for (size_t off = 0; off + kBlockUnit <= state.size();) {
    const uint32_t tag = Load32(state.data() + off);
    if (tag == 0) {
      off += kBlockUnit;
      continue;
    }
    const uint32_t bytes = TagBytes(tag);
    if (bytes == 0 || off + bytes > state.size()) return;
    if (!f(static_cast<uint32_t>(off), tag, bytes)) return;
    off += bytes;
  }
}

}  // namespace frs::limit
