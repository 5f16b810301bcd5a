#include "config/srv_config.h"

#include <unistd.h>
#include <pugixml.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include "config/srv_elements.h"
#include "limit/xml_shape.h"
#include "os/store_dir.h"
#include "os/text_file.h"

namespace frs {
namespace {

namespace fs = std::filesystem;

// The directories the Envoy loader reads under `dir` (and `dir` itself):
// every one reached through subdirectories and symbolic links, names
// starting with '.' left out, as ReadEnvoyDir walks them; canonical, each
// once, 16 levels at most (the loader refuses deeper trees).
// `files`: the files reached through a symbolic link (a link to a file
// elsewhere is read too), canonical, as reached.
void ReachedDirs(const fs::path& dir, int depth, std::map<fs::path, fs::path>* reached, const fs::path& as_named,
                 std::map<fs::path, fs::path>* files) {
  std::error_code ec;
  const fs::path real = fs::canonical(dir, ec);
  if (ec || !fs::is_directory(real, ec) || !reached->emplace(real, as_named).second) return;
  for (fs::directory_iterator it(real, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(".")) continue;
    std::error_code sub;
    if (fs::is_directory(it->path(), sub)) {
      if (depth < 16) ReachedDirs(it->path(), depth + 1, reached, as_named / name, files);
    } else if (fs::is_symlink(it->symlink_status(sub))) {
      // Where it leads, made yet or not (frsd makes its pid file and
      // decision log after this check).
      fs::path target = fs::read_symlink(it->path(), sub);
      if (sub) continue;
      if (target.is_relative()) target = real / target;
      target = fs::weakly_canonical(target, sub);
      if (!sub) files->emplace(target, as_named / name);
    }
  }
}

// Every change under <grpc config> reloads it (inotify, dot-files included:
// a ConfigMap's ..data swap is one), and every file there is read as YAML:
// a file frsd writes itself in it would reload it at each line written,
// for ever, each reload refused (a Unix socket cannot even be read). Under
// it means where the loader reads: through the directory's symbolic links
// too (a link to frsd's log directory looped reloads five times a second,
// each refused as a YAML error on the log: found from outside).
Status CheckWrittenOutsideGrpcConfig(const srv::Context& ctx, const pugi::xml_node& root) {
  const SrvConfig& cfg = ctx.cfg();
  if (cfg.grpc_config.empty()) return Status::OK();
  auto resolved = [](const std::string& p) {
    std::error_code ec;
    fs::path r = fs::weakly_canonical(p, ec);
    return ec ? fs::path(p).lexically_normal() : r;
  };
  std::map<fs::path, fs::path> reached, linked;  // canonical -> as reached from <grpc config>
  ReachedDirs(cfg.grpc_config, 0, &reached, cfg.grpc_config, &linked);
  if (reached.empty()) reached.emplace(resolved(cfg.grpc_config), cfg.grpc_config);
  const struct {
    const std::string& path;
    const char* what;
    const char* element;
    bool is_dir;
  } written[] = {
      {cfg.logfile, "<log file>", "log", false},     {cfg.decisions_file, "<decisions file>", "decisions", false},
      {cfg.pidfile, "<pidfile>", "pidfile", false},  {cfg.store_dir, "<store dir>", "store", true},
      {cfg.grpc_unix, "<grpc unix>", "grpc", false},
  };
  for (const auto& w : written) {
    if (w.path.empty()) continue;
    const fs::path at = resolved(w.path);
    // A file link to it (a file), or into it (the store's files).
    for (const auto& [target, named] : linked) {
      const fs::path rel = target.lexically_relative(at);
      if (w.is_dir ? rel.empty() || *rel.begin() == ".." || !rel.is_relative() : target != at) continue;
      return ctx.Error(root.child(w.element),
                       std::string(w.what) + " " + w.path +
                           (w.is_dir ? " holds " + target.filename().string() + ", which" : std::string()) +
                           " is read as a file of <grpc config> " + cfg.grpc_config + " (through " + named.string() +
                           "): each reload would read it as rate limit configuration");
    }
    for (const auto& [dir, named] : reached) {
      const fs::path rel = at.lexically_relative(dir);
      // A file in a directory the loader reads, or a directory of frsd's
      // (the store's) read as one of them or holding one.
      const bool inside = !rel.empty() && *rel.begin() != ".." && rel.is_relative() && (w.is_dir || rel != ".");
      // A directory of the loader's inside the store is frsd's to write
      // only under its statistics' folder (stats/...: the day files); the
      // store's own files lie in its root, beside it. (Refused whole, a
      // layout that worked before was refused, with this message's words
      // the other way round: found by a review.)
      const fs::path stats = at / store_dir::kFieldStats;
      const fs::path under_stats = dir.lexically_relative(stats);
      const bool in_stats =
          w.is_dir && !under_stats.empty() && *under_stats.begin() != ".." && under_stats.is_relative();
      if (!inside && !in_stats) continue;
      const std::string through =
          named == fs::path(cfg.grpc_config) ? std::string() : " (through " + named.string() + ")";
      if (!inside)
        return ctx.Error(root.child(w.element), "<grpc config> " + cfg.grpc_config + through + " lies inside " +
                                                    stats.string() +
                                                    ", where frsd writes its statistics by key field (<store dir> " +
                                                    w.path + "): each write would reload the rate limit configuration");
      return ctx.Error(root.child(w.element), std::string(w.what) + " " + w.path + " lies inside <grpc config> " +
                                                  cfg.grpc_config + through +
                                                  ", whose every change reloads the rate limit configuration: "
                                                  "frsd would reload at each write of its own");
    }
  }
  return Status::OK();
}

// What holds across elements, once every element has been read.
Status CheckWhole(const srv::Context& ctx, const pugi::xml_node& root) {
  SrvConfig& cfg = ctx.cfg();
  if (cfg.map_path.empty()) return ctx.Error(root, "<map> is required (the map.xml of businesses)");
  if (cfg.store_dir.empty()) return ctx.Error(root, "<store dir=\"...\"/> is required");
  if (Status s = CheckWrittenOutsideGrpcConfig(ctx, root); !s.ok()) return s;
  if (!cfg.cluster_shards.empty() && cfg.cluster_self.empty()) {
    // A wildcard names no shard: taken for this shard's name, every route
    // was another's, and the 421s sent clients back here.
    if (cfg.host == "0.0.0.0" || cfg.host == "::" || cfg.host == "[::]" || cfg.host.empty())
      return ctx.Error(root.child("cluster"),
                       "<cluster> needs self=\"HOST:PORT\", this shard's name as the <shard> list spells it: "
                       "it defaults to <listen host>:<port>, and " +
                           (cfg.host.empty() ? std::string("an empty host") : cfg.host) +
                           " (every address) names no shard");
    cfg.cluster_self = ListenName(cfg.host, cfg.port);
    cfg.cluster_self_derived = true;
  }
  // A self the list lacks is a leaving shard's, warned of only
  // (ClusterSelfNotListed). But a list that names this frsd's own <listen>
  // means the shard stays, and self is a typo: applied by a reload, the
  // shard owned no route and answered 421 to all of them.
  // With port="0" the port is known once bound: checked then (the start,
  // a reload: OwnListenListedUnderAnotherSelf).
  if (std::string why = OwnListenListedUnderAnotherSelf(cfg); !why.empty())
    return ctx.Error(root.child("cluster"), why);
  // Shards send each other changes of counts (POST /replicate), an admin's
  // act: they prove it with the token they share.
  // Each worker's change stream is named by self, its pid, a time and the
  // run's token (45 bytes beside self), and a receiver keeps its place in a
  // node whose key holds that name: at most 200 bytes (replica_apply.cc).
  if (cfg.cluster_replicas > 0 && cfg.cluster_self.size() > kMaxReplicaSelfBytes)
    return ctx.Error(root.child("cluster"), "<cluster self> is " + std::to_string(cfg.cluster_self.size()) +
                                                " bytes; with replicas it is at most " +
                                                std::to_string(kMaxReplicaSelfBytes) +
                                                " (each change stream's name holds it)");
  if (cfg.cluster_replicas > 0 && cfg.admin_token.empty())
    return ctx.Error(root.child("cluster"),
                     "<cluster replicas=\"1\"> needs <admin token=\"...\">, the same on every shard: shards "
                     "authenticate the changes they send each other with it");
  // It travels in a header (Authorization: Bearer T), whose value loses
  // its ends' blanks and cannot hold a control character: such a token is
  // another one by the time it arrives, and every batch would be refused.
  const std::string& t = cfg.admin_token;
  const bool blank_end = !t.empty() && (t.front() == ' ' || t.front() == '\t' || t.back() == ' ' || t.back() == '\t');
  const bool control = std::any_of(t.begin(), t.end(), [](char ch) {
    return static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) == 0x7f;
  });
  if (cfg.cluster_replicas > 0 && (blank_end || control))
    return ctx.Error(root.child("admin"),
                     "<admin token> begins or ends with a blank, or holds a control character: shards send it in "
                     "an HTTP header (Authorization: Bearer), which cannot carry it as it is");
  return Status::OK();
}

}  // namespace

