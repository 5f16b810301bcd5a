#include "server/master.h"

#include "frs/ring.h"
#include "frs/service.h"
#include "frs/store_admin.h"
#include "limit/lease_id.h"
#include "limit/map_config.h"
#include "os/store_dir.h"
#include "os/text_file.h"
#include "server/config_check.h"
#include "server/envoy_map.h"
#include "server/fd_limit.h"
#include "server/replica_catchup.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <optional>

#include "server/clock_util.h"
#include "server/config_watch.h"
#include "server/decision_log.h"
#include "server/held_now.h"
#include "server/logger.h"
#include "server/reset_claim.h"
#include "server/signals.h"
#include "server/stall_watch.h"
#include "server/worker.h"

namespace frs::server {

namespace {

constexpr int64_t kNsPerMs = 1000000;
constexpr int64_t kStopGraceNs = 4500 * kNsPerMs;
constexpr int64_t kYoungDeathNs = 5000 * kNsPerMs;
constexpr int64_t kEvictionReportNs = 60000 * kNsPerMs;

struct Slot {
  pid_t pid = 0;
  int64_t started_ns = 0;
  int64_t respawn_at_ns = -1;  // >= 0: due for respawn
  uint32_t young_deaths = 0;
  uint32_t open_failed_tries = 0;  // respawns in a row that could not open the store or the configuration
};

std::string DescribeExit(int st) {
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) {
    std::string s = "was killed by signal " + std::to_string(WTERMSIG(st)) + " (" + strsignal(WTERMSIG(st)) + ")";
    if (WCOREDUMP(st)) s += ", core dumped";
    return s;
  }
  return "ended with status " + std::to_string(st);
}

class Master {
 public:
  explicit Master(MasterContext ctx) : ctx_(std::move(ctx)), cfg_(*ctx_.config), live_(cfg_), slots_(cfg_.workers) {
    if (ctx_.admin != nullptr && ctx_.metrics != nullptr) held_.emplace(*ctx_.admin, ctx_.metrics->master().held);
  }
  int Run(const sigset_t* wait_mask);

 private:
  bool Spawn(uint32_t i);
  void Reap(bool stopping);
  void StopWorkers();
  void Reload();
  Status CheckReloadSideFiles(const SrvConfig& next, bool* lease_key_changed);
  // Watches live_'s <grpc config> directory (ConfigWatch), or nothing.
  void WatchEnvoyConfig();
  void ReloadWatched();
  void ConfigChanged();
  void Tick(int64_t now);
  // Kills a worker whose loop stopped turning (stall_watch.h).
  void WatchStalls(int64_t now);
  // Every slot's current worker has marked itself serving (metrics.h).
  bool AllServing() const { return !ctx_.metrics || Serving() == slots_.size(); }
  size_t Alive() const {
    return static_cast<size_t>(std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.pid > 0; }));
  }
  // Workers that have marked themselves serving (metrics.h; without the
  // metrics region, every live one).
  size_t Serving() const {
    if (!ctx_.metrics) return Alive();
    size_t n = 0;
    for (uint32_t i = 0; i < slots_.size(); ++i)
      n += slots_[i].pid > 0 && CounterGet(ctx_.metrics->worker(i).serving_pid) == static_cast<uint64_t>(slots_[i].pid);
    return n;
  }

  MasterContext ctx_;
  const SrvConfig& cfg_;  // as started
  SrvConfig live_;        // with the live settings of the last reload
  // The <cluster> shards before the last change of the list (empty: none
  // since the start): a worker forked after it takes changes its shards
  // queued under that list, and names it to shards that still run it.
  std::vector<RingShard> previous_cluster_;
  std::vector<Slot> slots_;
  bool fatal_ = false;
  int64_t next_flush_ = 0;
  int64_t next_eviction_report_ = 0;
  uint64_t evictions_live_seen_ = 0;
  ConfigWatch watch_;
  int64_t watch_due_ns_ = -1;   // >= 0: the directory changed; reload once quiet until then
  int64_t watch_first_ns_ = 0;  // the first change since the last reload (kMaxWaitMs counts from it)
  // The reload due is only a second read of a <grpc config> directory that
  // a reload named anew (ReloadWatched): said as such, not as a change.
  bool watch_recheck_ = false;
  // frs_leases_held and frs_reservations_held, walked for the scrapes.
  std::optional<HeldNowPublisher> held_;
  StallWatch stalls_;
  int64_t next_watchdog_ = 0;  // the next WATCHDOG=1 (MasterContext::watchdog_usec)
};

void Master::WatchEnvoyConfig() {
  // The directories frsd writes in: never watched (config_watch.h).
  const auto dir_of = [](const std::string& file) {
    return file.empty() ? std::string() : std::filesystem::path(file).parent_path().string();
  };
  const std::vector<std::string> own = {dir_of(live_.logfile), dir_of(live_.decisions_file), dir_of(live_.pidfile),
                                        dir_of(live_.grpc_unix), live_.store_dir};
  if (Status s = watch_.Rearm(live_.grpc ? live_.grpc_config : std::string(), own); !s.ok())
    FRS_LOG("warning: <grpc config> changes may go unnoticed (SIGHUP reloads them): %s", s.message().c_str());
}

// A reload with the watch armed before the files are read: a change made
// while they are read, or just after, is an event on the new watch (one
// more reload once quiet) instead of falling between the read and the
// arming, where nothing would ever reload it. A changed <grpc config>
// directory is read once more when it is watched.
void Master::ReloadWatched() {
  const std::string before = live_.grpc ? live_.grpc_config : std::string();
  WatchEnvoyConfig();
  Reload();
  const std::string after = live_.grpc ? live_.grpc_config : std::string();
  if (after == before) return;
  WatchEnvoyConfig();
  if (!after.empty()) {
    watch_first_ns_ = MonoNs();
    watch_due_ns_ = watch_first_ns_ + ConfigWatch::kQuietMs * kNsPerMs;
    watch_recheck_ = true;
  }
}

