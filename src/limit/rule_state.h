// limit/rule_state.h: a rule of any algorithm applied to its block.
//
// The algorithms (fixed_window, calendar_window, sliding_window,
// token_bucket) each know their own block (limit/rule_block.h gives the
// layout they share); these functions choose the algorithm by the rule's
// spec, so that the engine, a node's view and a handoff never name one.
//
// Thread safety: plain functions over caller-owned bytes; the store's chain
// lock serializes access to one node.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "frs/decision.h"
#include "limit/rule_block.h"

namespace frs::limit {

// The block length a rule needs (depends on algo and, for sliding, on max
// and interval), and its tag.
uint32_t BlockBytes(Algo algo, int64_t max, uint32_t interval);
uint32_t BlockTag(Algo algo, int64_t max, uint32_t interval);

// Whether `block` is in spec's own form (or never used): else a reload
// changed the rule and ConvertBlock makes it spec's.
bool BlockIsCurrent(const RuleSpec& spec, const uint8_t* block);
// The max a token bucket `block` was written under, as its conversion
// takes it (rule_state.cc): the history's whose low 16 bits the block keeps
// (spec.past, `old_max` first when > 0), else those bits, else spec.max.
int64_t WrittenMax(const RuleSpec& spec, const uint8_t* block, int64_t old_max);

// One rule over its block. `block` is spec.bytes long and carries spec.tag
// (or zero: a rule never used). Evaluate answers "would n more be allowed
// now" without changing anything; Record counts n unconditionally; SetCount
// implements the admin `set`; ExpireS is when the block is equivalent to a
// fresh one; Explain fills a RuleView (denies / next allowed for n = 1).
void Evaluate(const RuleSpec& spec, const uint8_t* block, const Now& now, int64_t n, RuleResult* out);
// The most uses one request can ever be granted by this rule (max + borrow
// for windows, max for sliding, burst for the token bucket).
int64_t MostEverGranted(const RuleSpec& spec);
void Record(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t n);
void SetCount(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t count);
int64_t ExpireS(const RuleSpec& spec, const uint8_t* block, const Now& now);
void Explain(const RuleSpec& spec, const uint8_t* block, const Now& now, RuleView* out);

// How far after this machine's clock (`now_s`) a time in a block from
// outside may lie: an export, or a shard's node, written by a clock that
// runs ahead of this one by less is taken as it is.
inline constexpr int64_t kMostAheadS = 3600;

// What is wrong with a block that came from outside (an import, a node
// another shard sent) beside its tag, which the caller checked: "" when
// nothing. A fixed or calendar window's debt is 0..2147483647, as a
// borrow is: a debt of 2^31 imported made a key's limit 0 for its window
// (found from outside). Its count and a sliding window's buckets take any
// value of their 32 bits, as the store writes them: updates stop at
// 2^32 - 1 (a settle's overrun, Envoy's hits), and a node that held such
// a count was refused by import, a snapshot and a handoff (found from
// outside: a snapshot's merge stopped there). A window's start, a sliding window's newest use and a
// concurrency rule's base lie at most kMostAheadS after now_s, and a token
// bucket's refill at most kMaxAheadMs after it: each holds its state until the
// clock reaches that time (a clock behind a block is held at it), so a
// window imported a year ahead denied its key, and a lease held its place,
// for that year (found from outside). The other blocks' fields are bounded
// where they are read.
std::string BlockProblem(Algo algo, std::span<const uint8_t> block, int64_t now_s);

// Handoff: folds `incoming`, a block in `spec`'s layout counted for the same
// key on another shard, into `block` so that neither side's recorded uses are
// lost (each algorithm's file says how). A zero block is a rule never used.
void MergeBlock(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now);

// Rebuilds `spec`'s block from an old block of the same algorithm written
// under another interval, max or length (a reload changed the rule): what
// was counted is kept as far as the new rule can hold it (docs/rules.md,
// "Changing a rule"). `old_block` carries its own tag; `old_max` is the max
// it was written under when known (0: the same as spec.max). Returns false
// when the old block is not usable (then the rule starts fresh).
bool ConvertBlock(const RuleSpec& spec, std::span<const uint8_t> old_block, uint8_t* block, const Now& now,
                  int64_t old_max = 0);

}  // namespace frs::limit