Result<SrvConfig> LoadSrvConfig(const std::string& path_in) { return LoadSrvConfigText(path_in, nullptr); }

Result<SrvConfig> LoadSrvConfigText(const std::string& path_in, const std::string* text_in) {
  // An empty path named no file ("" read as ":1: cannot resolve path").
  if (path_in.empty()) return Status::InvalidArgument("srv.xml: an empty path names no file");
  std::error_code ec;
  fs::path abs = fs::absolute(path_in, ec);
  if (ec) return Status::InvalidArgument(path_in + ": cannot resolve the path: " + ec.message());
  SrvConfig cfg;
  cfg.path = abs.lexically_normal().string();

  std::string text;
  if (text_in) {
    text = *text_in;
  } else {
    Result<std::string> read = os::ReadTextFile(cfg.path);
    // A path to nothing, or to no regular file, is a wrong argument; a file
    // this user may not read is not (the fix is the user or the mode), and
    // keeps its I/O code (frsctl: exit 3, not 2).
    if (!read.ok()) {
      const bool denied = ::access(cfg.path.c_str(), R_OK) != 0 && (errno == EACCES || errno == EPERM);
      return denied ? read.status() : Status::InvalidArgument(read.status().message());
    }
    text = std::move(read.value());
  }
  os::LineIndex lines(cfg.path, text);
  if (auto p = limit::FindNulProblem(text)) return Status::InvalidArgument(lines.At(p->offset, p->message));
  pugi::xml_document doc;
  pugi::xml_parse_result pr = doc.load_buffer(text.data(), text.size(), limit::kConfigXmlFlags, pugi::encoding_utf8);
  if (!pr) return Status::InvalidArgument(lines.At(pr.offset, std::string("malformed XML: ") + pr.description()));
  const srv::Context ctx(lines, fs::path(cfg.path).parent_path(), &cfg);
  pugi::xml_node root = doc.document_element();
  if (!root) return Status::InvalidArgument(cfg.path + ":1: no <frs> element");
  if (std::string_view(root.name()) != "frs")
    return ctx.Error(root, "the root element must be <frs>, not <" + std::string(root.name()) + ">");
  if (auto p = limit::FindXmlShapeProblem(doc, "frs")) return Status::InvalidArgument(lines.At(p->offset, p->message));

  std::set<std::string_view> seen;
  for (pugi::xml_node n : root.children()) {
    // Text between the elements is a typo or a pasted fragment; taken
    // silently it hid what was meant (map.xml refuses it alike).
    if (n.type() == pugi::node_pcdata || n.type() == pugi::node_cdata) {
      const std::string_view t = n.value();
      const size_t at = n.type() == pugi::node_pcdata ? t.find_first_not_of(" \t\r\n") : 0;
      if (at == std::string_view::npos) continue;
      const std::string_view shown = t.substr(at, std::min(t.find_first_of("\r\n", at), at + 20) - at);
      return Status::InvalidArgument(
          lines.At(n.offset_debug() + static_cast<std::ptrdiff_t>(at),
                   "stray text in <frs> (\"" + std::string(shown) + "\"): it holds only elements"));
    }
    if (n.type() != pugi::node_element) continue;
    const srv::Element* e = srv::FindElement(n.name(), false);
    if (e == nullptr) return ctx.Error(n, "unknown element <" + std::string(n.name()) + ">");
    if (e->place == srv::Place::kOnce && !seen.insert(e->name).second)
      return ctx.Error(n, "<" + std::string(e->name) + "> appears twice");
    if (Status s = srv::Apply(ctx, *e, n); !s.ok()) return s;
    cfg.element_lines.emplace(e->name, lines.LineOf(n.offset_debug()));
  }
  if (Status s = CheckWhole(ctx, root); !s.ok()) return s;
  return cfg;
}

