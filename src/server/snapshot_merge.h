// server/snapshot_merge.h: a replica snapshot's nodes folded into this
// store (the catch-up of a shard whose store is new, replica_catchup.h).
//
// Thread safety: as the engine's MergeNodes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "frs/admin_engine.h"

namespace frs::server {

// Merges a snapshot's node lines (one JSON node a line, ExportNode's text)
// in batches of AdminEngine::kMaxMergeNodes, batch k under the receipt
// `receipt_base`/k; returns the nodes merged. An error stops it: the
// engine's, or a batch the engine did not take because its receipt is in
// the store already (a snapshot of a new store is taken once, so that
// batch's nodes are not this snapshot's to count).
Result<uint64_t> MergeSnapshot(std::string_view body, AdminEngine* engine, const std::string& receipt_base);

}  // namespace frs::server
