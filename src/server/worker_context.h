// server/worker_context.h: what the master hands a worker it forks: its
// configuration, its listening sockets, the shared metrics, the allow list
// and the map channel; and the worker's exit codes the master acts on.
//
// Thread safety: plain values, set before fork.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "config/srv_config.h"
#include "os/unique_fd.h"
#include "server/allow_list.h"
#include "server/map_channel.h"
#include "server/metrics.h"
#include "server/tls_context.h"

namespace frs::server {

inline constexpr int kExitFatalConfig = 78;  // sysexits.h EX_CONFIG
// A respawned worker that finds a store file gone (deleted or moved while
// frsd ran): the others, which have it mapped, serve on (sysexits.h
// EX_TEMPFAIL).
inline constexpr int kExitStoreLost = 75;
inline constexpr int kDrainMs = 3000;

struct WorkerContext {
  const SrvConfig* config = nullptr;
  uint32_t index = 0;
  os::UniqueFd listener;
  os::UniqueFd grpc_listener;  // <grpc>: not valid without one
  Metrics* metrics = nullptr;
  const AllowList* allow = nullptr;
  const MapChannel* map_channel = nullptr;  // the map to run (see map_channel.h)
  std::shared_ptr<const TlsContext> tls;    // <grpc cert>: the master's last good files; null: plain
  // The shard list before the last <cluster> change the master applied
  // (null or empty: none since the start).
  const std::vector<RingShard>* previous_cluster = nullptr;
};

}  // namespace frs::server
