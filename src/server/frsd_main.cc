// frsd: the FRS server. `frsd -c PATH/srv.xml [--foreground]`.
//
// Start-up order matters: everything that can fail because of the
// configuration (srv.xml, map.xml, the store, the port, a running frsd) is
// checked in the foreground, before daemonizing, so the error reaches the
// terminal as one line and the exit status is non-zero.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>

#include "config/service_options.h"
#include "config/srv_config.h"
#include "frs/engine.h"
#include "frs/lock_holders.h"
#include "frs/store.h"
#include "frs/store_admin.h"
#include "limit/map_config.h"
#include "limit/side_files.h"
#include "os/store_dir.h"
#include "os/text_file.h"
#include "os/whole_file.h"
#include "server/allow_list.h"
#include "server/config_check.h"
#include "server/daemon.h"
#include "server/decision_log.h"
#include "server/envoy_map.h"
#include "server/fd_limit.h"
#include "server/listener.h"
#include "server/logger.h"
#include "server/map_channel.h"
#include "server/master.h"
#include "server/metrics.h"
#include "server/pidfile.h"
#include "server/sd_notify.h"
#include "server/tls_context.h"
#include "store/store_check.h"
#include "store/store_file.h"

namespace {

int Usage(const char* argv0, int rc) {
  std::fprintf(rc ? stderr : stdout,
               "usage: %s [-c PATH/srv.xml] [--foreground | -t]\n"
               "  -c, --config FILE   the server configuration (srv.xml); default: $FRS_CONF, else\n"
               "                      /etc/frs/srv.xml (PREFIX/etc/frs/srv.xml under another prefix)\n"
               "  -f, --foreground    stay attached, log to stderr (unless srv.xml names a log file)\n"
               "  -t, --test          check srv.xml, map.xml and the store's geometry and format, then exit\n"
               "  --version           print the version and exit\n"
               "  -h, --help          print this and exit\n",
               argv0);
  return rc;
}

// Removes the files of a store this start created, unless disarmed.
class NewStoreCleanup {
 public:
  NewStoreCleanup(std::string dir, uint32_t files, bool armed) : dir_(std::move(dir)), files_(files), armed_(armed) {}
  ~NewStoreCleanup() {
    if (!armed_) return;
    for (uint32_t i = 0; i < files_; ++i) ::unlink(frs::store::StoreFile::PathFor(dir_, i).c_str());
    ::unlink(frs::os::store_dir::In(dir_, frs::os::store_dir::kDailyStats).c_str());
  }
  void Disarm() { armed_ = false; }

 private:
  std::string dir_;
  uint32_t files_;
  bool armed_;
};

// Why the start is refused: on stderr (the terminal, systemd's journal),
// as `line`; once the log file is open, there too, where an operator who
// finds the server down reads first (it held only the lines of the starts
// that came up).
int Refuse(const std::string& line, const std::string& why) {
  std::fprintf(stderr, "%s\n", line.c_str());
  if (!frs::server::Logger::Get().path().empty()) FRS_LOG("the start is refused: %s", why.c_str());
  return 1;
}
int Refuse(const std::string& why) { return Refuse(why, why); }
int Fail(const std::string& msg) { return Refuse("frsd: " + msg, msg); }

struct Args {
  std::string config_path;
  // Where config_path came from when -c was not given ("" when it was).
  std::string config_source;
  bool foreground = false;
  bool test_only = false;
};

// The command line into *args; an exit code when there is nothing to start
// (--help, --version, a bad argument).
std::optional<int> ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-c" || a == "--config" || a.rfind("--config=", 0) == 0) {
      // An empty path is no path: it would fall back to the default file.
      const bool joined = a.size() > 8 && a[8] == '=';
      if ((joined && a.size() == 9) || (!joined && (i + 1 == argc || argv[i + 1][0] == '\0'))) {
        const std::string name = joined ? std::string("--config") : a;
        std::fprintf(stderr, "frsd: %s needs a file: %s PATH/srv.xml\n", name.c_str(), name.c_str());
        return Usage(argv[0], 2);
      }
      args->config_path = joined ? a.substr(9) : std::string(argv[++i]);
    } else if (a == "-f" || a == "--foreground") {
      args->foreground = true;
    } else if (a == "-t" || a == "--test") {
      args->test_only = true;
    } else if (a == "-h" || a == "--help") {
      return Usage(argv[0], 0);
    } else if (a == "--version") {
      std::printf("frsd %s\n", FRS_VERSION);
      return 0;
    } else {
      std::fprintf(stderr, "frsd: unknown argument \"%s\"\n", a.c_str());
      return Usage(argv[0], 2);
    }
  }
  if (args->config_path.empty()) {
    args->config_path = frs::DefaultSrvConfigPath();
    const char* env = std::getenv("FRS_CONF");
    args->config_source =
        env != nullptr && *env != '\0' ? "named by $FRS_CONF" : "the default path (neither -c nor $FRS_CONF given)";
  }
  return std::nullopt;
}

