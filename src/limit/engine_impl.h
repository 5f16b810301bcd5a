// limit/engine_impl.h: the Engine behind frs/engine.h.
//
// The map (bizzes by name and id) is an immutable object swapped on reload.
// Readers reach it through a per-thread cache checked against a generation
// counter, so the hot path takes no lock and touches no shared refcount;
// only the first call after a reload copies the new shared_ptr under the
// mutex.
//
// Thread safety: as frs/engine.h says; `mu_` guards `map_`.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "frs/engine.h"
#include "limit/daily_stats.h"
#include "limit/field_stats.h"
#include "limit/map_config.h"
#include "limit/node_op.h"
#include "limit/recent_denials.h"
#include "limit/rule_history.h"
#include "limit/time_zone.h"

namespace frs::limit {

struct Biz {
  BizConfig cfg;
  int32_t stats_slot = DailyStats::kNoSlot;
  std::vector<StatsTable*> stats_tables;  // parallel to cfg.stats; empty when none is kept
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

// What a batch hands each member it executes; a lone request has none of it.
struct BatchMember {
  const KeyRef* ref = nullptr;  // RefOf(biz, req), prepared and prefetched
  StatsTally* tally = nullptr;  // the batch's daily statistics
  const Now* now = nullptr;     // the batch's one instant
};

class EngineImpl final : public Engine {
 public:
  EngineImpl(const EngineOptions& opts, std::shared_ptr<const TimeZone> tz, std::unique_ptr<limit::DailyStats> stats,
             std::unique_ptr<RecentDenials> denials);
  ~EngineImpl() override;

  Status Install(MapConfig config);

  Decision Execute(const Request& req) override;
  bool ExecuteBatch(std::span<const Request> reqs, std::span<Decision> out) override;
  Status Reload(const std::string& path) override;
  Status ReloadText(std::string_view map_xml, const std::string& path) override;
  // Installs a parsed map (or returns its error) and remembers its path.
  Status InstallFrom(Result<MapConfig> config, const std::string& path);
  std::vector<BizStats> DailyStats() const override;
  Result<GroupStats> StatsBy(const GroupStatsQuery& q) const override;
  Status MergeStatsBy(const GroupStats& incoming, std::string_view receipt) override;
  Result<uint16_t> ResolveBiz(std::string_view biz) const override;
  std::vector<BizInfo> Bizzes() const override;
  Result<NodeView> Inspect(std::string_view biz, std::string_view key) override;
  Result<NodeView> View(const NodeInfo& node) const override;
  Result<std::string> ExportNode(const NodeInfo& node) const override;
  Status ImportNode(std::string_view json_line) override;
  uint32_t Today() const override { return Today(NowAt().s); }
  Result<bool> MergeNodes(std::span<const std::string_view> json_lines, std::string_view receipt) override;
  Store* store() override { return store_; }
  const Clock* clock() const override { return clock_; }

 private:
  const Map& CurrentMap() const;
  std::shared_ptr<const Map> SharedMap() const;
  Now NowAt() const { return Now::At(clock_->NowMs(), tz_.get()); }
  uint32_t Today(int64_t now_s) const;
  // With a tally (a batch), the daily statistics are added when it flushes.
  void Count(const Biz& biz, const Request& req, const Decision& d, bool created, int64_t now_s,
             StatsTally* tally = nullptr);
  // Runs op against the store, retrying once with the node's full state
  // when its layout must shrink (see AdoptLayout).
  // `ref`, when given, is RefOf(biz, req) made earlier (a batch prefetched it).
  Status RunOp(const Biz& biz, const Request& req, NodeOp* op, UpdateResult* result, const KeyRef* ref);
  // Execute with the biz looked up through `bizzes`, into `d`, which must be
  // a freshly constructed Decision.
  void ExecuteIn(BizCache& bizzes, const Request& req, const BatchMember& m, Decision& d);
  void ExecuteFor(const Biz& biz, const Request& req, const BatchMember& m, Decision& d);
  static KeyRef RefOf(const Biz& biz, const Request& req) {
    KeyRef ref{biz.cfg.id,    Fingerprint{}, req.key, static_cast<uint8_t>(req.key.size()),
               req.route_pos, req.route_known, biz.cfg.keep_keys};
    PrepareKey(&ref);
    return ref;
  }
  // The biz of a member that ExecuteReads may answer: a query or get with a
  // valid key and n, of a known biz that is not off; else null.
  static const Biz* PlainRead(BizCache& bizzes, const Request& req);
  // Answers reqs[begin, end), all plain reads of the bizzes bizs[begin,
  // end), through one Store::ReadEach.
  void ExecuteReads(BizCache& bizzes, std::span<const Request> reqs, std::span<Decision> out,
                    std::span<const Biz* const> bizs, size_t begin, size_t end, StatsTally* tally, const Now& now);
  Decision AnswerOff(const Biz& biz, const Now& now) const;
  void ExecuteAcquires(BizCache& bizzes, std::span<const Request> reqs, std::span<Decision> out,
                       const std::vector<size_t>& members, StatsTally* tally, const Now& now);

  const uint64_t id_;  // tells this engine's entries in per-thread caches apart
  Store* const store_;
  const Clock* const clock_;
  const std::shared_ptr<const TimeZone> tz_;
  const std::unique_ptr<limit::DailyStats> stats_;
  const std::unique_ptr<FieldStats> field_stats_;
  RuleHistory history_;
  const std::unique_ptr<RecentDenials> denials_;  // null: the table could not be opened
  std::string map_path_;  // GUARDED_BY(mu_)

  mutable std::mutex mu_;
  std::shared_ptr<const Map> map_;  // GUARDED_BY(mu_)
  std::atomic<uint64_t> generation_{0};
};

}  // namespace frs::limit