// The reload waits for the directory's quiet, kMaxWaitMs at most from the
// first change since the last one.
void Master::ConfigChanged() {
  const int64_t at = MonoNs();
  if (watch_due_ns_ < 0) watch_first_ns_ = at;
  watch_due_ns_ = std::min(at + ConfigWatch::kQuietMs * kNsPerMs, watch_first_ns_ + ConfigWatch::kMaxWaitMs * kNsPerMs);
  watch_recheck_ = false;
}

bool Master::Spawn(uint32_t i) {
  // Its start is its first turn (stall_watch.h), written before it can write its own.
  if (ctx_.metrics) CounterSet(ctx_.metrics->worker(i).beat_ms, static_cast<uint64_t>(MonoNs() / kNsPerMs));
  pid_t pid = fork();
  if (pid < 0) {
    FRS_LOG("cannot fork worker %u: %s", i, std::strerror(errno));
    return false;
  }
  if (pid == 0) {
    if (ctx_.in_child) ctx_.in_child();
    for (uint32_t j = 0; j < ctx_.listeners.size(); ++j)
      if (j != i) ctx_.listeners[j].reset();
    for (uint32_t j = 0; j < ctx_.grpc_listeners.size(); ++j)
      if (j != i) ctx_.grpc_listeners[j].reset();
    WorkerContext w;
    w.config = ctx_.config;
    w.index = i;
    w.listener = std::move(ctx_.listeners[i]);
    if (i < ctx_.grpc_listeners.size()) w.grpc_listener = std::move(ctx_.grpc_listeners[i]);
    w.metrics = ctx_.metrics;
    w.allow = ctx_.allow;
    w.map_channel = ctx_.map_channel;
    w.tls = ctx_.tls;
    w.previous_cluster = &previous_cluster_;
    int rc = RunWorker(std::move(w));
    // _exit: the master's objects copied into this process (its store and
    // engine) must not run their destructors here.
    _exit(rc);
  }
  slots_[i].pid = pid;
  if (ctx_.metrics) {
    CounterSet(ctx_.metrics->worker(i).pid, static_cast<uint64_t>(pid));
    CounterSet(ctx_.metrics->worker(i).log_reopen_failed, 0);
    CounterSet(ctx_.metrics->worker(i).decision_log.open_failed, 0);  // its own log opens anew
  }
  slots_[i].started_ns = MonoNs();
  slots_[i].respawn_at_ns = -1;
  FRS_LOG("worker %u started (pid %d)", i, static_cast<int>(pid));
  return true;
}

void Master::Reap(bool stopping) {
  for (;;) {
    int st = 0;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid <= 0) return;
    auto it = std::find_if(slots_.begin(), slots_.end(), [pid](const Slot& s) { return s.pid == pid; });
    if (it == slots_.end()) continue;
    uint32_t i = static_cast<uint32_t>(it - slots_.begin());
    Slot& s = *it;
    s.pid = 0;
    // A slot without a worker serves no certificate: its last one (perhaps
    // expired since a rotation) must not stand for the server's until the
    // next worker there sets its own.
    if (ctx_.metrics) CounterSet(ctx_.metrics->worker(i).tls_not_after, 0);
    // Nor does it turn a loop (frs_worker_loop_stalled_seconds), or wait.
    if (ctx_.metrics) {
      CounterSet(ctx_.metrics->worker(i).pid, 0);
      CounterSet(ctx_.metrics->worker(i).serving_pid, 0);
      CounterSet(ctx_.metrics->worker(i).lock_wait_tid, 0);
    }
    bool clean = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!(stopping && clean)) FRS_LOG("worker %u (pid %d) %s", i, static_cast<int>(pid), DescribeExit(st).c_str());
    // The decision log lines its buffer held died with it: counted, not
    // left as a gap between the decisions and the lines.
    if (ctx_.metrics)
      if (const uint64_t lost = DecisionLog::CountLost(&ctx_.metrics->worker(i).decision_log); lost > 0)
        FRS_LOG("worker %u took %llu decision log line(s) not yet written with it (frs_decision_log_dropped_total)", i,
                static_cast<unsigned long long>(lost));
    // Its claim on a replica stream goes with it (reset_claim.h): its pid,
    // given to another process later, would read as a live claimant.
    if (ctx_.metrics) {
      ResetClaim::ReleaseDead(ctx_.metrics->master().replica, pid);
      CounterSet(ctx_.metrics->worker(i).replica.applying, 0);  // its ApplyingMark likewise
    }
    // Release whatever store locks it held before anyone waits on them long.
    auto rec = ctx_.store->RecoverDeadOwner(pid);
    if (!rec.ok()) {
      FRS_LOG("lock recovery for pid %d failed: %s", static_cast<int>(pid), rec.status().ToString().c_str());
    } else if (rec.value() > 0) {
      FRS_LOG("recovered %u store lock(s) held by dead worker %u (pid %d)", rec.value(), i, static_cast<int>(pid));
      if (ctx_.metrics) CounterAdd(ctx_.metrics->master().lock_recoveries, rec.value());
    }
    if (stopping) continue;
    // A worker that cannot open the configuration while others serve on it
    // met a file changed since they opened it (its mode, the disk): they
    // hold theirs open and serve on, and the slot is tried again, as for a
    // lost store file. With none serving (a start's workers, which all
    // fail so: the configuration is what is wrong), frsd stops at once.
    const bool config_failed = WIFEXITED(st) && WEXITSTATUS(st) == kExitFatalConfig;
    if (config_failed && Serving() == 0) {
      FRS_LOG("worker %u cannot run with this configuration (see its message above); stopping", i);
      fatal_ = true;
      continue;
    }
    if (config_failed || (WIFEXITED(st) && WEXITSTATUS(st) == kExitStoreLost)) {
      // One lost file must not take the others' keys down with it: the
      // workers still alive hold it mapped and serve on (its keys 503).
      if (Alive() == 0) {
        FRS_LOG(
            "worker %u cannot open the store (see its message above) and no worker is left; stopping: restore "
            "the file, or `frsctl init --recreate-missing`, then start frsd",
            i);
        fatal_ = true;
        continue;
      }
      s.open_failed_tries = std::min<uint32_t>(s.open_failed_tries + 1, 7);
      const int64_t wait_ms = int64_t{1000} << (s.open_failed_tries - 1);
      s.respawn_at_ns = MonoNs() + std::min<int64_t>(wait_ms, 60000) * kNsPerMs;
      FRS_LOG(
          "worker %u cannot open %s (see its message above): the %zu other worker(s) serve on; trying again in "
          "%lld s (a restart of frsd needs %s)",
          i, config_failed ? "its configuration's files" : "the store", config_failed ? Serving() : Alive(),
          static_cast<long long>(std::min<int64_t>(wait_ms, 60000) / 1000),
          config_failed ? "them readable and writable by frsd's user again"
                        : "the file back, or `frsctl init --recreate-missing`");
      continue;
    }
    s.open_failed_tries = 0;
    int64_t now = MonoNs();
    if (now - s.started_ns < kYoungDeathNs) ++s.young_deaths;
    else s.young_deaths = 0;
    int64_t delay =
        s.young_deaths == 0 ? 0 : std::min<int64_t>(1000, int64_t{50} << std::min<uint32_t>(s.young_deaths - 1, 5));
    s.respawn_at_ns = now + delay * kNsPerMs;
    if (s.young_deaths > 1)
      FRS_LOG("worker %u keeps dying (%u times in a row soon after its start); respawning in %lld ms", i,
              s.young_deaths, static_cast<long long>(delay));
    else if (delay > 0)
      FRS_LOG("worker %u died soon after its start; respawning in %lld ms", i, static_cast<long long>(delay));
  }
}

