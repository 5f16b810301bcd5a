// envoy/envoy_rules.h: an Envoy configuration compiled for the engine.
//
// Every descriptor path that carries a rate_limit becomes one biz of the
// engine's map, so its counters are store nodes like any other (same
// durability, frsctl explain/dump/top): name "envoy.DOMAIN.K1_V1.K2"
// (key_value for a descriptor with a value, key alone for one without;
// characters outside [A-Za-z0-9_.-] become '_'; a name past 64 bytes is cut
// and ends in a hash of the whole). That spelling is not one-to-one (domain
// x.z's z and domain x's z.z are both envoy.x.z.z), so a name once given is
// bound to its path's identity ("DOMAIN/K1=V1/K2", every other byte than
// [A-Za-z0-9_.*-] as %XX) in envoy.ids, and a path whose spelling another
// path holds is named by the spelling cut and ended in a hash of its
// identity. Id in the reserved range
// [kFirstEnvoyBizId, 65535] assigned once per name and never moved
// (AssignEnvoyIds: frsd's master keeps the assignment in the store
// directory, so a reload that adds or removes descriptors leaves every other
// biz its id, its counts, its rules.history and its metrics), one calendar
// rule of interval = the unit's seconds aligned in UTC (zone="UTC":
// envoyproxy/ratelimit's duration_until_reset = unit - now % unit).
// shadow_mode is the biz's mode="shadow". An unlimited descriptor has no
// biz: nothing is counted. FRS's own `unit: concurrent` is a concurrency
// rule (max = requests_per_unit, its lease), and with any such limit one
// more biz, "envoy._pending" (PendingLimit), notes the acquires they refused.
//
// Find() walks a request descriptor's entries through the tree as
// envoyproxy/ratelimit does: at each level the entry's key_value, else the
// first wildcard value (`value: foo*`, `a*b`; '*' is any run of bytes) of
// its key in the file's order, else its key alone; the limit is the one on
// the node the last entry reaches. A wildcard's values each get a counter
// of their own: the counter key is made of the request's values, but for a
// wildcard with `share_threshold: true`, whose values all share one counter
// (the key holds the pattern, MatchInfo::share).
//
// A request descriptor's own `limit` (Envoy's RateLimitDescriptor.limit)
// replaces whatever the configuration says for it, as envoyproxy/ratelimit
// applies it: in a configured domain only, listed or not, never in shadow
// mode, without name or replaces. Its counts live in one biz per unit,
// "envoy._override.UNIT" (OverrideLimit), the counter key prefixed with the
// domain.
//
// Thread safety: immutable after Compile; Find from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "envoy/envoy_config.h"
#include "frs/status.h"

namespace frs::envoy {

inline constexpr uint16_t kFirstEnvoyBizId = 49152;
inline constexpr uint32_t kEnvoyBizIds = 65536 - kFirstEnvoyBizId;

struct Entry {
  std::string_view key, value;
};

// One rate-limited descriptor path: a biz of the engine.
struct CompiledLimit {
  std::string biz;  // engine biz name
  uint16_t biz_id = 0;
  std::string domain;
  std::string path;  // "database_users": the metrics' descriptor label
  // One-to-one (PathIdentity, below): what envoy.ids binds the biz name to.
  std::string identity;
  Limit limit;
  bool shadow_mode = false;
  // detailed_metric: the per-descriptor metrics also carry the request's
  // own values (server/envoy_metrics.h).
  bool detailed_metric = false;
  bool quota_mode = false;
  // A descriptor on the path has value_to_metric: the metrics may carry the
  // request's values (MatchInfo::metric_path).
  bool value_to_metric = false;
  std::string metadata_json;  // `metadata` as JSON; "" when none
  bool is_override = false;   // a request's own limit: one of OverrideLimit's bizzes
  bool is_pending = false;    // PendingLimit's biz: never matched by a descriptor
  std::string name;           // current_limit.name ("" when not named)
  std::vector<std::string> replaces;
  std::string file;
  int line = 0;
};

// An `unlimited` limit: nothing counted, but its name and replaces count.
struct UnlimitedLimit {
  std::string name;
  std::vector<std::string> replaces;
};

// The slot (0..kEnvoyBizIds-1) a new name probes from.
uint32_t EnvoyIdSlot(std::string_view biz);
// Ids for `names` (biz names) of the descriptor paths `paths` (parallel;
// may be empty): a name in `table` keeps its id (and is bound to its path
// when it was not yet); a new one takes the first free id from its slot and
// is added to `table`, bound to its path. Ids of names in `table` but not
// in `names` stay taken (their nodes may live), so an id never passes from
// one name to another. `ids` is parallel to `names`. Refused when every id
// is taken, or when a name is bound to another path.
Status AssignEnvoyIds(const std::vector<std::string>& names, const std::vector<std::string>& paths, EnvoyIds* table,
                      std::vector<uint16_t>* ids);

// What Find learnt on the way besides the limit (filled when asked for).
struct MatchInfo {
  // Per entry: the wildcard value (the YAML's, '*' included) that stands for
  // the request's value in the counter key (share_threshold), or empty.
  std::vector<std::string_view> share;
  // envoyproxy/ratelimit's metric path with value_to_metric ("k1_v1.k2"):
  // set (metric_path_changed) only where value_to_metric put a request's
  // value in it that the configured path does not hold.
  std::string metric_path;
  bool metric_path_changed = false;
  void Clear(size_t n) {
    share.assign(n, std::string_view());
    metric_path.clear();
    metric_path_changed = false;
  }
};

class EnvoyRules {
 public:
  // Ids from cfg.ids (as the master assigned them), new names taking free
  // ones; `ids_out`, when given, receives the table with the new names.
  static Result<std::shared_ptr<const EnvoyRules>> Compile(const EnvoyConfig& cfg, EnvoyIds* ids_out = nullptr);
  // From a bundle (envoy_config.h): parse and compile.
  static Result<std::shared_ptr<const EnvoyRules>> FromBundle(std::string_view bundle, bool merge_domains = false);

