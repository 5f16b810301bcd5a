#include "limit/fixed_window.h"

namespace frs::limit {

Frame FixedWindow::FrameAt(const RuleSpec& spec, const CounterBlock& b, int64_t now_s) {
  // A clock that stepped back before the window's start stays in that window.
  const int64_t t = std::max<int64_t>(now_s, b.start_s);
  const int64_t interval = spec.interval;
  Frame f;
  if (b.start_s != 0 && t < int64_t{b.start_s} + interval) {
    f.open = true;
    f.start = b.start_s;
    f.end = f.start + interval;
    f.count = b.count;
    f.debt_in = b.debt;
    f.next = f.end;
    f.next_debt = DebtOut(spec, f.count, f.debt_in);
    // Unused for a whole interval after it ends, the next window owes nothing.
    f.after = f.next_debt > 0 ? f.end + interval : 0;
    return f;
  }
  f.start = t;
  f.end = t + interval;
  if (b.start_s != 0 && t < int64_t{b.start_s} + 2 * interval) {
    f.debt_in = DebtOut(spec, b.count, b.debt);
    if (f.debt_in > 0) f.next = int64_t{b.start_s} + 2 * interval;
  }
  return f;
}

void FixedWindow::Evaluate(const RuleSpec& spec, const uint8_t* block, const Now& now, int64_t n, RuleResult* out) {
  CounterBlock b = CounterBlock::Load(block);
  const int64_t t = std::max<int64_t>(now.s, b.start_s);
  *out = EvaluateFrame(spec, FrameAt(spec, b, now.s), t, n).r;
  WaitFromNow(out, t, now.s);
}

void FixedWindow::Record(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t n) {
  const CounterBlock b = CounterBlock::Load(block);
  const Frame f = FrameAt(spec, b, now.s);
  RecordInFrame(spec, b, f, f.open, n, block);
}

void FixedWindow::SetCount(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t count) {
  const CounterBlock b = CounterBlock::Load(block);
  const Frame f = FrameAt(spec, b, now.s);
  SetCountInFrame(spec, b, f, f.open, count, block);
}

int64_t FixedWindow::ExpireS(const RuleSpec& spec, const uint8_t* block) {
  CounterBlock b = CounterBlock::Load(block);
  if (b.start_s == 0) return 0;
  int64_t end = int64_t{b.start_s} + spec.interval;
  return DebtOut(spec, b.count, b.debt) > 0 ? end + spec.interval : end;
}

void FixedWindow::Explain(const RuleSpec& spec, const uint8_t* block, const Now& now, RuleView* out) {
  CounterBlock b = CounterBlock::Load(block);
  Now clamped = now;
  if (clamped.s < int64_t{b.start_s}) clamped = Now{int64_t{b.start_s} * 1000, b.start_s, now.tz};
  ExplainFrame(spec, FrameAt(spec, b, now.s), clamped, out);
}

void FixedWindow::Merge(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now) {
  MergeCounterBlocks(spec, block, incoming, [&](const CounterBlock& b) { return FrameAt(spec, b, now.s); });
}

}  // namespace frs::limit
