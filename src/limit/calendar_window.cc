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

bool CalendarWindow::Ahead(const RuleSpec& spec, const uint8_t* block, const Now& now) {
  const CounterBlock b = CounterBlock::Load(block);
  if (b.tag == 0 || b.start_s == 0) return false;
  int64_t start, end;
  WindowOf(ZoneOf(spec, now), spec.interval, now.s, &start, &end, spec.epoch);
  return int64_t{b.start_s} >= end;
}

// A calendar frame is always the window of an instant (FrameAt: `open` is
// always set), holding a block's count only when the block's window is
// that one, and the debt the window before it carries in. So the two sides
// are read as frames of one window, the later of the two (a side written
// ahead of this clock, by a sender's clock ahead or this one stepped back,
// is in a later window than now), and summed there: a side whose window
// ended brings the debt it carries into it, nothing else. (Merged as two
// open fixed windows, the sum went into the block's own window, an ended
// one: a replica's copy dropped every use after a key's first window, and a
// failover granted the limit again; found from outside.)
void CalendarWindow::Merge(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now) {
  const CounterBlock a = CounterBlock::Load(block), b = CounterBlock::Load(incoming);
  if (b.tag == 0) return;
  if (a.tag == 0) {
    std::copy(incoming, incoming + kBlockUnit, block);
    return;
  }
  const int64_t start = std::max(FrameAt(spec, a, now).start, FrameAt(spec, b, now).start);
  const Now at = start > now.s ? Now::At(start * 1000, now.tz) : now;
  const Frame fa = FrameAt(spec, a, at), fb = FrameAt(spec, b, at);
  CounterBlock m;
  m.tag = spec.tag;
  m.start_s = Clamp32(fa.start);
  m.count = SatAdd32(Clamp32(fa.count), fb.count);
  // Each side's debt is owed whole while either counts in this window (as
  // MergeCounterBlocks); carried from ended windows alone, it is at most
  // what one window may borrow.
  const int64_t debt = fa.debt_in + fb.debt_in;
  m.debt = Clamp32(fa.held || fb.held ? std::min<int64_t>(debt, kMaxUses) : std::min<int64_t>(debt, spec.borrow));
  m.Store(block);
}

}  // namespace frs::limit
