#include "limit/rule_state.h"

#include <algorithm>
#include <cstring>

#include "limit/calendar_window.h"
#include "limit/concurrency.h"
#include "limit/fixed_window.h"
#include "limit/sliding_window.h"
#include "limit/token_bucket.h"

namespace frs::limit {

uint32_t BlockBytes(Algo algo, int64_t max, uint32_t interval) {
  switch (algo) {
    case Algo::kFixed: return FixedWindow::kBytes;
    case Algo::kCalendar: return CalendarWindow::kBytes;
    case Algo::kSliding: return SlidingWindow::Bytes(max, interval);
    case Algo::kTokenBucket: return TokenBucket::kBytes;
    case Algo::kConcurrency: return Concurrency::Bytes(max);
  }
  return kBlockUnit;
}

uint32_t BlockTag(Algo algo, int64_t max, uint32_t interval) {
  return MakeTag(algo, interval, BlockBytes(algo, max, interval),
                 algo == Algo::kSliding && SlidingWindow::Narrow(max, interval));
}

bool BlockIsCurrent(const RuleSpec& spec, const uint8_t* block) {
  const uint32_t tag = Load32(block);
  if (tag == 0) return true;
  // A token bucket's tag does not say its max, which a reload may change.
  return tag == spec.tag && (spec.algo != Algo::kTokenBucket || TokenBucket::WrittenFor(spec, block));
}

int64_t MostEverGranted(const RuleSpec& spec) {
  switch (spec.algo) {
    case Algo::kFixed:
    case Algo::kCalendar: return spec.max + spec.borrow;  // a window that owes nothing
    case Algo::kSliding: return spec.max;
    case Algo::kTokenBucket: return spec.burst;
    case Algo::kConcurrency: return kMaxUses;  // one lease whatever n: n never decides
  }
  return spec.max;
}

void Evaluate(const RuleSpec& spec, const uint8_t* block, const Now& now, int64_t n, RuleResult* out) {
  switch (spec.algo) {
    case Algo::kFixed: FixedWindow::Evaluate(spec, block, now, n, out); break;
    case Algo::kCalendar: CalendarWindow::Evaluate(spec, block, now, n, out); break;
    case Algo::kSliding: SlidingWindow::Evaluate(spec, block, now, n, out); break;
    case Algo::kTokenBucket: TokenBucket::Evaluate(spec, block, now, n, out); break;
    case Algo::kConcurrency: Concurrency::Evaluate(spec, block, now, n, out); break;
  }
  // n more than any window can ever grant: no wait cures it, and a client
  // told to retry after some seconds would retry forever.
  if (!out->allowed && n > MostEverGranted(spec)) out->retry_after = kNeverCurable;
  std::memcpy(out->name, spec.name, sizeof out->name);
  out->quota = spec.max;
}

void Record(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t n) {
  switch (spec.algo) {
    case Algo::kFixed: return FixedWindow::Record(spec, block, now, n);
    case Algo::kCalendar: return CalendarWindow::Record(spec, block, now, n);
    case Algo::kSliding: return SlidingWindow::Record(spec, block, now, n);
    case Algo::kTokenBucket: return TokenBucket::Record(spec, block, now, n);
    case Algo::kConcurrency: return Concurrency::Record(spec, block, now, n);
  }
}

void SetCount(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t count) {
  switch (spec.algo) {
    case Algo::kFixed: return FixedWindow::SetCount(spec, block, now, count);
    case Algo::kCalendar: return CalendarWindow::SetCount(spec, block, now, count);
    case Algo::kSliding: return SlidingWindow::SetCount(spec, block, now, count);
    case Algo::kTokenBucket: return TokenBucket::SetCount(spec, block, now, count);
    case Algo::kConcurrency: return Concurrency::SetCount(spec, block, now, count);
  }
}

int64_t ExpireS(const RuleSpec& spec, const uint8_t* block, const Now& now) {
  if (Load32(block) == 0) return 0;  // never used
  switch (spec.algo) {
    case Algo::kFixed: return FixedWindow::ExpireS(spec, block);
    case Algo::kCalendar: return CalendarWindow::ExpireS(spec, block, now);
    case Algo::kSliding: return SlidingWindow::ExpireS(spec, block);
    case Algo::kTokenBucket: return TokenBucket::ExpireS(spec, block);
    case Algo::kConcurrency: return Concurrency::ExpireS(spec, block);
  }
  return 0;
}

void Explain(const RuleSpec& spec, const uint8_t* block, const Now& now, RuleView* out) {
  *out = RuleView{};
  switch (spec.algo) {
    case Algo::kFixed: FixedWindow::Explain(spec, block, now, out); break;
    case Algo::kCalendar: CalendarWindow::Explain(spec, block, now, out); break;
    case Algo::kSliding: SlidingWindow::Explain(spec, block, now, out); break;
    case Algo::kTokenBucket: TokenBucket::Explain(spec, block, now, out); break;
    case Algo::kConcurrency: Concurrency::Explain(spec, block, now, out); break;
  }
  out->max = spec.max;
  out->burst = spec.burst;
  out->borrow = spec.borrow;
  out->name = spec.name;
  if (spec.algo == Algo::kCalendar) out->zone = spec.epoch ? "epoch" : CalendarWindow::ZoneOf(spec, now).name();
}

void MergeBlock(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now) {
  switch (spec.algo) {
    case Algo::kFixed: return FixedWindow::Merge(spec, block, incoming, now);
    case Algo::kCalendar: return CalendarWindow::Merge(spec, block, incoming, now);
    case Algo::kSliding: return SlidingWindow::Merge(spec, block, incoming, now);
    case Algo::kTokenBucket: return TokenBucket::Merge(spec, block, incoming, now);
    case Algo::kConcurrency: return Concurrency::Merge(spec, block, incoming, now);
  }
}

std::string BlockProblem(Algo algo, std::span<const uint8_t> block, int64_t now_s) {
  auto debt_at = [&](size_t at) -> std::string {
    const uint32_t v = Load32(block.data() + at);
    return v > uint32_t{INT32_MAX} ? "a debt of " + std::to_string(v) + " (at most 2147483647)" : std::string();
  };
  auto ahead = [&](int64_t t, const char* what) -> std::string {
    if (t <= now_s + kMostAheadS) return {};
    return std::string(what) + " " + std::to_string(t - now_s) + " s after this machine's clock (at most " +
           std::to_string(kMostAheadS) + ": a clock that far ahead wrote it, or it was edited)";
  };
  switch (algo) {
    case Algo::kFixed:
    case Algo::kCalendar:
      if (std::string p = debt_at(12); !p.empty()) return p;
      return ahead(Load32(block.data() + 4), "a window that starts");
    case Algo::kSliding: return ahead(SlidingWindow::NewestS(block), "a use counted");
    case Algo::kTokenBucket: {
      const int64_t tat_ms =
          static_cast<int64_t>(uint64_t{Load32(block.data() + 4)} | uint64_t{Load32(block.data() + 8) & 0xffff} << 32);
      // A set may put the refill as far as kMaxAheadMs ahead (a count of
      // up to 2^31 - 1 at a slow rate): only past that is it refused.
      if (tat_ms <= (now_s + kMostAheadS) * 1000 + TokenBucket::kMaxAheadMs) return {};
      return "a refill that ends " + std::to_string(tat_ms / 1000 - now_s) + " s after this machine's clock (at most " +
             std::to_string(TokenBucket::kMaxAheadMs / 1000 + kMostAheadS) +
             ": the furthest a token bucket keeps it, and the hour a clock may run ahead)";
    }
    case Algo::kConcurrency:
      // A lease may hold longer than its rule's lease + 1 s (a reload that
      // shortened it keeps the leases held), never past its base + 65,535 s.
      return ahead(Concurrency::BaseS(block), "leases timed from a second");
  }
  return {};
}

namespace {

// A fixed or calendar block written under another rule (`old_tag`: another
// interval, or the other of the two algorithms) made `spec`'s. The block
// does not say when in its window its uses happened, so every window of the
// new rule that may hold one of them carries all of them: the new window in
// force now, if it began before the old window ended. A window of the new
// rule that began after the old one ended holds none of them. Hence no
// sequence of reloads lets more through in a window of the new rule than
// its max with every use that may lie in it counted, and a carried count
// lasts no longer than the old window would have held it.
void ConvertWindow(const RuleSpec& spec, uint32_t old_tag, CounterBlock b, const Now& now, uint8_t* block) {
  b.tag = spec.tag;
  if (b.start_s != 0) {
    const int64_t old_start = b.start_s;
    int64_t old_end = old_start + TagInterval(old_tag);
    if (TagAlgo(old_tag) == Algo::kCalendar) {
      int64_t s;
      CalendarWindow::WindowOf(CalendarWindow::ZoneOf(spec, now), TagInterval(old_tag), old_start, &s, &old_end,
                               spec.epoch);
      // A start that is no boundary here was written in another zone (the
      // rule's zone changed with its interval): its window, taken as the old
      // interval long, may end after the window of ours that holds its start.
      if (s != old_start) old_end = std::max(old_end, old_start + int64_t{TagInterval(old_tag)});
    }
    // A clock stepped back behind the old window: its uses lie later than
    // now, anywhere in it. They go to the new rule's window that ends with
    // it, which a clock behind a stored window stays in (docs/rules.md,
    // "Time"): every window up to the old window's end carries them.
    const bool behind = now.s < old_start;
    const int64_t t = behind ? old_end - 1 : now.s;
    const int64_t interval = spec.interval;
    int64_t start = old_start;
    if (spec.algo == Algo::kCalendar) {
      int64_t end;
      CalendarWindow::WindowOf(CalendarWindow::ZoneOf(spec, now), spec.interval, t, &start, &end, spec.epoch);
      // Ended before this window began: the window holding its start, so a
      // debt still passes to the window right after it.
      if (start >= old_end)
        CalendarWindow::WindowOf(CalendarWindow::ZoneOf(spec, now), spec.interval, old_start, &start, &end, spec.epoch);
    } else if (behind) {
      start = std::max(old_start, old_end - interval);
    } else if (t >= old_start + interval && t < old_end) {
      // Narrowed, past the new interval's end, the old window still open:
      // a window open now, ending no later than the old one.
      start = std::min(t, old_end - interval);
    }
    b.start_s = Clamp32(start);
  }
  b.Store(block);
}

}  // namespace

// The max a token bucket's block was written under: of the maxes the rule
// history knows it by (`old_max`, its lineage's, and spec.past's of the
// block's identity, newest first) the first whose low 16 bits the block
// keeps; else `old_max`; else those bits (the whole max below 65,536); else
// this rule's. With the bits alone, a max of 65,536 or more changed with the
// interval kept read as max mod 65,536: 100,000 made 60,000 with 50,000 in
// use read 30,000 in use, and granted the other 20,000 again (found from
// outside).
int64_t WrittenMax(const RuleSpec& spec, const uint8_t* old_block, int64_t old_max) {
  const int64_t bits = TokenBucket::WrittenMaxBits(old_block);
  auto fits = [&](int64_t m) { return m > 0 && (m & 0xffff) == bits; };
  if (fits(old_max)) return old_max;
  const uint32_t identity = TagIdentity(Load32(old_block));
  for (uint32_t p = 0; p < spec.npast; ++p)
    if (spec.past[p].identity == identity && fits(spec.past[p].max)) return spec.past[p].max;
  if (old_max > 0) return old_max;
  if (bits != 0 && !TokenBucket::WrittenFor(spec, old_block)) return bits;
  return spec.max;
}

bool ConvertBlock(const RuleSpec& spec, std::span<const uint8_t> old_block, uint8_t* block, const Now& now,
                  int64_t old_max) {
  if (old_block.size() < kBlockUnit) return false;
  const uint32_t old_tag = Load32(old_block.data());
  const bool windows = IsWindowAlgo(TagAlgo(old_tag)) && IsWindowAlgo(spec.algo);
  if ((TagAlgo(old_tag) != spec.algo && !windows) || TagBytes(old_tag) != old_block.size()) return false;
  const bool same_interval = TagInterval(old_tag) == spec.interval;
  switch (spec.algo) {
    case Algo::kConcurrency:
      if (old_block.size() > kMaxLeaseBlockBytes || old_block.size() < Concurrency::kHeaderBytes) return false;
      if (old_tag == spec.tag) {
        // The same layout is taken as it is, leases past their expiry
        // included: they are freed and counted (frs_leases_expired_total)
        // by the next write's sweep. Convert would drop them unseen, and a
        // node merged from another shard (a snapshot after a lost disk, a
        // handoff) then had its expiries counted on neither holder.
        std::memcpy(block, old_block.data(), spec.bytes);
        return true;
      }
      Concurrency::Convert(spec, old_block, block, now);
      return true;
    case Algo::kSliding:
      if (old_block.size() > kMaxBlockBytes ||
          (!SlidingWindow::BytesAreExact(TagBytes(old_tag)) && TagBytes(old_tag) != SlidingWindow::kApproxBytes)) {
        return false;
      }
      // Every recorded use is kept where the new window can hold it.
      SlidingWindow::Convert(spec, old_block, block, now);
      return true;
    case Algo::kTokenBucket: {
      if (old_block.size() != spec.bytes) return false;
      // Said by its sender to be of another max (an export's "max"): that
      // max, though the bits alike are this rule's.
      if (same_interval && TokenBucket::WrittenFor(spec, old_block.data()) && (old_max <= 0 || old_max == spec.max)) {
        std::memcpy(block, old_block.data(), spec.bytes);
        return true;
      }
      TokenBucket::Convert(spec, old_block.data(), block, now, WrittenMax(spec, old_block.data(), old_max));
      return true;
    }
    case Algo::kFixed:
    case Algo::kCalendar: {
      if (old_block.size() != spec.bytes) return false;
      if (same_interval && TagAlgo(old_tag) == spec.algo) {
        std::memcpy(block, old_block.data(), spec.bytes);
        Store32(block, spec.tag);
        return true;
      }
      ConvertWindow(spec, old_tag, CounterBlock::Load(old_block.data()), now, block);
      return true;
    }
  }
  return false;
}

}  // namespace frs::limit
