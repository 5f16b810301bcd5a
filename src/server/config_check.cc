#include "server/config_check.h"

#include <dirent.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/srv_config.h"
#include "frs/lock_holders.h"
#include "frs/service.h"
#include "frs/store.h"
#include "frs/store_admin.h"
#include "frs/store_dir.h"
#include "limit/lease_id.h"
#include "limit/map_config.h"
#include "limit/side_files.h"
#include "os/output_file.h"
#include "os/path_access.h"
#include "os/store_dir.h"
#include "os/text_file.h"
#include "os/unique_dir.h"
#include "server/allow_list.h"
#include "server/envoy_map.h"
#include "server/fd_limit.h"
#include "server/listener.h"
#include "server/tls_context.h"
#include "store/store_check.h"

namespace frs::server {

namespace {

std::vector<std::string> NodeFitProblemsOf(const SrvConfig& cfg, const limit::MapConfig& map) {
  std::vector<std::string> problems;
  for (const limit::BizConfig& b : map.bizzes) {
    const uint32_t slots = b.NodeSlotsNeeded();
    // A node may take every slot of its key-node's group, up to kMaxSpan.
    const uint32_t room = GroupSlots(cfg.geometry);
    if (slots > room)
      problems.push_back(cfg.map_path + ":" + std::to_string(b.line) + ": biz \"" + b.name + "\" needs " +
                         std::to_string(slots) + " slots per key but <store chain=\"" +
                         std::to_string(cfg.geometry.chain) + "\" keynodes=\"" + std::to_string(cfg.geometry.keynodes) +
                         "\"> in " + cfg.path + " gives a node at most " + std::to_string(room) +
                         " (the slots of a key-node group)");
  }
  return problems;
}

// `dir`, or the nearest directory above it that exists (what frsd's start
// makes a missing store directory in), with its stat in *st; empty when
// nothing on the path exists.
std::filesystem::path NearestExisting(const std::string& dir, struct stat* st) {
  std::filesystem::path at = dir;
  while (::stat(at.c_str(), st) != 0) {
    if (!at.has_parent_path() || at.parent_path() == at) return {};
    at = at.parent_path();
  }
  return at;
}

// A store frsd's start will make: it creates the directory (and its
// missing parents), then the files. frsd -t said "is new; ok" where the
// start then failed: a directory this user may not write (a volume left
// root's), or a disk that cannot hold the files.
std::vector<std::string> NewStoreProblems(const SrvConfig& cfg) {
  struct stat st {};
  const std::string where = NearestExisting(cfg.store_dir, &st).string();
  if (where.empty()) return {};
  const std::string made = where == cfg.store_dir ? "its files in it" : "the store directory in it";
  if (!S_ISDIR(st.st_mode)) return {"store " + cfg.store_dir + " is new: " + where + " is not a directory"};
  if (::access(where.c_str(), W_OK | X_OK) != 0)
    return {
        "store " + cfg.store_dir + " is new: " +
        (errno == EACCES || errno == EPERM ? os::PermissionWords(where) : Status::FromErrno(where, errno).message()) +
        "; frsd makes " + made};
  const uint64_t need = uint64_t{cfg.geometry.files} * StoreFileBytes(cfg.geometry);
  // `ulimit -f` (LimitFSIZE=) below a file's size: the start refuses to
  // make it (EFBIG), so the check does.
  if (struct rlimit rl{};
      ::getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < StoreFileBytes(cfg.geometry))
    return {"store " + cfg.store_dir + " is new: each of its files is " + std::to_string(StoreFileBytes(cfg.geometry)) +
            " bytes, and this process's file size limit (ulimit -f, LimitFSIZE=) is " + std::to_string(rl.rlim_cur) +
            " bytes"};
  struct statvfs vfs {};
  if (::statvfs(where.c_str(), &vfs) == 0 && uint64_t{vfs.f_bavail} * vfs.f_frsize < need)
    return {"store " + cfg.store_dir + " is new: its " + std::to_string(cfg.geometry.files) + " file(s) need " +
            std::to_string(need) + " bytes and " + where + "'s disk has " +
            std::to_string(uint64_t{vfs.f_bavail} * vfs.f_frsize) +
            " free (free space, or a smaller <store> geometry)"};
  return {};
}

// A symbolic link where frsd writes a file in place: the start refuses it
// (a store file, stats.frs, the lock, lease.key) or keeps nothing there
// (denials.frs, replica-parked), and -t said ok, or a dangling link at a
// store file "missing, its counts lost" (found from outside: an init
// container passed a server that then failed). *store_file: one of them
// is a store file (what the store's own check would say of it is wrong).
// *warnings: a link at denials.frs or replica-parked, or at a folder or day
// file of the statistics by key field, without which frsd serves (a
// warning, as an unreadable day file is: a refusal here would stop every
// reload that runs frsd -t first).
std::vector<std::string> LinkProblems(const SrvConfig& cfg, bool* store_file, std::vector<std::string>* warnings) {
  std::vector<std::string> problems;
  std::vector<std::string> names = {std::string(frs::store_dir::kDailyStats),
                                    std::string(frs::store_dir::kRecentDenials), std::string(frs::store_dir::kLeaseKey),
                                    std::string(frs::store_dir::kStoreLock),
                                    std::string(frs::store_dir::kReplicaParked)};
  const size_t side = names.size();
  for (uint32_t i = 0; i < cfg.geometry.files; ++i) names.push_back(frs::store_dir::StoreFileName(i));
  *store_file = false;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string path = frs::store_dir::In(cfg.store_dir, names[i]);
    struct stat ls {};
    if (::lstat(path.c_str(), &ls) != 0 || !S_ISLNK(ls.st_mode)) continue;
    *store_file |= i >= side;
    // frsd serves without these two (no recent denials; changes of a biz
    // its map lacks not kept aside): a warning, as for the statistics.
    if (names[i] == frs::store_dir::kRecentDenials || names[i] == frs::store_dir::kReplicaParked)
      warnings->push_back(frs::os::store_dir::LinkRefusedWords(path) + " (frsd serves without it)");
    else problems.push_back(frs::os::store_dir::LinkRefusedWords(path));
  }
  // The statistics' folders and day files: a link at stats/, at a biz's or
  // a table's folder, or at a day file, keeps what is below it from being
  // counted and read (field_stats.h).
  // Each entry of `dir` (depth levels down) that is a link is said.
  const auto look = [&](const auto& self, const std::string& dir, int depth) -> void {
    const frs::os::UniqueDir d = frs::os::OpenDir(dir.c_str());
    if (!d) return;
    while (const dirent* e = ::readdir(d.get())) {
      const std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      const std::string path = dir + "/" + std::string(name);
      struct stat ls {};
      if (::lstat(path.c_str(), &ls) != 0) continue;
      if (S_ISLNK(ls.st_mode))
        warnings->push_back(frs::os::store_dir::LinkRefusedWords(path) + " (its statistics by field are not counted)");
      else if (S_ISDIR(ls.st_mode) && depth > 1) self(self, path, depth - 1);
    }
  };
  const std::string stats = frs::store_dir::In(cfg.store_dir, frs::store_dir::kFieldStats);
  struct stat ls {};
  if (::lstat(stats.c_str(), &ls) == 0 && S_ISLNK(ls.st_mode))
    warnings->push_back(frs::os::store_dir::LinkRefusedWords(stats) + " (its statistics by field are not counted)");
  else look(look, stats, 3);  // stats/<biz>/<table>/<day file>
  return problems;
}

// The store directory as frsd's start will use it: a new store made in it
// (NewStoreProblems), its lock and listen files written there.
std::vector<std::string> StoreDirectoryProblems(const SrvConfig& cfg, bool exists) {
  std::vector<std::string> problems;
  if (!exists) problems = NewStoreProblems(cfg);
  // A directory on a read-only file system (or not this user's to write)
  // fails the start, so it fails the check too.
  if (exists && ::access(cfg.store_dir.c_str(), W_OK) != 0)
    problems.push_back(Status::FromErrno("store " + cfg.store_dir + " is not writable", errno).message() +
                       ": frsd writes its lock and listen files there");
  // A directory in their place fails the start ("Is a directory"), so it
  // fails the check. (The lock is opened through a symbolic link; the
  // listen file is renamed over one.)
  for (std::string_view name : {frs::store_dir::kStoreLock, frs::store_dir::kListen}) {
    const std::string path = frs::store_dir::In(cfg.store_dir, name);
    const bool lock = name == frs::store_dir::kStoreLock;
    struct stat st {};
    if ((lock ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) == 0 && S_ISDIR(st.st_mode))
      problems.push_back(path + " is a directory: frsd writes its " + (lock ? "lock" : "listen address") +
                         " there and will not start; remove it");
  }
  return problems;
}

}  // namespace