void Master::StopWorkers() {
  for (const Slot& s : slots_)
    if (s.pid > 0) kill(s.pid, SIGTERM);
  int64_t deadline = MonoNs() + kStopGraceNs;
  while (Alive() > 0 && MonoNs() < deadline) {
    timespec ts{0, 20 * kNsPerMs};
    ppoll(nullptr, 0, &ts, nullptr);
    Reap(/*stopping=*/true);
  }
  for (const Slot& s : slots_)
    if (s.pid > 0) {
      FRS_LOG("worker pid %d did not stop in time; killing it", static_cast<int>(s.pid));
      kill(s.pid, SIGKILL);
    }
  while (Alive() > 0) {
    timespec ts{0, 10 * kNsPerMs};
    ppoll(nullptr, 0, &ts, nullptr);
    Reap(/*stopping=*/true);
  }
}

namespace {

// The digest of a configuration's shard list (0: none), as the workers'
// rings compute it.
uint32_t ClusterDigest(const SrvConfig& c) {
  if (c.cluster_shards.empty()) return 0;
  auto ring = Ring::Make(c.cluster_shards);  // validated when srv.xml was read
  return ring.ok() ? ring.value().Digest() : 0;
}

// What a reload cannot change in a running server: one line each, naming
// the old and new value, so the operator knows a restart is due.
std::vector<std::string> NeedRestart(const SrvConfig& a, const SrvConfig& b) {
  std::vector<std::string> out;
  auto diff = [&](const char* what, const std::string& x, const std::string& y) {
    if (x != y) out.push_back(std::string(what) + " changed (" + x + " -> " + y + ")");
  };
  diff("<grpc listen>", a.grpc ? a.grpc_host + ":" + std::to_string(a.grpc_port) : "none",
       b.grpc ? b.grpc_host + ":" + std::to_string(b.grpc_port) : "none");
  diff("<grpc unix>", a.grpc_unix, b.grpc_unix);
  diff("<grpc> TLS", a.grpc_tls_cert.empty() ? "off" : "on", b.grpc_tls_cert.empty() ? "off" : "on");
  diff("<grpc client_ca> (mTLS)", a.grpc_tls_client_ca.empty() ? "off" : "on",
       b.grpc_tls_client_ca.empty() ? "off" : "on");
  diff("<listen>", a.host + ":" + std::to_string(a.port) + (a.reuseport ? " reuseport" : ""),
       b.host + ":" + std::to_string(b.port) + (b.reuseport ? " reuseport" : ""));
  diff("<workers>", std::to_string(a.workers), std::to_string(b.workers));
  diff("<store>",
       a.store_dir + " " + std::to_string(a.geometry.files) + "x" + std::to_string(a.geometry.keynodes) + "x" +
           std::to_string(a.geometry.chain),
       b.store_dir + " " + std::to_string(b.geometry.files) + "x" + std::to_string(b.geometry.keynodes) + "x" +
           std::to_string(b.geometry.chain));
  diff("<timezone>", a.timezone, b.timezone);
  diff("<pidfile>", a.pidfile, b.pidfile);
  diff("<flush interval_ms>", std::to_string(a.flush_interval_ms), std::to_string(b.flush_interval_ms));
  return out;
}

// What a reload reads: srv.xml's and map.xml's bytes (every worker is
// handed these very bytes), the <grpc config> bundle, and srv.xml parsed.
struct ReloadFiles {
  std::string srv_text, map_text, envoy;
  std::string map_digest;  // of map.xml's bytes as read (frsd.running)
  std::optional<SrvConfig> next;
  size_t envoy_limits = 0, envoy_domains = 0;  // what <grpc config> gave
};

Status ReadWhole(const std::string& path, std::string* out) {
  Result<std::string> r = os::ReadTextFile(path);
  if (!r.ok()) return Status::InvalidArgument(r.status().message());
  *out = std::move(r.value());
  return Status::OK();
}

// srv.xml (at `path`) and the map it names read and checked against what
// runs (`live`, `geometry`), and the map loaded into `engine`. A broken file
// refuses the whole reload; f->next is set once srv.xml parsed.
Status ReadForReload(const std::string& path, const SrvConfig& live, const StoreGeometry& geometry, Engine* engine,
                     ReloadFiles* f) {
  if (Status s = ReadWhole(path, &f->srv_text); !s.ok()) return s;
  auto parsed = LoadSrvConfigText(path, &f->srv_text);
  if (!parsed.ok()) return parsed.status();
  if (auto allow = AllowList::Parse(parsed->allow); !allow.ok())
    return Status::InvalidArgument(path + ": " + allow.status().message());
  f->next = std::move(parsed.value());
  SrvConfig& next = *f->next;
  // Another geometry for the running store: a restart would refuse to open
  // it (a store is never reinterpreted), so the files are broken for it,
  // not merely waiting for a restart.
  // Compared as the files they name: a trailing slash or a link to the
  // same directory is the same store.
  std::error_code same_ec;
  const bool same_store =
      next.store_dir == live.store_dir || std::filesystem::equivalent(next.store_dir, live.store_dir, same_ec);
  if (same_store && !(next.geometry == geometry)) {
    auto g = [](const StoreGeometry& x) {
      return "files=" + std::to_string(x.files) + " keynodes=" + std::to_string(x.keynodes) +
             " chain=" + std::to_string(x.chain);
    };
    return Status::Mismatch(path + ": <store> says " + g(next.geometry) + ", but the store in " + next.store_dir +
                            " has " + g(geometry) +
                            ": a restart would refuse it (a store is never reinterpreted). Put <store> back to the "
                            "store's geometry, or stop frsd, change the store's with frsctl grow, and start it");
  }
  Status s;
  // A file to write that would make an open(2) wait (a FIFO) is refused
  // here, before any worker is told: a worker opens files it is told of.
  if (std::vector<std::string> out = OutputPathProblems(next); !out.empty()) s = Status::InvalidArgument(out.front());
  else if (!next.decisions_file.empty() && next.decisions_file != live.decisions_file)
    s = DecisionLog::CheckFile(next.decisions_file);
  // <listen port="0"> means the port already bound, not a new one; so
  // does <grpc listen="host:0"> (it was said to need a restart).
  ApplyBoundPort(&next, live.port);
  if (next.grpc && next.grpc_port == 0 && next.grpc_host == live.grpc_host) next.grpc_port = live.grpc_port;
  if (!s.ok()) return s;
  if (std::string why = OwnListenListedUnderAnotherSelf(next); !why.empty())
    return Status::InvalidArgument(path + ": " + why);
  // The store's geometry stays what is running until a restart.
  SrvConfig check = next;
  check.geometry = geometry;
  // <grpc config>'s YAML files are read here too and their bizzes put in
  // the map: a broken file refuses the whole reload like a broken map.
  std::string text;
  if (s = ReadWhole(next.map_path, &text); !s.ok()) return s;
  Result<ComposedMap> composed = ComposeEnvoyMap(next, std::move(text));
  if (!composed.ok()) return composed.status();
  f->map_digest = std::move(composed->map_digest);
  f->map_text = std::move(composed->map_text);
  f->envoy = std::move(composed->envoy_bundle);
  f->envoy_limits = composed->envoy_limits;
  f->envoy_domains = composed->envoy_domains;
  if (auto fit = NodeFitProblems(check, f->map_text); !fit.empty())
    return Status::InvalidArgument(fit.front());  // a biz whose nodes cannot fit would answer 503 forever
  return engine->ReloadText(f->map_text, next.map_path);
}

// What a reload applies, said in the log (the <log file> switched here:
// the master's lines go to the new file; each worker switches as it
// reloads).
void SayApplied(const SrvConfig& live, const SrvConfig& next) {
  if (next.admin_token != live.admin_token) FRS_LOG("srv.xml: the admin token changed; applied");
  // Who may connect at all: a change an operator must be able to see in the
  // log, as the token's.
  if (next.allow != live.allow)
    FRS_LOG("srv.xml: <allow> changed (%zu range(s)%s); applied by each worker", next.allow.size(),
            next.allow.empty() ? ": every peer" : "");
  if (next.ratelimit_fields != live.ratelimit_fields) {
    static constexpr const char* kForms[] = {"0 (the draft's fields)", "1 (the draft's fields and the older trio)",
                                             "only (the older trio)"};
    FRS_LOG("srv.xml: <ratelimit legacy> changed to %s; applied", kForms[static_cast<size_t>(next.ratelimit_fields)]);
  }
  if (next.logfile != live.logfile) {
    if (next.logfile.empty())  // removed: back where a start without it logs
      FRS_LOG("srv.xml: <log file> removed; switching to %s", Logger::Get().DefaultTarget().c_str());
    else FRS_LOG("srv.xml: <log file> changed to \"%s\"; switching", next.logfile.c_str());
    if (Status ls = Logger::Get().UseFile(next.logfile); !ls.ok())
      FRS_LOG("cannot switch the log file, logging here still: %s", ls.message().c_str());
    else FRS_LOG("logging here from now on (srv.xml reloaded)");
  }
  // The sizes and time-outs every connection lives by: a change was applied
  // unsaid, where each other live setting is logged (found by an outside run).
  {
    std::string changed;
    const std::pair<const char*, uint32_t SrvConfig::*> limits[] =
        {{"header_bytes", &SrvConfig::max_header_bytes},         {"body_bytes", &SrvConfig::max_body_bytes},
         {"connections", &SrvConfig::max_connections},           {"idle_timeout_ms", &SrvConfig::idle_timeout_ms},
         {"request_timeout_ms", &SrvConfig::request_timeout_ms}, {"batch", &SrvConfig::max_batch}};
    for (const auto& [name, field] : limits)
      if (next.*field != live.*field)
        changed += std::string(changed.empty() ? "" : ", ") + name + " " + std::to_string(live.*field) + " -> " +
                   std::to_string(next.*field);
    if (!changed.empty())
      FRS_LOG(
          "srv.xml: <limits> changed (%s); applied by each worker (new connections get the new sizes; time-outs "
          "apply from each connection's next activity)",
          changed.c_str());
  }
  if (next.worker_stall_ms != live.worker_stall_ms)
    FRS_LOG("srv.xml: <limits worker_stall_ms> changed (%u -> %u%s); applied", live.worker_stall_ms,
            next.worker_stall_ms, next.worker_stall_ms == 0 ? ": no watch over hung workers" : "");
  if (next.decisions_file != live.decisions_file || next.decisions_all != live.decisions_all ||
      next.decisions_sample != live.decisions_sample)
    FRS_LOG("srv.xml: <decisions> changed (file \"%s\", record %s, sample %g); applied by each worker",
            next.decisions_file.c_str(), next.decisions_all ? "all" : "denied", next.decisions_sample);
  // Only a change of who holds which routes moves nodes: a mode, a timeout
  // or enforce changes how they are served, and calls for no handoff.
  const bool routes = next.cluster_shards != live.cluster_shards || next.cluster_self != live.cluster_self ||
                      next.cluster_replicas != live.cluster_replicas;
  if (routes) {
    FRS_LOG(
        "srv.xml: <cluster> changed (%zu shard(s), self %s); applied: run frsctl handoff to move the nodes "
        "other shards now own",
        next.cluster_shards.size(), next.cluster_self.c_str());
    if (std::string w = ClusterSelfNotListed(next); !w.empty()) FRS_LOG("warning: %s", w.c_str());
  } else if (next.cluster_enforce != live.cluster_enforce || next.replica_sync != live.replica_sync ||
             next.replica_refuse != live.replica_refuse || next.replica_timeout_ms != live.replica_timeout_ms ||
             next.catchup_timeout_ms != live.catchup_timeout_ms)
    FRS_LOG(
        "srv.xml: <cluster> changed (enforce %d, replica_mode %s, on_replica_down %s, replica_timeout_ms %u, "
        "catchup_timeout_ms %u: read at the next start); applied, the shard list unchanged: no handoff is needed",
        next.cluster_enforce ? 1 : 0, next.replica_sync ? "sync" : "async", next.replica_refuse ? "refuse" : "serve",
        static_cast<unsigned>(next.replica_timeout_ms), static_cast<unsigned>(next.catchup_timeout_ms));
}

// The configuration that runs after a reload: `next`, but for what a
// restart would change, which stays as running for the next comparison.
SrvConfig AppliedConfig(const SrvConfig& live, SrvConfig next) {
  next.host = live.host;
  next.store_dir = live.store_dir;
  next.timezone = live.timezone;
  next.pidfile = live.pidfile;
  next.port = live.port;
  next.reuseport = live.reuseport;
  next.workers = live.workers;
  next.geometry = live.geometry;
  next.flush_interval_ms = live.flush_interval_ms;
  next.grpc_unix = live.grpc_unix;
  next.grpc_host = live.grpc_host;
  next.grpc_port = live.grpc_port;
  if (next.grpc_tls_cert.empty() != live.grpc_tls_cert.empty() ||
      next.grpc_tls_client_ca.empty() != live.grpc_tls_client_ca.empty()) {
    next.grpc_tls_cert = live.grpc_tls_cert;
    next.grpc_tls_key = live.grpc_tls_key;
    next.grpc_tls_client_ca = live.grpc_tls_client_ca;
    next.grpc_tls_client_names = live.grpc_tls_client_names;
  }
  return next;
}

// What a reload's new map changes of the one every worker runs (read from
// the channel before it is replaced): the bizzes it adds, removes and
// changes, and what it ends of what keys hold.
struct MapReloadWords {
  limit::MapChange change;
  std::vector<std::string> tables_left;
  std::vector<std::string> ends;
};
MapReloadWords SayOfMapReload(MapChannel* channel, const limit::MapConfig& next, bool with_envoy) {
  MapReloadWords out;
  if (channel == nullptr) return out;
  if (Result<MapChannel::Map> was = channel->Read(); was.ok() && !was->text.empty())
    if (auto running = limit::ParseMap(was->text, next.path); running.ok()) {
      out.ends = limit::HeldAReloadEnds(*running, next, with_envoy);
      out.change = limit::MapChangeWords(*running, next, with_envoy);
      out.tables_left = limit::StatsTablesLeft(*running, next);
    }
  return out;
}

}  // namespace

