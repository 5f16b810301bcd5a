// limit/engine_impl.h: the engine behind frs/engine.h and frs/admin_engine.h.
//
// Its parts live in files named for them: engine.cc (opening, the map and
// its reloads), engine_execute.cc (one request: check, decide, count),
// engine_batch.cc (a batch's one walk) and node_view.cc (the operator's verbs
// on nodes). What it counts of its decisions is one stats::Statistics.
//
// The map (bizzes by name and id) is an immutable object swapped on reload.
// Readers reach it through a per-thread cache checked against a generation
// counter, so the hot path takes no lock and touches no shared refcount;
// only the first call after a reload copies the new shared_ptr under the
// mutex.
//
// Thread safety: as frs/engine.h says; `mu_` guards `map_` and `map_path_`.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "frs/admin_engine.h"
#include "frs/clock.h"
#include "frs/percent_encode.h"
#include "limit/map_config.h"
#include "limit/node_op.h"
#include "limit/rule_history.h"
#include "limit/time_zone.h"
#include "stats/statistics.h"

namespace frs::limit {

struct Biz {
  BizConfig cfg;
  stats::BizCounters counters;  // its place in the statistics
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Map {
  MapConfig config;
  std::vector<Biz> bizzes;
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> by_name;
  std::vector<int32_t> by_id;  // 65536 entries: index into bizzes, or -1

  // A name, or a numeric id (names are never all digits).
  const Biz* Find(std::string_view biz) const;
  const Biz* FindId(uint16_t id) const { return by_id[id] < 0 ? nullptr : &bizzes[by_id[id]]; }
};

// Find() on one map, remembering the last name it resolved: the members of
// a batch mostly share one biz, and each run of a name is hashed once.
class BizCache {
 public:
  explicit BizCache(const Map& map) : map_(map) {}
  // Inline with its own comparison: a batch asks twice per member (its
  // prefetch and its execution), and a call of libc's memcmp for a name of
  // a few bytes cost more than the rest of a hit.
  const Biz* Find(std::string_view name) {
    if (biz_ != nullptr && SameBytes(name, name_)) return biz_;
    return Miss(name);
  }