// A srv.xml that is not there, when no -c named it: says where the path came
// from ($FRS_CONF, set in a unit or a container's environment, is easily
// forgotten).
void SayWhereTheConfigPathCameFrom(const Args& args) {
  if (args.config_source.empty() || ::access(args.config_path.c_str(), F_OK) == 0) return;
  std::fprintf(stderr, "frsd: %s: %s; -c FILE names another\n", args.config_path.c_str(), args.config_source.c_str());
}

// srv.xml, or nothing with its errors said (they are already
// "file:line: message") and where a missing file's path came from.
std::optional<frs::SrvConfig> LoadConfig(const Args& args) {
  frs::Result<frs::SrvConfig> cfg = frs::LoadSrvConfig(args.config_path);
  if (cfg.ok()) return std::move(cfg.value());
  std::fprintf(stderr, "%s\n", cfg.status().message().c_str());
  SayWhereTheConfigPathCameFrom(args);
  return std::nullopt;
}

// frsd -t: the check, and where a missing srv.xml's path came from. A
// failure ends on a line of frsd's own, as a pass does: the problems above
// it are "file:line: message" (an editor jumps to them), and a script or a
// unit's ExecStartPre log shows whose check failed.
int TestOnly(const Args& args) {
  const int rc = frs::server::CheckConfiguration(args.config_path, stdout, stderr);
  if (rc != 0) {
    SayWhereTheConfigPathCameFrom(args);
    std::fprintf(stderr, "frsd: %s: test failed\n", args.config_path.c_str());
  }
  return rc;
}

// The log (stderr in the foreground, else <log file> or the store's
// frsd.log), and the decision log's file checked once here: the workers
// open it after fork.
frs::Status OpenLogs(const frs::SrvConfig& cfg, bool foreground) {
  using frs::server::Logger;
  // A daemon without <log file> logs next to its store.
  std::string logfile = cfg.logfile;
  const std::string store_log = frs::os::store_dir::In(cfg.store_dir, frs::os::store_dir::kLog);
  if (logfile.empty() && !foreground) logfile = store_log;
  Logger::Get().SetDefaultPath(foreground ? "" : store_log);
  // Named at srv.xml's line, as frsd -t and a reload name them.
  if (frs::Status s = Logger::Get().Configure(logfile, "master"); !s.ok())
    return logfile == cfg.logfile && !cfg.logfile.empty() ? frs::Status::IOError(cfg.Where("log") + ": " + s.message())
                                                          : s;
  if (!cfg.decisions_file.empty())
    if (frs::Status s = frs::server::DecisionLog::CheckFile(cfg.decisions_file); !s.ok())
      return frs::Status::IOError(cfg.Where("decisions") + ": " + s.message());
  return frs::Status::OK();
}

