#include "limit/calendar_window.h"

#include <algorithm>

namespace frs::limit {

const TimeZone& CalendarWindow::ZoneOf(const RuleSpec& spec, const Now& now) {
  static const std::shared_ptr<const TimeZone> utc = TimeZone::Utc();
  if (spec.zone) return *spec.zone;
  return spec.utc || now.tz == nullptr ? *utc : *now.tz;
}

void CalendarWindow::WindowOf(const TimeZone& tz, uint32_t interval, int64_t t, int64_t* start, int64_t* end,
                              bool epoch) {
  const int64_t i = interval;
  const int64_t origin = !epoch && i % (7 * 86400) == 0 ? 4 * 86400 : 0;  // Monday 1970-01-05
  const int64_t ls = FloorDiv(tz.ToLocal(t) - origin, i) * i + origin;
  *start = tz.LocalToUtc(ls);
  *end = tz.LocalToUtc(ls + i);
  if (*end > t) return;
  // t is in the second pass of a repeated local hour: every boundary up to
  // the end of the repetition happened in the first pass, so t belongs to
  // the window that ends at the first boundary after the repetition.
  int64_t at;
  int32_t offset_before;
  if (!tz.TransitionAtOrBefore(t, &at, &offset_before)) return;
  const int64_t le = FloorDiv(at + offset_before - origin + i - 1, i) * i + origin;
  *start = tz.LocalToUtc(le - i);
  *end = tz.LocalToUtc(le);
}

namespace {
// Whether a block's stored start, whose window in this rule's zone starts at
// `window_start`, was written under another zone: it is no boundary of
// ours. A start clamped at the clock's end (2106) is not one.
bool ForeignStart(uint32_t start_s, int64_t window_start) {
  return int64_t{start_s} != window_start && start_s != UINT32_MAX;
}
}  // namespace

Frame CalendarWindow::FrameAt(const RuleSpec& spec, const CounterBlock& b, const Now& now) {
  Frame f;
  f.open = true;
  WindowOf(ZoneOf(spec, now), spec.interval, now.s, &f.start, &f.end, spec.epoch);
  if (b.start_s != 0 && int64_t{b.start_s} >= f.start) {
    // The stored window is current, or the clock stepped back out of it: stay in it.
    if (int64_t{b.start_s} > f.start)
      WindowOf(ZoneOf(spec, now), spec.interval, b.start_s, &f.start, &f.end, spec.epoch);
    f.count = b.count;
    f.debt_in = b.debt;
    f.held = true;
  } else if (b.start_s != 0 && b.count > 0) {
    int64_t prev_start, prev_end;
    WindowOf(ZoneOf(spec, now), spec.interval, b.start_s, &prev_start, &prev_end, spec.epoch);
    if (ForeignStart(b.start_s, prev_start) && int64_t{b.start_s} + spec.interval > f.start) {
      // A start that is no boundary of ours was written under another zone
      // (<timezone> or the rule's zone changed): that window, taken as
      // `interval` long, may reach into this one, so this one carries its
      // uses (docs/rules.md, "Changing a rule").
      f.count = b.count;
      f.debt_in = b.debt;
      f.held = true;
    } else if (prev_end == f.start) {
      f.debt_in = DebtOut(spec, b.count, b.debt);
    }
  }
  f.next = f.end;
  f.next_debt = DebtOut(spec, f.count, f.debt_in);
  if (f.next_debt > 0) {
    int64_t s2;
    WindowOf(ZoneOf(spec, now), spec.interval, f.end, &s2, &f.after, spec.epoch);
  }
  return f;
}

void CalendarWindow::Evaluate(const RuleSpec& spec, const uint8_t* block, const Now& now, int64_t n, RuleResult* out) {
  CounterBlock b = CounterBlock::Load(block);
  Frame f = FrameAt(spec, b, now);
  const int64_t t = std::max(now.s, f.start);
  *out = EvaluateFrame(spec, f, t, n).r;
  WaitFromNow(out, t, now.s);
}

// A window that holds the block's count keeps it, and its start becomes the
// window's own (it differs when written under another zone).
void CalendarWindow::Record(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t n) {
  CounterBlock b = CounterBlock::Load(block);
  const Frame f = FrameAt(spec, b, now);
  if (f.held) b.start_s = Clamp32(f.start);
  RecordInFrame(spec, b, f, f.held, n, block);
}

void CalendarWindow::SetCount(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t count) {
  CounterBlock b = CounterBlock::Load(block);
  const Frame f = FrameAt(spec, b, now);
  if (f.held) b.start_s = Clamp32(f.start);
  SetCountInFrame(spec, b, f, f.held, count, block);
}

int64_t CalendarWindow::ExpireS(const RuleSpec& spec, const uint8_t* block, const Now& now) {
  CounterBlock b = CounterBlock::Load(block);
  if (b.start_s == 0) return 0;
  int64_t start, end;
  WindowOf(ZoneOf(spec, now), spec.interval, b.start_s, &start, &end, spec.epoch);
  // A start written under another zone: FrameAt holds its count for an interval.
  if (ForeignStart(b.start_s, start))
    WindowOf(ZoneOf(spec, now), spec.interval, b.start_s + spec.interval - 1, &start, &end, spec.epoch);
  if (DebtOut(spec, b.count, b.debt) > 0) WindowOf(ZoneOf(spec, now), spec.interval, end, &start, &end, spec.epoch);
  return end;
}

void CalendarWindow::Explain(const RuleSpec& spec, const uint8_t* block, const Now& now, RuleView* out) {
  CounterBlock b = CounterBlock::Load(block);
  Frame f = FrameAt(spec, b, now);
  Now clamped = now;
  if (now.s < f.start) clamped = Now{f.start * 1000, f.start, now.tz};
  ExplainFrame(spec, f, clamped, out);
}

// A calendar frame is always the window of now (FrameAt: `open` is always
// set), holding a block's count only when the block's window is that one.
// So the two sides are summed as their frames hold them, in the window of
// now; a side whose window ended brings nothing but the debt it carries in.
// (Merged as two open fixed windows, the sum went into the block's own
// window, an ended one: a replica's copy dropped every use after a key's
// first window, and a failover granted the limit again; found from outside.)
void CalendarWindow::Merge(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now) {
  const CounterBlock a = CounterBlock::Load(block), b = CounterBlock::Load(incoming);
  if (b.tag == 0) return;
  if (a.tag == 0) {
    std::copy(incoming, incoming + kBlockUnit, block);
    return;
  }
  const Frame fa = FrameAt(spec, a, now), fb = FrameAt(spec, b, now);
  CounterBlock m;
  m.tag = spec.tag;
  if (fa.start == fb.start) {
    m.start_s = Clamp32(fa.start);
    m.count = SatAdd32(Clamp32(fa.count), fb.count);
    // Each side's debt is owed whole (as MergeCounterBlocks).
    m.debt = Clamp32(std::min<int64_t>(fa.debt_in + fb.debt_in, kMaxUses));
  } else {
    // One side written ahead of this clock (the clock stepped back, or the
    // sender's ran ahead): its window is the later one, and counts alone.
    const Frame& later = fa.start > fb.start ? fa : fb;
    m.start_s = Clamp32(later.start);
    m.count = Clamp32(later.count);
    m.debt = Clamp32(later.debt_in);
  }
  m.Store(block);
}

}  // namespace frs::limit
