// envoy/envoy_config.h: envoyproxy/ratelimit's YAML configuration, read.
//
//   domain: mongo_cps
//   descriptors:
//     - key: database
//       value: users
//       rate_limit: {unit: second, requests_per_unit: 500}
//       # or, FRS's own: at most 3 in flight, each held at most 120 s
//       # rate_limit: {unit: concurrent, requests_per_unit: 3, lease: 120}
//       shadow_mode: false          # count, never deny
//       quota_mode: false           # OVER_LIMIT overall only when every quota one is
//       detailed_metric: false
//       value_to_metric: false      # the request's value in the metric's path
//       share_threshold: false      # a wildcard's values share one counter
//       metadata: {any: yaml}       # returned as the answer's dynamic metadata
//       name: users_limit           # for `replaces`
//       replaces: [{name: other}]   # this limit drops `other` when both match
//       descriptors: [...]          # nested: deeper entries of one descriptor
//
// A <grpc config="DIR"> directory holds such files, one domain each (two of
// one domain merged under <grpc merge_domains="1">, MERGE_DOMAIN_CONFIG), as
// envoyproxy/ratelimit's runtime directory does: every file of any name in
// it and in its subdirectories but names starting with '.' (ReadEnvoyDir). Errors are
// "file:line: message", line from the YAML node at fault.
//
// Reading is done once by frsd's master (and by frsd -t, frsctl
// envoy-config); the files' bytes then travel to the workers in a bundle
// (ReadEnvoyDir / ParseEnvoyBundle) so every process parses the very bytes
// that were checked, as map.xml does (server/map_channel.h).
//
// Thread safety: values; parsing touches no global state. yaml-cpp throws:
// every entry point here catches and answers a Status.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frs/status.h"

