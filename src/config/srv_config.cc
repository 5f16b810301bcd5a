#include "config/srv_config.h"

#include <pugixml.hpp>

#include <charconv>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "base/cidr.h"
#include "os/store_dir.h"
#include "os/text_file.h"

namespace frs {
namespace {

namespace fs = std::filesystem;

class Parser {
 public:
  Parser(const os::LineIndex& lines) : lines_(lines) {}

  Status Error(const pugi::xml_node& n, const std::string& msg) const {
    return Status::InvalidArgument(lines_.At(n.offset_debug(), msg));
  }

  // Unsigned attribute in [lo, hi]; leaves *out alone when absent.
  Status UInt(const pugi::xml_node& n, const char* attr, uint64_t lo, uint64_t hi, uint64_t* out) const {
    pugi::xml_attribute a = n.attribute(attr);
    if (!a) return Status::OK();
    return ParseUInt(n, std::string("<") + n.name() + " " + attr + ">", a.value(), lo, hi, out);
  }

  Status ParseUInt(const pugi::xml_node& n, const std::string& what, std::string_view text, uint64_t lo, uint64_t hi,
                   uint64_t* out) const {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\n' || text.front() == '\t'))
      text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\t')) text.remove_suffix(1);
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size() || text.empty())
      return Error(n, what + " must be a whole number, not \"" + std::string(text) + "\"");
    if (v < lo || v > hi)
      return Error(n, what + " is " + std::to_string(v) + ", must be from " + std::to_string(lo) + " to " +
                          std::to_string(hi));
    *out = v;
    return Status::OK();
  }

  Status OnlyAttrs(const pugi::xml_node& n, std::initializer_list<const char*> allowed) const {
    for (pugi::xml_attribute a : n.attributes()) {
      bool ok = false;
      for (const char* name : allowed) ok = ok || std::string_view(a.name()) == name;
      if (!ok) return Error(n, std::string("<") + n.name() + "> has no attribute \"" + a.name() + "\"");
    }
    return Status::OK();
  }

 private:
  const os::LineIndex& lines_;
};

std::string Resolve(const fs::path& base, const std::string& p) {
  if (p.empty()) return p;
  fs::path path(p);
  if (path.is_relative()) path = base / path;
  return path.lexically_normal().string();
}

// <cluster>'s replica attributes (docs/configuration.md).
Status ParseReplicas(const Parser& P, const pugi::xml_node& n, SrvConfig* cfg) {
  uint64_t v = 0;
  if (Status s = P.UInt(n, "replicas", 0, 1, &v); !s.ok()) return s;
  cfg->cluster_replicas = static_cast<uint32_t>(v);
  if (pugi::xml_attribute a = n.attribute("replica_mode")) {
    const std::string_view m = a.value();
    if (m != "sync" && m != "async")
      return P.Error(n, "<cluster replica_mode> is sync (the default) or async, not \"" + std::string(m) + "\"");
    cfg->replica_sync = m == "sync";
  }
  v = cfg->replica_timeout_ms;
  if (Status s = P.UInt(n, "replica_timeout_ms", 10, 60000, &v); !s.ok()) return s;
  cfg->replica_timeout_ms = static_cast<uint32_t>(v);
  if (pugi::xml_attribute a = n.attribute("on_replica_down")) {
    const std::string_view m = a.value();
    if (m != "serve" && m != "refuse")
      return P.Error(n, "<cluster on_replica_down> is serve (the default) or refuse, not \"" + std::string(m) + "\"");
    cfg->replica_refuse = m == "refuse";
  }
  return Status::OK();
}

}  // namespace

Result<SrvConfig> LoadSrvConfig(const std::string& path_in) { return LoadSrvConfigText(path_in, nullptr); }