// What a reload needs of the files beside the configuration: the cluster's
// lease key files, and a rules.history the workers can read.
Status Master::CheckReloadSideFiles(const SrvConfig& next, bool* lease_key_changed) {
  Status s;
  // <cluster lease_key> is read at start only (ids verify under it): a file
  // that `frsd -t` refuses refuses the reload too, and another key is said
  // to need a restart.
  {
    // The check of a named key file (0: none named).
    auto check_of = [&s](const std::string& file, const char* attribute) -> uint64_t {
      if (file.empty() || !s.ok()) return 0;
      auto key = limit::LoadLeaseKeyFile(file, attribute);
      if (!key.ok()) s = key.status();
      return key.ok() ? limit::LeaseKeyCheckOf(key.value()) : 0;
    };
    const uint64_t check = check_of(next.cluster_lease_key, "lease_key"),
                   also = check_of(next.cluster_lease_key_also, "lease_key_also");
    if (s.ok() && also != 0 && also == check)
      s = Status::InvalidArgument(limit::SameKeyWords(next.cluster_lease_key, next.cluster_lease_key_also));
    *lease_key_changed = s.ok() && (check != ctx_.engine->LeaseKeyCheck() || also != ctx_.engine->LeaseKeyAlsoCheck());
  }
  // A rules.history the workers cannot read (a FIFO, a device, its mode):
  // each would install the map without the rules' pasts, and a changed
  // interval would start its keys' counts afresh, unsaid. The start refuses
  // it (side_files.h); so does a reload. A damaged line is not this: the
  // rest is read, and the start sets such a file aside.
  if (s.ok())
    if (const std::string h = RuleHistoryUnreadableWarning(cfg_.store_dir); !h.empty()) s = Status::IOError(h);
  return s;
}