std::string SrvConfig::Where(std::string_view element) const {
  const auto it = element_lines.find(element);
  return it == element_lines.end() ? path : path + ":" + std::to_string(it->second);
}

std::string DefaultSrvConfigPath() {
  const char* env = std::getenv("FRS_CONF");
  if (env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  // A prefix only for a program in its bin or sbin: one elsewhere (a build
  // tree, an unpacked copy) read the srv.xml of its directory's parent,
  // /tmp/etc/frs/srv.xml for one in /tmp (found from outside).
  const fs::path dir = ec ? fs::path() : exe.parent_path();
  const bool in_bin = dir.filename() == "bin" || dir.filename() == "sbin";
  const fs::path prefix = in_bin ? dir.parent_path() : fs::path("/usr");
  if (prefix == "/usr" || prefix == "/" || prefix.empty()) return "/etc/frs/srv.xml";
  return (prefix / "etc" / "frs" / "srv.xml").string();
}

std::string ListenName(const std::string& host, uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string OwnListenListedUnderAnotherSelf(const SrvConfig& cfg) {
  if (cfg.cluster_shards.empty() || cfg.cluster_self_derived || cfg.port == 0) return "";
  const std::string own = ListenName(cfg.host, cfg.port);
  bool self_listed = false, own_listed = false;
  for (const RingShard& sh : cfg.cluster_shards) {
    self_listed |= sh.name == cfg.cluster_self;
    own_listed |= sh.name == own;
  }
  if (!own_listed || own == cfg.cluster_self) return "";
  if (self_listed)
    // Behind a relay: self is the relay's name, and the list names this frsd
    // by its own address too. Two names of one shard: it owns the second's
    // routes as another shard, sends their changes to itself, and its
    // batches signed for the one are refused under the other.
    return "<cluster> names this shard twice: as its self " + cfg.cluster_self + " and as " + own +
           ", this frsd's own <listen>: each shard is listed once, by the name its self gives";
  return "<cluster self> " + cfg.cluster_self + " is not among its <shard>s, but " + own +
         ", this frsd's own <listen>, is: self must name this shard as the list spells it (self=\"" + own +
         "\", or no self at all); a shard leaving the ring is no longer in the list";
}

std::string ClusterSelfNotListed(const SrvConfig& cfg) {
  if (cfg.cluster_shards.empty()) return "";
  // <listen port="0"> and no self: the name follows the port bound at start
  // (ApplyBoundPort), which no list can name beforehand (frsd -t said
  // nothing of it: found from outside).
  if (cfg.cluster_self_derived && cfg.port == 0)
    return "<listen port=\"0\"> with <cluster> and no self: this shard is named by the port it binds at each "
           "start, which no <shard> list can name beforehand, and the other shards reach a shard by its name: give "
           "<listen> a fixed port (or set self to the name the list gives this shard, such as a relay's)";
  for (const RingShard& sh : cfg.cluster_shards)
    if (sh.name == cfg.cluster_self) return "";
  return "<cluster self> " + cfg.cluster_self +
         " is not among its <shard>s: this shard owns no route (with enforce=\"1\" it answers each routed request "
         "421), which is right for a shard leaving the ring, until its handoff; if it is one of them, set self to "
         "its name exactly as the list spells it";
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
