#include "limit/token_bucket.h"

#include <algorithm>

namespace frs::limit {
namespace {

using i128 = __int128;

struct Tat {
  int64_t ms = 0;
  int64_t frac = 0;  // numerator over max, < max

  static Tat Load(const RuleSpec& spec, const uint8_t* b) {
    Tat t;
    t.ms = static_cast<int64_t>(uint64_t{Load32(b + 4)} | uint64_t{Load32(b + 8) & 0xffff} << 32);
    uint32_t check = Load32(b + 8) >> 16;
    t.frac = Load32(b + 12);
    if (check != (static_cast<uint64_t>(spec.max) & 0xffff) || t.frac >= spec.max) {
      // Written under another max: the fraction's unit changed; round up.
      if (t.frac > 0) ++t.ms;
      t.frac = 0;
    }
    return t;
  }
  void Store(const RuleSpec& spec, uint8_t* b) const {
    uint64_t ms48 = static_cast<uint64_t>(std::max<int64_t>(ms, 0)) & ((uint64_t{1} << 48) - 1);
    Store32(b, spec.tag);
    Store32(b + 4, static_cast<uint32_t>(ms48));
    Store32(b + 8, static_cast<uint32_t>(ms48 >> 32) | static_cast<uint32_t>(spec.max & 0xffff) << 16);
    Store32(b + 12, static_cast<uint32_t>(frac));
  }
  i128 Units(int64_t max) const { return i128{ms} * max + frac; }
  static Tat FromUnits(i128 u, int64_t max) {
    Tat t;
    t.ms = static_cast<int64_t>(u / max);
    t.frac = static_cast<int64_t>(u % max);
    return t;
  }
};

i128 UnitsPerMax(const RuleSpec& spec) { return i128{spec.interval} * 1000; }

// D: how far TAT is ahead of now, in 1/max ms (0 when the bucket is full).
i128 Ahead(const RuleSpec& spec, const Tat& tat, int64_t now_ms) {
  i128 d = tat.Units(spec.max) - i128{now_ms} * spec.max;
  return d > 0 ? d : 0;
}

int64_t CeilDiv128(i128 a, i128 b) { return static_cast<int64_t>((a + b - 1) / b); }

struct Verdict {
  RuleResult r;
  int64_t retry_at_ms = 0;
  double tokens = 0;
};

Verdict Judge(const RuleSpec& spec, const uint8_t* block, const Now& now, int64_t n) {
  Verdict v;
  const Tat tat = Tat::Load(spec, block);
  const i128 u = UnitsPerMax(spec);
  const i128 d = Ahead(spec, tat, now.ms);
  RuleResult& r = v.r;
  r.algo = spec.algo;
  r.interval = spec.interval;
  r.limit = spec.burst;
  r.count = CeilDiv128(d, u);
  r.remaining = std::max<int64_t>(0, spec.burst - r.count);
  v.tokens = spec.burst - static_cast<double>(d) / static_cast<double>(u);
  if (r.count == 0) {
    r.reset = now.s;
  } else {
    int64_t wait_ms = CeilDiv128(d - i128{r.count - 1} * u, spec.max);
    r.reset = CeilDiv(now.ms + wait_ms, 1000);
  }
  r.allowed = d + i128{n} * u <= i128{spec.burst} * u;
  v.retry_at_ms = now.ms;
  if (!r.allowed) {
    i128 must_drain = n <= spec.burst ? d - i128{spec.burst - n} * u : d;
    int64_t wait_ms = CeilDiv128(must_drain, spec.max);
    v.retry_at_ms = now.ms + wait_ms;
    r.retry_after = std::max<int64_t>(1, CeilDiv(wait_ms, 1000));
  }
  return v;
}

}  // namespace

void TokenBucket::Evaluate(const RuleSpec& spec, const uint8_t* block, const Now& now, int64_t n, RuleResult* out) {
  *out = Judge(spec, block, now, n).r;
}

void TokenBucket::Record(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t n) {
  Tat tat = Tat::Load(spec, block);
  i128 base = std::max(tat.Units(spec.max), i128{now.ms} * spec.max);
  i128 next = base + i128{n} * UnitsPerMax(spec);
  i128 cap = i128{now.ms + kMaxAheadMs} * spec.max;
  Tat::FromUnits(std::min(next, std::max(cap, base)), spec.max).Store(spec, block);
}

int64_t TokenBucket::GiveBack(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t k, int64_t taken_ms,
                              int64_t estimate) {
  if (Load32(block) == 0 || k <= 0) return 0;
  Tat tat = Tat::Load(spec, block);
  const i128 floor = i128{now.ms} * spec.max;
  const i128 had = tat.Units(spec.max);
  if (had <= floor) return 0;  // full already
  // What of the reservation the refill has not replaced, counted from the
  // start of its second, goes back in the bucket's own unit: whole tokens
  // only would keep up to a token more than that second's refill (a whole
  // token is six minutes of a bucket of 10 an hour).
  const i128 per = UnitsPerMax(spec);
  const i128 unrefilled = i128{taken_ms} * spec.max + i128{estimate} * per - floor;
  if (unrefilled <= 0) return 0;
  const i128 next = std::max(floor, had - std::min<i128>(i128{k} * per, unrefilled));
  Tat::FromUnits(next, spec.max).Store(spec, block);
  // Reported as the count falls (Evaluate counts tokens in use rounded up).
  return std::min<int64_t>(k, CeilDiv128(had - floor, per) - CeilDiv128(next - floor, per));
}

void TokenBucket::SetCount(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t count) {
  i128 next = i128{now.ms} * spec.max + i128{count} * UnitsPerMax(spec);
  i128 cap = i128{now.ms + kMaxAheadMs} * spec.max;
  Tat::FromUnits(std::min(next, cap), spec.max).Store(spec, block);
}

int64_t TokenBucket::ExpireS(const RuleSpec& spec, const uint8_t* block) {
  Tat tat = Tat::Load(spec, block);
  return CeilDiv(tat.ms + (tat.frac > 0 ? 1 : 0), 1000);
}

void TokenBucket::Explain(const RuleSpec& spec, const uint8_t* block, const Now& now, RuleView* out) {
  Verdict v = Judge(spec, block, now, 1);
  out->algo = spec.algo;
  out->interval = spec.interval;
  out->max = spec.max;
  out->burst = spec.burst;
  out->count = v.r.count;
  out->limit = v.r.limit;
  out->tokens = v.tokens;
  out->denies = !v.r.allowed;
  out->next_allowed_ms = v.retry_at_ms;
}

void TokenBucket::Merge(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now) {
  if (Load32(incoming) == 0) return;
  if (Load32(block) == 0) {
    std::copy(incoming, incoming + kBytes, block);
    return;
  }
  const i128 lead = Ahead(spec, Tat::Load(spec, block), now.ms) + Ahead(spec, Tat::Load(spec, incoming), now.ms);
  const i128 cap = i128{kMaxAheadMs} * spec.max;
  Tat::FromUnits(i128{now.ms} * spec.max + std::min(lead, cap), spec.max).Store(spec, block);
}

void TokenBucket::Convert(const RuleSpec& spec, const uint8_t* old_block, uint8_t* block, const Now& now,
                          int64_t old_max) {
  RuleSpec old = spec;
  old.interval = TagInterval(Load32(old_block));
  old.max = old_max;
  // Tokens in use = lead / U (U = interval * 1000, the lead in 1/max ms):
  // the same tokens under the new rule lead by tokens * U' (whatever max is:
  // recording n moves TAT by n * U in these units).
  const i128 lead = Ahead(old, Tat::Load(old, old_block), now.ms);
  i128 moved = lead * UnitsPerMax(spec) / UnitsPerMax(old);
  // A raised max: the same instant full again holds more tokens in use.
  // Rounded up, so no reading of the old state grants more.
  if (spec.max > old.max) moved = std::max(moved, (lead * spec.max + old.max - 1) / old.max);
  const i128 cap = i128{kMaxAheadMs} * spec.max;
  Tat::FromUnits(i128{now.ms} * spec.max + std::min(moved, cap), spec.max).Store(spec, block);
}

}  // namespace frs::limit
