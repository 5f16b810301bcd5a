// frs/engine.h: the rule engine: map.xml businesses applied to store nodes.
//
// An Engine owns the current map (businesses and their rules), decides each
// request against the node the store keeps for (biz, key), and keeps per-biz
// daily statistics. It is the one API the server, frsctl and in-process users
// call; it never throws and never blocks except on a chain lock.
//
// Thread safety: Execute/ExecuteBatch/Inspect may run concurrently from many
// threads and processes. Reload swaps the map atomically for later calls.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frs/clock.h"
#include "frs/group_stats.h"
#include "frs/status.h"
#include "frs/store.h"

namespace frs {

// kMerge: handoff between shards (admin; see Engine::MergeNodes).
enum class Cmd : uint8_t { kQuery, kUpdate, kAcquire, kGet, kSet, kDelete, kReset, kStats, kMerge };
enum class Algo : uint8_t { kFixed, kCalendar, kSliding, kTokenBucket };
enum class Mode : uint8_t { kEnforce, kShadow, kOff };

const char* CmdName(Cmd);
const char* AlgoName(Algo);
const char* ModeName(Mode);
bool ParseCmd(std::string_view, Cmd*);

inline constexpr size_t kMaxRulesPerBiz = 4;
inline constexpr size_t kRuleNameBytes = 32;  // a rule's policy name, NUL included
// Biz id 0 is no business of map.xml's: the store keeps handoff receipts
// under it (Engine::MergeNodes). Tools that list nodes skip it.
inline constexpr uint16_t kReceiptBiz = 0;
// How long a receipt is kept: a handoff re-run later than this after an
// interruption could count a node twice.
inline constexpr uint32_t kReceiptSeconds = 7 * 86400;
inline constexpr int64_t kMaxUses = 2147483647;  // n and count: 1..2^31-1

struct Request {
  Cmd cmd = Cmd::kQuery;
  std::string_view biz;     // name or numeric id
  std::string_view key;
  int64_t n = 1;
  int64_t count = 0;        // for kSet
  // The ring position of the request's route (frs/ring.h), kept in the node
  // for handoff. Not known: the route its key implies (hash tag, else key).
  uint32_t route_pos = 0;
  bool route_known = false;
  // The caller checked `key` with ValidateKeyBytes already (the server's
  // decoder does), so the engine does not check it again.
  bool key_checked = false;
};

// retry_after of a denial that no wait can cure: n is above what the rule
// can ever grant (the XML says retry_after="-1"; no Retry-After header).
inline constexpr int64_t kNeverCurable = -1;

// One rule's verdict. Times are unix seconds.
struct RuleResult {
  Algo algo = Algo::kFixed;
  uint32_t interval = 0;
  int64_t count = 0;        // uses counted in the current window (tokens used, for token_bucket)
  int64_t limit = 0;        // allowance of the current window (max - debt; burst for token_bucket)
  int64_t remaining = 0;
  int64_t reset = 0;        // when the count next drops (window end / refill of one token)
  int64_t retry_after = 0;  // seconds until n more uses would be allowed (0 if allowed; kNeverCurable)
  int64_t debt = 0;         // borrow owed to the next window
  int64_t quota = 0;        // max: what the rule grants per interval (a token bucket's sustained rate), RateLimit's q
  bool allowed = true;
  char name[kRuleNameBytes] = {};  // the policy name (RateLimit-Policy)
};

// The answer to one request. `status` is OK, or says in the engine's own
// terms why there is no answer (InvalidArgument: a bad key, n or count;
// NotFound: an unknown biz; Unavailable/Busy: the store could not do it),
// its message one readable sentence. Only the server maps it to HTTP.
struct Decision {
  Status status;
  bool allowed = true;
  bool shadow = false;      // mode="shadow": counted, never denied
  bool found = false;       // for kGet: the node exists
  bool would_deny = false;  // shadow mode: what enforce would have answered
  int64_t count = 0, limit = 0, remaining = 0, reset = 0, retry_after = 0;  // most restrictive rule
  uint32_t nrules = 0;
  uint32_t top = 0;         // index of the most restrictive rule
  RuleResult rules[kMaxRulesPerBiz];
  uint64_t erased = 0;      // kReset: nodes erased
  uint16_t biz_id = 0;      // the biz the request resolved to (0: none)
  int64_t now_s = 0;        // the engine's clock when it decided (unix seconds; 0: no decision)
  bool ok() const { return status.ok(); }
  // Back to Decision{}, writing only rules[0, nrules): the engine sets
  // nrules before it writes a rule and writes none past it, so the rest are
  // still as constructed. ExecuteBatch resets each decision of the span it
  // is given; clearing all 512 bytes of each cost a batch of 64 a 32-KB
  // sweep through the cache (docs/performance.md, section 9).
  void Reset() {
    const uint32_t used = nrules < kMaxRulesPerBiz ? nrules : static_cast<uint32_t>(kMaxRulesPerBiz);
    status = Status();
    allowed = true;
    shadow = found = would_deny = false;
    count = limit = remaining = reset = retry_after = 0;
    nrules = top = 0;
    for (uint32_t i = 0; i < used; ++i) rules[i] = RuleResult{};
    erased = 0;
    biz_id = 0;
    now_s = 0;
  }
};

// A biz of the current map, as /metrics names it: its rules' names in
// their order (a Decision's rules[i] is rules[i] here).
struct BizInfo {
  uint16_t id = 0;
  std::string name;
  Mode mode = Mode::kEnforce;
  std::vector<std::string> rules;
};

struct BizStatsDay {
  uint32_t day = 0;         // days since 1970-01-01 in the engine's time zone
  uint64_t requests = 0, allowed = 0, denied = 0, new_keys = 0;
};
struct BizStats {
  uint16_t id = 0;
  std::string name;
  std::vector<BizStatsDay> days;  // newest first, up to 8
};

// A node as a human or a script sees it (frsctl explain/get/dump/top).
struct RuleView {
  Algo algo = Algo::kFixed;
  uint32_t interval = 0;
  int64_t max = 0, burst = 0, borrow = 0;
  int64_t count = 0;
  int64_t limit = 0;
  int64_t window_start_ms = 0, window_end_ms = 0;  // 0 when no window is open
  int64_t debt = 0;
  double tokens = 0;            // token_bucket
  bool denies = false;          // a request of n=1 now would be denied by this rule
  int64_t next_allowed_ms = 0;  // when n=1 is next allowed (now when allowed)
};
struct NodeView {
  uint16_t biz_id = 0;
  std::string biz_name;
  std::string key;              // the stored key bytes (may be a prefix)
  bool key_truncated = false;
  // False: the node keeps no key text (a compact node of a key longer than
  // its identity, docs/store.md); node.fp.lo identifies it.
  bool key_kept = true;
  Mode mode = Mode::kEnforce;
  int64_t count = 0;            // of the most restrictive rule
  std::vector<RuleView> rules;
  NodeInfo node;
};

struct EngineOptions {
  std::string map_path;              // map.xml
  std::string map_text;              // when not empty: map.xml's bytes, used instead of reading map_path
  std::string timezone = "UTC";      // IANA name, for calendar windows and daily stats
  Store* store = nullptr;            // not owned; must outlive the engine
  std::string stats_dir;             // where the daily statistics file lives (the store dir)
  bool read_only = false;            // never write the statistics file (a read-only store)
  const Clock* clock = nullptr;      // default: SystemClock
};

class Engine {
 public:
  // Loads map.xml; errors are "file:line: message".
  static Result<std::unique_ptr<Engine>> Open(const EngineOptions& opts);
  virtual ~Engine() = default;