Result<SrvConfig> LoadSrvConfigText(const std::string& path_in, const std::string* text_in) {
  std::error_code ec;
  fs::path abs = fs::absolute(path_in, ec);
  if (ec) return Status::InvalidArgument(path_in + ":1: cannot resolve path: " + ec.message());
  SrvConfig cfg;
  cfg.path = abs.lexically_normal().string();
  const fs::path base = fs::path(cfg.path).parent_path();

  std::string text;
  if (text_in) {
    text = *text_in;
  } else {
    Result<std::string> read = os::ReadTextFile(cfg.path);
    if (!read.ok()) return Status::InvalidArgument(read.status().message());
    text = std::move(read.value());
  }
  os::LineIndex lines(cfg.path, text);
  pugi::xml_document doc;
  pugi::xml_parse_result pr = doc.load_buffer(text.data(), text.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!pr) return Status::InvalidArgument(lines.At(pr.offset, std::string("malformed XML: ") + pr.description()));
  Parser P(lines);
  pugi::xml_node root = doc.document_element();
  if (std::string_view(root.name()) != "frs")
    return P.Error(root, "the root element must be <frs>, not <" + std::string(root.name()) + ">");

  std::set<std::string> seen;
  bool have_map = false;
  for (pugi::xml_node n : root.children()) {
    if (n.type() != pugi::node_element) continue;
    std::string name = n.name();
    if (name != "allow" && !seen.insert(name).second) return P.Error(n, "<" + name + "> appears twice");
    Status s;
    uint64_t v = 0;
    if (name == "listen") {
      if (!(s = P.OnlyAttrs(n, {"host", "port", "reuseport"})).ok()) return s;
      if (n.attribute("reuseport")) {
        v = 0;
        if (!(s = P.UInt(n, "reuseport", 0, 1, &v)).ok()) return s;
        cfg.reuseport = v == 1;
      }
      if (n.attribute("host")) {
        cfg.host = n.attribute("host").value();
        IpAddress ip;
        if (!IpAddress::Parse(cfg.host, &ip))
          return P.Error(n, "<listen host> must be an IPv4 or IPv6 address, not \"" + cfg.host + "\"");
      }
      v = cfg.port;
      if (!(s = P.UInt(n, "port", 0, 65535, &v)).ok()) return s;
      cfg.port = static_cast<uint16_t>(v);
    } else if (name == "workers") {
      if (!(s = P.ParseUInt(n, "<workers>", n.child_value(), 1, 256, &v)).ok()) return s;
      cfg.workers = static_cast<uint32_t>(v);
    } else if (name == "map") {
      std::string m = n.child_value();
      if (m.empty()) return P.Error(n, "<map> must name the map.xml file");
      cfg.map_path = Resolve(base, m);
      have_map = true;
    } else if (name == "store") {
      if (!(s = P.OnlyAttrs(n, {"dir", "files", "keynodes", "chain"})).ok()) return s;
      std::string dir = n.attribute("dir").value();
      if (dir.empty()) return P.Error(n, "<store dir> is required");
      cfg.store_dir = Resolve(base, dir);
      v = cfg.geometry.files;
      if (!(s = P.UInt(n, "files", 1, 256, &v)).ok()) return s;
      cfg.geometry.files = static_cast<uint32_t>(v);
      v = cfg.geometry.keynodes;
      if (!(s = P.UInt(n, "keynodes", 1, 1u << 26, &v)).ok()) return s;
      cfg.geometry.keynodes = static_cast<uint32_t>(v);
      v = cfg.geometry.chain;
      if (!(s = P.UInt(n, "chain", 1, 64, &v)).ok()) return s;
      cfg.geometry.chain = static_cast<uint32_t>(v);
    } else if (name == "timezone") {
      cfg.timezone = n.child_value();
      if (cfg.timezone.empty()) return P.Error(n, "<timezone> must be an IANA zone name such as UTC or Asia/Shanghai");
    } else if (name == "pidfile") {
      cfg.pidfile = Resolve(base, n.child_value());
    } else if (name == "log") {
      if (!(s = P.OnlyAttrs(n, {"file"})).ok()) return s;
      cfg.logfile = Resolve(base, n.attribute("file").value());
    } else if (name == "admin") {
      if (!(s = P.OnlyAttrs(n, {"token"})).ok()) return s;
      cfg.admin_token = n.attribute("token").value();
    } else if (name == "allow") {
      std::string list = n.child_value();
      for (char& c : list)
        if (c == ',' || c == '\n' || c == '\t') c = ' ';
      size_t i = 0;
      while (i < list.size()) {
        size_t j = list.find(' ', i);
        if (j == std::string::npos) j = list.size();
        std::string item = list.substr(i, j - i);
        if (!item.empty()) {
          if (!ParseCidr(item).ok())
            return P.Error(n, "<allow> entry \"" + item + "\" is not an address or CIDR range");
          cfg.allow.push_back(item);
        }
        i = j + 1;
      }
    } else if (name == "ratelimit") {
      if (!(s = P.OnlyAttrs(n, {"legacy"})).ok()) return s;
      if (n.attribute("legacy")) {
        const std::string_view legacy = n.attribute("legacy").value();
        if (legacy == "only") cfg.ratelimit_fields = SrvConfig::RateLimitFields::kLegacy;
        else if (legacy == "1") cfg.ratelimit_fields = SrvConfig::RateLimitFields::kDraftAndLegacy;
        else if (legacy == "0") cfg.ratelimit_fields = SrvConfig::RateLimitFields::kDraft;
        else
          return P.Error(n,
                         "<ratelimit legacy> is 1 (both forms), 0 (the draft's fields only) or only (the older "
                         "RateLimit-Limit/-Remaining/-Reset only), not \"" +
                             std::string(legacy) + "\"");
      }
    } else if (name == "limits") {
      if (!(s = P.OnlyAttrs(n, {"header_bytes", "body_bytes", "connections", "idle_timeout_ms", "request_timeout_ms",
                                "batch"}))
               .ok())
        return s;
      struct {
        const char* attr;
        uint64_t lo, hi;
        uint32_t* field;
      } fields[] = {
          {"header_bytes", 1024, 1u << 20, &cfg.max_header_bytes},
          {"body_bytes", 256, 16u << 20, &cfg.max_body_bytes},
          {"connections", 1, 1000000, &cfg.max_connections},
          {"idle_timeout_ms", 100, 3600000, &cfg.idle_timeout_ms},
          {"request_timeout_ms", 100, 3600000, &cfg.request_timeout_ms},
          {"batch", 1, kMaxWireBatch, &cfg.max_batch},
      };
      for (auto& f : fields) {
        v = *f.field;
        if (!(s = P.UInt(n, f.attr, f.lo, f.hi, &v)).ok()) return s;
        *f.field = static_cast<uint32_t>(v);
      }
    } else if (name == "cluster") {
      if (!(s = P.OnlyAttrs(n, {"self", "enforce", "replicas", "replica_mode", "replica_timeout_ms", "on_replica_down",
                                "lease_key"}))
               .ok())
        return s;
      cfg.cluster_self = n.attribute("self").value();
      // Checked as a <shard> is: a self that is not a dialable host:port
      // named no shard (every key answered 421 naming this very server), and
      // a handoff's spool fields split on a space in it.
      if (n.attribute("self"))
        if (Status a = Ring::CheckAddress(cfg.cluster_self); !a.ok())
          return P.Error(n, "<cluster self> must be host:port exactly as in the proxy's server line, not \"" +
                                cfg.cluster_self + "\": " + a.message());
      v = 1;
      if (!(s = P.UInt(n, "enforce", 0, 1, &v)).ok()) return s;
      cfg.cluster_enforce = v == 1;
      if (Status r = ParseReplicas(P, n, &cfg); !r.ok()) return r;
      if (pugi::xml_attribute a = n.attribute("lease_key")) {
        if (std::string_view(a.value()).empty()) return P.Error(n, "<cluster lease_key> names a file, not \"\"");
        cfg.cluster_lease_key = Resolve(base, a.value());
      }
      for (pugi::xml_node sh : n.children()) {
        if (sh.type() != pugi::node_element) continue;
        if (std::string_view(sh.name()) != "shard")
          return P.Error(sh, "<cluster> holds only <shard> elements, not <" + std::string(sh.name()) + ">");
        if (!(s = P.OnlyAttrs(sh, {"weight"})).ok()) return s;
        RingShard shard;
        shard.name = sh.child_value();
        const size_t first = shard.name.find_first_not_of(" \t\r\n");
        shard.name = first == std::string::npos
                         ? std::string()
                         : shard.name.substr(first, shard.name.find_last_not_of(" \t\r\n") + 1 - first);
        v = 1;
        if (!(s = P.UInt(sh, "weight", 1, Ring::kMaxRingWeight, &v)).ok()) return s;
        shard.weight = static_cast<uint32_t>(v);
        if (Status a = Ring::CheckAddress(shard.name); !a.ok())
          return P.Error(sh, "<shard> must be host:port exactly as in the proxy's server line, not \"" + shard.name +
                                 "\": " + a.message());
        for (const RingShard& other : cfg.cluster_shards)
          if (other.name == shard.name) return P.Error(sh, "shard " + shard.name + " is listed twice");
        cfg.cluster_shards.push_back(std::move(shard));
      }
      if (cfg.cluster_shards.empty()) return P.Error(n, "<cluster> needs at least one <shard>");
      if (auto ring = Ring::Make(cfg.cluster_shards); !ring.ok()) return P.Error(n, ring.status().message());
      if (cfg.cluster_replicas > 0 && cfg.cluster_shards.size() < 2)
        return P.Error(n, "<cluster replicas=\"1\"> needs at least two <shard>s: a replica lives on another shard");
      if (cfg.cluster_replicas > 0 && cfg.cluster_shards.size() > SrvConfig::kMaxReplicaShards)
        return P.Error(n, "<cluster replicas=\"1\"> takes at most " + std::to_string(SrvConfig::kMaxReplicaShards) +
                              " shards (each worker keeps a link to every other shard)");
    } else if (name == "flush") {
      if (!(s = P.OnlyAttrs(n, {"interval_ms"})).ok()) return s;
      v = cfg.flush_interval_ms;
      if (!(s = P.UInt(n, "interval_ms", 0, 3600000, &v)).ok()) return s;
      if (v != 0 && v < 10) return P.Error(n, "<flush interval_ms> is 0 (the kernel's writeback) or 10..3600000 ms");
      cfg.flush_interval_ms = static_cast<uint32_t>(v);
    } else if (name == "decisions") {
      if (!(s = P.OnlyAttrs(n, {"file", "record", "sample"})).ok()) return s;
      const std::string file = n.attribute("file").value();
      if (file.empty()) return P.Error(n, "<decisions file> is required: the path of the decision log");
      cfg.decisions_file = Resolve(base, file);
      if (n.attribute("record")) {
        const std::string_view record = n.attribute("record").value();
        if (record == "denied") cfg.decisions_all = false;
        else if (record == "all") cfg.decisions_all = true;
        else
          return P.Error(n, "<decisions record> is denied (the default) or all, not \"" + std::string(record) + "\"");
      }
      if (n.attribute("sample")) {
        // A share from 0 to 1: "0.01", "1", ".5"; no exponent, sign or words.
        const std::string text = n.attribute("sample").value();
        double v = -1;
        const bool plain = !text.empty() && text.find_first_not_of("0123456789.") == std::string::npos;
        auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::fixed);
        if (!plain || ec != std::errc() || p != text.data() + text.size() || !(v >= 0.0 && v <= 1.0))
          return P.Error(n,
                         "<decisions sample> is the share of decisions written, from 0 to 1 (0.01 is one in a "
                         "hundred), not \"" +
                             text + "\"");
        cfg.decisions_sample = v;
      }
    } else if (name == "grpc") {
      if (!(s = P.OnlyAttrs(n, {"listen",
                                "config",
                                "headers",
                                "streams",
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
                                "client_names"}))
               .ok())
        return s;
      const std::string listen = n.attribute("listen").value();
      // unix="PATH" mode="0660": a Unix socket in place of host:port.
      if (n.attribute("unix") && n.attribute("listen"))
        return P.Error(n, "<grpc> takes listen=\"host:port\" or unix=\"PATH\", not both");
      if (n.attribute("unix")) {
        const std::string path = n.attribute("unix").value();
        // sun_path holds 108 bytes with its terminating NUL.
        if (path.empty() || path.size() > 107)
          return P.Error(n, "<grpc unix> must be the socket's path (at most 107 bytes), not \"" + path + "\"");
        cfg.grpc_unix = Resolve(base, path);
        if (cfg.grpc_unix.size() > 107)
          return P.Error(n,
                         "<grpc unix> resolves to " + cfg.grpc_unix + ", longer than a socket path may be (107 bytes)");
      }
      if (n.attribute("mode")) {
        const std::string text = n.attribute("mode").value();
        uint64_t mode = 0;
        auto [me, mec] = std::from_chars(text.data(), text.data() + text.size(), mode, 8);
        if (cfg.grpc_unix.empty() || text.empty() || mec != std::errc() || me != text.data() + text.size() ||
            mode > 0777)
          return P.Error(n, "<grpc mode> is the Unix socket's permissions in octal (0660), with unix=\"PATH\", not \"" +
                                text + "\"");
        cfg.grpc_unix_mode = static_cast<uint32_t>(mode);
      }
      if (n.attribute("cert")) cfg.grpc_tls_cert = Resolve(base, n.attribute("cert").value());
      if (n.attribute("key")) cfg.grpc_tls_key = Resolve(base, n.attribute("key").value());
      if (n.attribute("client_ca")) cfg.grpc_tls_client_ca = Resolve(base, n.attribute("client_ca").value());
      if (cfg.grpc_tls_cert.empty() != cfg.grpc_tls_key.empty() ||
          (n.attribute("cert") && !*n.attribute("cert").value()) ||
          (n.attribute("key") && !*n.attribute("key").value()))
        return P.Error(n, "<grpc cert> and <grpc key> go together: the server's certificate and its private key (PEM)");
      if (n.attribute("client_ca") && (cfg.grpc_tls_cert.empty() || !*n.attribute("client_ca").value()))
        return P.Error(n, "<grpc client_ca> (a required client certificate) needs TLS: cert=\"...\" key=\"...\"");
      if (n.attribute("client_names")) {
        std::string list = n.attribute("client_names").value();
        for (char& c : list)
          if (c == ',' || c == '\n' || c == '\t') c = ' ';
        for (size_t i = 0; i < list.size();) {
          size_t j = list.find(' ', i);
          if (j == std::string::npos) j = list.size();
          if (j > i) cfg.grpc_tls_client_names.push_back(list.substr(i, j - i));
          i = j + 1;
        }
        if (cfg.grpc_tls_client_names.empty() || cfg.grpc_tls_client_ca.empty())
          return P.Error(n, "<grpc client_names> lists the client certificate names allowed, and needs client_ca");
      }
      if (!cfg.grpc_unix.empty()) {
        cfg.grpc = true;
        cfg.grpc_host.clear();
        cfg.grpc_port = 0;
      } else {
        const size_t colon = listen.rfind(':');
        std::string host = colon == std::string::npos ? std::string() : listen.substr(0, colon);
        if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
        IpAddress ip;
        uint64_t port = 0;
        const std::string port_text = colon == std::string::npos ? std::string() : listen.substr(colon + 1);
        auto [pe, pec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
        if (!IpAddress::Parse(host, &ip) || port_text.empty() || pec != std::errc() ||
            pe != port_text.data() + port_text.size() || port > 65535)
          return P.Error(n, "<grpc listen> must be host:port (an IP address; port 0: the kernel chooses), not \"" +
                                listen + "\"");
        cfg.grpc = true;
        cfg.grpc_host = host;
        cfg.grpc_port = static_cast<uint16_t>(port);
      }
      const std::string dir = n.attribute("config").value();
      if (dir.empty()) return P.Error(n, "<grpc config> must name the directory of envoyproxy/ratelimit YAML files");
      cfg.grpc_config = Resolve(base, dir);
      v = 0;
      if (!(s = P.UInt(n, "headers", 0, 1, &v)).ok()) return s;
      cfg.grpc_headers = v == 1;
      v = cfg.grpc_max_streams;
      if (!(s = P.UInt(n, "streams", 1, 1000, &v)).ok()) return s;
      cfg.grpc_max_streams = static_cast<uint32_t>(v);
      // envoyproxy/ratelimit's settings (its environment variables), each
      // an attribute: the switches 0|1, the header names HTTP tokens, the
      // near-limit ratio a share from 0 to 1.
      struct {
        const char* attr;
        bool* field;
      } switches[] = {{"shadow", &cfg.grpc_shadow},
                      {"quota", &cfg.grpc_quota},
                      {"metadata", &cfg.grpc_metadata},
                      {"stop_increment_when_over", &cfg.grpc_stop_increment},
                      {"healthy_with_config", &cfg.grpc_healthy_with_config},
                      {"merge_domains", &cfg.grpc_merge_domains}};
      for (auto& sw : switches) {
        v = *sw.field ? 1 : 0;
        if (!(s = P.UInt(n, sw.attr, 0, 1, &v)).ok()) return s;
        *sw.field = v == 1;
      }
      struct {
        const char* attr;
        std::string* field;
      } header_names[] = {{"limit_header", &cfg.grpc_limit_header},
                          {"remaining_header", &cfg.grpc_remaining_header},
                          {"reset_header", &cfg.grpc_reset_header}};
      for (auto& h : header_names) {
        if (!n.attribute(h.attr)) continue;
        const std::string name = n.attribute(h.attr).value();
        const bool token = !name.empty() && name.size() <= 128 &&
                           name.find_first_not_of(
                               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                               "!#$%&'*+-.^_`|~") == std::string::npos;
        if (!token)
          return P.Error(n, std::string("<grpc ") + h.attr +
                                "> must be an HTTP header name (1..128 token characters), "
                                "not \"" +
                                name + "\"");
        *h.field = name;
      }
      if (n.attribute("near_limit_ratio")) {
        const std::string text = n.attribute("near_limit_ratio").value();
        double r = -1;
        const bool plain = !text.empty() && text.find_first_not_of("0123456789.") == std::string::npos;
        auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), r, std::chars_format::fixed);
        if (!plain || ec != std::errc() || p != text.data() + text.size() || !(r >= 0.0 && r <= 1.0))
          return P.Error(n,
                         "<grpc near_limit_ratio> is a share of the limit from 0 to 1 (0.8 is envoyproxy/"
                         "ratelimit's NEAR_LIMIT_RATIO default), not \"" +
                             text + "\"");
        cfg.grpc_near_limit_ratio = r;
      }
    } else {
      return P.Error(n, "unknown element <" + name + ">");
    }
  }
  if (!have_map) return P.Error(root, "<map> is required (the map.xml of businesses)");
  if (cfg.store_dir.empty()) return P.Error(root, "<store dir=\"...\"/> is required");
  if (!cfg.cluster_shards.empty() && cfg.cluster_self.empty()) {
    cfg.cluster_self = ListenName(cfg.host, cfg.port);
    cfg.cluster_self_derived = true;
  }
  // Shards send each other changes of counts (POST /replicate), an admin's
  // act: they prove it with the token they share.
  if (cfg.cluster_replicas > 0 && cfg.admin_token.empty())
    return P.Error(root,
                   "<cluster replicas=\"1\"> needs <admin token=\"...\">, the same on every shard: shards "
                   "authenticate the changes they send each other with it");
  return cfg;
}

std::string DefaultSrvConfigPath() {
  const char* env = std::getenv("FRS_CONF");
  if (env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path prefix = ec ? fs::path("/usr") : exe.parent_path().parent_path();
  if (prefix == "/usr" || prefix == "/" || prefix.empty()) return "/etc/frs/srv.xml";
  return (prefix / "etc" / "frs" / "srv.xml").string();
}

std::string ListenName(const std::string& host, uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

void ApplyBoundPort(SrvConfig* cfg, uint16_t bound) {
  if (cfg->port == 0) cfg->port = bound;
  if (cfg->cluster_self_derived) cfg->cluster_self = ListenName(cfg->host, cfg->port);
}

std::string ListenAddressPath(const SrvConfig& cfg) { return os::store_dir::In(cfg.store_dir, os::store_dir::kListen); }
std::string GrpcListenAddressPath(const SrvConfig& cfg) {
  return os::store_dir::In(cfg.store_dir, os::store_dir::kGrpcListen);
}

}  // namespace frs