namespace frs::envoy {

// As envoyproxy/ratelimit names units, and as rls.proto numbers them.
enum class Unit : uint8_t { kSecond = 1, kMinute = 2, kHour = 3, kDay = 4, kMonth = 5, kYear = 6, kWeek = 7 };
// Its window, as envoyproxy/ratelimit computes it (utils.UnitToDivider):
// a week is 7 days, a month 30, a year 365, every window a multiple of
// that many seconds since the Unix epoch (a week starts on a Thursday).
uint32_t UnitSeconds(Unit u);
const char* UnitName(Unit u);  // "second", ...
// rls.proto's number (1..7) as a Unit; false for 0 (UNKNOWN) and others.
bool UnitFromNumber(int64_t n, Unit* u);

struct Limit {
  Unit unit = Unit::kSecond;
  uint32_t requests_per_unit = 0;  // 0..2^32-1, as rls.proto's uint32
  // FRS's own `unit: concurrent` (an in-flight limit): at most
  // requests_per_unit (1..77) leases held at once per counter key, each of
  // `lease` seconds (1..65534) unless given back sooner (a descriptor with
  // is_negative_hits, as Envoy sends one when a stream is done). 0: a rate.
  uint32_t lease_s = 0;
  bool concurrent() const { return lease_s != 0; }
  // rls.proto's unit number in an answer's current_limit: UNKNOWN (0) for
  // an in-flight limit, which has no window.
  int rls_unit() const { return concurrent() ? 0 : static_cast<int>(unit); }
};

// One `descriptors` entry: matches a request entry with this key and (when
// `value` is not empty) this value.
struct DescriptorNode {
  std::string key;
  std::string value;       // "": any value of `key`
  bool has_limit = false;  // rate_limit given (and not unlimited)
  Limit limit;
  bool unlimited = false;
  bool shadow_mode = false;
  bool quota_mode = false;
  bool detailed_metric = false;
  bool value_to_metric = false;
  bool share_threshold = false;  // only on a wildcard value (checked)
  // `metadata` as JSON text (a YAML map, its plain scalars typed as YAML
  // 1.1 types them); "" when none.
  std::string metadata_json;
  std::string name;  // the limit's name (current_limit.name, replaces)
  std::vector<std::string> replaces;
  std::vector<DescriptorNode> children;
  std::string file;
  int line = 0;
};

struct Domain {
  std::string name;
  std::vector<DescriptorNode> descriptors;
  std::string file;
  int line = 0;
};

// The biz ids of Envoy's descriptors, by biz name: assigned once and never
// moved (envoy_rules.h AssignEnvoyIds). frsd's master keeps them in the
// store directory (envoy.ids) and sends them to the workers inside the
// bundle, so every process compiles the same ids. A name is bound to the
// one descriptor path it was given to (`path`, envoy_rules.h PathIdentity),
// so that no other path, whose name would be spelled alike, is ever given
// it.
struct EnvoyIdEntry {
  std::string name;
  uint16_t id = 0;
  std::string path;  // "": not bound yet (a line written before paths were kept)
  bool operator==(const EnvoyIdEntry&) const = default;
};
using EnvoyIds = std::vector<EnvoyIdEntry>;

struct EnvoyConfig {
  std::vector<Domain> domains;  // sorted by name
  EnvoyIds ids;                 // from the bundle's ids entry; empty: none sent
};

// The bounds of one file, checked while it is read and parsed, before any
// descriptor is built (envoyproxy/ratelimit's files are a few kB; the
// largest configuration frsd can serve, 16384 limits, fits in them).
inline constexpr size_t kMaxEnvoyFileBytes = 4u << 20;
// YAML nodes as the file means them: an alias counts its anchor's nodes each
// time it is used, so that a "billion laughs" is refused, not expanded.
inline constexpr uint64_t kMaxEnvoyYamlNodes = 1000000;
inline constexpr uint32_t kMaxEnvoyYamlDepth = 64;
// Its scalars' bytes, aliases expanded as for the nodes: the directory's
// bound of 16 MiB, which a file's aliases could not pass either.
inline constexpr uint64_t kMaxEnvoyYamlBytes = uint64_t{16} << 20;
// A descriptor's `metadata` as the answer carries it: Envoy takes a gRPC
// answer of 4 MiB at most, and each OK answer carries the metadata of its
// descriptors (an expanded 100 MB one took the worker 1.5 s a call).
inline constexpr size_t kMaxEnvoyMetadataBytes = size_t{64} << 10;
// Every descriptor's together, over the directory's files.
inline constexpr uint64_t kMaxEnvoyMetadataTotalBytes = uint64_t{16} << 20;
// unit: concurrent's bounds, a concurrency rule's (limit/concurrency.h).
inline constexpr uint64_t kMaxConcurrent = 77;
inline constexpr uint64_t kMaxConcurrentLeaseS = 65534;
inline constexpr size_t kMaxEnvoyDescriptors = 65536;
// All the files of a configuration together.
inline constexpr size_t kMaxEnvoyBundleBytes = 16u << 20;

// Parses one YAML file's text (`file` names it in messages).
Result<Domain> ParseEnvoyYaml(std::string_view text, const std::string& file);

// One file's bytes: a file that is not a regular one (a FIFO would block
// the reader) or is larger than kMaxEnvoyFileBytes is refused, naming it.
Result<std::string> ReadEnvoyFile(const std::string& path);
// The files of `dir` and of its subdirectories (every regular file, or
// symbolic link to one, whose name does not start with '.'; in path order)
// as one bundle of (path, bytes) pairs; a missing or unreadable directory
// is an error. Directories whose name starts with '.' are skipped too, so
// that a Kubernetes ConfigMap's "..data" and "..2024_..." are read once,
// through the links beside them.
Result<std::string> ReadEnvoyDir(const std::string& dir);
// `paths` with each directory replaced by its files as ReadEnvoyDir reads
// them (frsctl envoy-config DIR reads what frsd's <grpc config> would).
Result<std::vector<std::string>> ExpandEnvoyPaths(const std::vector<std::string>& paths);
// The bundle of the files named, in that order (frsctl envoy-config).
Result<std::string> BundleOfFiles(const std::vector<std::string>& paths);
// Parses every file of a bundle; two files of one domain are refused, or,
// with `merge_domains` (MERGE_DOMAIN_CONFIG), merged into one domain in the
// files' order (a descriptor both give is refused, as upstream refuses it).
Result<EnvoyConfig> ParseEnvoyBundle(std::string_view bundle, bool merge_domains = false);
// The ids entry of a bundle (an entry with an empty path: no file has one),
// appended by frsd's master after the files.
std::string BundleIdsEntry(const EnvoyIds& ids);
// "NAME ID PATH" lines, or "NAME ID" for a name not bound yet (envoy.ids'
// text and the ids entry's); a damaged line is skipped.
EnvoyIds ParseEnvoyIds(std::string_view text);
std::string FormatEnvoyIds(const EnvoyIds& ids);

}  // namespace frs::envoy