  virtual Decision Execute(const Request& req) = 0;
  // A batch: acquires are all-or-nothing (nothing is recorded unless every
  // member is allowed); other commands run one by one, in order, each
  // answering as it would alone in its place (runs of reads are read
  // together, with the same answers). Returns overall allowed.
  // Every out[i] for i < reqs.size() is written (the caller need not clear
  // them); every member resolves its biz in one map, even across a Reload.
  virtual bool ExecuteBatch(std::span<const Request> reqs, std::span<Decision> out) = 0;

  // Re-reads map.xml (or `path` when given); on error the old map stays and
  // the error is returned as "file:line: message".
  virtual Status Reload(const std::string& path = "") = 0;
  // The same from map.xml's bytes, already read (errors name `path`): a
  // server that reads and validates the file once hands every process the
  // very bytes it checked.
  virtual Status ReloadText(std::string_view map_xml, const std::string& path) = 0;

  // Per-biz counters of the last days, from the statistics file every
  // process on this store writes (frsd's workers and any program linking
  // libfrs): in-process decisions count there, and frsd's /metrics shows
  // today's (frs_biz_today_*).
  virtual std::vector<BizStats> DailyStats() const = 0;
  // Statistics by key field (map.xml <stats>) of one day. NotFound names
  // the biz or the `by` it lacks; a day with no file answers no groups.
  virtual Result<GroupStats> StatsBy(const GroupStatsQuery& q) const = 0;
  // Adds statistics counted elsewhere (a handoff from a leaving shard) to
  // the same day and table here: counts add up, distinct sketches merge.
  // `receipt` (not empty): a merge of that receipt already taken is not
  // taken again (answers OK).
  virtual Status MergeStatsBy(const GroupStats& incoming, std::string_view receipt = {}) = 0;
  // Today's day number (days since 1970-01-01 in the engine's time zone).
  virtual uint32_t Today() const = 0;
  // Resolves a name or numeric id; NotFound names the biz.
  virtual Result<uint16_t> ResolveBiz(std::string_view biz) const = 0;
  virtual std::vector<BizInfo> Bizzes() const = 0;

  // Decodes a node for humans and scripts (explain, get, dump, top).
  virtual Result<NodeView> Inspect(std::string_view biz, std::string_view key) = 0;
  virtual Result<NodeView> View(const NodeInfo& node) const = 0;

  // Portable text (one JSON object per node, no trailing newline) and back.
  // Import resolves the biz by name (falling back to id), rehashes into this
  // store's geometry and keeps every rule's state. NotFound names a biz
  // missing from this map.
  virtual Result<std::string> ExportNode(const NodeInfo& node) const = 0;
  virtual Status ImportNode(std::string_view json_line) = 0;
  // Handoff: folds nodes another shard exported (ExportNode's text) into
  // this store's nodes of the same keys, rule by rule, so that no use either
  // shard recorded is lost (docs/cluster.md gives each algorithm's merge).
  // `receipt` (1..255 bytes) names this transfer: every merge and one
  // receipt node are written in one transaction, and a receipt already
  // present makes it a no-op, so nodes sent twice are counted once. At most
  // kMaxMergeNodes lines. Returns true when merged, false when the receipt
  // was already there; an error changes nothing.
  static constexpr size_t kMaxMergeNodes = Store::kMaxBatch - 1;
  virtual Result<bool> MergeNodes(std::span<const std::string_view> json_lines, std::string_view receipt) = 0;

  virtual Store* store() = 0;
  virtual const Clock* clock() const = 0;

 protected:
  Engine() = default;
};

}  // namespace frs
