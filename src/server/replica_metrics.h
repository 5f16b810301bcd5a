// server/replica_metrics.h: /metrics' series of <cluster replicas="1">
// (server/replicator.h), summed over the workers, per other shard where
// they are about one.
//
// Thread safety: reads the shared counters (relaxed); any worker may render.
#pragma once

#include <string>

#include "frs/ring.h"
#include "server/metrics.h"

namespace frs::server {

// Appends the frs_replica_* series; nothing without a ring. `store_dir`
// ("": none) holds snapshot.missed (snapshot_missed.h).
void RenderReplicaMetrics(const Metrics& metrics, const Ring& ring, long self_index, const std::string& store_dir,
                          std::string* out);
// frs_replica_lag_seconds in ms: the oldest change of this shard's workers
// that no other holder acknowledged, their live links', the links a reload
// retired and the spools they deliver alike (0: none waits).
uint64_t ReplicaLagMs(const Metrics& metrics);

}  // namespace frs::server
