// limit/window_counter.h: the counting shared by fixed and calendar windows.
//
// Both keep one 16-byte block: tag, window start (unix s), count, and the
// debt the window owes from its predecessor (borrow). They differ only in
// where windows begin and end, which each algorithm resolves into a Frame;
// allowance, borrowing, retry times and reports are computed here once.
//
// Borrow (K): a window that owes nothing allows max + K; what it takes beyond
// max is owed by the next window, which allows max - debt and borrows
// nothing. Unconditional updates may push a count past the allowance: the
// overdraft (capped at K) is still owed, so the long-run rate holds.
//
// Thread safety: plain values and functions over caller-owned bytes; the
// store's chain lock serializes access to one node (limit/rule_block.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "limit/rule_block.h"

namespace frs::limit {

struct CounterBlock {
  uint32_t tag = 0, start_s = 0, count = 0, debt = 0;

  static CounterBlock Load(const uint8_t* b) {
    return CounterBlock{Load32(b), Load32(b + 4), Load32(b + 8), Load32(b + 12)};
  }
  void Store(uint8_t* b) const {
    Store32(b, tag);
    Store32(b + 4, start_s);
    Store32(b + 8, count);
    Store32(b + 12, debt);
  }
};
static_assert(sizeof(uint32_t) * 4 == kBlockUnit);

// The window in force now, as the algorithm sees it.
struct Frame {
  int64_t start = 0, end = 0;  // [start, end) in unix s; a fixed window not yet opened: [now, now + I)
  bool open = false;           // the stored window is the current one
  bool held = false;           // the block's count is this window's (calendar: `open` is always set)
  int64_t count = 0;
  int64_t debt_in = 0;  // owed to the previous window, repaid by this one
  // When the allowance next improves without any use: at `next` a window
  // with debt `next_debt` begins; at `after` (0: never) one that owes nothing.
  int64_t next = 0;
  int64_t next_debt = 0;
  int64_t after = 0;
};

inline int64_t Allowance(const RuleSpec& spec, int64_t debt_in) {
  return debt_in > 0 ? spec.max - std::min(debt_in, spec.max) : spec.max + spec.borrow;
}
inline int64_t DebtOut(const RuleSpec& spec, int64_t count, int64_t debt_in) {
  int64_t base = debt_in > 0 ? spec.max - std::min(debt_in, spec.max) : spec.max;
  return std::clamp<int64_t>(count - base, 0, spec.borrow);
}

struct WindowVerdict {
  RuleResult r;
  int64_t retry_at_s = 0;  // when n more are allowed (now when allowed)
};

inline WindowVerdict EvaluateFrame(const RuleSpec& spec, const Frame& f, int64_t now_s, int64_t n) {
  WindowVerdict v;
  RuleResult& r = v.r;
  r.algo = spec.algo;
  r.interval = spec.interval;
  r.count = f.count;
  r.limit = f.debt_in > 0 ? spec.max - std::min(f.debt_in, spec.max) : spec.max;
  int64_t allowance = Allowance(spec, f.debt_in);
  r.remaining = std::max<int64_t>(0, allowance - f.count);
  r.reset = f.open ? f.end : now_s;
  r.debt = DebtOut(spec, f.count, f.debt_in);
  r.allowed = f.count + n <= allowance;
  v.retry_at_s = now_s;
  if (!r.allowed) {
    // The earliest boundary whose allowance covers n; an n no window can
    // ever allow waits for the most generous one.
    if (f.next > 0 && n <= Allowance(spec, f.next_debt)) v.retry_at_s = f.next;
    else if (f.after > 0) v.retry_at_s = f.after;
    else if (f.next > 0) v.retry_at_s = f.next;
    else v.retry_at_s = now_s + spec.interval;
    r.retry_after = std::max<int64_t>(1, v.retry_at_s - now_s);
  }
  return v;
}

// Handoff's merge of two blocks of one rule for one key, counted on two
// shards (`block` here, `incoming` from the shard that owned the key
// before), so that no use either recorded is lost and none is counted twice:
//  - both windows current: the one that ends later, holding both counts and
//    both debts (uses of the earlier window are held until the later one
//    ends: stricter than one shard would have been, never laxer);
//  - one current: it, with the debt the other carries into its next window
//    added (the other's own window is over, its uses no longer count);
//  - neither current: what each carries into its next window is a debt; the
//    later block carries their sum (at most `borrow`, as any window).
// `frame_at` resolves a block into its Frame now (fixed or calendar).
// Record and set of a window rule once its current frame `f` is known.
// `stored`: the block's window is that frame; else the block starts it,
// owing what the frame inherits, and (Record) counts from zero.
inline void RecordInFrame(const RuleSpec& spec, CounterBlock b, const Frame& f, bool stored, int64_t n,
                          uint8_t* block) {
  if (!stored) {
    b.start_s = Clamp32(f.start);
    b.count = 0;
    b.debt = Clamp32(f.debt_in);
  }
  b.count = SatAdd32(b.count, n);
  b.tag = spec.tag;
  b.Store(block);
}
inline void SetCountInFrame(const RuleSpec& spec, CounterBlock b, const Frame& f, bool stored, int64_t count,
                            uint8_t* block) {
  if (!stored) {
    b.start_s = Clamp32(f.start);
    b.debt = Clamp32(f.debt_in);
  }
  b.count = Clamp32(count);
  b.tag = spec.tag;
  b.Store(block);
}

template <class FrameAt>
void MergeCounterBlocks(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, FrameAt frame_at) {
  const CounterBlock a = CounterBlock::Load(block), b = CounterBlock::Load(incoming);
  if (b.tag == 0) return;
  if (a.tag == 0) {
    std::copy(incoming, incoming + kBlockUnit, block);
    return;
  }
  const Frame fa = frame_at(a), fb = frame_at(b);
  CounterBlock m;
  m.tag = spec.tag;
  // Two sides' debts each at most `borrow`: their sum is owed whole, up to
  // 2^31 - 1, what a debt may be. Unbounded, a borrow past 2^30 summed past
  // it, which export, import and a merge refuse (found in review); bounded
  // by this rule's max, a reload that raised max granted the rest again.
  const int64_t debt = std::min<int64_t>(fa.debt_in + fb.debt_in, kMaxUses);
  if (fa.open && fb.open) {
    const CounterBlock& later = fa.end >= fb.end ? a : b;
    m.start_s = later.start_s;
    m.count = SatAdd32(a.count, b.count);
    m.debt = Clamp32(debt);
  } else if (fa.open || fb.open) {
    const CounterBlock& open = fa.open ? a : b;
    m.start_s = open.start_s;
    m.count = open.count;
    m.debt = Clamp32(debt);
  } else {
    const CounterBlock& later = a.start_s >= b.start_s ? a : b;
    const int64_t carried = std::min<int64_t>(fa.debt_in + fb.debt_in, spec.borrow);
    const int64_t base = later.debt > 0 ? spec.max - std::min<int64_t>(later.debt, spec.max) : spec.max;
    m.start_s = later.start_s;
    m.debt = later.debt;
    m.count = Clamp32(base + carried);  // DebtOut(count, debt) == carried
  }
  m.Store(block);
}

// Fills a RuleView from a frame (shared part of Explain).
inline void ExplainFrame(const RuleSpec& spec, const Frame& f, const Now& now, RuleView* out) {
  WindowVerdict v = EvaluateFrame(spec, f, now.s, 1);
  out->algo = spec.algo;
  out->interval = spec.interval;
  out->max = spec.max;
  out->borrow = spec.borrow;
  out->count = v.r.count;
  out->limit = v.r.limit;
  out->debt = v.r.debt;
  out->window_start_ms = f.open ? f.start * 1000 : 0;
  out->window_end_ms = f.open ? f.end * 1000 : 0;
  out->denies = !v.r.allowed;
  out->next_allowed_ms = v.r.allowed ? now.ms : v.retry_at_s * 1000;
}

}  // namespace frs::limit