 private:
  static bool SameBytes(std::string_view a, std::string_view b) {
    const size_t n = a.size();
    if (n != b.size()) return false;
    const char *x = a.data(), *y = b.data();
    auto eq8 = [](const char* p, const char* q) { return Word64(p) == Word64(q); };
    auto eq4 = [](const char* p, const char* q) { return Word32(p) == Word32(q); };
    // Two loads that overlap cover every length from 4 to 16 bytes.
    if (n >= 8 && n <= 16) return eq8(x, y) && eq8(x + n - 8, y + n - 8);
    if (n >= 4 && n < 8) return eq4(x, y) && eq4(x + n - 4, y + n - 4);
    return std::memcmp(x, y, n) == 0;
  }
  static uint64_t Word64(const char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  static uint32_t Word32(const char* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  const Biz* Miss(std::string_view name);

  const Map& map_;
  std::string_view name_;
  const Biz* biz_ = nullptr;
};

// A decision that is only an error: allowed false, so that a caller that
// reads `allowed` alone denies.
inline Decision ErrorDecision(Status status) {
  Decision d;
  d.status = std::move(status);
  d.allowed = false;
  return d;
}

// The commands that use the rules (and are counted in the statistics).
inline bool CountsUses(Cmd c) { return c == Cmd::kQuery || c == Cmd::kUpdate || c == Cmd::kAcquire; }

// NotFound "unknown biz 'NAME'", NAME cut at 64 bytes: it is echoed to
// clients, and a 60 KB name must not come back whole; its control bytes and
// bytes that are not UTF-8 as %XX (a NUL cut the message a C program
// printed: `unknown biz 'log`).
inline Status UnknownBiz(std::string_view name) {
  constexpr PercentTable kShown(0x20, 0x7e, "", PercentHigh::kKeyChars);
  return Status::NotFound("unknown biz '" + PercentEncoded(name.substr(0, 64), kShown) +
                          (name.size() > 64 ? "...'" : "'"));
}

// A node written under a larger layout (a rule removed since) holds more
// state than its biz's: the first look at it, with the biz's size, cannot
// take it whole, and says how many bytes it needs (AdoptLayout). A write
// (Update), the acquires of a batch (UpdateBatch, all or nothing), a
// replica's batch of changes and a merge ask the store through this: `pass`
// runs with each item's state_bytes and fills need[k]; an item that needs
// more is given it, and the pass runs again. A pass that needs more commits
// nothing; a node that grows again between passes (another process or link
// wrote it meanwhile) is read again, up to kWholeReadPasses passes in all,
// then the answer is Busy (the pass was not applied: the sender or client
// asks again; a replica batch's resets, applied before it, are marked so
// and not applied again: ApplyResetsOnce). A run of reads reads only those nodes again
// (EngineImpl::DecideReads).
inline constexpr int kWholeReadPasses = 4;

template <class Item, class Pass>
Status WithWholeNodes(std::span<Item> items, std::span<uint32_t> need, const Pass& pass) {
  for (int done = 1;; ++done) {
    Status s = pass();
    if (!s.ok()) return s;
    bool again = false;
    for (size_t k = 0; k < items.size(); ++k) {
      if (need[k] > items[k].state_bytes) {
        items[k].state_bytes = need[k];
        again = true;
      }
    }
    if (!again) return s;
    if (done == kWholeReadPasses)
      return Status::Busy("a node grew each time it was read (" + std::to_string(kWholeReadPasses) +
                          " reads: written meanwhile by another process); not applied, ask again");
  }
}

// A batch member as the walk of a batch sees it (engine_batch.cc). A lone
// request is a batch of one without a step of its own.
struct BatchMember {
  enum class Step : uint8_t {
    kNone,     // decided by its check (an error, or stats: nothing to do)
    kRead,     // query or get of a biz that is not off: read with its neighbours
    kAcquire,  // judged with every acquire of the batch, all or nothing
    kOne,      // everything else, one by one in its place
  };
  const Biz* biz = nullptr;
  Step step = Step::kNone;
  bool created = false;  // the decision created the node
  KeyRef ref;            // RefOf(biz, req) when `prepared`
};

class EngineImpl final : public AdminEngine {
 public:
  EngineImpl(const EngineOptions& opts, std::shared_ptr<const TimeZone> tz,
             std::unique_ptr<stats::Statistics> statistics);
  ~EngineImpl() override;

  Status Install(MapConfig config);

  Decision Execute(const Request& req) override;
  void ExecuteInto(const Request& req, Decision* out) override;
  bool ExecuteBatch(std::span<const Request> reqs, std::span<Decision> out) override;
  Status CheckRequest(const Request& req) const override;
  Status Reload(const std::string& path) override;
  Status ReloadText(std::string_view map_xml, const std::string& path) override;
  // Installs a parsed map (or returns its error) and remembers its path.
  Status InstallFrom(Result<MapConfig> config, const std::string& path);
  std::vector<BizStats> DailyStats() const override;
  Result<GroupStats> StatsBy(const GroupStatsQuery& q) const override;
  Status MergeStatsBy(const GroupStats& incoming, std::string_view receipt) override;
  Result<DeniedKeys> TopDenied(uint32_t minutes, uint16_t biz_id, size_t n) const override;
  Result<std::vector<StatsDayFile>> StatsDayFiles() const override;
  Result<GroupStats> ExportStatsDay(const StatsDayFile& file) const override;
  Result<uint16_t> ResolveBiz(std::string_view biz) const override;
  std::vector<BizInfo> Bizzes() const override;
  Result<NodeView> Inspect(std::string_view biz, std::string_view key) override;
  Result<NodeView> View(const NodeInfo& node) const override;
  bool LeaseEnded(uint16_t biz_id, std::string_view key, uint32_t serial, int64_t until) override;
  Result<std::vector<BizHeldNow>> HeldNow(uint32_t lock_wait_ms) override;
  std::vector<BizHeldNow> HeldBizzes() const override;
  Result<std::string> ExportNode(const NodeInfo& node) const override;
  Result<bool> ImportNode(std::string_view json_line) override;
  Status CheckImport(std::string_view json_line) const override;
  uint32_t Today() const override { return Today(NowAt().s); }
  Result<bool> MergeNodes(std::span<const std::string_view> json_lines, std::string_view receipt) override {
    return FoldNodes(json_lines, receipt, /*replace=*/false, nullptr, /*by_id=*/false);
  }
  Result<bool> MergeKnownNodes(std::span<const std::string_view> json_lines, std::string_view receipt,
                               std::vector<LeftOutNode>* left_out) override {
    if (left_out != nullptr) left_out->clear();
    return FoldNodes(json_lines, receipt, /*replace=*/false, left_out, /*by_id=*/true);
  }
  Result<bool> ReplaceNodes(std::span<const std::string_view> json_lines, std::string_view receipt) override {
    return FoldNodes(json_lines, receipt, /*replace=*/true, nullptr, /*by_id=*/false);
  }
  Result<bool> ApplyChanges(std::span<const Change> changes, std::string_view stream, uint64_t seq,
                            size_t skip_first) override;
  void SetChangeSink(ChangeSink* sink) override { sink_ = sink; }

 private:
  const Map& CurrentMap() const;
  std::shared_ptr<const Map> SharedMap() const;
  Now NowAt() const { return Now::At(clock_->NowMs(), tz_.get()); }
  uint32_t Today(int64_t now_s) const;
  // MergeNodes (each sent node summed into this store's, rule by rule) and
  // ReplaceNodes (each sent node taking its place whole), one transaction.
  // `left_out`: null, a node of a biz the map lacks refuses the batch;
  // else it is left out and named there. `by_id`: each node is of its biz
  // id (else of its name first).
  Result<bool> FoldNodes(std::span<const std::string_view> json_lines, std::string_view receipt, bool replace,
                         std::vector<LeftOutNode>* left_out, bool by_id);

  // The one check of a request, whichever way it is decided: its biz, or
  // null with `d` holding the error (or nothing: stats has no decision).
  // `id` (optional): a release's, renew's or settle's id, taken apart.
  const Biz* Check(BizCache& bizzes, const Request& req, Decision& d, ParsedLeaseId* id = nullptr) const;
  // Decides a checked request that is not a read of a run nor an acquire
  // of a batch, into `d` (reset). `ref`: RefOf(biz, req), prepared and
  // prefetched (unused by reset and delete). `id`: what Check took apart
  // (or nothing: the node's operation parses the id itself).
  void DecideOne(const Biz& biz, const Request& req, const KeyRef& ref, const Now& now, Decision& d, bool* created,
                 const ParsedLeaseId& id = {});
  // Reads members [begin, end), all of step kRead, through one Store::ReadEach.
  void DecideReads(std::span<const Request> reqs, std::span<Decision> out, std::span<BatchMember> members, size_t begin,
                   size_t end, const Now& now);
  // Judges every acquire of the batch together: all are recorded or none.
  void DecideAcquires(std::span<const Request> reqs, std::span<Decision> out, std::span<BatchMember> members,
                      const Now& now);
  // The daily and by-field statistics and the recent denials of a decided
  // request; with a tally (a batch), the daily counters are added when it
  // flushes. Every route counts here, once its locks are released.
  void Count(const Biz& biz, const Request& req, const Decision& d, bool created, int64_t now_s,
             stats::StatsTally* tally = nullptr);
  Decision AnswerOff(const Biz& biz, const Now& now) const;
  // The reservations `node` holds now, into v (node_view.cc).
  void ViewReservations(const BizConfig& biz, const NodeInfo& node, const Now& now, NodeView* v) const;
  // Tells sink_ of the change a decided request made (replica_apply.cc).
  void Notify(const Biz& biz, const Request& req, const Decision& d, const Now& now);
  // The count's change a decided request made (false: none), into *out.
  static bool CountChange(const Biz& biz, const Request& req, const Decision& d, Change* out);
  // Applies the other holder's add `c` (kind kAdd) to `state`, a node of
  // `cfg`'s layout (replica_apply.cc).
  void ApplyAdd(const BizConfig& cfg, uint8_t* state, const Change& c, const Now& now) const;
  // The request's key, prepared and located in this engine's store: its
  // prefetch and its update hash it once.
  KeyRef RefOf(const Biz& biz, const Request& req) const {
    KeyRef ref{biz.cfg.id,    Fingerprint{},   req.key,          static_cast<uint8_t>(req.key.size()),
               req.route_pos, req.route_known, biz.cfg.keep_keys};
    PrepareKey(&ref);
    store_->LocateKey(&ref);
    return ref;
  }

  const uint64_t id_;  // tells this engine's entries in per-thread caches apart
  Store* const store_;
  const Clock* const clock_;
  const std::shared_ptr<const TimeZone> tz_;
  const std::unique_ptr<stats::Statistics> statistics_;
  RuleHistory history_;

  mutable Mutex mu_;
  std::string map_path_ FRS_GUARDED_BY(mu_);
  const std::string stats_dir_;  // the store directory ("": statistics in memory only)
  std::shared_ptr<const Map> map_ FRS_GUARDED_BY(mu_);
  std::atomic<uint64_t> generation_{0};
  ChangeSink* sink_ = nullptr;  // null: nobody replicates (SetChangeSink)
  LeaseSecret lease_secret_;    // keys lease ids (limit/lease_id.h); set once at Open
  uint64_t lease_check_ = 0;    // LeaseKeyCheck(): of a cluster's key file, else 0
  bool ids_known_ = true;       // false: lease_secret_ stands in for a lease.key not made
  // <cluster lease_key_also>: a rotation's second key, whose ids verify too.
  LeaseSecret lease_secret_also_;
  bool has_also_ = false;
  uint64_t lease_check_also_ = 0;

 public:
  void SetLeaseSecret(const LeaseSecret& s, bool shared, bool known) {
    lease_secret_ = s;
    lease_check_ = shared ? LeaseKeyCheckOf(s) : 0;
    ids_known_ = known;
  }
  void SetLeaseSecretAlso(const LeaseSecret& s) {
    lease_secret_also_ = s;
    has_also_ = true;
    lease_check_also_ = LeaseKeyCheckOf(s);
  }
  uint64_t LeaseKeyCheck() const override { return lease_check_; }
  uint64_t LeaseKeyAlsoCheck() const override { return lease_check_also_; }
  uint64_t FieldStatsUnstored() const override { return statistics_->FieldUnstored(); }
};

}  // namespace frs::limit