// map.xml, read once here: the workers get these bytes through the map
// channel, so every process starts on the map that was validated. With
// <grpc config>'s Envoy descriptors as bizzes of the map. 0, or the exit
// code once the refusal is printed.
int ReadMap(const frs::SrvConfig& cfg, frs::server::ComposedMap* map) {
  frs::Result<std::string> map_read = frs::os::ReadTextFile(cfg.map_path);
  if (!map_read.ok()) return Refuse(map_read.status().message());
  auto composed = frs::server::ComposeEnvoyMap(cfg, std::move(map_read.value()));
  if (!composed.ok()) return Refuse(composed.status().message());
  *map = std::move(composed.value());
  if (auto fit = frs::server::NodeFitProblems(cfg, map->map_text); !fit.empty()) {
    for (size_t i = 0; i + 1 < fit.size(); ++i) std::fprintf(stderr, "%s\n", fit[i].c_str());
    return Refuse(fit.back());
  }
  return 0;
}

// <grpc>'s TLS context (loaded and checked once here) and its own sockets,
// shared by the workers as the HTTP ones are; cfg->grpc_port becomes the
// bound one.
frs::Status OpenGrpc(frs::SrvConfig* cfg, std::shared_ptr<const frs::server::TlsContext>* tls,
                     std::vector<frs::os::UniqueFd>* fds) {
  using namespace frs::server;
  if (!cfg->grpc) return frs::Status::OK();
  if (!cfg->grpc_tls_cert.empty()) {
    auto loaded = TlsContext::Load(TlsFilesOf(*cfg));
    if (!loaded.ok())
      return frs::Status::InvalidArgument("<grpc> TLS files (cert, key, client_ca): " + loaded.status().message());
    *tls = std::move(loaded.value());
  }
  if (!cfg->grpc_unix.empty()) {
    auto grpc = OpenUnixListener(cfg->grpc_unix, cfg->grpc_unix_mode, cfg->workers);
    if (!grpc.ok()) return frs::Status::InvalidArgument("<grpc unix>: " + grpc.status().message());
    *fds = std::move(grpc->fds);
    return frs::Status::OK();
  }
  auto grpc = OpenListeners(cfg->grpc_host, cfg->grpc_port, cfg->workers, cfg->reuseport);
  if (!grpc.ok()) return frs::Status::InvalidArgument("<grpc listen>: " + grpc.status().message());
  cfg->grpc_port = grpc->port;
  *fds = std::move(grpc->fds);
  return frs::Status::OK();
}

// The port bound (<listen port="0">: the kernel's choice) into `cfg`, and
// the check of the shard list against it that the parse could not make.
frs::Status ApplyListenPort(frs::SrvConfig* cfg, uint16_t bound) {
  frs::ApplyBoundPort(cfg, bound);
  if (std::string why = frs::OwnListenListedUnderAnotherSelf(*cfg); !why.empty())
    return frs::Status::InvalidArgument(cfg->path + ": " + why);
  return frs::Status::OK();
}

// A name of its own that is not where it listens is right behind a
// forwarder, and wrong when copied from another shard's srv.xml: said once.
void LogClusterSelf(const frs::SrvConfig& cfg) {
  if (std::string w = frs::ClusterSelfNotListed(cfg); !w.empty()) FRS_LOG("warning: %s", w.c_str());
  if (cfg.cluster_shards.empty() || cfg.cluster_self_derived) return;
  // The port alone: a shard listening on 0.0.0.0 names itself by an address.
  const std::string listen = frs::ListenName(cfg.host, cfg.port);
  const size_t colon = cfg.cluster_self.rfind(':');
  if (colon != std::string::npos && cfg.cluster_self.substr(colon + 1) != std::to_string(cfg.port))
    FRS_LOG("<cluster self> is %s while this frsd listens on %s: the other shards and the proxy reach it at %s",
            cfg.cluster_self.c_str(), listen.c_str(), cfg.cluster_self.c_str());
}