  // The <biz> elements of every limit, one per line, for the engine's map.
  std::string MapXmlBizzes() const;
  const std::vector<CompiledLimit>& limits() const { return limits_; }
  bool empty() const { return domains_.empty(); }

  static constexpr int32_t kNoLimit = -1;  // no rule matches: OK, unlimited
  // `unlimited: true`: kUnlimited - k for unlimited()[k].
  static constexpr int32_t kUnlimited = -2;
  static bool IsUnlimited(int32_t found) { return found <= kUnlimited; }
  const UnlimitedLimit& unlimited(int32_t found) const { return unlimited_[static_cast<size_t>(kUnlimited - found)]; }
  // The limit (an index into limits()) for one request descriptor, or
  // kNoLimit / kUnlimited. `scratch` is reused between calls (no allocation
  // once warm).
  int32_t Find(std::string_view domain, std::span<const Entry> entries, std::string* scratch,
               MatchInfo* info = nullptr) const;
  bool HasDomain(std::string_view domain) const { return domains_.find(domain) != domains_.end(); }
  // The limit (an index into limits()) whose biz counts a request's own
  // limit of unit `u`; kNoLimit when no domain is configured.
  int32_t OverrideLimit(Unit u) const {
    const auto k = static_cast<size_t>(u) - 1;
    return k < 7 ? overrides_[k] : kNoLimit;
  }
  // The limit (an index into limits()) whose biz notes the acquires that
  // limits of unit: concurrent denied, until their give-back comes; kNoLimit
  // when no limit is concurrent.
  int32_t PendingLimit() const { return pending_; }

 private:
  // XXH3: a third of std::hash's instructions on the short strings looked
  // up per descriptor entry (the tables hold what the YAML names; a client
  // only probes them).
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const;
  };

  struct Wildcard {
    std::string key, pattern;  // pattern: the YAML value, '*' any run of bytes
    uint32_t node = 0;
  };
  struct Node {
    int32_t limit = kNoLimit;
    bool value_to_metric = false;
    bool share_threshold = false;
    std::string pattern;  // a wildcard's value (share_threshold's counter key)
    // ValueLookup(key, value) -> node index, for the entries with a value
    std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> values;
    std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> keys;  // key alone -> node index
    std::vector<Wildcard> wildcards;                                        // in the file's order
  };
  void Add(const std::string& domain, const std::string& prefix, const std::string& identity_prefix,
           const DescriptorNode& d, uint32_t parent, bool value_to_metric);

  std::vector<Node> nodes_;
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> domains_;  // domain -> root node
  std::vector<CompiledLimit> limits_;
  std::vector<UnlimitedLimit> unlimited_;
  int32_t pending_ = kNoLimit;
  int32_t overrides_[7] = {kNoLimit, kNoLimit, kNoLimit, kNoLimit, kNoLimit, kNoLimit, kNoLimit};
};

// The name the engine knows a limit's rule by (MapXmlBizzes): per_<unit>
// for a rate, so that a changed unit starts from zero as upstream's cache
// key does; <biz>_1, map.xml's default, for an in-flight limit. The
// decision log and frs_rule_decisions_total say it.
std::string RuleNameOf(const CompiledLimit& l);

// map.xml's text with the bizzes of `rules` added before its closing
// </map> (the last one outside a comment), then parsed again to check that
// every Envoy biz is in the map. Refused ("file:line: ...") when map.xml has
// a biz in the reserved id range or named envoy.*: the two would share
// counters.
Result<std::string> ComposeMap(std::string_view map_xml, const std::string& map_path, const EnvoyRules& rules);
// The line ComposeMap puts before Envoy's bizzes.
inline constexpr std::string_view kComposedMarker = "<!-- <grpc config>: Envoy's descriptors -->\n";

// The counter key of a descriptor: its entries as envoyproxy/ratelimit
// builds its cache key (key_value pairs joined by '_'), without the domain
// (the biz holds it), but one-to-one where upstream's is not: a '_' inside
// a value that another entry follows is written %5F, so that values
// holding '_' never share a counter (upstream's a=1_b_2,b=3 and
// a=1,b=2_b_3). Always a key the store accepts (ValidateKeyBytes), whatever
// bytes Envoy sends (header values may hold a tab or invalid UTF-8): '%',
// '#', control characters (C0, DEL, C1) and bytes that are not valid UTF-8
// are written %XX, so distinct entries make distinct keys; past
// kMaxKeyBytes, a prefix cut on a character boundary, '#' and a 64-bit hash
// of the whole key.
// `domain`, when given (a request's own limit, whose biz every domain
// shares), leads the key, escaped alike and ended by '|'.
void CounterKey(std::span<const Entry> entries, std::string* out, std::string_view domain = {});

// `s` made safe inside an XML comment ("--" broken up; & < " escaped).
std::string XmlCommentText(std::string_view s);

// At most this many descriptors in one call: the work of a call is bounded
// (each descriptor is a store operation); more is INVALID_ARGUMENT.
inline constexpr size_t kMaxDescriptorsPerCall = 64;

}  // namespace frs::envoy
