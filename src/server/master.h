// server/master.h: the master process: forks the workers, respawns the ones
// that die, relays signals, flushes the store; it never serves requests.
//
// - A dead worker's store locks are released (RecoverDeadOwner) before its
//   replacement starts; the replacement starts at once, or after a back-off
//   (50 ms doubling to 1 s) when workers keep dying young.
// - A worker that exits with kExitFatalConfig while no worker serves (a
//   start whose configuration is wrong) stops frsd: the master stops the
//   others and exits 1. One that exits so while others serve (a file of
//   the configuration changed since they opened it), or with kExitStoreLost
//   (a store file went while frsd ran, so a new worker cannot open the
//   store), is tried again, 1 s doubling to 60 s, while another worker
//   serves: those hold their files open and answer as before (a lost
//   file's keys 503); when none is left the master stops and exits 1.
// - SIGTERM/SIGINT: workers get SIGTERM and finish what is in flight; any
//   still alive after 4.5 s is killed; the store is flushed (msync) and the
//   master exits 0.
// - SIGHUP: srv.xml, map.xml and <grpc config>'s files are read and
//   validated in the master first; a broken one is logged with file:line and
//   nothing changes, good ones are published to every worker (the map
//   channel), which reloads between requests (connections and counts stay).
// - SIGUSR1: reopen the log file, here and in every worker.
// - Every flush_interval_ms: Store::Flush(false); every minute, a log line
//   when live nodes were evicted (the store is too small).
//
// Thread safety: single-threaded; signal handlers only set flags.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "config/srv_config.h"
#include "frs/admin_engine.h"
#include "frs/engine.h"
#include "frs/store.h"
#include "os/unique_fd.h"
#include "server/allow_list.h"
#include "server/map_channel.h"
#include "server/metrics.h"
#include "server/tls_context.h"

namespace frs::server {

struct MasterContext {
  const SrvConfig* config = nullptr;
  Store* store = nullptr;
  Engine* engine = nullptr;  // the master's own, to validate reloads
  // The same engine's admin face: a shard's return takes nodes back through
  // it (<cluster replicas="1">, replica_catchup.h). `fresh_store`: this
  // start created the store.
  AdminEngine* admin = nullptr;
  bool fresh_store = false;
  Metrics* metrics = nullptr;
  const AllowList* allow = nullptr;
  std::vector<os::UniqueFd> listeners;       // one per worker slot
  std::vector<os::UniqueFd> grpc_listeners;  // <grpc>: one per worker slot (empty without)
  // The map every worker runs: the master publishes the bytes it validated
  // (map_channel.h); workers never read map.xml themselves.
  MapChannel* map_channel = nullptr;
  // <grpc cert>: the TLS files as loaded at start; a reload loads them again
  // (a broken set keeps the previous one), and a respawned worker starts
  // with the last good set.
  std::shared_ptr<const TlsContext> tls;
  // Runs in every forked worker before anything else: closes what workers
  // must not inherit (the lock files, the daemon's start-up pipe).
  std::function<void()> in_child;
  // Called once every worker has been started the first time.
  std::function<void()> on_ready;
  // Service manager notifications ("READY=1", "RELOADING=1", "STOPPING=1";
  // see sd_notify.h); unset: none.
  std::function<void(const std::string&)> notify;
  // systemd's watchdog period (sd_notify.h), microseconds: the master sends
  // WATCHDOG=1 through `notify` every half of it. 0: none.
  int64_t watchdog_usec = 0;
};

// Runs until stopped; returns the process exit code.
int RunMaster(MasterContext ctx);

}  // namespace frs::server