// Envoy's side in the log too, not only in frsd.grpc.listen: where it
// listens, how it is secured, and which directory it answers from; and
// what is wrong with a certificate that loads all the same.
void LogGrpcListener(const frs::SrvConfig& cfg, const frs::server::ComposedMap& map,
                     const frs::server::TlsContext* tls) {
  const std::string where =
      !cfg.grpc_unix.empty() ? "unix socket " + cfg.grpc_unix : cfg.grpc_host + ":" + std::to_string(cfg.grpc_port);
  const char* security = cfg.grpc_tls_cert.empty()        ? "cleartext (h2c)"
                         : cfg.grpc_tls_client_ca.empty() ? "TLS"
                                                          : "TLS with a required client certificate (mTLS)";
  // What the directory gave, said where an operator looks first: a file the
  // reader skipped or a domain missing shows here as a count lower than meant.
  FRS_LOG("gRPC (Envoy's rate limit service) on %s, %s, config %s: %zu rate limit(s) of %zu domain(s)", where.c_str(),
          security, cfg.grpc_config.c_str(), map.envoy_limits, map.envoy_domains);
  if (tls)
    for (const std::string& w : tls->Warnings(std::time(nullptr))) FRS_LOG("warning: <grpc> TLS: %s", w.c_str());
}

