#include "limit/rule_state.h"

#include <cstring>

#include "limit/calendar_window.h"
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
  }
  return kBlockUnit;
}

uint32_t BlockTag(Algo algo, int64_t max, uint32_t interval) {
  return MakeTag(algo, interval, BlockBytes(algo, max, interval),
                 algo == Algo::kSliding && SlidingWindow::Narrow(max, interval));
}

int64_t MostEverGranted(const RuleSpec& spec) {
  switch (spec.algo) {
    case Algo::kFixed:
    case Algo::kCalendar: return spec.max + spec.borrow;  // a window that owes nothing
    case Algo::kSliding: return spec.max;
    case Algo::kTokenBucket: return spec.burst;
  }
  return spec.max;
}

void Evaluate(const RuleSpec& spec, const uint8_t* block, const Now& now, int64_t n, RuleResult* out) {
  switch (spec.algo) {
    case Algo::kFixed: FixedWindow::Evaluate(spec, block, now, n, out); break;
    case Algo::kCalendar: CalendarWindow::Evaluate(spec, block, now, n, out); break;
    case Algo::kSliding: SlidingWindow::Evaluate(spec, block, now, n, out); break;
    case Algo::kTokenBucket: TokenBucket::Evaluate(spec, block, now, n, out); break;
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
  }
}

void SetCount(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t count) {
  switch (spec.algo) {
    case Algo::kFixed: return FixedWindow::SetCount(spec, block, now, count);
    case Algo::kCalendar: return CalendarWindow::SetCount(spec, block, now, count);
    case Algo::kSliding: return SlidingWindow::SetCount(spec, block, now, count);
    case Algo::kTokenBucket: return TokenBucket::SetCount(spec, block, now, count);
  }
}

int64_t ExpireS(const RuleSpec& spec, const uint8_t* block, const Now& now) {
  if (Load32(block) == 0) return 0;  // never used
  switch (spec.algo) {
    case Algo::kFixed: return FixedWindow::ExpireS(spec, block);
    case Algo::kCalendar: return CalendarWindow::ExpireS(spec, block, now);
    case Algo::kSliding: return SlidingWindow::ExpireS(spec, block);
    case Algo::kTokenBucket: return TokenBucket::ExpireS(spec, block);
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
  }
  out->max = spec.max;
  out->burst = spec.burst;
  out->borrow = spec.borrow;
}

void MergeBlock(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now) {
  switch (spec.algo) {
    case Algo::kFixed: return FixedWindow::Merge(spec, block, incoming, now);
    case Algo::kCalendar: return CalendarWindow::Merge(spec, block, incoming, now);
    case Algo::kSliding: return SlidingWindow::Merge(spec, block, incoming, now);
    case Algo::kTokenBucket: return TokenBucket::Merge(spec, block, incoming, now);
  }
}

bool ConvertBlock(const RuleSpec& spec, std::span<const uint8_t> old_block, uint8_t* block, const Now& now,
                  int64_t old_max) {
  if (old_block.size() < kBlockUnit) return false;
  const uint32_t old_tag = Load32(old_block.data());
  if (TagAlgo(old_tag) != spec.algo || TagBytes(old_tag) != old_block.size()) return false;
  const bool same_interval = TagInterval(old_tag) == spec.interval;
  switch (spec.algo) {
    case Algo::kSliding:
      if (old_block.size() > kMaxBlockBytes ||
          (!SlidingWindow::BytesAreExact(TagBytes(old_tag)) && TagBytes(old_tag) != SlidingWindow::kApproxBytes)) {
        return false;
      }
      // Every recorded use is kept where the new window can hold it.
      SlidingWindow::Convert(spec, old_block, block, now);
      return true;
    case Algo::kTokenBucket:
      if (old_block.size() != spec.bytes) return false;
      if (same_interval) {
        std::memcpy(block, old_block.data(), spec.bytes);
        return true;
      }
      TokenBucket::ConvertInterval(spec, old_block.data(), block, now, old_max > 0 ? old_max : spec.max);
      return true;
    case Algo::kFixed:
    case Algo::kCalendar: {
      // The count and the window's start stay; the window now ends at
      // start + the new interval. A calendar window's start becomes that of
      // the new interval's aligned window holding it (an hour from 14:00
      // widened to a day starts at midnight): Record restarts a window whose
      // stored start is not its own.
      if (old_block.size() != spec.bytes) return false;
      std::memcpy(block, old_block.data(), spec.bytes);
      Store32(block, spec.tag);
      const uint32_t start = Load32(block + 4);
      if (spec.algo == Algo::kCalendar && !same_interval && start != 0 && now.tz != nullptr) {
        int64_t s = 0, e = 0;
        CalendarWindow::WindowOf(*now.tz, spec.interval, start, &s, &e);
        Store32(block + 4, Clamp32(s));
      }
      return true;
    }
  }
  return false;
}

}  // namespace frs::limit
