// server/replica_catchup.h: a shard's return (<cluster replicas="1">).
//
// A shard that starts takes back, before it answers on its routes, what the
// other shards hold for it (docs/cluster.md, "Replicas"):
//   - on a new store (a lost disk), every node it holds (owns, or is the
//     successor of) from each other shard's snapshot (GET /replicate?
//     snapshot=1, every store file in one reading), merged in; of that
//     shard's changes afterwards, those the snapshot carried (by their
//     numbers in each of its streams, which it names) are skipped and
//     every later one is applied;
//   - on its old store, nothing to fetch: the other shards' workers send
//     what they queued for it while it was away as soon as it listens.
// A new store takes no snapshot at all while any shard reports a ring
// change's handoff pending (the moved nodes come by the handoff: a snapshot
// would count them again), and asks a snapshot answered 503 again, with a
// growing wait, within the catch-up's bound.
// Either way it then waits until every change each other shard had queued
// for it when it first answered is delivered (those queued later are new
// traffic), asking them in turn, and only then clears `catching_up`: until then its
// workers answer 503 on routed requests, so nginx keeps its routes on their
// successors. A shard that takes a question and does not answer (paused,
// stalled) is asked again within the catch-up's bound (<cluster
// catchup_timeout_ms>, which every question but a snapshot's ends by, a
// shard's first having a second at least); one that cannot be
// reached is skipped (said in the log): what it alone held is lost
// (docs/cluster.md, "Both holders lost").
//
// Thread safety: runs in the master, once, before it serves signals.
#pragma once

#include "config/srv_config.h"
#include "frs/admin_engine.h"
#include "frs/store.h"
#include "server/metrics.h"

namespace frs::server {

// Before the workers start: whether to catch up, and the gates it needs.
// A new store's catch-up is marked in the store directory until it ends
// (store_dir::kCatchUpPending): a start that finds the mark
// (the last one was killed during its catch-up) empties the store and
// catches up as on a new store again, setting *fresh_store. Kept, what the
// killed start merged would read as "its old store", complete, and the
// nodes its snapshots had not brought yet would be missing for good. An
// error when the store cannot be emptied: frsd must not serve then.
// After a <cluster> change made by a restart, *previous is the list before it
// as the store noted it (store_dir::kRingList), as a SIGHUP's master keeps it.
[[nodiscard]] Status PrepareReplicaCatchUp(const SrvConfig& cfg, bool* fresh_store, Store* store, ReplicaShared* shared,
                                           std::vector<RingShard>* previous);

// Takes back what the other shards hold, then opens the gates (and drops a
// new store's mark). False when a stop (SIGTERM, SIGINT) ended it first:
// the gates stay shut and the mark stays, for the next start.
bool RunReplicaCatchUp(const SrvConfig& cfg, bool fresh_store, AdminEngine* engine, ReplicaShared* shared);

}  // namespace frs::server
