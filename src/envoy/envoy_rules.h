// envoy/envoy_rules.h: an Envoy configuration compiled for the engine.
//
// Every descriptor path that carries a rate_limit becomes one biz of the
// engine's map, so its counters are store nodes like any other (same
// durability, frsctl explain/dump/top): name "envoy.DOMAIN.K1_V1.K2"
// (key_value for a descriptor with a value, key alone for one without;
// characters outside [A-Za-z0-9_.-] become '_'; a name past 64 bytes is cut
// and ends in a hash of the whole), id in the reserved range
// [kFirstEnvoyBizId, 65535] from a hash of the name (so a reload that adds
// a domain leaves every other biz its id and its counts), one calendar
// rule of interval = the unit's seconds aligned in UTC (zone="UTC":
// envoyproxy/ratelimit's duration_until_reset = unit - now % unit).
// shadow_mode is the biz's mode="shadow". An unlimited descriptor has no
// biz: nothing is counted.
//
// Find() walks a request descriptor's entries through the tree as
// envoyproxy/ratelimit does: at each level the entry's key_value, else its
// key alone; the limit is the one on the node the last entry reaches.
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
  std::string biz;           // engine biz name
  uint16_t biz_id = 0;
  std::string domain;
  std::string path;          // "database_users": the metrics' descriptor label
  Limit limit;
  bool shadow_mode = false;
  // detailed_metric: the per-descriptor metrics also carry the request's
  // own values (server/envoy_metrics.h).
  bool detailed_metric = false;
  std::string name;          // current_limit.name ("" when not named)
  std::vector<std::string> replaces;
  std::string file;
  int line = 0;
};

class EnvoyRules {
 public:
  static Result<std::shared_ptr<const EnvoyRules>> Compile(const EnvoyConfig& cfg);
  // From a bundle (envoy_config.h): parse and compile.
  static Result<std::shared_ptr<const EnvoyRules>> FromBundle(std::string_view bundle);

  // The <biz> elements of every limit, one per line, for the engine's map.
  std::string MapXmlBizzes() const;
  const std::vector<CompiledLimit>& limits() const { return limits_; }
  bool empty() const { return domains_.empty(); }

  static constexpr int32_t kNoLimit = -1;     // no rule matches: OK, unlimited
  static constexpr int32_t kUnlimited = -2;   // `unlimited: true`
  // The limit (an index into limits()) for one request descriptor, or
  // kNoLimit / kUnlimited. `scratch` is reused between calls (no allocation
  // once warm).
  int32_t Find(std::string_view domain, std::span<const Entry> entries, std::string* scratch) const;

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Node {
    int32_t limit = kNoLimit;
    // "key\x1fvalue" or "key" -> node index
    std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> children;
  };
  void Add(const std::string& domain, const std::string& prefix, const DescriptorNode& d, uint32_t parent);

  std::vector<Node> nodes_;
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> domains_;  // domain -> root node
  std::vector<CompiledLimit> limits_;
};

// map.xml's text with the bizzes of `rules` added before </map>. Refused
// ("file:line: ...") when map.xml has a biz in the reserved id range or
// named envoy.*: the two would share counters.
Result<std::string> ComposeMap(std::string_view map_xml, const std::string& map_path, const EnvoyRules& rules);

// The counter key of a descriptor: its entries as envoyproxy/ratelimit
// builds its cache key (key_value pairs joined by '_'), without the domain
// (the biz holds it); past kMaxKeyBytes a prefix and a hash of the whole.
void CounterKey(std::span<const Entry> entries, std::string* out);

}  // namespace frs::envoy
