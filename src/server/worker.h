// server/worker.h: one pre-forked worker process: its own store mapping and
// engine, its own epoll loop over its own listening socket.
//
// The worker opens the store and the engine itself after fork (no mapping,
// lock or thread id state is inherited from the master). Signals only set
// flags; the loop acts on them between waits: SIGTERM/SIGINT stop accepting
// and finish the requests in flight (at most kDrainMs), SIGHUP reloads
// map.xml into the engine (connections and counts stay), SIGUSR1 reopens the
// log file.
//
// Exit codes: 0 after a graceful stop, kExitFatalConfig when the store or
// map cannot be opened (the master does not respawn it), 1 otherwise.
//
// Thread safety: single-threaded by design.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "config/srv_config.h"
#include "os/unique_fd.h"
#include "server/allow_list.h"
#include "server/map_channel.h"
#include "server/metrics.h"

namespace frs::server {

inline constexpr int kExitFatalConfig = 78;  // sysexits.h EX_CONFIG
inline constexpr int kDrainMs = 3000;

struct WorkerContext {
  const SrvConfig* config = nullptr;
  uint32_t index = 0;
  os::UniqueFd listener;
  os::UniqueFd grpc_listener;  // <grpc>: not valid without one
  Metrics* metrics = nullptr;
  const AllowList* allow = nullptr;
  const MapChannel* map_channel = nullptr;  // the map to run (see map_channel.h)
};

// Runs the worker until it stops; returns the process exit code.
int RunWorker(WorkerContext ctx);

}  // namespace frs::server