void Master::Reload() {
  if (ctx_.notify) ctx_.notify("RELOADING=1");
  // srv.xml and map.xml are read once, validated, and every worker is handed
  // these very bytes: a file rewritten meanwhile cannot give two workers two
  // configurations. A broken file refuses the whole reload.
  ReloadFiles f;
  Status s = ReadForReload(cfg_.path, live_, cfg_.geometry, ctx_.engine, &f);
  bool lease_key_changed = false;
  if (s.ok()) s = CheckReloadSideFiles(*f.next, &lease_key_changed);
  // The new map parsed once, for what it ends of what the running one held
  // (read before it is replaced: the channel holds the map every worker
  // runs) and for the descriptors its statistics need.
  std::optional<limit::MapConfig> new_map;
  if (s.ok())
    if (Result<limit::MapConfig> m = limit::ParseMap(f.map_text, f.next->map_path); m.ok()) new_map = std::move(*m);
  const MapReloadWords said = new_map ? SayOfMapReload(ctx_.map_channel, *new_map, f.next->grpc) : MapReloadWords{};
  // The list before the last <cluster> change once this one applies: the
  // master's record, published with the map for the running workers (a
  // worker that applies two changes at once knows only its own list) and
  // kept for the ones it forks.
  std::vector<RingShard> previous_after = previous_cluster_;
  std::string previous_text;
  if (s.ok()) {
    if (ClusterDigest(*f.next) != ClusterDigest(live_) && !live_.cluster_shards.empty())
      previous_after = live_.cluster_shards;
    if (!previous_after.empty())
      if (auto ring = Ring::Make(previous_after); ring.ok()) previous_text = ring->ListText();
  }
  if (s.ok() && ctx_.map_channel) s = ctx_.map_channel->Publish(f.srv_text, f.map_text, f.envoy, previous_text);
  if (!s.ok()) {
    FRS_LOG("reload refused, the old configuration stays: %s", s.message().c_str());
    if (ctx_.metrics) CounterAdd(ctx_.metrics->master().reload_failures);
    if (ctx_.metrics) CounterSet(ctx_.metrics->master().last_reload_refused, 1);
    if (ctx_.notify) ctx_.notify("READY=1\nSTATUS=reload refused, the old configuration stays: " + s.message());
    return;
  }
  const SrvConfig& next = *f.next;
  // What frsd runs from now on, for frsctl; the zone stays the start's.
  if (Status w = WriteRunningConfig(live_.store_dir,
                                    RunningConfig{::getpid(), live_.timezone, next.map_path, f.map_digest, f.map_text});
      !w.ok()) {
    // The previous one would name a map this frsd no longer runs.
    ::unlink(os::store_dir::In(live_.store_dir, os::store_dir::kRunningConfig).c_str());
    FRS_LOG("warning: %s: frsctl shows map.xml as it is on disk, not the map this frsd runs", w.message().c_str());
  }
  // What the map changes, said once by the master: each worker's line says
  // only that it reloaded (an operator read no more, found by an outside run).
  if (!said.change.bizzes.empty()) FRS_LOG("%s: %s", next.map_path.c_str(), said.change.bizzes.c_str());
  if (!said.change.envoy.empty())
    FRS_LOG("<grpc config> %s: Envoy %s", next.grpc_config.c_str(), said.change.envoy.c_str());
  for (const std::string& line : said.ends) FRS_LOG("warning: %s", line.c_str());
  for (const std::string& line : said.tables_left) FRS_LOG("note: %s", line.c_str());
  if (ctx_.metrics) CounterAdd(ctx_.metrics->master().reloads);
  if (held_) held_->Invalidate();
  // Against the start's values, not the last reload's: a change said once
  // is said again at every reload until a restart applies it (or the file
  // goes back), and the gauge stays up as long.
  const std::vector<std::string> need_restart = NeedRestart(cfg_, next);
  for (const std::string& line : need_restart)
    FRS_LOG("srv.xml: %s: this needs a restart; still running with the old value", line.c_str());
  if (ctx_.metrics) {
    CounterSet(ctx_.metrics->master().last_reload_refused, 0);
    CounterSet(ctx_.metrics->master().restart_pending, need_restart.empty() && !lease_key_changed ? 0 : 1);
  }
  if (lease_key_changed)
    FRS_LOG(
        "srv.xml: <cluster lease_key> or lease_key_also (a file or its key) changed: this needs a restart of every "
        "shard (one at a time only through lease_key_also's two steps: docs/cluster.md, \"The shared secret\"); "
        "still running with the old keys");
  // A map with more <stats> tables needs more descriptors: said from the
  // same sum as at start (server/fd_limit.h).
  if (new_map)
    if (std::string fd = FdLimitProblem(next, *new_map, CurrentFdLimit(), /*raised=*/true); !fd.empty())
      FRS_LOG("warning: %s", fd.c_str());
  SayApplied(live_, next);
  previous_cluster_ = std::move(previous_after);
  live_ = AppliedConfig(live_, next);
  // <grpc cert>'s files, read again (rotated certificates): a set that does
  // not load keeps the previous one serving. Each worker reads them too;
  // this copy is what a respawned worker starts with.
  bool tls_refused = false;
  if (ctx_.tls) {
    auto tls = TlsContext::Load(TlsFilesOf(live_));
    tls_refused = !tls.ok();
    if (tls.ok()) {
      ctx_.tls = std::move(tls.value());
      for (const std::string& w : ctx_.tls->Warnings(std::time(nullptr))) FRS_LOG("warning: <grpc> TLS: %s", w.c_str());
    } else {
      FRS_LOG("TLS files refused, the previous certificate stays: %s", tls.status().message().c_str());
    }
    // The rest applied, but a restart would fail on these files, which is
    // what the gauge (and FrsConfigBroken) is for.
    if (tls_refused && ctx_.metrics) CounterSet(ctx_.metrics->master().last_reload_refused, 1);
  }
  const std::string envoy = live_.grpc ? ", with " + std::to_string(f.envoy_limits) + " Envoy rate limit(s) of " +
                                             std::to_string(f.envoy_domains) + " domain(s) from " + live_.grpc_config
                                       : std::string();
  FRS_LOG("srv.xml %s and map %s are valid%s; reloading them in every worker%s", cfg_.path.c_str(),
          live_.map_path.c_str(), envoy.c_str(),
          tls_refused ? " (not the TLS files: the previous certificate stays)" : "");
  for (const Slot& sl : slots_)
    if (sl.pid > 0) kill(sl.pid, SIGHUP);
  if (ctx_.notify) ctx_.notify("READY=1\nSTATUS=serving; configuration reloaded");
}

