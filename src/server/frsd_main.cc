// frsd: the FRS server. `frsd -c PATH/srv.xml [--foreground]`.
//
// Start-up order matters: everything that can fail because of the
// configuration (srv.xml, map.xml, the store, the port, a running frsd) is
// checked in the foreground, before daemonizing, so the error reaches the
// terminal as one line and the exit status is non-zero.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "config/service_options.h"
#include "config/srv_config.h"
#include "frs/engine.h"
#include "frs/store.h"
#include "limit/map_config.h"
#include "limit/side_files.h"
#include "os/store_dir.h"
#include "os/text_file.h"
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
               "  --version           print the version and exit\n",
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

int Fail(const std::string& msg) {
  std::fprintf(stderr, "frsd: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace frs;
  using namespace frs::server;
  std::string config_path;
  bool foreground = false;
  bool test_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "-c" || a == "--config") && i + 1 < argc) config_path = argv[++i];
    else if (a.rfind("--config=", 0) == 0) config_path = a.substr(9);
    else if (a == "-f" || a == "--foreground") foreground = true;
    else if (a == "-t" || a == "--test") test_only = true;
    else if (a == "-h" || a == "--help") return Usage(argv[0], 0);
    else if (a == "--version") {
      std::printf("frsd %s\n", FRS_VERSION);
      return 0;
    } else {
      std::fprintf(stderr, "frsd: unknown argument \"%s\"\n", a.c_str());
      return Usage(argv[0], 2);
    }
  }
  if (config_path.empty()) config_path = DefaultSrvConfigPath();
  if (test_only) return CheckConfiguration(config_path, stdout, stderr);
  // Taken out of the environment at once: no worker may speak for the service.
  const SdNotifier notifier = SdNotifier::FromEnvironment();

  // srv.xml: its own errors are already "file:line: message".
  auto cfg_r = LoadSrvConfig(config_path);
  if (!cfg_r.ok()) {
    std::fprintf(stderr, "%s\n", cfg_r.status().message().c_str());
    return 1;
  }
  SrvConfig cfg = cfg_r.value();
  auto allow = AllowList::Parse(cfg.allow);
  if (!allow.ok()) return Fail(cfg.path + ": " + allow.status().message());

  std::error_code ec;
  std::filesystem::create_directories(cfg.store_dir, ec);
  if (ec) return Fail("cannot create the store directory " + cfg.store_dir + ": " + ec.message());

  // One frsd per store and per pid file.
  auto store_lock = LockFile::Acquire(os::store_dir::In(cfg.store_dir, os::store_dir::kStoreLock), "store");
  if (!store_lock.ok()) return Fail(store_lock.status().message());
  std::optional<LockFile> pid_lock;
  if (!cfg.pidfile.empty()) {
    auto pl = LockFile::Acquire(cfg.pidfile, "pid file");
    if (!pl.ok()) return Fail(pl.status().message());
    pid_lock.emplace(std::move(pl.value()));
  }

  // A daemon without <log file> logs next to its store.
  std::string logfile = cfg.logfile;
  const std::string store_log = os::store_dir::In(cfg.store_dir, os::store_dir::kLog);
  if (logfile.empty() && !foreground) logfile = store_log;
  Logger::Get().SetDefaultPath(foreground ? "" : store_log);
  Status s = Logger::Get().Configure(logfile, "master");
  if (!s.ok()) return Fail(s.message());
  // The workers open it after fork; one that cannot is refused here, once.
  if (!cfg.decisions_file.empty())
    if (Status ds = DecisionLog::CheckFile(cfg.decisions_file); !ds.ok()) return Fail(ds.message());

  // A start that fails after creating a new store takes it away again, so a
  // disk too small is left as it was found (not 100 % full of a store that
  // never served). An existing store is never removed.
  auto before = store::CheckStoreFiles(cfg.store_dir, cfg.geometry);
  NewStoreCleanup cleanup(cfg.store_dir, cfg.geometry.files, before.ok() && !before->exists);
  StoreOptions so = StoreOptionsFor(cfg, /*create_if_missing=*/true);
  so.on_recovery = [](const std::string& what) { FRS_LOG("store lock recovered: %s", what.c_str()); };
  auto store = Store::Open(so);
  if (!store.ok()) return Fail(store.status().message());
  // Before serving: a disk too small for the store fails here, with its
  // name, not later as a SIGBUS in a worker; and no request pays first-touch
  // page faults.
  if (Status s = store.value()->Reserve(); !s.ok()) return Fail(s.message());
  // A lock left by a process that died with the previous frsd is recovered
  // by whoever meets it; nothing from a dead run needs the master here.

  // map.xml is read once here; the workers get these bytes through the map
  // channel, so every process starts on the map that was validated.
  Result<std::string> map_read = os::ReadTextFile(cfg.map_path);
  if (!map_read.ok()) {
    std::fprintf(stderr, "%s\n", map_read.status().message().c_str());
    return 1;
  }
  std::string map_text = std::move(map_read.value());
  // With <grpc config>'s Envoy descriptors as bizzes of the map.
  auto composed = ComposeEnvoyMap(cfg, std::move(map_text));
  if (!composed.ok()) {
    std::fprintf(stderr, "%s\n", composed.status().message().c_str());
    return 1;
  }
  map_text = std::move(composed->map_text);
  if (auto fit = NodeFitProblems(cfg, map_text); !fit.empty()) {
    for (const std::string& p : fit) std::fprintf(stderr, "%s\n", p.c_str());
    return 1;
  }
  // The engine's other files, checked as frsctl verify checks them: a
  // damaged one is refused with its name and fix, or moved aside and said.
  auto side = limit::PrepareSideFiles(cfg.store_dir);
  if (!side.ok()) return Fail(side.status().message());
  for (const std::string& said : side.value()) FRS_LOG("%s", said.c_str());
  EngineOptions eo = EngineOptionsFor(cfg, store.value().get());
  eo.map_text = map_text;
  auto engine = AdminEngine::Open(eo);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().message().c_str());
    return 1;
  }
  auto map_channel = MapChannel::Create();
  if (!map_channel.ok()) return Fail(map_channel.status().message());
  // With the srv.xml bytes the configuration was read from, so that a worker
  // respawned after a reload runs the reloaded settings.
  Result<std::string> srv_read = os::ReadTextFile(cfg.path);
  if (!srv_read.ok()) return Fail(srv_read.status().message());
  const std::string& srv_text = srv_read.value();
  if (Status ps = map_channel.value().Publish(srv_text, map_text, composed->envoy_bundle); !ps.ok())
    return Fail(ps.message());

  // The workers inherit it: room for <limits connections> where the hard
  // limit allows it, and a word when it does not (server/fd_limit.h).
  // The statistics day files of the map's <stats> tables count too.
  Result<limit::MapConfig> fd_map = limit::ParseMap(map_text, cfg.map_path);
  const std::string fd_problem =
      fd_map.ok() ? FdLimitProblem(cfg, fd_map.value(), RaiseFdLimit(), /*raised=*/true) : std::string();

  auto listeners = OpenListeners(cfg.host, cfg.port, cfg.workers, cfg.reuseport);
  if (!listeners.ok()) return Fail(listeners.status().message());
  // From here on the configuration names the port really bound (<listen
  // port="0">: the kernel's choice), which the workers inherit.
  ApplyBoundPort(&cfg, listeners->port);
  // <grpc cert>: loaded (and checked) once here; the workers inherit it.
  std::shared_ptr<const TlsContext> tls;
  if (cfg.grpc && !cfg.grpc_tls_cert.empty()) {
    auto loaded = TlsContext::Load(TlsFilesOf(cfg));
    if (!loaded.ok()) return Fail("<grpc cert>: " + loaded.status().message());
    tls = std::move(loaded.value());
  }
  // <grpc>: its own sockets, shared by the workers the same way.
  std::vector<os::UniqueFd> grpc_fds;
  if (cfg.grpc && !cfg.grpc_unix.empty()) {
    auto grpc = OpenUnixListener(cfg.grpc_unix, cfg.grpc_unix_mode, cfg.workers);
    if (!grpc.ok()) return Fail("<grpc unix>: " + grpc.status().message());
    grpc_fds = std::move(grpc->fds);
  } else if (cfg.grpc) {
    auto grpc = OpenListeners(cfg.grpc_host, cfg.grpc_port, cfg.workers, cfg.reuseport);
    if (!grpc.ok()) return Fail("<grpc listen>: " + grpc.status().message());
    cfg.grpc_port = grpc->port;
    grpc_fds = std::move(grpc->fds);
  }
  // The socket file is ours from here on: removed however the start ends.
  struct UnixSocketFile {
    std::string path;
    ~UnixSocketFile() {
      if (!path.empty()) RemoveUnixListener(path);
    }
  } unix_socket{cfg.grpc_unix};

  auto metrics = Metrics::Create(cfg.workers);
  if (!metrics.ok()) return Fail(metrics.status().message());

  cleanup.Disarm();  // everything that could fail because of the disk has passed
  Daemon daemon;
  if (!foreground) {
    s = daemon.Daemonize();
    if (!s.ok()) return Fail(s.message());
  }
  pid_t pid = getpid();
  s = store_lock.value().WritePid(pid);
  if (s.ok() && pid_lock) s = pid_lock->WritePid(pid);
  // Last before serving: whoever waits for this file may connect at once.
  const std::string listen_file = ListenAddressPath(cfg);
  if (s.ok() && cfg.grpc)
    s = PublishListenAddress(GrpcListenAddressPath(cfg), cfg.grpc_unix.empty()
                                                             ? ListenName(cfg.grpc_host, cfg.grpc_port)
                                                             : "unix:" + cfg.grpc_unix);
  if (s.ok()) s = PublishListenAddress(listen_file, ListenName(cfg.host, cfg.port));
  if (!s.ok()) {
    daemon.Failed();
    return Fail(s.message());
  }

  FRS_LOG("starting: %s, %u worker(s) on %s:%u, store %s (%llu slots), map %s", cfg.path.c_str(), cfg.workers,
          cfg.host.c_str(), cfg.port, cfg.store_dir.c_str(), static_cast<unsigned long long>(cfg.geometry.slots()),
          cfg.map_path.c_str());

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
    store_lock.value().CloseInChild();
    if (pid_lock) pid_lock->CloseInChild();
    daemon.CloseInChild();
  };
  mc.on_ready = [&daemon] { daemon.Ready(); };
  if (notifier.enabled()) mc.notify = [&notifier](const std::string& state) { notifier.Notify(state); };
  int rc = RunMaster(std::move(mc));
  if (rc == 0 && pid_lock) pid_lock->Remove();
  if (rc == 0) ::unlink(listen_file.c_str());
  if (rc == 0 && cfg.grpc) ::unlink(GrpcListenAddressPath(cfg).c_str());
  return rc;
}