std::vector<std::string> OutputPathProblems(const SrvConfig& cfg) {
  std::vector<std::string> problems;
  // Each at the line of the element that names it: srv.xml's errors name
  // their line, these too.
  auto check = [&](const std::string& path, std::string_view what, std::string_view element) {
    if (path.empty()) return;
    if (Status s = os::CheckOutputPath(path, what); !s.ok())
      problems.push_back(cfg.Where(element) + ": " + s.message());
  };
  check(cfg.decisions_file, "decision log", "decisions");
  check(cfg.logfile, "log file", "log");
  // The pid file is locked and rewritten: a regular file only; one that
  // does not exist yet needs a directory frsd may create it in (else the
  // start fails after -t passed it).
  if (struct stat st; !cfg.pidfile.empty() && ::stat(cfg.pidfile.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      problems.push_back(cfg.Where("pidfile") + ": the pid file " + os::NotRegularWords(cfg.pidfile, st.st_mode));
  } else if (PidDirMissing(cfg).empty()) {
    check(cfg.pidfile, "pid file", "pidfile");
  }
  return problems;
}

std::string RootOnAnotherUsersStore(const SrvConfig& cfg) {
  if (::geteuid() != 0) return {};
  // The store directory, or the nearest directory above it that exists: a
  // store not made yet under the service user's directory would be made
  // root's.
  struct stat st {};
  const std::filesystem::path at = NearestExisting(cfg.store_dir, &st);
  if (at.empty() || st.st_uid == 0) return {};
  const passwd* pw = ::getpwuid(st.st_uid);
  const bool named = pw != nullptr && pw->pw_name != nullptr;
  const std::string user = named ? std::string(pw->pw_name) : "uid " + std::to_string(st.st_uid);
  const std::string as = named ? "runuser -u " + user + " --"
                               : "setpriv --reuid=" + std::to_string(st.st_uid) +
                                     " --regid=" + std::to_string(st.st_gid) + " --clear-groups";
  return "this frsd runs as root, and " + std::string(at == cfg.store_dir ? "the store directory " : "the directory ") +
         at.string() + (at == cfg.store_dir ? "" : " of the store directory " + cfg.store_dir) + " is " + user +
         "'s: the files it would make there (the side tables, statistics days, rules.history) would be root's, "
         "and frsd run as " +
         user + " (the service) could not open them at its next start; start it as " + user + " (" + as + " frsd -c " +
         cfg.path + ", or systemctl start frsd)";
}

namespace {

// `install -d`'s owner options for a directory the frsd of `cfg` writes in:
// the user it runs as (root: the store directory's owner, the user frsd
// must run as; none for a store of root's).
std::string OwnerOptionsFor(const SrvConfig& cfg) {
  uid_t uid = ::geteuid();
  gid_t gid = ::getegid();
  struct stat st {};
  if (uid == 0 && !NearestExisting(cfg.store_dir, &st).empty()) {
    uid = st.st_uid;
    gid = st.st_gid;
  }
  if (uid == 0) return "";
  return "-o " + os::UserName(uid) + " -g " + os::GroupName(gid) + " ";
}

}  // namespace

std::string PidDirMissing(const SrvConfig& cfg) {
  const std::filesystem::path dir = std::filesystem::path(cfg.pidfile).parent_path();
  struct stat st;
  if (dir.empty() || ::stat(dir.c_str(), &st) == 0 || errno != ENOENT) return {};
  // One level not made yet, in a directory that is there (/run/frs in
  // /run), is no mistake of the configuration: the systemd unit's
  // RuntimeDirectory= makes it before its ExecStartPre runs this check. A
  // deeper path missing is (a typo): that stays a problem.
  const std::filesystem::path parent = dir.has_parent_path() ? dir.parent_path() : ".";
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return {};
  return "the pid file's directory " + dir.string() +
         " does not exist now: the start fails unless it is made first (the systemd unit's RuntimeDirectory= "
         "makes it; by hand: install -d " +
         OwnerOptionsFor(cfg) + dir.string() + ")";
}

std::vector<std::string> NodeFitProblems(const SrvConfig& cfg, std::string_view map_xml) {
  Result<limit::MapConfig> map = limit::ParseMap(map_xml, cfg.map_path);
  if (!map.ok()) return {};  // the map's own errors are reported by whoever parses it
  return NodeFitProblemsOf(cfg, map.value());
}

namespace {
// The pid of the frsd serving this store: the one its lock file names
// while a process holds that lock (/proc/locks, whatever the binary's name;
// a file a kill -9 left names a pid no lock is held for), as frsctl judges
// it. /proc/locks names the process that took the lock, frsd's launcher,
// which forks the master and exits: not compared with the file's pid.
long StoreLockHolder(const SrvConfig& cfg) {
  const std::string lock = frs::store_dir::In(cfg.store_dir, frs::store_dir::kStoreLock);
  if (FlockHolders(lock).empty()) return 0;
  Result<std::string> named = os::ReadTextFile(lock);
  const long pid = named.ok() ? std::atol(named->c_str()) : 0;
  return pid > 0 ? pid : 0;
}

// <grpc unix>: what the start's bind would refuse (a file that is not a
// socket, another server answering there, no directory), or "". A server
// there that this store's frsd published as its own is the running frsd
// (-t before a reload), not a problem.
std::string GrpcUnixProblem(const SrvConfig& cfg) {
  if (!cfg.grpc || cfg.grpc_unix.empty()) return "";
  const Status st = CheckUnixListenPath(cfg.grpc_unix);
  if (st.ok()) return "";
  // This store's frsd: it published the very path (the whole line), and
  // the store's lock is held (a file left by a kill -9 excuses no other
  // server that took the path since).
  Result<std::string> published = os::ReadTextFile(GrpcListenAddressPath(cfg));
  const std::string line = published.ok() ? published->substr(0, published->find('\n')) : std::string();
  if (line == "unix:" + cfg.grpc_unix && StoreLockHolder(cfg) != 0 &&
      st.message().find("a server listens there already") != std::string::npos)
    return "";
  return cfg.Where("grpc") + ": <grpc unix>: " + st.message();
}
// The map this store's running frsd runs (frsd.running, trusted while the
// store's lock is held and names its pid: StoreLockHolder), with Envoy's
// bizzes when it has <grpc>; nullopt when no frsd runs there.
struct RunningMap {
  int64_t pid = 0;
  limit::MapConfig map;
};
std::optional<RunningMap> ReadRunningMap(const SrvConfig& cfg) {
  Result<RunningConfig> rc = ReadRunningConfig(cfg.store_dir);
  if (!rc.ok() || rc->pid <= 0) return std::nullopt;
  if (StoreLockHolder(cfg) != rc->pid) return std::nullopt;
  Result<limit::MapConfig> running = limit::ParseMap(rc->map_text, rc->map_path);
  if (!running.ok()) return std::nullopt;
  return RunningMap{rc->pid, std::move(running.value())};
}

// What a reload of the running frsd to `next` would warn of (leases or
// reservations that end, a biz's id changed, a sliding block rebuilt); with
// no frsd running, what the next start would, against the map the last run
// ran (frsd.last).
std::vector<std::string> EndsWarnings(const SrvConfig& cfg, const std::optional<RunningMap>& running,
                                      const limit::MapConfig& next, bool with_envoy) {
  std::vector<std::string> out;
  if (running) {
    for (std::string& w : limit::HeldAReloadEnds(running->map, next, with_envoy))
      out.push_back("a reload of the frsd running on this store (pid " + std::to_string(running->pid) +
                    ") would say: " + std::move(w));
    return out;
  }
  // A run killed since left its frsd.running (the next start makes it
  // frsd.last): newer than frsd.last, so it is the last run while nobody
  // holds the store.
  Result<RunningConfig> last =
      StoreLockHolder(cfg) == 0 ? ReadRunningConfig(cfg.store_dir) : Result<RunningConfig>(Status::NotFound(""));
  if (!last.ok()) last = ReadLastRunConfig(cfg.store_dir);
  if (!last.ok()) return out;
  Result<limit::MapConfig> was = limit::ParseMap(last->map_text, last->map_path);
  if (!was.ok()) return out;
  for (std::string& w : limit::HeldAReloadEnds(was.value(), next, with_envoy))
    out.push_back("the next start on this store would say (since its last run, pid " + std::to_string(last->pid) +
                  "): " + std::move(w));
  return out;
}

// A reload's check of the rules' order (limit::CheckRuleOrder) against the
// running map: frsd -t before a SIGHUP warns of what the reload would
// refuse (it said ok, and the reload was refused). A warning, not a
// problem: a restart is not checked for the order, and may be what the
// operator means.
std::string ReloadOrderProblem(const RunningMap& running, const limit::MapConfig& map) {
  const Status order = limit::CheckRuleOrder(running.map, map);
  if (order.ok()) return "";
  return order.message() + " (the frsd running on this store, pid " + std::to_string(running.pid) +
         ", refuses this map at a reload; a restart takes it, and the counts are then read as this order says)";
}
// <cluster lease_key>: readable and 16 bytes, as frsd's start reads it;
// lease_key_also another key than it.
std::vector<std::string> LeaseKeyProblems(const SrvConfig& cfg) {
  std::vector<std::string> problems;
  uint64_t checks[2] = {0, 0};
  const std::pair<const std::string*, const char*> files[] = {{&cfg.cluster_lease_key, "lease_key"},
                                                              {&cfg.cluster_lease_key_also, "lease_key_also"}};
  for (int i = 0; i < 2; ++i) {
    if (files[i].first->empty()) continue;
    if (auto key = limit::LoadLeaseKeyFile(*files[i].first, files[i].second); !key.ok())
      problems.push_back(cfg.Where("cluster") + ": " + key.status().message());
    else checks[i] = limit::LeaseKeyCheckOf(key.value());
  }
  if (checks[1] != 0 && checks[1] == checks[0])
    problems.push_back(cfg.Where("cluster") + ": " +
                       limit::SameKeyWords(cfg.cluster_lease_key, cfg.cluster_lease_key_also));
  return problems;
}

// The store files are read by CheckStoreFiles; frsd maps them to write.
std::vector<std::string> StoreFileAccessProblems(const std::string& dir, uint32_t files, const store::StoreCheck& sc) {
  std::vector<std::string> problems;
  for (uint32_t i = 0; i < files; ++i) {
    const std::string path = frs::store_dir::In(dir, frs::store_dir::StoreFileName(i));
    // Made by the start (a making cut short): nothing there to open yet.
    if (std::find(sc.cut_short.begin(), sc.cut_short.end(), path) != sc.cut_short.end() ||
        std::find(sc.never_made.begin(), sc.never_made.end(), path) != sc.never_made.end())
      continue;
    if (::access(path.c_str(), R_OK | W_OK) == 0) continue;
    problems.push_back(
        (errno == EACCES || errno == EPERM ? os::PermissionWords(path) : Status::FromErrno(path, errno).message()) +
        ": frsd opens it to read and write");
  }
  return problems;
}

// What frsd -t says of the store it checked: there, or to be made, and each
// file it will make again.
std::string StoreWords(const std::string& dir, const store::StoreCheck& sc) {
  std::string words = "store " + dir + (sc.exists ? " matches" : " is new");
  for (const std::string& p : sc.cut_short)
    words += " (" + p + " holds only zeros, its making cut short: the start makes it again)";
  for (const std::string& p : sc.never_made)
    words += " (" + p + " was never made, the store never served: the start makes it)";
  return words;
}

}  // namespace

int CheckConfiguration(const std::string& srv_xml, std::FILE* out, std::FILE* err) {
  Result<SrvConfig> cfg = LoadSrvConfig(srv_xml);
  if (!cfg.ok()) {
    std::fprintf(err, "%s\n", cfg.status().message().c_str());
    return 1;
  }
  std::vector<std::string> problems;
  if (auto allow = AllowList::Parse(cfg->allow); !allow.ok())
    problems.push_back(cfg->path + ": " + allow.status().message());
  for (std::string& p : OutputPathProblems(*cfg)) problems.push_back(std::move(p));

  size_t bizzes = 0;
  std::string order_warning;  // a reload refuses the map; a restart takes it
  const std::optional<RunningMap> running = ReadRunningMap(*cfg);
  // What a reload to this map would end of what keys hold (the reload's log
  // says it too), against the running map: Envoy's bizzes on both sides
  // when <grpc> composes them.
  std::vector<std::string> ends_warnings;
  Result<limit::MapConfig> map = limit::LoadMapFile(cfg->map_path);
  if (!map.ok()) {
    problems.push_back(map.status().message());
  } else {
    bizzes = map->bizzes.size();
    for (std::string& p : NodeFitProblemsOf(*cfg, map.value())) problems.push_back(std::move(p));
    if (running) order_warning = ReloadOrderProblem(*running, map.value());
  }
  // <grpc cert key client_ca>: readable, PEM, the key is the certificate's,
  // the CA file loads, as frsd's start and each reload load them.
  // Files that load but are past their date, or a key others may read: said,
  // not refused (tls_context.h).
  std::vector<std::string> tls_warnings;
  if (cfg->grpc && !cfg->grpc_tls_cert.empty()) {
    if (auto tls = TlsContext::Load(TlsFilesOf(*cfg)); !tls.ok())
      problems.push_back(cfg->path + ": <grpc> TLS files (cert, key, client_ca): " + tls.status().message());
    else
      for (std::string& w : tls.value()->Warnings(std::time(nullptr))) tls_warnings.push_back("<grpc> TLS: " + w);
  }
  if (std::string p = GrpcUnixProblem(*cfg); !p.empty()) problems.push_back(std::move(p));
  std::string envoy_words;
  if (cfg->grpc && map.ok()) {
    Result<std::string> text = os::ReadTextFile(cfg->map_path);
    if (!text.ok()) {
      problems.push_back(text.status().message());
    } else if (auto composed = ComposeEnvoyMap(*cfg, std::move(text.value()), /*persist_ids=*/false); !composed.ok()) {
      problems.push_back(composed.status().message());
    } else {
      for (std::string& p : NodeFitProblems(*cfg, composed->map_text)) problems.push_back(std::move(p));
      if (auto next = limit::ParseMap(composed->map_text, cfg->map_path); next.ok())
        ends_warnings = EndsWarnings(*cfg, running, next.value(), /*with_envoy=*/true);
      envoy_words = ", " + std::to_string(composed->envoy_limits) + " Envoy rate limit(s) of " +
                    std::to_string(composed->envoy_domains) + " domain(s) in " + cfg->grpc_config;
    }
  }

  for (std::string& p : LeaseKeyProblems(*cfg)) problems.push_back(std::move(p));
  std::string store_words;
  if (Status grow = CheckNoInterruptedGrow(cfg->store_dir); !grow.ok()) problems.push_back(grow.message());
  bool store_file_link = false;
  std::vector<std::string> link_warnings;
  for (std::string& p : LinkProblems(*cfg, &store_file_link, &link_warnings)) problems.push_back(std::move(p));
  Result<store::StoreCheck> sc = store_file_link ? Result<store::StoreCheck>(Status::InvalidArgument(""))
                                                 : store::CheckStoreFiles(cfg->store_dir, cfg->geometry);
  if (sc.ok()) store_words = StoreWords(cfg->store_dir, sc.value());
  else if (!store_file_link) problems.push_back(sc.status().message());
  if (sc.ok())
    for (std::string& p : StoreDirectoryProblems(*cfg, sc->exists)) problems.push_back(std::move(p));
  if (sc.ok() && sc->exists)
    for (std::string& p : StoreFileAccessProblems(cfg->store_dir, cfg->geometry.files, sc.value()))
      problems.push_back(std::move(p));
  // The engine's other files, as frsd's start will find them.
  std::vector<std::string> side_warnings = std::move(tls_warnings);
  if (!order_warning.empty()) side_warnings.push_back(std::move(order_warning));
  if (!cfg->grpc && map.ok()) ends_warnings = EndsWarnings(*cfg, running, map.value(), /*with_envoy=*/false);
  for (std::string& w : ends_warnings) side_warnings.push_back(std::move(w));
  for (std::string& w : link_warnings) side_warnings.push_back(std::move(w));
  if (std::string w = PidDirMissing(*cfg); !w.empty()) side_warnings.push_back(std::move(w));
  if (std::string w = RootOnAnotherUsersStore(*cfg); !w.empty())
    side_warnings.push_back("a start as root refuses: " + w);
  if (std::string w = ClusterSelfNotListed(*cfg); !w.empty()) side_warnings.push_back(std::move(w));
  if (std::string w = limit::LeaseKeyModeWarning(cfg->store_dir); !w.empty()) side_warnings.push_back(std::move(w));
  if (std::string w = limit::LeaseKeyMissingWarning(cfg->store_dir); !w.empty() && cfg->cluster_lease_key.empty())
    side_warnings.push_back(std::move(w));
  for (const limit::SideFileReport& r : limit::CheckStartFiles(cfg->store_dir)) {
    // Checked as read; the engine maps these two to write: stats.frs it
    // cannot write stops the start, denials.frs only goes unkept.
    const bool daily = r.path == frs::store_dir::In(cfg->store_dir, frs::store_dir::kDailyStats);
    const bool denials = r.path == frs::store_dir::In(cfg->store_dir, frs::store_dir::kRecentDenials);
    if (r.status.ok() && r.exists && (daily || denials) && ::access(r.path.c_str(), R_OK | W_OK) != 0) {
      const std::string why =
          errno == EACCES || errno == EPERM ? os::PermissionWords(r.path) : Status::FromErrno(r.path, errno).message();
      if (daily) problems.push_back(why + ": frsd opens it to write today's counters, and will not start");
      else side_warnings.push_back(why + ": frsd starts, but keeps no recent denials (frsctl top --denied)");
      continue;
    }
    if (r.status.ok()) continue;
    if (r.RefusesStart()) problems.push_back(r.status.message() + ": " + r.AtStartText());
    else side_warnings.push_back(r.status.message() + ": " + r.AtStartText());
  }

  if (!problems.empty()) {
    for (const std::string& p : problems) std::fprintf(err, "%s\n", p.c_str());
    return 1;
  }
  // Not a refusal: frsd serves, with fewer connections than configured
  // (in the environment this check runs in: a unit's LimitNOFILE may differ).
  // From the same sum as frsd's start: the map's statistics day files too.
  if (std::string fd = FdLimitProblem(*cfg, map.value(), CurrentFdLimit(), /*raised=*/false); !fd.empty())
    std::fprintf(err, "%s: warning: %s\n", cfg->path.c_str(), fd.c_str());
  for (const std::string& w : side_warnings) std::fprintf(err, "%s: warning: %s\n", cfg->path.c_str(), w.c_str());
  if (std::string gw = KeynodeGroupWarning(cfg->geometry); !gw.empty())
    std::fprintf(err, "%s: warning: %s\n", cfg->path.c_str(), gw.c_str());
  std::fprintf(out, "frsd: %s: %zu biz(es) in %s%s, %s; ok\n", cfg->path.c_str(), bizzes, cfg->map_path.c_str(),
               envoy_words.c_str(), store_words.c_str());
  return 0;
}

}  // namespace frs::server
