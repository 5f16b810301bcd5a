// server/snapshot_merge.h: a replica snapshot's nodes folded into this
// store (the catch-up of a shard whose store is new, replica_catchup.h).
//
// Thread safety: as the engine's MergeNodes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frs/admin_engine.h"

namespace frs::server {

struct SnapshotMerged {
  uint64_t nodes = 0;  // merged
  // Left out, each of a biz this map lacks (why empty) or refused by this
  // store (AdminEngine::MergeKnownNodes): its line (in the body given),
  // the biz id it names, why, and the receipt of its batch.
  struct LeftOut {
    std::string_view line;
    uint32_t biz = 0;
    std::string why;
    std::string receipt;
  };
  std::vector<LeftOut> left_out;
  // What stopped the merge (OK: it went through): the batches before it
  // are merged, their receipts written, and their nodes left out above,
  // so that a caller still keeps those aside (dropped with the error, no
  // later take brought them back: found in review).
  Status status;
};

// Merges a snapshot's node lines (one JSON node a line, ExportNode's text)
// in batches of AdminEngine::kMaxMergeNodes, batch k under the receipt
// `receipt_base`/k. A node of a biz this map lacks, or one this store
// refuses, is left out and named: the peer's map may be a step of a rolling
// change ahead or behind, and the nodes after it are this shard's all the
// same. Any other error stops it (`status`): the engine's, or a batch the
// engine did not take because its receipt is in the store already (a
// snapshot of a new store is taken once, so that batch's nodes are not this
// snapshot's to count).
SnapshotMerged MergeSnapshot(std::string_view body, AdminEngine* engine, const std::string& receipt_base);

}  // namespace frs::server