void Master::Tick(int64_t now) {
  if (cfg_.flush_interval_ms == 0) {
    next_flush_ = now + 1000 * kNsPerMs;  // off: only the wake-up below uses it
  } else if (now >= next_flush_) {
    Status s = ctx_.store->Flush(false);
    if (!s.ok()) FRS_LOG("store flush failed: %s", s.ToString().c_str());
    next_flush_ = now + int64_t{cfg_.flush_interval_ms} * kNsPerMs;
  }
  if (now >= next_eviction_report_) {
    uint64_t live = ctx_.store->Stats().total.evictions_live;
    if (next_eviction_report_ != 0 && live > evictions_live_seen_)
      FRS_LOG(
          "%llu live node(s) evicted in the last minute: the store is too small for the keys in use "
          "(their limits restarted); grow it: stop frsd, run frsctl grow --keynodes N (every count is kept), "
          "set the <store> line it prints in srv.xml, start frsd",
          static_cast<unsigned long long>(live - evictions_live_seen_));
    evictions_live_seen_ = live;
    next_eviction_report_ = now + kEvictionReportNs;
  }
  if (held_) held_->Tick(now / kNsPerMs);
  if (ctx_.metrics) WatchStalls(MonoNs());
}

void Master::WatchStalls(int64_t now) {
  std::vector<WorkerBeat> beats(slots_.size());
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    const WorkerCounters& c = ctx_.metrics->worker(i);
    const pid_t pid = slots_[i].pid;
    if (pid <= 0) continue;
    beats[i] =
        WorkerBeat{pid, static_cast<int64_t>(CounterGet(c.beat_ms)), static_cast<uint32_t>(CounterGet(c.lock_wait_tid)),
                   static_cast<int64_t>(CounterGet(c.lock_wait_since_ms)),
                   CounterGet(c.serving_pid) == static_cast<uint64_t>(pid)};
  }
  for (const StallVerdict& v : stalls_.Judge(now / kNsPerMs, live_.worker_stall_ms, beats, ThreadGroupOf)) {
    const pid_t pid = beats[v.slot].pid;
    if (v.kind == StallVerdict::Kind::kForeignWait) {
      FRS_LOG(
          "worker %u (pid %d) has waited %lld ms for a store lock held by pid %d (%s), which is not one of this "
          "frsd's workers: frsd cannot end that wait; let that process go on, or stop it (a kill -9 frees the "
          "lock and undoes the write it was making, not what it wrote before)",
          v.slot, static_cast<int>(pid), static_cast<long long>(v.stalled_ms), static_cast<int>(v.owner_pid),
          ProcessName(v.owner_pid).c_str());
      continue;
    }
    if (v.serving)
      FRS_LOG(
          "worker %u (pid %d) has not turned its event loop for %lld ms (<limits worker_stall_ms> %u): killing it "
          "(SIGKILL); its store locks are recovered and its slot starts again",
          v.slot, static_cast<int>(pid), static_cast<long long>(v.stalled_ms), live_.worker_stall_ms);
    else
      FRS_LOG(
          "worker %u (pid %d) has not begun to serve %lld ms after its start: killing it (SIGKILL); its slot "
          "starts again",
          v.slot, static_cast<int>(pid), static_cast<long long>(v.stalled_ms));
    if (::kill(pid, SIGKILL) == 0) CounterAdd(ctx_.metrics->master().stall_kills);
    else FRS_LOG("cannot kill worker %u (pid %d): %s", v.slot, static_cast<int>(pid), std::strerror(errno));
  }
}

