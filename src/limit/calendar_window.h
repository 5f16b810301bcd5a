// limit/calendar_window.h: windows aligned to the wall clock of a time zone.
//
// Window boundaries are the UTC instants at which local wall time is a
// multiple of `interval` (60: minutes, 3600: hours, 86400: days at local
// 00:00); multiples of a week count from Monday 1970-01-05 local, so weeks
// start on Monday. A local time that happens twice (fall back) is a boundary
// at its first occurrence, one that never happens (spring forward) at the
// end of the gap: a day is 23 or 25 hours long across a DST change, and the
// repeated hour is one two-hour window. The debt of a window is owed to the
// window that immediately follows it. Block: 16 bytes (tag, start_s, count,
// debt).
//
// Thread safety: plain functions over caller-owned bytes; the store's chain
// lock serializes access to one node (limit/rule_block.h). The UTC zone ZoneOf
// falls back to is made once and never changes.
#pragma once

#include "limit/rule_block.h"
#include "limit/window_counter.h"

namespace frs::limit {

struct CalendarWindow {
  static constexpr uint32_t kBytes = 16;

  // The window [*start, *end) that contains `t`. `epoch` (zone="epoch"):
  // weeks too count from the Unix epoch (a Thursday), as Envoy's rate
  // limit service counts them.
  static void WindowOf(const TimeZone& tz, uint32_t interval, int64_t t, int64_t* start, int64_t* end,
                       bool epoch = false);
  // The zone `spec`'s windows are aligned in: the rule's own (zone="NAME"),
  // UTC for zone="UTC" (or when `now` names none), else the engine's.
  static const TimeZone& ZoneOf(const RuleSpec& spec, const Now& now);

  static Frame FrameAt(const RuleSpec& spec, const CounterBlock& b, const Now& now);
  static void Evaluate(const RuleSpec& spec, const uint8_t* block, const Now& now, int64_t n, RuleResult* out);
  static void Record(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t n);
  static void SetCount(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t count);
  static int64_t ExpireS(const RuleSpec& spec, const uint8_t* block, const Now& now);
  static void Explain(const RuleSpec& spec, const uint8_t* block, const Now& now, RuleView* out);
  static void Merge(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now);
  // Whether the block's stored window is later than the window of `now`
  // (written by a clock ahead of it).
  static bool Ahead(const RuleSpec& spec, const uint8_t* block, const Now& now);
};

}  // namespace frs::limit
