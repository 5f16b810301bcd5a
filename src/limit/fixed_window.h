// limit/fixed_window.h: the seed paper's fixed window.
//
// The window opens at the key's first counted use and lasts `interval`
// seconds; the first counted use at or after its end opens a new one at
// count 0. A debt (borrow) is owed to the window that opens within one
// interval after the indebted one ended; a key idle longer than that has
// repaid it by waiting. Block: 16 bytes (tag, start_s, count, debt).
// Resolution: whole seconds.
//
// Thread safety: plain functions over caller-owned bytes; the store's chain
// lock serializes access to one node (limit/rule_block.h).
#pragma once

#include "limit/rule_block.h"
#include "limit/window_counter.h"

namespace frs::limit {

struct FixedWindow {
  static constexpr uint32_t kBytes = 16;

  static Frame FrameAt(const RuleSpec& spec, const CounterBlock& b, int64_t now_s);
  static void Evaluate(const RuleSpec& spec, const uint8_t* block, const Now& now, int64_t n, RuleResult* out);
  static void Record(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t n);
  static void SetCount(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t count);
  static int64_t ExpireS(const RuleSpec& spec, const uint8_t* block);
  static void Explain(const RuleSpec& spec, const uint8_t* block, const Now& now, RuleView* out);
  static void Merge(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now);
};

}  // namespace frs::limit