// A clean stop removes frsd.listen: one still here was left by a run that
// ended otherwise, which the operator reading this start should hear of.
void SayIfTheLastRunEndedOtherwise(const std::string& listen_file) {
  struct stat st {};
  if (::lstat(listen_file.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) return;  // a directory: PublishStart says it
  FRS_LOG(
      "the previous frsd on this store did not stop cleanly (killed, crashed, or its machine went down): %s was "
      "left behind; what it acknowledged is in the store as docs/store.md (\"What survives what\") says, and a "
      "lock it held is recovered by its next user",
      listen_file.c_str());
}

// frsd.running, which names a frsd no longer running, becomes frsd.last:
// what the last run ran, for the next start's warnings. Advisory: a rename
// that fails removes it, as before.
void KeepAsTheLastRun(const std::string& store_dir) {
  const std::string running = frs::os::store_dir::In(store_dir, frs::os::store_dir::kRunningConfig);
  if (::rename(running.c_str(), frs::os::store_dir::In(store_dir, frs::os::store_dir::kLastRunConfig).c_str()) != 0)
    ::unlink(running.c_str());
}

// A map edited while frsd was stopped is applied by the start as a reload
// applies one: what that reload would warn of (leases or reservations that
// end, a biz's id changed, a sliding rule's block rebuilt) is said here,
// against the map the last run ran (frsd.last, which KeepAsTheLastRun made
// of its frsd.running). Nothing when there was no last run or the map is
// the same.
void SayWhatTheMapChangeSinceTheLastRunCosts(const frs::SrvConfig& cfg, const frs::server::ComposedMap& map) {
  // frsd.running still there: a store directory KeepAsTheLastRun could not
  // change (read-only), whose frsd.running is the last run's.
  frs::Result<frs::RunningConfig> last = frs::ReadRunningConfig(cfg.store_dir);
  if (!last.ok()) last = frs::ReadLastRunConfig(cfg.store_dir);
  if (!last.ok() || last->map_text == map.map_text) return;
  frs::Result<frs::limit::MapConfig> was = frs::limit::ParseMap(last->map_text, last->map_path);
  frs::Result<frs::limit::MapConfig> now = frs::limit::ParseMap(map.map_text, cfg.map_path);
  if (!was.ok() || !now.ok()) return;
  for (const std::string& w : frs::limit::HeldAReloadEnds(was.value(), now.value(), cfg.grpc))
    FRS_LOG("warning: since this store's last run: %s", w.c_str());
}

// The pid in the lock files, then the addresses frsd listens on: last
// before serving, since whoever waits for them may connect at once.
frs::Status PublishStart(const frs::SrvConfig& cfg, const frs::server::ComposedMap& map,
                         frs::server::LockFile& store_lock, std::optional<frs::server::LockFile>& pid_lock) {
  using namespace frs::server;
  const pid_t pid = getpid();
  // A directory where an address goes can never be replaced: the start
  // fails, as `frsd -t` says it does, rather than serve at an address no
  // reader of the file will ever find.
  for (const std::string& path : {frs::ListenAddressPath(cfg), cfg.grpc ? GrpcListenAddressPath(cfg) : std::string()}) {
    struct stat st {};
    if (!path.empty() && ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      return frs::Status::IOError(path + " is a directory: frsd writes its listen address there; remove it");
  }
  // What this frsd runs, for frsctl while it does (frs/service.h): before
  // the pid, which is what makes a reader trust it.
  // Not written (a disk that filled since the last stop), it is a warning,
  // as at a reload: frsctl then reads map.xml as it is on disk.
  if (frs::Status w = frs::WriteRunningConfig(cfg.store_dir, frs::RunningConfig{pid, cfg.timezone, cfg.map_path,
                                                                                map.map_digest, map.map_text});
      !w.ok()) {
    ::unlink(frs::os::store_dir::In(cfg.store_dir, frs::os::store_dir::kRunningConfig).c_str());
    FRS_LOG("warning: %s: frsctl shows map.xml as it is on disk, not the map this frsd runs", w.message().c_str());
  }
  // With its PID namespace: a frsctl of another one (another container on
  // the volume) reads the store's lock owners as other threads, and is
  // refused (frs/lock_holders.h).
  frs::Status s = store_lock.WritePid(pid, frs::OwnPidNamespace());
  if (s.ok() && pid_lock) s = pid_lock->WritePid(pid);
  if (!s.ok()) return s;
  // A disk that filled while the last run served (every store page was
  // allocated at its start) has no block for a new file beside the old: the
  // address a killed run left (read already: the start said so) names a
  // port no one listens on, and goes then, its block with it. A name that
  // still cannot be written only keeps a reader of it waiting: a warning,
  // not a refusal to serve. (Replaced while the old one stands, the file
  // is a new inode, which a reader waiting for it may go by.)
  auto publish = [](const std::string& path, const std::string& name, bool synced) {
    frs::Status p = PublishListenAddress(path, name, synced);
    if (!p.ok() && ::unlink(path.c_str()) == 0) p = PublishListenAddress(path, name, synced);
    if (!p.ok())
      FRS_LOG("warning: %s; serving on %s all the same: a program that reads %s to find frsd will not find it",
              p.message().c_str(), name.c_str(), path.c_str());
  };
  if (cfg.grpc)
    publish(GrpcListenAddressPath(cfg),
            cfg.grpc_unix.empty() ? frs::ListenName(cfg.grpc_host, cfg.grpc_port) : "unix:" + cfg.grpc_unix,
            /*synced=*/false);
  // Synced: after a power cut, the next start still finds it and says this
  // run did not stop cleanly (SayIfTheLastRunEndedOtherwise).
  publish(frs::ListenAddressPath(cfg), frs::ListenName(cfg.host, cfg.port), /*synced=*/true);
  return s;
}

// One frsd per store and per pid file: their locks, held while frsd runs.
frs::Status TakeLocks(const frs::SrvConfig& cfg, std::optional<frs::server::LockFile>* store_lock,
                      std::optional<frs::server::LockFile>* pid_lock) {
  using frs::server::LockFile;
  auto sl = LockFile::Acquire(frs::os::store_dir::In(cfg.store_dir, frs::os::store_dir::kStoreLock), "store");
  if (!sl.ok()) return sl.status();
  store_lock->emplace(std::move(sl.value()));
  // What a frsd killed here said it ran: not this one's (PublishStart
  // writes this one's), kept as the last run's.
  KeepAsTheLastRun(cfg.store_dir);
  if (cfg.pidfile.empty()) return frs::Status::OK();
  auto pl = LockFile::Acquire(cfg.pidfile, "pid file");
  if (!pl.ok()) {
    if (std::string w = frs::server::PidDirMissing(cfg); !w.empty())
      return frs::Status::NotFound(pl.status().message() + " (" + w + ")");
    return pl.status();
  }
  pid_lock->emplace(std::move(pl.value()));
  return frs::Status::OK();
}

// The store, created when missing, its whole size reserved: a disk too
// small for it fails here, with its name, not later as a SIGBUS in a
// worker; and no request pays first-touch page faults. A lock left by a
// process that died with the previous frsd is recovered by whoever meets
// it; nothing from a dead run needs the master here.
frs::Result<std::unique_ptr<frs::Store>> OpenStore(const frs::SrvConfig& cfg) {
  frs::StoreOptions so = frs::StoreOptionsFor(cfg, /*create_if_missing=*/true);
  so.on_recovery = [](const std::string& what) { FRS_LOG("store: %s", what.c_str()); };
  auto store = frs::Store::Open(so);
  if (!store.ok()) return store.status();
  if (frs::Status s = store.value()->Reserve(); !s.ok()) return s;
  // A store of format 5 places nodes by a hash any client can compute
  // (src/store/identity.h): served as it is, and said at each start.
  if (frs::Result<frs::StoreOnDisk> d = frs::InspectStoreFiles(so.dir); d.ok() && d.value().format_version == 5)
    FRS_LOG(
        "store: %s is of format 5 (its placement unkeyed, as every store before format 6): a client that knows "
        "how keys are placed can choose some 130 keys that evict another key's counts, however large the store; "
        "stop frsd and run frsctl upgrade (every count is kept) to make it a store of format 6",
        so.dir.c_str());
  return store;
}

// The open-file limit raised for the workers to inherit: room for <limits
// connections> where the hard limit allows it, and a word when it does not
// (server/fd_limit.h). The statistics day files of the map's <stats> tables
// count too.
std::string RaiseFdLimitFor(const frs::SrvConfig& cfg, const std::string& map_text) {
  frs::Result<frs::limit::MapConfig> map = frs::limit::ParseMap(map_text, cfg.map_path);
  return map.ok() ? frs::server::FdLimitProblem(cfg, map.value(), frs::server::RaiseFdLimit(), /*raised=*/true)
                  : std::string();
}

// The channel the workers read their configuration from, holding the
// srv.xml bytes the configuration was read from (so that a worker respawned
// after a reload runs the reloaded settings) and the composed map.
frs::Result<frs::server::MapChannel> PublishConfiguration(const frs::SrvConfig& cfg,
                                                          const frs::server::ComposedMap& map) {
  auto channel = frs::server::MapChannel::Create();
  if (!channel.ok()) return channel.status();
  frs::Result<std::string> srv_read = frs::os::ReadTextFile(cfg.path);
  if (!srv_read.ok()) return srv_read.status();
  if (frs::Status s = channel.value().Publish(srv_read.value(), map.map_text, map.envoy_bundle); !s.ok()) return s;
  return channel;
}

// The engine's files beside the store, as frsctl verify checks them, and
// what the start does with each, logged; a store that served before and
// lost its lease.key is warned of (a new one voids every id).
frs::Status PrepareSideFiles(const frs::SrvConfig& cfg) {
  auto side = frs::limit::PrepareSideFiles(cfg.store_dir);
  if (!side.ok()) return side.status();
  for (const std::string& said : side.value()) FRS_LOG("%s", said.c_str());
  if (std::string w = frs::limit::LeaseKeyMissingWarning(cfg.store_dir); !w.empty() && cfg.cluster_lease_key.empty())
    FRS_LOG("warning: %s", w.c_str());
  return frs::Status::OK();
}

// systemd's readiness and watchdog (sd_notify.h), spoken by the master only.
// Called after daemonizing: WatchdogUsec compares $WATCHDOG_PID with the
// master's pid.
void ConnectServiceManager(const frs::server::SdNotifier& notifier, frs::server::MasterContext* mc) {
  if (notifier.enabled()) mc->notify = [&notifier](const std::string& state) { notifier.Notify(state); };
  mc->watchdog_usec = notifier.WatchdogUsec();
}

// A start that fails before it serves leaves no pid file behind: an empty
// one made `kill -HUP $(cat frsd.pid)` fail, naming no process. Removed
// under its lock, so no other frsd's. Once it names the running frsd, that
// frsd's to remove at its stop.
class PidFileUntilServing {
 public:
  explicit PidFileUntilServing(std::optional<frs::server::LockFile>& lock) : lock_(lock) {}
  ~PidFileUntilServing() {
    if (armed_ && lock_) lock_->Remove();
  }
  PidFileUntilServing(const PidFileUntilServing&) = delete;
  PidFileUntilServing& operator=(const PidFileUntilServing&) = delete;
  void Disarm() { armed_ = false; }

 private:
  std::optional<frs::server::LockFile>& lock_;
  bool armed_ = true;
};

// <grpc unix>'s socket file, removed however the start ends: the one this
// frsd bound, known by its inode, and no other (a socket another frsd bound
// at the path since this one's was moved away is that one's: removed, its
// clients found no socket until it restarted; found from outside).
struct UnixSocketFile {
  explicit UnixSocketFile(std::string p) : path(std::move(p)) {
    struct stat st {};
    if (!path.empty() && ::lstat(path.c_str(), &st) == 0) bound = {st.st_dev, st.st_ino};
  }
  ~UnixSocketFile() {
    if (!path.empty()) frs::server::RemoveUnixListener(path, bound);
  }
  UnixSocketFile(const UnixSocketFile&) = delete;
  UnixSocketFile& operator=(const UnixSocketFile&) = delete;
  std::string path;
  frs::server::FileIdentity bound;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace frs;
  using namespace frs::server;
  Args args;
  if (std::optional<int> rc = ParseArgs(argc, argv, &args)) return *rc;
  if (args.test_only) return TestOnly(args);
  // Before any file is made: a store file past `ulimit -f` is then a failed
  // ftruncate (EFBIG) that the start reports and takes back, where SIGXFSZ
  // killed the master at once, the file half made (signals.cc ignores it
  // again, with the others, once the master sets up its signals).
  ::signal(SIGXFSZ, SIG_IGN);
  // Taken out of the environment at once: no worker may speak for the service.
  const SdNotifier notifier = SdNotifier::FromEnvironment();

  std::optional<SrvConfig> loaded = LoadConfig(args);
  if (!loaded) return 1;
  SrvConfig cfg = std::move(*loaded);
  auto allow = AllowList::Parse(cfg.allow);
  if (!allow.ok()) return Fail(cfg.Where("allow") + ": " + allow.status().message());

  if (Status grow = CheckNoInterruptedGrow(cfg.store_dir); !grow.ok()) return Fail(grow.message());
  if (std::string owner = frs::server::RootOnAnotherUsersStore(cfg); !owner.empty()) return Fail(owner);
  std::error_code ec;
  std::filesystem::create_directories(cfg.store_dir, ec);
  if (ec) return Fail("cannot create the store directory " + cfg.store_dir + ": " + ec.message());

  std::optional<LockFile> store_lock, pid_lock;
  if (Status s = TakeLocks(cfg, &store_lock, &pid_lock); !s.ok()) return Fail(s.message());
  PidFileUntilServing pid_file_guard(pid_lock);

  if (Status s = OpenLogs(cfg, args.foreground); !s.ok()) return Fail(s.message());

  // A start that fails after creating a new store takes it away again, so a
  // disk too small is left as it was found (not 100 % full of a store that
  // never served). An existing store is never removed.
  auto before = store::CheckStoreFiles(cfg.store_dir, cfg.geometry);
  NewStoreCleanup cleanup(cfg.store_dir, cfg.geometry.files, before.ok() && !before->exists);
  auto store = OpenStore(cfg);
  if (!store.ok()) return Fail(store.status().message());

  ComposedMap composed;
  if (int rc = ReadMap(cfg, &composed); rc != 0) return rc;
  const std::string& map_text = composed.map_text;
  // The engine's other files, checked as frsctl verify checks them: a
  // damaged one is refused with its name and fix, or moved aside and said.
  if (frs::Status side = PrepareSideFiles(cfg); !side.ok()) return Fail(side.message());
  EngineOptions eo = EngineOptionsFor(cfg, store.value().get());
  eo.map_text = map_text;
  auto engine = AdminEngine::Open(eo);
  if (!engine.ok()) return Refuse(engine.status().message());
  auto map_channel = PublishConfiguration(cfg, composed);
  if (!map_channel.ok()) return Fail(map_channel.status().message());

  const std::string fd_problem = RaiseFdLimitFor(cfg, map_text);

  auto listeners = OpenListeners(cfg.host, cfg.port, cfg.workers, cfg.reuseport);
  if (!listeners.ok()) return Fail(listeners.status().message());
  // From here on the configuration names the port really bound (<listen
  // port="0">: the kernel's choice), which the workers inherit.
  if (Status b = ApplyListenPort(&cfg, listeners->port); !b.ok()) return Fail(b.message());
  std::shared_ptr<const TlsContext> tls;
  std::vector<os::UniqueFd> grpc_fds;
  if (Status g = OpenGrpc(&cfg, &tls, &grpc_fds); !g.ok()) return Fail(g.message());
  UnixSocketFile unix_socket(cfg.grpc_unix);  // ours from here on: removed however the start ends

  auto metrics = Metrics::Create(cfg.workers);
  if (!metrics.ok()) return Fail(metrics.status().message());

  cleanup.Disarm();  // everything that could fail because of the disk has passed
  Daemon daemon;
  if (!args.foreground)
    if (Status d = daemon.Daemonize(); !d.ok()) return Fail(d.message());
  const std::string listen_file = ListenAddressPath(cfg);
  SayIfTheLastRunEndedOtherwise(listen_file);
  SayWhatTheMapChangeSinceTheLastRunCosts(cfg, composed);
  if (Status p = PublishStart(cfg, composed, *store_lock, pid_lock); !p.ok()) {
    daemon.Failed();
    return Fail(p.message());
  }
  pid_file_guard.Disarm();  // it names this frsd now (the fork's parents leave by _exit)

  FRS_LOG("starting: %s, frsd " FRS_VERSION ", %u worker(s) on %s:%u, store %s (%llu slots), map %s", cfg.path.c_str(),
          cfg.workers, cfg.host.c_str(), cfg.port, cfg.store_dir.c_str(),
          static_cast<unsigned long long>(cfg.geometry.slots()), cfg.map_path.c_str());

  if (cfg.grpc) LogGrpcListener(cfg, composed, tls.get());
  LogClusterSelf(cfg);
  if (!fd_problem.empty()) FRS_LOG("warning: %s", fd_problem.c_str());

  MasterContext mc;
  mc.config = &cfg;
  mc.store = store.value().get();
  mc.engine = engine.value().get();
  mc.admin = engine.value().get();
  mc.fresh_store = before.ok() && !before->exists;
  mc.metrics = metrics.value().get();
  mc.allow = &allow.value();
  mc.listeners = std::move(listeners->fds);
  mc.grpc_listeners = std::move(grpc_fds);
  mc.tls = std::move(tls);
  mc.map_channel = &map_channel.value();
  mc.in_child = [&] {
    store_lock->CloseInChild();
    if (pid_lock) pid_lock->CloseInChild();
    daemon.CloseInChild();
  };
  mc.on_ready = [&daemon] { daemon.Ready(); };
  ConnectServiceManager(notifier, &mc);
  int rc = RunMaster(std::move(mc));
  // Stopped either way (its workers stopped, or dying with it): a pid or an
  // address left behind would name a server that is not there.
  if (pid_lock) pid_lock->Remove();
  // Its removal synced too, so that a power cut after a clean stop does not
  // bring it back to tell the next start of an unclean one.
  if (frs::Status s = frs::os::RemoveFileSynced(listen_file); !s.ok()) FRS_LOG("%s", s.message().c_str());
  KeepAsTheLastRun(cfg.store_dir);
  if (cfg.grpc) ::unlink(GrpcListenAddressPath(cfg).c_str());
  return rc;
}
