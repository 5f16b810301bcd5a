#include "server/replica_metrics.h"

#include <time.h>

#include <algorithm>

#include "server/clock_util.h"
#include "server/snapshot_missed.h"

namespace frs::server {
namespace {

// How long frs_replica_list_behind reads 1 after the last request from a
// shard one list ahead: its links send each second at least while busy,
// and ask every 5 s while idle.
constexpr uint64_t kListBehindMs = 10000;

void Help(std::string* out, const char* name, const char* type, const char* help) {
  out->append("# HELP ").append(name).append(" ").append(help).append("\n# TYPE ").append(name).append(" ");
  out->append(type).append("\n");
}

void Value(std::string* out, const char* name, const std::string& labels, uint64_t v) {
  out->append(name);
  if (!labels.empty()) out->append("{").append(labels).append("}");
  out->append(" ").append(std::to_string(v)).append("\n");
}

}  // namespace

uint64_t ReplicaLagMs(const Metrics& metrics) {
  uint64_t lag = 0;
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const uint64_t now_ms = static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
  const auto since = [&](uint64_t oldest) { return oldest != 0 && now_ms > oldest ? now_ms - oldest : 0; };
  for (uint32_t w = 0; w < metrics.workers(); ++w) {
    const ReplicaCounters& rc = metrics.worker(w).replica;
    lag = std::max(lag, CounterGet(rc.lag_ms));
    // What links a reload retired still hold, and a spool of an earlier
    // stop, wait since their oldest change was made.
    lag = std::max(lag, since(CounterGet(rc.retired_oldest_ms)));
    for (size_t i = 0; i < kMaxSpoolStreams; ++i)
      if (CounterGet(rc.spool_hash[i]) != 0) lag = std::max(lag, since(CounterGet(rc.spool_oldest_ms[i])));
  }
  return lag;
}

namespace {

// frs_replica_snapshot_missed, from snapshot.missed (snapshot_missed.h).
void RenderMissedSnapshots(const Ring& ring, long self_index, const std::string& store_dir, std::string* out) {
  // Read at each scrape: the file is tiny when there, and an operator's
  // removal of it (the remedy not wanted) shows at once.
  Help(out, "frs_replica_snapshot_missed", "gauge",
       "Per other shard: the unix second of the start at which this store, new, took no snapshot from it (0: it "
       "took one). While above 0 and that shard's link is up, docs/cluster.md's remedy for \"Both holders lost\" is "
       "due.");
  auto missed = store_dir.empty() ? Result<std::vector<MissedSnapshot>>(std::vector<MissedSnapshot>{})
                                  : ReadMissedSnapshots(store_dir);
  for (size_t i = 0; i < ring.shards().size(); ++i) {
    if (static_cast<long>(i) == self_index) continue;
    int64_t at = 0;
    if (missed.ok())
      for (const MissedSnapshot& m : *missed)
        if (m.shard == ring.shards()[i].name) at = m.at_s;
    Value(out, "frs_replica_snapshot_missed", "shard=\"" + ring.shards()[i].name + "\"", static_cast<uint64_t>(at));
  }
}

}  // namespace

void RenderReplicaMetrics(const Metrics& metrics, const Ring& ring, long self_index, const std::string& store_dir,
                          std::string* out) {
  const auto sum = [&](uint64_t ReplicaCounters::*f) {
    uint64_t v = 0;
    for (uint32_t w = 0; w < metrics.workers(); ++w) v += CounterGet(metrics.worker(w).replica.*f);
    return v;
  };
  struct Row {
    const char* name;
    const char* type;
    const char* help;
    uint64_t ReplicaCounters::*field;
  };
  static const Row kRows[] = {
      {"frs_replica_changes_sent_total", "counter", "Changes sent to the other holder of their route.",
       &ReplicaCounters::sent},
      {"frs_replica_changes_acked_total", "counter",
       "Changes the other holder acknowledged (it has them in its store).", &ReplicaCounters::acked},
      {"frs_replica_batches_total", "counter", "Batches of changes sent (POST /replicate).", &ReplicaCounters::batches},
      {"frs_replica_batches_resent_total", "counter",
       "Batches sent again after a lost link (the receiver applies each once).", &ReplicaCounters::retries},
      {"frs_replica_unprotected_total", "counter",
       "Changes answered before the other holder had them, its link being down (on_replica_down=\"serve\").",
       &ReplicaCounters::unprotected},
      {"frs_replica_refused_total", "counter",
       "Answers replaced by 503 because the other holder did not acknowledge (on_replica_down=\"refuse\").",
       &ReplicaCounters::refused},
      {"frs_replica_served_for_owner_total", "counter",
       "Requests this shard served as their route's successor (its owner down, or another proxy's choice).",
       &ReplicaCounters::served_for_owner},
      {"frs_replica_changes_received_total", "counter", "Changes other shards sent here and applied.",
       &ReplicaCounters::received},
      {"frs_replica_duplicates_total", "counter", "Batches received again and ignored (already applied).",
       &ReplicaCounters::duplicates},
      {"frs_replica_key_refused_total", "counter",
       "Batches and snapshot asks refused (409) because the sending shard's <cluster lease_key> is not this "
       "shard's (another key file, or a key on one side only).",
       &ReplicaCounters::key_refused},
      {"frs_replica_dropped_total", "counter",
       "Changes dropped from a full backlog (a link down for long): the other holder never gets them.",
       &ReplicaCounters::dropped},
      {"frs_replica_changes_parked_total", "counter",
       "Changes other shards sent of a biz this shard's map has not yet (a map rolled out to them first), kept aside "
       "in the store directory's replica-parked for the reload that brings it.",
       &ReplicaCounters::parked},
      {"frs_replica_parked_applied_total", "counter",
       "Changes kept aside that a reload (or a start) applied once the map had their biz.",
       &ReplicaCounters::parked_applied},
      {"frs_replica_changes_skipped_total", "counter",
       "Changes of a biz this shard's map has not that could not be kept aside (the file full, an I/O error), or "
       "were kept a day without a reload bringing their biz: that biz's uses are missing from this copy.",
       &ReplicaCounters::skipped_no_biz},
      {"frs_replica_link_down_total", "counter",
       "Times a link to another shard went down, counted by each worker (each keeps its own links).",
       &ReplicaCounters::episodes},
      {"frs_replica_behind_total", "counter",
       "Times the other holder of routes answered a batch 'behind': it served them alone while this shard did not "
       "take them (a pause, a partition, a ring change's different lists), so they answer 503 here until its changes "
       "arrive.",
       &ReplicaCounters::behind},
  };
  for (const Row& r : kRows) {
    Help(out, r.name, r.type, r.help);
    Value(out, r.name, "", sum(r.field));
  }
  const uint64_t lag = ReplicaLagMs(metrics);
  Help(out, "frs_replica_lag_seconds", "gauge",
       "Age of the oldest change not yet acknowledged by its other holder (0: none waits).");
  out->append("frs_replica_lag_seconds ").append(std::to_string(static_cast<double>(lag) / 1000.0)).append("\n");
  Help(out, "frs_replica_pending", "gauge",
       "Changes queued for each other shard, not yet acknowledged (those an earlier stop kept in a spool included).");
  for (size_t i = 0; i < ring.shards().size() && i < kMaxReplicaPeers; ++i) {
    if (static_cast<long>(i) == self_index) continue;
    uint64_t v = 0;
    for (uint32_t w = 0; w < metrics.workers(); ++w)
      v += CounterGet(metrics.worker(w).replica.pending[i]) + SpoolHeld(metrics.worker(w).replica, i);
    Value(out, "frs_replica_pending", "shard=\"" + ring.shards()[i].name + "\"", v);
  }
  Help(out, "frs_replica_link_up", "gauge",
       "1 while every worker's link to that shard acknowledges, else 0 (0 too for a shard this one's start could not "
       "reach, until it answers this one's link).");
  for (size_t i = 0; i < ring.shards().size() && i < kMaxReplicaPeers; ++i) {
    if (static_cast<long>(i) == self_index) continue;
    uint64_t down = 0;
    for (uint32_t w = 0; w < metrics.workers(); ++w)
      down |= CounterGet(metrics.worker(w).replica.down[i]) | (SpoolDown(metrics.worker(w).replica, i) ? 1 : 0);
    down |= CounterGet(metrics.master().replica.unreached[i]);
    Value(out, "frs_replica_link_up", "shard=\"" + ring.shards()[i].name + "\"", down ? 0 : 1);
  }
  const ReplicaShared& sh = metrics.master().replica;
  Help(out, "frs_replica_catching_up", "gauge",
       "1 while this shard takes back its nodes after a start (its routes answer 503).");
  Value(out, "frs_replica_catching_up", "", CounterGet(sh.catching_up));
  Help(out, "frs_replica_catchup_nodes", "gauge", "Nodes taken back from other shards' snapshots at the last start.");
  Value(out, "frs_replica_catchup_nodes", "", CounterGet(sh.catchup_nodes));
  Help(out, "frs_replica_snapshot_retries_total", "counter",
       "Snapshots asked again at the start because the other shard answered 503 (it could not read its store within "
       "the hold, or was catching up itself).");
  Value(out, "frs_replica_snapshot_retries_total", "", CounterGet(sh.snapshot_retries));
  Help(out, "frs_replica_draining", "gauge",
       "Changes queued under the shard list before the last <cluster> change, or kept in a spool by an earlier stop, "
       "still to be delivered (frsctl handoff waits for 0).");
  Value(out, "frs_replica_draining", "", sum(&ReplicaCounters::draining));
  Help(out, "frs_replica_handoff_pending", "gauge",
       "1 from a <cluster> change until frsctl handoff reports it finished here: snapshots are refused meanwhile.");
  Value(out, "frs_replica_handoff_pending", "", HandoffPending(sh) ? 1 : 0);
  // Its links read up across the two lists (the shard ahead is taken), so
  // the link gauges no longer say a shard was left out of a ring change.
  const uint64_t ahead_ms = CounterGet(sh.list_ahead_seen_ms);
  const uint64_t mono_ms = static_cast<uint64_t>(MonoNs() / 1000000);
  Help(out, "frs_replica_list_behind", "gauge",
       "1 while another shard that ran this shard's <cluster> list has sent it changes or questions under its next "
       "list within the last 10 s: this shard has not had the new srv.xml and SIGHUP yet.");
  Value(out, "frs_replica_list_behind", "", ahead_ms != 0 && mono_ms - ahead_ms < kListBehindMs ? 1 : 0);
  RenderMissedSnapshots(ring, self_index, store_dir, out);
}

}  // namespace frs::server
