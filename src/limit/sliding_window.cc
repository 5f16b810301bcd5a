#include "limit/sliding_window.h"

#include <algorithm>
#include <cstring>

namespace frs::limit {
namespace {

// Exact layouts, oldest first (sliding_window.h):
//   wide    [tag][used][ts 0 .. used-1]
//   narrow  [tag][base][u16 off 0 .. max-1]: ts = base + off, 0xFFFF none
constexpr uint32_t kNoUse = 0xFFFF;
inline uint16_t LoadOffset(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
inline void StoreOffset(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

struct ExactView {
  int64_t used = 0;
  uint32_t ts[SlidingWindow::kExactMax];

  // `bytes`: the block's room; its own tag says its form and length.
  static ExactView Load(const uint8_t* b, uint32_t bytes) {
    ExactView v;
    const uint32_t tag = Load32(b);
    if (tag != 0 && TagBytes(tag) >= 16) bytes = std::min(bytes, TagBytes(tag));
    if (TagNarrow(tag)) {
      const uint32_t base = Load32(b + 4);
      const int64_t cap = std::min<int64_t>((bytes - 8) / 2, SlidingWindow::kExactMax);
      while (v.used < cap) {
        const uint32_t off = LoadOffset(b + 8 + 2 * v.used);
        if (off == kNoUse) break;
        v.ts[v.used++] = base + off;
      }
      return v;
    }
    int64_t cap = (bytes - 8) / 4;
    v.used = std::min<int64_t>({Load32(b + 4), cap, SlidingWindow::kExactMax});
    for (int64_t i = 0; i < v.used; ++i) v.ts[i] = Load32(b + 8 + 4 * i);
    return v;
  }
  void Store(uint8_t* b, uint32_t tag, uint32_t bytes) const {
    std::memset(b, 0, bytes);
    Store32(b, tag);
    if (TagNarrow(tag)) {
      // Uses more than 65,534 s older than the newest are out of every
      // narrow window (interval below 65,536) and are not kept.
      int64_t first = 0;
      while (first < used && int64_t{ts[used - 1]} - ts[first] > 65534) ++first;
      const int64_t cap = (bytes - 8) / 2;
      const int64_t n = std::min(used - first, cap);
      first = used - n;
      const uint32_t base = n > 0 ? ts[first] : 0;
      Store32(b + 4, base);
      for (int64_t i = 0; i < cap; ++i) StoreOffset(b + 8 + 2 * i, i < n ? ts[first + i] - base : kNoUse);
      return;
    }
    Store32(b + 4, static_cast<uint32_t>(used));
    for (int64_t i = 0; i < used; ++i) Store32(b + 8 + 4 * i, ts[i]);
  }
  int64_t Newest() const { return used > 0 ? ts[used - 1] : 0; }
  // Index of the first use still in the window at t.
  int64_t FirstLive(int64_t t, int64_t interval) const {
    int64_t i = 0;
    while (i < used && int64_t{ts[i]} + interval <= t) ++i;
    return i;
  }
  // Keeps the newest `keep` uses alive at t, then appends m uses at t.
  void Append(int64_t t, int64_t interval, int64_t m, int64_t max) {
    int64_t first = FirstLive(t, interval);
    int64_t live = used - first;
    m = std::min(m, max);
    int64_t keep = std::min(live, max - m);
    int64_t from = used - keep;
    std::memmove(ts, ts + from, sizeof(uint32_t) * keep);
    for (int64_t i = 0; i < m; ++i) ts[keep + i] = Clamp32(t);
    used = keep + m;
  }
};

// Bucketed layout: [tag][newest bucket index][counters, ring by index].
struct BucketView {
  static constexpr uint32_t kN = SlidingWindow::kBuckets;
  int64_t newest = 0;
  uint32_t c[kN];

  static BucketView Load(const uint8_t* b) {
    BucketView v;
    v.newest = Load32(b + 4);
    for (uint32_t i = 0; i < kN; ++i) v.c[i] = Load32(b + 8 + 4 * i);
    return v;
  }
  void Store(uint8_t* b, uint32_t tag) const {
    Store32(b, tag);
    Store32(b + 4, Clamp32(newest));
    for (uint32_t i = 0; i < kN; ++i) Store32(b + 8 + 4 * i, c[i]);
  }
  uint32_t& At(int64_t idx) { return c[idx % kN]; }
  uint32_t Get(int64_t idx) const { return idx > newest || idx + kN <= newest || idx < 0 ? 0 : c[idx % kN]; }
  void AdvanceTo(int64_t idx) {
    if (idx <= newest) return;
    if (idx - newest >= kN) std::memset(c, 0, sizeof c);
    else
      for (int64_t i = newest + 1; i <= idx; ++i) c[i % kN] = 0;
    newest = idx;
  }
};

struct Counted {
  int64_t count = 0;
  int64_t reset_s = 0;     // when the count next drops
  int64_t retry_at_s = 0;  // when n more fit
};

Counted CountExact(const ExactView& v, int64_t t, int64_t interval, int64_t max, int64_t n) {
  Counted k;
  int64_t first = v.FirstLive(t, interval);
  k.count = v.used - first;
  k.reset_s = k.count > 0 ? int64_t{v.ts[first]} + interval : t;
  k.retry_at_s = t;
  int64_t must_leave = k.count + n - max;
  if (must_leave > 0) {
    if (k.count == 0) {
      // Only n > max gets here, and no wait makes it fit: answer the most
      // generous wait (an empty window) without indexing a use there is not.
      k.retry_at_s = t + interval;
    } else {
      // n > max never fits: wait for the window to empty.
      int64_t idx = first + std::min(must_leave, k.count) - 1;
      k.retry_at_s = int64_t{v.ts[idx]} + interval;
    }
  }
  return k;
}

Counted CountBuckets(const BucketView& v, int64_t t, int64_t interval, int64_t w, int64_t max, int64_t n) {
  Counted k;
  const int64_t lo = std::max(FloorDiv(t - interval + 1, w), v.newest - BucketView::kN + 1);
  for (int64_t i = lo; i <= v.newest; ++i) k.count += v.Get(i);
  k.reset_s = t;
  k.retry_at_s = t;
  bool reset_found = false;
  int64_t left = k.count;
  // A bucket stops counting once t - I + 1 passes its end: at (i+1)w + I - 1.
  for (int64_t i = lo; i <= v.newest; ++i) {
    if (v.Get(i) == 0) continue;
    int64_t leaves = (i + 1) * w + interval - 1;
    if (!reset_found) {
      k.reset_s = leaves;
      reset_found = true;
    }
    if (left + n <= max) break;
    left -= v.Get(i);
    k.retry_at_s = leaves;
  }
  // n > max on an empty window: as the exact form, a whole interval.
  if (k.count == 0 && n > max) k.retry_at_s = t + interval;
  return k;
}

RuleResult Report(const RuleSpec& spec, const Counted& k, int64_t t, int64_t n) {
  RuleResult r;
  r.algo = spec.algo;
  r.interval = spec.interval;
  r.count = k.count;
  r.limit = spec.max;
  r.remaining = std::max<int64_t>(0, spec.max - k.count);
  r.reset = k.reset_s;
  r.allowed = k.count + n <= spec.max;
  r.retry_after = r.allowed ? 0 : std::max<int64_t>(1, k.retry_at_s - t);
  return r;
}

int64_t ClampedNow(const RuleSpec& spec, const uint8_t* block, const Now& now) {
  // A clock that stepped back is held at the newest use (or its bucket).
  if (SlidingWindow::Exact(spec.max)) return std::max(now.s, ExactView::Load(block, spec.bytes).Newest());
  return std::max(now.s, int64_t{Load32(block + 4)} * SlidingWindow::BucketWidth(spec.interval));
}

Counted CountAt(const RuleSpec& spec, const uint8_t* block, int64_t t, int64_t n) {
  if (SlidingWindow::Exact(spec.max)) {
    return CountExact(ExactView::Load(block, spec.bytes), t, spec.interval, spec.max, n);
  }
  return CountBuckets(BucketView::Load(block), t, spec.interval, SlidingWindow::BucketWidth(spec.interval), spec.max,
                      n);
}

}  // namespace

uint32_t SlidingWindow::Bytes(int64_t max, uint32_t interval) {
  if (!Exact(max)) return kApproxBytes;
  const uint32_t raw = 8 + (Narrow(max, interval) ? 2 : 4) * static_cast<uint32_t>(max);
  return (raw + kBlockUnit - 1) / kBlockUnit * kBlockUnit;
}

void SlidingWindow::Evaluate(const RuleSpec& spec, const uint8_t* block, const Now& now, int64_t n, RuleResult* out) {
  int64_t t = ClampedNow(spec, block, now);
  *out = Report(spec, CountAt(spec, block, t, n), t, n);
  WaitFromNow(out, t, now.s);
}

void SlidingWindow::Record(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t n) {
  int64_t t = ClampedNow(spec, block, now);
  if (Exact(spec.max)) {
    ExactView v = ExactView::Load(block, spec.bytes);
    v.Append(t, spec.interval, n, spec.max);
    v.Store(block, spec.tag, spec.bytes);
    return;
  }
  BucketView v = BucketView::Load(block);
  int64_t idx = t / BucketWidth(spec.interval);
  v.AdvanceTo(idx);
  v.At(idx) = SatAdd32(v.At(idx), n);
  v.Store(block, spec.tag);
}

int64_t SlidingWindow::GiveBack(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t at_s, int64_t k) {
  if (Load32(block) == 0 || k <= 0 || now.s >= at_s + spec.interval) return 0;
  if (Exact(spec.max)) {
    // The newest uses of that second go first (all of them are the
    // reservation's or as old: either way the same count leaves together).
    ExactView v = ExactView::Load(block, spec.bytes);
    int64_t back = 0;
    for (int64_t i = v.used - 1; i >= 0 && back < k; --i) {
      if (int64_t{v.ts[i]} != at_s) continue;
      std::memmove(v.ts + i, v.ts + i + 1, sizeof(uint32_t) * static_cast<size_t>(v.used - i - 1));
      --v.used;
      ++back;
    }
    if (back > 0) v.Store(block, spec.tag, spec.bytes);
    return back;
  }
  BucketView v = BucketView::Load(block);
  const int64_t idx = at_s / BucketWidth(spec.interval);
  const int64_t have = v.Get(idx);
  const int64_t back = std::min(k, have);
  if (back <= 0) return 0;
  v.At(idx) = static_cast<uint32_t>(have - back);
  v.Store(block, spec.tag);
  return back;
}

void SlidingWindow::SetCount(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t count) {
  int64_t t = ClampedNow(spec, block, now);
  if (Exact(spec.max)) {
    ExactView v;
    v.used = 0;
    v.Append(t, spec.interval, count, spec.max);
    v.Store(block, spec.tag, spec.bytes);
    return;
  }
  BucketView v{};
  v.newest = t / BucketWidth(spec.interval);
  v.At(v.newest) = Clamp32(count);
  v.Store(block, spec.tag);
}

int64_t SlidingWindow::ExpireS(const RuleSpec& spec, const uint8_t* block) {
  if (Exact(spec.max)) {
    // Used, but every use given back (a settle of 0, a set to 0): it holds
    // nothing and may go at once. 0 would mean "never", and such a node
    // would stay for good, to be taken only by a live eviction.
    constexpr int64_t kGoneAlready = 1;
    ExactView v = ExactView::Load(block, spec.bytes);
    return v.used > 0 ? v.Newest() + spec.interval : kGoneAlready;
  }
  BucketView v = BucketView::Load(block);
  return v.newest > 0 ? (v.newest + 1) * BucketWidth(spec.interval) + spec.interval - 1 : 0;
}

int64_t SlidingWindow::NewestS(std::span<const uint8_t> block) {
  if (block.size() < kBlockUnit || Load32(block.data()) == 0) return 0;
  if (BytesAreExact(static_cast<uint32_t>(block.size()))) {
    // The largest, not the last: a block from outside may not be in order.
    const ExactView v = ExactView::Load(block.data(), static_cast<uint32_t>(block.size()));
    return v.used > 0 ? *std::max_element(v.ts, v.ts + v.used) : 0;
  }
  return BucketView::Load(block.data()).newest * BucketWidth(TagInterval(Load32(block.data())));
}

void SlidingWindow::Explain(const RuleSpec& spec, const uint8_t* block, const Now& now, RuleView* out) {
  int64_t t = ClampedNow(spec, block, now);
  Counted k = CountAt(spec, block, t, 1);
  RuleResult r = Report(spec, k, t, 1);
  out->algo = spec.algo;
  out->interval = spec.interval;
  out->max = spec.max;
  out->count = r.count;
  out->limit = r.limit;
  out->window_start_ms = (t - spec.interval + 1) * 1000;
  out->window_end_ms = (t + 1) * 1000;
  out->denies = !r.allowed;
  out->next_allowed_ms = r.allowed ? now.ms : k.retry_at_s * 1000;
}

void SlidingWindow::Convert(const RuleSpec& spec, std::span<const uint8_t> old_block, uint8_t* block, const Now& now) {
  const uint32_t old_bytes = TagBytes(Load32(old_block.data()));
  const int64_t w = BucketWidth(spec.interval);
  std::memset(block, 0, spec.bytes);
  if (BytesAreExact(old_bytes)) {
    ExactView old = ExactView::Load(old_block.data(), old_bytes);
    if (Exact(spec.max)) {
      ExactView v;
      v.used = std::min(old.used, spec.max);
      std::memcpy(v.ts, old.ts + (old.used - v.used), sizeof(uint32_t) * v.used);
      v.Store(block, spec.tag, spec.bytes);
    } else {
      BucketView v{};
      for (int64_t i = 0; i < old.used; ++i) {
        int64_t idx = old.ts[i] / w;
        v.AdvanceTo(idx);
        if (idx + BucketView::kN > v.newest) v.At(idx) = SatAdd32(v.At(idx), 1);
      }
      v.Store(block, spec.tag);
    }
    return;
  }
  BucketView old = BucketView::Load(old_block.data());
  // The old block's buckets are as wide as its own interval made them.
  const int64_t old_w = BucketWidth(TagInterval(Load32(old_block.data())));
  if (!Exact(spec.max)) {
    if (old_w == w) {
      old.Store(block, spec.tag);
      return;
    }
    // Another interval: each old bucket's uses at its last second (but not
    // in the future), counted again in buckets of the new width.
    BucketView v{};
    for (int64_t i = std::max<int64_t>(old.newest - BucketView::kN + 1, 0); i <= old.newest; ++i) {
      const uint32_t k = old.Get(i);
      if (k == 0) continue;
      const int64_t idx = std::min((i + 1) * old_w - 1, now.s) / w;
      v.AdvanceTo(idx);
      if (idx + BucketView::kN > v.newest) v.At(idx) = SatAdd32(v.At(idx), k);
    }
    v.Store(block, spec.tag);
    return;
  }
  // Newest buckets first, each use at the last second of its bucket (but
  // not in the future), until max uses are placed.
  uint32_t newest_first[kExactMax];
  int64_t used = 0;
  for (int64_t i = old.newest; i > old.newest - BucketView::kN && i >= 0 && used < spec.max; --i) {
    int64_t at = std::min((i + 1) * old_w - 1, now.s);
    for (uint32_t k = old.Get(i); k > 0 && used < spec.max; --k) newest_first[used++] = Clamp32(at);
  }
  ExactView v;
  v.used = used;
  for (int64_t i = 0; i < used; ++i) v.ts[i] = newest_first[used - 1 - i];
  v.Store(block, spec.tag, spec.bytes);
}

void SlidingWindow::Merge(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now) {
  if (Load32(incoming) == 0) return;
  if (Load32(block) == 0) {
    std::memcpy(block, incoming, spec.bytes);
    return;
  }
  if (Exact(spec.max)) {
    const ExactView a = ExactView::Load(block, spec.bytes), b = ExactView::Load(incoming, spec.bytes);
    // Both lists are oldest first: merge them, then keep the newest max.
    uint32_t all[2 * kExactMax];
    const int64_t total = a.used + b.used;
    std::merge(a.ts, a.ts + a.used, b.ts, b.ts + b.used, all);
    ExactView m;
    m.used = std::min<int64_t>(total, spec.max);
    std::memcpy(m.ts, all + (total - m.used), sizeof(uint32_t) * m.used);
    m.Store(block, spec.tag, spec.bytes);
    return;
  }
  BucketView a = BucketView::Load(block);
  const BucketView b = BucketView::Load(incoming);
  const int64_t newest = std::max({a.newest, b.newest, now.s / BucketWidth(spec.interval)});
  a.AdvanceTo(newest);
  for (int64_t idx = newest - BucketView::kN + 1; idx <= newest; ++idx)
    if (idx >= 0) a.At(idx) = SatAdd32(a.At(idx), b.Get(idx));
  a.Store(block, spec.tag);
}

}  // namespace frs::limit
