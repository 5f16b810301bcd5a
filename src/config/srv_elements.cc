#include "config/srv_elements.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <utility>

#include "base/cidr.h"
#include "frs/ring.h"
#include "limit/time_zone.h"

namespace frs::srv {

Status Context::Error(const pugi::xml_node& n, const std::string& msg) const {
  return Status::InvalidArgument(lines_.At(n.offset_debug(), msg));
}

Status Context::UInt(const pugi::xml_node& n, const char* attr, uint64_t lo, uint64_t hi, uint64_t* out) const {
  pugi::xml_attribute a = n.attribute(attr);
  if (!a) return Status::OK();
  return ParseUInt(n, std::string("<") + n.name() + " " + attr + ">", a.value(), lo, hi, out);
}

Status Context::ParseUInt(const pugi::xml_node& n, const std::string& what, std::string_view text, uint64_t lo,
                          uint64_t hi, uint64_t* out) const {
  const auto blank = [](char c) { return c == ' ' || c == '\n' || c == '\t'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  // Digits past 2^64 are a whole number too: said as out of range.
  if (ec == std::errc::result_out_of_range && p == text.data() + text.size())
    return Error(n, what + " is " + std::string(text) + ", must be from " + std::to_string(lo) + " to " +
                        std::to_string(hi));
  if (ec != std::errc() || p != text.data() + text.size() || text.empty())
    return Error(n, what + " must be a whole number, not \"" + std::string(text) + "\"");
  if (v < lo || v > hi)
    return Error(n, what + " is " + std::to_string(v) + ", must be from " + std::to_string(lo) + " to " +
                        std::to_string(hi));
  *out = v;
  return Status::OK();
}

std::string Context::Resolve(const std::string& p) const {
  if (p.empty()) return p;
  std::filesystem::path path(p);
  if (path.is_relative()) path = base_ / path;
  return path.lexically_normal().string();
}

bool ParseShare(const std::string& text, double* out) {
  double v = -1;
  const bool plain = !text.empty() && text.find_first_not_of("0123456789.") == std::string::npos;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::fixed);
  if (!plain || ec != std::errc() || p != text.data() + text.size() || !(v >= 0.0 && v <= 1.0)) return false;
  *out = v;
  return true;
}

namespace {

// A uint32_t field set from an attribute in [lo, hi], when the attribute is
// there.
struct UIntAttribute {
  const char* name;
  uint64_t lo, hi;
  uint32_t SrvConfig::*field;
};

Status SetUInts(const Context& ctx, const pugi::xml_node& n, std::span<const UIntAttribute> attrs) {
  for (const UIntAttribute& a : attrs) {
    uint64_t v = ctx.cfg().*a.field;
    if (Status s = ctx.UInt(n, a.name, a.lo, a.hi, &v); !s.ok()) return s;
    ctx.cfg().*a.field = static_cast<uint32_t>(v);
  }
  return Status::OK();
}

// An attribute that is 0 or 1 (absent: `absent`).
Status Switch(const Context& ctx, const pugi::xml_node& n, const char* attr, bool absent, bool* out) {
  uint64_t v = absent ? 1 : 0;
  if (Status s = ctx.UInt(n, attr, 0, 1, &v); !s.ok()) return s;
  *out = v == 1;
  return Status::OK();
}

}  // namespace

std::vector<std::string> Words(std::string list) {
  for (char& c : list)
    if (c == ',' || c == '\n' || c == '\t') c = ' ';
  std::vector<std::string> words;
  for (size_t i = 0; i < list.size();) {
    size_t j = list.find(' ', i);
    if (j == std::string::npos) j = list.size();
    if (j > i) words.push_back(list.substr(i, j - i));
    i = j + 1;
  }
  return words;
}

namespace {

Status SetListen(const Context& ctx, const pugi::xml_node& n) {
  SrvConfig& cfg = ctx.cfg();
  if (n.attribute("reuseport"))
    if (Status s = Switch(ctx, n, "reuseport", false, &cfg.reuseport); !s.ok()) return s;
  if (n.attribute("host")) {
    cfg.host = n.attribute("host").value();
    IpAddress ip;
    if (!IpAddress::Parse(cfg.host, &ip))
      return ctx.Error(n, "<listen host> must be an IPv4 or IPv6 address, not \"" + cfg.host + "\"");
  }
  uint64_t v = cfg.port;
  if (Status s = ctx.UInt(n, "port", 0, 65535, &v); !s.ok()) return s;
  cfg.port = static_cast<uint16_t>(v);
  return Status::OK();
}

Status SetWorkers(const Context& ctx, const pugi::xml_node& n) {
  uint64_t v = 0;
  if (Status s = ctx.ParseUInt(n, "<workers>", n.child_value(), 1, 256, &v); !s.ok()) return s;
  ctx.cfg().workers = static_cast<uint32_t>(v);
  return Status::OK();
}

// Room in PATH_MAX (4096, the NUL included) for "/" and the longest name a
// store directory holds.
constexpr size_t kMaxStoreDirBytes = 4000;

Status SetMap(const Context& ctx, const pugi::xml_node& n) {
  const std::string m = n.child_value();
  if (m.empty()) return ctx.Error(n, "<map> must name the map.xml file");
  ctx.cfg().map_path = ctx.Resolve(m);
  return Status::OK();
}

Status SetStore(const Context& ctx, const pugi::xml_node& n) {
  SrvConfig& cfg = ctx.cfg();
  const std::string dir = n.attribute("dir").value();
  if (dir.empty()) return ctx.Error(n, "<store dir> is required");
  cfg.store_dir = ctx.Resolve(dir);
  // Its files' paths are opened whole (the directory, "/", their names): one
  // past PATH_MAX opens nowhere, and the start's search of a long path for
  // what exists of it took time quadratic in its components (20 s for
  // 20,000 of them) before it said so.
  if (cfg.store_dir.size() > kMaxStoreDirBytes)
    return ctx.Error(n, "<store dir> is a path of " + std::to_string(cfg.store_dir.size()) + " bytes: at most " +
                            std::to_string(kMaxStoreDirBytes) + " (the system opens no path past 4095 bytes)");
  // A file where the directory should be (or on its path) is said with
  // <store>'s line here, not later as "DIR/frs.0.store: Not a directory".
  struct stat st {};
  if (::stat(cfg.store_dir.c_str(), &st) == 0 ? !S_ISDIR(st.st_mode) : errno == ENOTDIR)
    return ctx.Error(n, "<store dir> " + cfg.store_dir + " is not a directory: a file is there or on its path");
  // A link to nothing would be taken for a new store by frsd -t, then fail
  // the start with "cannot create ...: File exists".
  if (errno == ENOENT && ::lstat(cfg.store_dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return ctx.Error(n, "<store dir> " + cfg.store_dir +
                            " is a symbolic link to nothing (its target does not exist): make the target "
                            "directory, or name an existing directory");
  const struct {
    const char* name;
    uint64_t hi;
    uint32_t StoreGeometry::*field;
  } geometry[] = {{"files", 256, &StoreGeometry::files},
                  {"keynodes", 1u << 26, &StoreGeometry::keynodes},
                  {"chain", 64, &StoreGeometry::chain}};
  for (const auto& g : geometry) {
    uint64_t v = cfg.geometry.*g.field;
    if (Status s = ctx.UInt(n, g.name, 1, g.hi, &v); !s.ok()) return s;
    cfg.geometry.*g.field = static_cast<uint32_t>(v);
  }
  return Status::OK();
}

Status SetTimezone(const Context& ctx, const pugi::xml_node& n) {
  ctx.cfg().timezone = n.child_value();
  if (ctx.cfg().timezone.empty())
    return ctx.Error(n, "<timezone> must be an IANA zone name such as UTC or Asia/Shanghai");
  // Read here, so that a zone this machine does not have is refused with its
  // line by every reader of srv.xml: a reload (which keeps the running zone
  // until a restart) must not call valid what the next start refuses.
  if (auto tz = limit::TimeZone::Load(ctx.cfg().timezone); !tz.ok())
    return ctx.Error(n, "<timezone>: " + tz.status().message());
  return Status::OK();
}

Status SetPidfile(const Context& ctx, const pugi::xml_node& n) {
  ctx.cfg().pidfile = ctx.Resolve(n.child_value());
  return Status::OK();
}

Status SetLog(const Context& ctx, const pugi::xml_node& n) {
  ctx.cfg().logfile = ctx.Resolve(n.attribute("file").value());
  return Status::OK();
}

Status SetAdmin(const Context& ctx, const pugi::xml_node& n) {
  ctx.cfg().admin_token = n.attribute("token").value();
  return Status::OK();
}

// <allow>, any number of them: each adds its addresses and ranges.
Status SetAllow(const Context& ctx, const pugi::xml_node& n) {
  for (std::string& item : Words(n.child_value())) {
    if (!ParseCidr(item).ok()) return ctx.Error(n, "<allow> entry \"" + item + "\" is not an address or CIDR range");
    ctx.cfg().allow.push_back(std::move(item));
  }
  return Status::OK();
}

Status SetRatelimit(const Context& ctx, const pugi::xml_node& n) {
  if (!n.attribute("legacy")) return Status::OK();
  using Fields = SrvConfig::RateLimitFields;
  const std::string_view legacy = n.attribute("legacy").value();
  if (legacy == "only") ctx.cfg().ratelimit_fields = Fields::kLegacy;
  else if (legacy == "1") ctx.cfg().ratelimit_fields = Fields::kDraftAndLegacy;
  else if (legacy == "0") ctx.cfg().ratelimit_fields = Fields::kDraft;
  else
    return ctx.Error(n,
                     "<ratelimit legacy> is 1 (both forms), 0 (the draft's fields only) or only (the older "
                     "RateLimit-Limit/-Remaining/-Reset only), not \"" +
                         std::string(legacy) + "\"");
  return Status::OK();
}

constexpr UIntAttribute kLimits[] = {
    {"header_bytes", 1024, 1u << 20, &SrvConfig::max_header_bytes},
    {"body_bytes", 256, 16u << 20, &SrvConfig::max_body_bytes},
    {"connections", 1, 1000000, &SrvConfig::max_connections},
    {"idle_timeout_ms", 100, 3600000, &SrvConfig::idle_timeout_ms},
    {"request_timeout_ms", 100, 3600000, &SrvConfig::request_timeout_ms},
    {"batch", 1, kMaxWireBatch, &SrvConfig::max_batch},
};

constexpr uint32_t kMaxWorkerStallMs = 3600000;

Status SetLimits(const Context& ctx, const pugi::xml_node& n) {
  if (Status s = SetUInts(ctx, n, kLimits); !s.ok()) return s;
  uint64_t v = ctx.cfg().worker_stall_ms;
  if (Status s = ctx.UInt(n, "worker_stall_ms", 0, UINT64_MAX, &v); !s.ok()) return s;
  if (v != 0 && (v < kMinWorkerStallMs || v > kMaxWorkerStallMs))
    return ctx.Error(n, "<limits worker_stall_ms> is " + std::to_string(v) + ": 0 (no watch) or from " +
                            std::to_string(kMinWorkerStallMs) + " (an idle worker's loop turns once a second) to " +
                            std::to_string(kMaxWorkerStallMs));
  ctx.cfg().worker_stall_ms = static_cast<uint32_t>(v);
  return Status::OK();
}

// <cluster>'s replica attributes (docs/configuration.md).
Status SetReplicas(const Context& ctx, const pugi::xml_node& n) {
  SrvConfig& cfg = ctx.cfg();
  uint64_t v = 0;
  if (Status s = ctx.UInt(n, "replicas", 0, 1, &v); !s.ok()) return s;
  cfg.cluster_replicas = static_cast<uint32_t>(v);
  if (pugi::xml_attribute a = n.attribute("replica_mode")) {
    const std::string_view m = a.value();
    if (m != "sync" && m != "async")
      return ctx.Error(n, "<cluster replica_mode> is sync (the default) or async, not \"" + std::string(m) + "\"");
    cfg.replica_sync = m == "sync";
  }
  v = cfg.replica_timeout_ms;
  if (Status s = ctx.UInt(n, "replica_timeout_ms", 10, 60000, &v); !s.ok()) return s;
  cfg.replica_timeout_ms = static_cast<uint32_t>(v);
  v = cfg.catchup_timeout_ms;
  if (Status s = ctx.UInt(n, "catchup_timeout_ms", 1000, 3600000, &v); !s.ok()) return s;
  cfg.catchup_timeout_ms = static_cast<uint32_t>(v);
  if (pugi::xml_attribute a = n.attribute("on_replica_down")) {
    const std::string_view m = a.value();
    if (m != "serve" && m != "refuse")
      return ctx.Error(n, "<cluster on_replica_down> is serve (the default) or refuse, not \"" + std::string(m) + "\"");
    cfg.replica_refuse = m == "refuse";
  }
  return Status::OK();
}

// <cluster>: its own attributes, then its <shard>s, then the ring they make.
Status SetCluster(const Context& ctx, const pugi::xml_node& n) {
  SrvConfig& cfg = ctx.cfg();
  cfg.cluster_self = n.attribute("self").value();
  // Checked as a <shard> is: a self that is not a dialable host:port
  // named no shard (every key answered 421 naming this very server), and
  // a handoff's spool fields split on a space in it.
  if (n.attribute("self"))
    if (Status a = Ring::CheckAddress(cfg.cluster_self); !a.ok())
      return ctx.Error(n, "<cluster self> must be host:port exactly as in the proxy's server line, not \"" +
                              cfg.cluster_self + "\": " + a.message());
  if (Status s = Switch(ctx, n, "enforce", true, &cfg.cluster_enforce); !s.ok()) return s;
  if (Status s = SetReplicas(ctx, n); !s.ok()) return s;
  if (pugi::xml_attribute a = n.attribute("lease_key")) {
    if (std::string_view(a.value()).empty()) return ctx.Error(n, "<cluster lease_key> names a file, not \"\"");
    cfg.cluster_lease_key = ctx.Resolve(a.value());
  }
  if (pugi::xml_attribute a = n.attribute("lease_key_also")) {
    if (std::string_view(a.value()).empty()) return ctx.Error(n, "<cluster lease_key_also> names a file, not \"\"");
    if (cfg.cluster_lease_key.empty())
      return ctx.Error(n, "<cluster lease_key_also> needs lease_key: it is a second key beside it, for a rotation");
    cfg.cluster_lease_key_also = ctx.Resolve(a.value());
    if (cfg.cluster_lease_key_also == cfg.cluster_lease_key)
      return ctx.Error(n, "<cluster lease_key_also> names the file lease_key names: it is the other key of a rotation");
  }
  for (pugi::xml_node child : n.children()) {
    if (child.type() != pugi::node_element) continue;
    const Element* e = FindElement(child.name(), true);
    if (e == nullptr)
      return ctx.Error(child, "<cluster> holds only <shard> elements, not <" + std::string(child.name()) + ">");
    if (Status s = Apply(ctx, *e, child); !s.ok()) return s;
  }
  if (cfg.cluster_shards.empty()) return ctx.Error(n, "<cluster> needs at least one <shard>");
  if (auto ring = Ring::Make(cfg.cluster_shards); !ring.ok()) return ctx.Error(n, ring.status().message());
  if (cfg.cluster_replicas > 0 && cfg.cluster_shards.size() < 2)
    return ctx.Error(n, "<cluster replicas=\"1\"> needs at least two <shard>s: a replica lives on another shard");
  if (cfg.cluster_replicas > 0 && cfg.cluster_shards.size() > SrvConfig::kMaxReplicaShards)
    return ctx.Error(n, "<cluster replicas=\"1\"> takes at most " + std::to_string(SrvConfig::kMaxReplicaShards) +
                            " shards (each worker keeps a link to every other shard)");
  return Status::OK();
}

Status SetShard(const Context& ctx, const pugi::xml_node& n) {
  RingShard shard;
  shard.name = n.child_value();
  const size_t first = shard.name.find_first_not_of(" \t\r\n");
  shard.name = first == std::string::npos
                   ? std::string()
                   : shard.name.substr(first, shard.name.find_last_not_of(" \t\r\n") + 1 - first);
  uint64_t v = 1;
  if (Status s = ctx.UInt(n, "weight", 1, Ring::kMaxRingWeight, &v); !s.ok()) return s;
  shard.weight = static_cast<uint32_t>(v);
  if (Status a = Ring::CheckAddress(shard.name); !a.ok())
    return ctx.Error(n, "<shard> must be host:port exactly as in the proxy's server line, not \"" + shard.name +
                            "\": " + a.message());
  for (const RingShard& other : ctx.cfg().cluster_shards)
    if (other.name == shard.name) return ctx.Error(n, "shard " + shard.name + " is listed twice");
  ctx.cfg().cluster_shards.push_back(std::move(shard));
  return Status::OK();
}

Status SetFlush(const Context& ctx, const pugi::xml_node& n) {
  uint64_t v = ctx.cfg().flush_interval_ms;
  if (Status s = ctx.UInt(n, "interval_ms", 0, 3600000, &v); !s.ok()) return s;
  if (v != 0 && v < 10) return ctx.Error(n, "<flush interval_ms> is 0 (the kernel's writeback) or 10..3600000 ms");
  ctx.cfg().flush_interval_ms = static_cast<uint32_t>(v);
  return Status::OK();
}

Status SetDecisions(const Context& ctx, const pugi::xml_node& n) {
  SrvConfig& cfg = ctx.cfg();
  const std::string file = n.attribute("file").value();
  if (file.empty()) return ctx.Error(n, "<decisions file> is required: the path of the decision log");
  cfg.decisions_file = ctx.Resolve(file);
  if (n.attribute("record")) {
    const std::string_view record = n.attribute("record").value();
    if (record == "denied") cfg.decisions_all = false;
    else if (record == "all") cfg.decisions_all = true;
    else return ctx.Error(n, "<decisions record> is denied (the default) or all, not \"" + std::string(record) + "\"");
  }
  if (n.attribute("sample")) {
    const std::string text = n.attribute("sample").value();
    if (!ParseShare(text, &cfg.decisions_sample))
      return ctx.Error(n,
                       "<decisions sample> is the share of decisions written, from 0 to 1 (0.01 is one in a "
                       "hundred), not \"" +
                           text + "\"");
  }
  return Status::OK();
}

// The attributes each element takes.
constexpr const char* kListenAttrs[] = {"host", "port", "reuseport"};
constexpr const char* kStoreAttrs[] = {"dir", "files", "keynodes", "chain"};
constexpr const char* kLogAttrs[] = {"file"};
constexpr const char* kAdminAttrs[] = {"token"};
constexpr const char* kRatelimitAttrs[] = {"legacy"};
constexpr const char* kLimitsAttrs[] = {"header_bytes",       "body_bytes", "connections",    "idle_timeout_ms",
                                        "request_timeout_ms", "batch",      "worker_stall_ms"};
constexpr const char* kClusterAttrs[] = {"self",
                                         "enforce",
                                         "replicas",
                                         "replica_mode",
                                         "replica_timeout_ms",
                                         "on_replica_down",
                                         "catchup_timeout_ms",
                                         "lease_key",
                                         "lease_key_also"};
constexpr const char* kShardAttrs[] = {"weight"};
constexpr const char* kFlushAttrs[] = {"interval_ms"};
constexpr const char* kDecisionsAttrs[] = {"file", "record", "sample"};
constexpr const char* kGrpcAttrs[] = {"listen",
                                      "config",
                                      "headers",
                                      "streams",
                                      "buffered_bytes",
                                      "shadow",
                                      "quota",
                                      "metadata",
                                      "limit_header",
                                      "remaining_header",
                                      "reset_header",
                                      "near_limit_ratio",
                                      "stop_increment_when_over",
                                      "healthy_with_config",
                                      "merge_domains",
                                      "unix",
                                      "mode",
                                      "cert",
                                      "key",
                                      "client_ca",
                                      "client_names"};
// The elements whose value is their text take no attribute.
constexpr std::span<const char* const> kText;

constexpr Element kElements[] = {
    {"listen", Place::kOnce, kListenAttrs, false, SetListen},
    {"workers", Place::kOnce, kText, true, SetWorkers},
    {"map", Place::kOnce, kText, true, SetMap},
    {"store", Place::kOnce, kStoreAttrs, false, SetStore},
    {"timezone", Place::kOnce, kText, true, SetTimezone},
    {"pidfile", Place::kOnce, kText, true, SetPidfile},
    {"log", Place::kOnce, kLogAttrs, false, SetLog},
    {"admin", Place::kOnce, kAdminAttrs, false, SetAdmin},
    {"allow", Place::kRepeated, kText, true, SetAllow},
    {"ratelimit", Place::kOnce, kRatelimitAttrs, false, SetRatelimit},
    {"limits", Place::kOnce, kLimitsAttrs, false, SetLimits},
    {"cluster", Place::kOnce, kClusterAttrs, false, SetCluster, true},
    {"shard", Place::kInCluster, kShardAttrs, true, SetShard},
    {"flush", Place::kOnce, kFlushAttrs, false, SetFlush},
    {"decisions", Place::kOnce, kDecisionsAttrs, false, SetDecisions},
    {"grpc", Place::kOnce, kGrpcAttrs, false, SetGrpc},
};

}  // namespace

const Element* FindElement(std::string_view name, bool in_cluster) {
  for (const Element& e : kElements)
    if (e.name == name && (e.place == Place::kInCluster) == in_cluster) return &e;
  return nullptr;
}

Status Apply(const Context& ctx, const Element& e, const pugi::xml_node& n) {
  // A typo that is not refused changes what runs unsaid (<admin>T</admin>
  // started without a token; <map file="x"> read the text), as map.xml
  // refuses alike.
  for (pugi::xml_attribute a : n.attributes()) {
    bool known = false;
    for (const char* name : e.attributes) known = known || std::string_view(a.name()) == name;
    if (!known) return ctx.Error(n, std::string("<") + n.name() + "> has no attribute \"" + a.name() + "\"");
  }
  for (pugi::xml_node c : n.children()) {
    if (c.type() == pugi::node_element && !e.holds_elements)
      return ctx.Error(c, std::string("<") + n.name() + "> holds no element (<" + c.name() + ">)" +
                              (e.text ? ": its value is its text" : ": its settings are attributes"));
    if (!e.text && (c.type() == pugi::node_pcdata || c.type() == pugi::node_cdata) &&
        std::string_view(c.value()).find_first_not_of(" \t\r\n") != std::string_view::npos)
      return ctx.Error(n, std::string("<") + n.name() + "> takes no text: its settings are attributes");
  }
  return e.set(ctx, n);
}

}  // namespace frs::srv