int Master::Run(const sigset_t* wait_mask) {
  if (ctx_.metrics) CounterSet(ctx_.metrics->master().master_pid, static_cast<uint64_t>(getpid()));
  if (ctx_.metrics)
    if (Status s = PrepareReplicaCatchUp(cfg_, &ctx_.fresh_store, ctx_.store, &ctx_.metrics->master().replica,
                                         &previous_cluster_);
        !s.ok()) {
      FRS_LOG("cannot serve: %s", s.message().c_str());
      return 1;
    }
  for (uint32_t i = 0; i < slots_.size(); ++i)
    if (!Spawn(i)) {
      StopWorkers();
      return 1;
    }
  // READY=1 (and a daemon's launcher returning 0) once every worker serves,
  // not once they are forked: a unit ordered After=frsd.service may send
  // requests at once.
  bool ready_pending = true;
  SignalFlags& f = Signals();
  WatchEnvoyConfig();
  for (;;) {
    int64_t now = MonoNs();
    if (ready_pending && AllServing()) {
      ready_pending = false;
      if (ctx_.on_ready) ctx_.on_ready();
      // Every worker serves /replicate: take back what the other shards
      // hold for this one, then open its routes.
      bool caught_up = true;
      if (ctx_.admin != nullptr && ctx_.metrics != nullptr && cfg_.cluster_replicas > 0)
        caught_up = RunReplicaCatchUp(cfg_, ctx_.fresh_store, ctx_.admin, &ctx_.metrics->master().replica);
      // A stop ended the catch-up: not ready, stopping (the signal is read next).
      if (ctx_.notify && caught_up)
        ctx_.notify("READY=1\nMAINPID=" + std::to_string(getpid()) + "\nSTATUS=serving on " + cfg_.host + ":" +
                    std::to_string(cfg_.port) + " with " + std::to_string(slots_.size()) + " worker(s)");
    }
    Tick(now);
    // systemd's watchdog: this loop turning is what it watches.
    if (ctx_.watchdog_usec > 0 && ctx_.notify && now >= next_watchdog_) {
      ctx_.notify("WATCHDOG=1");
      next_watchdog_ = now + ctx_.watchdog_usec * 1000 / 2;
    }
    int64_t wake = std::min(next_flush_, now + (ready_pending ? 5 : 1000) * kNsPerMs);
    if (ctx_.watchdog_usec > 0) wake = std::min(wake, next_watchdog_);
    for (const Slot& s : slots_)
      if (s.respawn_at_ns >= 0) wake = std::min(wake, s.respawn_at_ns);
    if (watch_due_ns_ >= 0) wake = std::min(wake, watch_due_ns_);
    if (held_)
      if (const int64_t due = held_->NextDueMs(now / kNsPerMs); due >= 0) wake = std::min(wake, due * kNsPerMs);
    int64_t wait = std::max<int64_t>(0, wake - now);
    timespec ts{static_cast<time_t>(wait / 1000000000), static_cast<long>(wait % 1000000000)};
    // Signals are blocked except inside ppoll: a flag set before the wait
    // interrupts it at once, none is lost in between.
    pollfd pfd{watch_.fd(), POLLIN, 0};
    if (!f.terminate && !f.child && !f.reload && !f.reopen) ppoll(&pfd, pfd.fd >= 0 ? 1 : 0, &ts, wait_mask);
    // A change restarts the quiet period: the several steps of one update
    // (a ConfigMap's new directory and link, an editor's temp file and
    // rename) are one reload.
    if (pfd.fd >= 0 && (pfd.revents & POLLIN) && watch_.Drain()) ConfigChanged();
    if (f.child) {
      f.child = 0;
      Reap(/*stopping=*/false);
    }
    if (f.terminate || fatal_) {
      FRS_LOG("stopping %s", fatal_ ? "after a fatal worker error" : f.terminate == SIGINT ? "(SIGINT)" : "(SIGTERM)");
      if (ctx_.notify) ctx_.notify("STOPPING=1");
      // No worker starts again: the master's copies of the listening sockets
      // go, so that once each worker has closed its own (as its drain
      // begins) a new connection is refused at once instead of waiting in
      // the backlog for the drain's 3 s and then being reset.
      for (os::UniqueFd& l : ctx_.listeners) l.reset();
      for (os::UniqueFd& l : ctx_.grpc_listeners) l.reset();
      StopWorkers();
      Status s = ctx_.store->Flush(true);
      if (!s.ok()) FRS_LOG("final store flush failed: %s", s.ToString().c_str());
      FRS_LOG("stopped");
      return fatal_ ? 1 : 0;
    }
    if (f.reload) {
      f.reload = 0;
      ReloadWatched();
    }
    if (watch_due_ns_ >= 0 && MonoNs() >= watch_due_ns_) {
      watch_due_ns_ = -1;
      // As SIGHUP: srv.xml, map.xml and the YAML files read and checked
      // once, a broken file keeping the old configuration (logged, counted
      // in frs_reload_failures_total), every worker handed the same bytes.
      if (watch_recheck_)
        FRS_LOG(
            "<grpc config> is %s now: read again once watched, so that a change made while the reload read it "
            "is not missed",
            live_.grpc_config.c_str());
      else FRS_LOG("<grpc config> %s changed: reloading", live_.grpc_config.c_str());
      watch_recheck_ = false;
      ReloadWatched();
    }
    if (f.reopen) {
      f.reopen = 0;
      Status s = Logger::Get().Reopen();
      if (!s.ok()) FRS_LOG("cannot reopen the log file: %s", s.ToString().c_str());
      else FRS_LOG("log file reopened");
      if (ctx_.metrics) CounterSet(ctx_.metrics->master().log_reopen_failed, s.ok() ? 0 : 1);
      for (const Slot& sl : slots_)
        if (sl.pid > 0) kill(sl.pid, SIGUSR1);
    }
    now = MonoNs();
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      if (s.pid == 0 && s.respawn_at_ns >= 0 && now >= s.respawn_at_ns) {
        if (Spawn(i)) {
          if (ctx_.metrics) CounterAdd(ctx_.metrics->master().worker_restarts);
        } else {
          s.respawn_at_ns = now + 1000 * kNsPerMs;
        }
      }
    }
  }
}

}  // namespace

int RunMaster(MasterContext ctx) {
  Logger::Get().SetRole("master");
  // The master reads store headers (counters) and flushes the mappings: a
  // store file truncated under it must not kill it either.
  sigset_t wait_mask;
  if (!SetUpProcessSignals(/*want_child=*/true, &wait_mask)) return 1;
  try {
    Master m(std::move(ctx));
    return m.Run(&wait_mask);
  } catch (const std::exception& e) {
    // The workers die with us (PR_SET_PDEATHSIG); the store needs no flush
    // to keep what was acknowledged.
    FRS_LOG("master stopped by an internal error: %s", e.what());
    return 1;
  }
}

}  // namespace frs::server
