// server/metrics.h: counters shared by the master and every worker.
//
// The counters live in one anonymous MAP_SHARED region that the master maps
// before forking, so every worker (and a respawned one) writes into the same
// memory and /metrics answered by any worker shows the totals of all of them.
// Each worker slot has its own cache-line-aligned block with a single writer
// (the worker, or the master for the header), so an increment is a relaxed
// load and store with no locked instruction and no cache line bouncing
// between cores; readers sum the slots with relaxed loads. A respawned worker
// takes over its predecessor's slot, so totals never go backwards.
//
// Per-biz counters are indexed by biz id (1..65535), per-rule ones by biz id
// and the rule's position; the pages of ids never used are never touched, so
// they cost address space only.
//
// Thread safety: see above; Render may run concurrently with writers.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "frs/engine.h"
#include "frs/status.h"
#include "frs/store.h"

namespace frs::server {

// What the `cmd` label of frs_requests_total says.
enum class CmdLabel : uint8_t {
  kQuery,
  kUpdate,
  kAcquire,
  kGet,
  kSet,
  kDelete,
  kReset,
  kStats,
  kMerge,
  kRelease,
  kRenew,
  kSettle,
  kBatch,
  kHealth,
  kMetrics,
  kJson,
  kNone,  // kJson: Envoy's POST /json; kNone: the request never got as far as a command
  kCount
};
CmdLabel LabelOf(Cmd cmd);
const char* LabelName(CmdLabel label);

// Every status frsd answers over HTTP/1.1 (501: a method other than GET,
// HEAD and POST).
inline constexpr int kStatusCodes[] = {200, 204, 400, 403, 404, 405, 408, 409, 410,
                                       411, 413, 421, 429, 431, 500, 501, 503};
inline constexpr size_t kStatusSlots = sizeof(kStatusCodes) / sizeof(kStatusCodes[0]);
size_t StatusSlot(int http_status);  // unknown statuses count as 500

// Upper bounds of the latency histogram, in microseconds (+Inf implied).
inline constexpr uint64_t kLatencyBoundsUs[] = {25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 50000, 250000, 1000000};
inline constexpr size_t kLatencyBuckets = sizeof(kLatencyBoundsUs) / sizeof(kLatencyBoundsUs[0]) + 1;

// Appends `v` escaped as a Prometheus label value (backslash, quote, newline).
void AppendLabelValue(std::string* out, std::string_view v);

inline void CounterAdd(uint64_t& c, uint64_t v = 1) {
  std::atomic_ref<uint64_t> a(c);
  a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}
inline void CounterSet(uint64_t& c, uint64_t v) { std::atomic_ref<uint64_t>(c).store(v, std::memory_order_relaxed); }
inline uint64_t CounterGet(const uint64_t& c) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(c)).load(std::memory_order_relaxed);
}

// The decision log's figures (server/decision_log.h). Each counter has one
// writer: the request thread counts the lines its full buffer refused and
// those it kept, the log's writer thread what it wrote and what a failed
// write lost; the master, once the worker is dead (and before the slot's
// next one starts), what its buffer still held (DecisionLog::CountLost).
struct DecisionLogCounters {
  uint64_t lines;           // written to the file
  uint64_t dropped_full;    // refused by a full buffer (or longer than a line may be)
  uint64_t dropped_failed;  // lost to a failed or short write, or no file open, or with a killed worker
  uint64_t open_failed;     // a gauge: 1 from a failed open of <decisions file> until one succeeds
  uint64_t kept;            // put in the buffer: lines + dropped_failed once it is written out
};

// Per-rule results of frs_rule_decisions_total, by rule position 0..3.
enum class RuleResultLabel : uint8_t { kAllowed, kDenied, kShadowDenied, kCount };
inline constexpr size_t kRuleResults = static_cast<size_t>(RuleResultLabel::kCount);

// Envoy's per-descriptor results (server/envoy_metrics.h), as
// envoyproxy/ratelimit names its stats: every rate-limited descriptor path is
// a biz with an id in [kFirstEnvoyDescriptorId, 65535].
enum class EnvoyResult : uint8_t { kTotal, kOverLimit, kNearLimit, kWithinLimit, kShadowMode, kCount };
inline constexpr size_t kEnvoyResults = static_cast<size_t>(EnvoyResult::kCount);
inline constexpr uint32_t kFirstEnvoyDescriptorId = 49152;
inline constexpr size_t kEnvoyDescriptorIds = 65536 - kFirstEnvoyDescriptorId;

// One value of a `detailed_metric: true` descriptor: its counter key, whose
// counts this worker keeps apart. Written once by its worker (key, then
// `published` with release order) and never changed after but for the
// counts, so a reader that sees `published` reads a whole key.
inline constexpr size_t kDetailedKeyBytes = 120;
struct alignas(64) DetailedKeySlot {
  uint64_t published;  // 0: free; else the hash the slot was claimed with
  uint16_t biz_id;
  uint16_t len;
  char key[kDetailedKeyBytes];
  uint64_t counts[kEnvoyResults];
};
// Per worker: the first this many distinct (descriptor, value) pairs since
// frsd started keep a series of their own; later ones are summed per
// descriptor in detailed_other (key "~other"). A bound, so that a
// descriptor keyed by client address cannot grow /metrics without end.
inline constexpr size_t kDetailedKeys = 1024;

// <cluster replicas="1">: at most this many shards (SrvConfig::kMaxReplicaShards),
// so that per-peer figures fit a fixed region.
inline constexpr size_t kMaxReplicaPeers = 64;
// A snapshot names the change streams of the sender's workers (<workers>
// is at most 256).
inline constexpr size_t kMaxSnapshotStreams = 256;
// Spools of earlier stops a worker names to a snapshot (beyond them, a
// snapshot taken while it still delivers more may carry a change twice).
inline constexpr size_t kMaxSpoolStreams = 8;
// Words of ReplicaShared::reset_claims (server/reset_claim.h).
inline constexpr size_t kResetClaims = 16;
// Signed snapshot asks remembered per other shard (ReplicaShared::snapshot_asks).
inline constexpr size_t kSnapshotAsksKept = 8;

// One worker's replica links (server/replicator.h). Gauges are set by the
// worker; the rest count up.
struct ReplicaCounters {
  uint64_t sent, acked;                // changes sent to / acknowledged by the other holders
  uint64_t batches, retries;           // batches sent; batches sent again after a lost link
  uint64_t unprotected;                // answers given before the other holder had the change (a link down)
  uint64_t refused;                    // answers 503 for a link down (on_replica_down="refuse")
  uint64_t served_for_owner;           // requests this shard served as a route's successor
  uint64_t received, duplicates;       // changes applied from other shards; batches received again
  uint64_t key_refused;                // batches and snapshot asks refused: the sender's <cluster lease_key> differs
  uint64_t dropped;                    // changes dropped from a full backlog (kMaxBacklog)
  uint64_t parked;                     // changes of a biz this map has not yet, kept aside (replica_park.h)
  uint64_t parked_applied;             // changes kept aside, applied once the map had their biz
  uint64_t skipped_no_biz;             // changes of a biz this map has not, not kept (or kept a day in vain)
  uint64_t episodes;                   // times a link went down
  uint64_t lag_ms;                     // gauge: age of the oldest change not acknowledged
  uint64_t pending[kMaxReplicaPeers];  // gauge: changes queued for each shard (ring index)
  uint64_t down[kMaxReplicaPeers];     // gauge: 1 while the link to that shard is down
  // gauge: of pending, the changes answered alone (queued while the link was
  // down) that the shard has not acknowledged: while any is left, a batch
  // from that shard is answered "behind" (its copy lacks uses granted here).
  uint64_t alone[kMaxReplicaPeers];
  // gauges: of alone, those on routes this shard owns and those on routes
  // that shard owns (a reset: both). alone is stored after them (release):
  // a reader that loads it first and finds them summing to less read them
  // mid-update (Handler::AheadOf).
  uint64_t alone_own[kMaxReplicaPeers];
  uint64_t alone_peer[kMaxReplicaPeers];
  uint64_t behind;  // times a link learnt that the other holder answered alone for it (Replicator::Behind)
  // A batch of another shard's stream that resets nothing, while this
  // worker applies it: the stream's hash and the worker's pid (ApplyingMark,
  // reset_claim.h); 0: none.
  uint64_t applying;
  // For a snapshot (handler_replica.cc), set by the worker:
  uint64_t inside;                       // 1 while its engine executes a request (ChangeSink::Enter..Leave)
  uint64_t stream_hash;                  // StreamHash of its stream's name; 0 before its replicator exists
  uint64_t queued_no[kMaxReplicaPeers];  // the number of the last change queued for each shard (1, 2, ...)
  // gauge: changes queued under an earlier <cluster> that its links still
  // deliver (a ring change keeps them: Worker::SetUpReplicas)
  uint64_t draining;
  // unix ms of the oldest change those retired links hold (0: none), for the
  // lag: a reload during a link's episode moves its changes there.
  uint64_t retired_oldest_ms;
  // The spools of an earlier stop this worker delivers (replica_spool.h),
  // for a snapshot as the streams above: every change they carry is in
  // this shard's store already, so a snapshot carries it too, and the
  // taker skips it when the spool reaches it.
  uint64_t spool_hash[kMaxSpoolStreams];                  // StreamHash of the stopped worker's stream; 0: none
  uint64_t spool_no[kMaxSpoolStreams][kMaxReplicaPeers];  // the number of its last change for each shard
  // And what each still holds, as the gauges above say it of the worker's
  // own links: a spool's undelivered changes count as pending and lagging,
  // and its link down as down (set by the worker each turn while it delivers).
  uint64_t spool_held[kMaxSpoolStreams][kMaxReplicaPeers];
  uint64_t spool_down[kMaxSpoolStreams][kMaxReplicaPeers];
  uint64_t spool_oldest_ms[kMaxSpoolStreams];  // unix ms of its oldest change held (0: none)
  // What the links of an earlier <cluster> (a reload retired them) still
  // hold for each shard of the current list, and whether one is down: as a
  // spool's, they count as pending, and a returning shard waits for them.
  uint64_t retired_held[kMaxReplicaPeers];
  uint64_t retired_down[kMaxReplicaPeers];
  // Of retired_held, those answered alone, while their link was down
  // (Replicator::LinkView::alone): what a shard asking is told it lacks
  // (Handler::AheadOf). A sync link's answers held at the reload waited.
  uint64_t retired_alone[kMaxReplicaPeers];
  // Of those, on this shard's own routes and on that shard's (both: the
  // list changed since they were stamped), as alone_own and alone_peer.
  uint64_t retired_alone_own[kMaxReplicaPeers];
  uint64_t retired_alone_peer[kMaxReplicaPeers];
};

// What the spools a worker delivers and its retired links hold for shard
// `peer`, and whether a link of theirs to it is down.
inline uint64_t SpoolHeld(const ReplicaCounters& rc, size_t peer) {
  uint64_t n = CounterGet(rc.retired_held[peer]);
  for (size_t i = 0; i < kMaxSpoolStreams; ++i)
    if (CounterGet(rc.spool_hash[i]) != 0) n += CounterGet(rc.spool_held[i][peer]);
  return n;
}
inline bool SpoolDown(const ReplicaCounters& rc, size_t peer) {
  if (CounterGet(rc.retired_down[peer]) != 0) return true;
  for (size_t i = 0; i < kMaxSpoolStreams; ++i)
    if (CounterGet(rc.spool_hash[i]) != 0 && CounterGet(rc.spool_down[i][peer]) != 0) return true;
  return false;
}

// What every process of a shard shares about its replicas (in the master's
// region): whether it is still taking back its nodes, per other shard
// (ring index) whether its changes are taken yet and which of them its
// snapshot carried, and whether this shard is reading a snapshot.
struct ReplicaShared {
  uint64_t catching_up;                 // 1: routed requests answer 503 (the start's catch-up is not done)
  uint64_t hold_off[kMaxReplicaPeers];  // 1: /replicate from that shard answers 503 (its snapshot is being taken)
  // Per other shard, per stream of it: (StreamHash, number of the last
  // change its snapshot carried); that stream's changes up to it are skipped.
  uint64_t carried[kMaxReplicaPeers][kMaxSnapshotStreams][2];
  uint64_t catchup_nodes;      // nodes taken back from snapshots at the start
  uint64_t snapshots;          // > 0: a snapshot is being read here; every worker's engine waits (Replicator::Enter)
  uint64_t snapshot_until_ns;  // CLOCK_MONOTONIC: ... until then at most (a reader that died stops nobody longer)
  uint64_t snapshot_retries;   // snapshots asked again at the start after a 503 (replica_catchup.cc)
  // A ring change (SIGHUP with another <cluster>) and its handoff: the
  // digest of the list it changed to, and the one frsctl handoff said it
  // finished under. While they differ, this shard answers no snapshot
  // (the nodes of moved routes go by the handoff, docs/cluster.md).
  uint64_t ring_changed_to;
  uint64_t handed_off;
  // CLOCK_MONOTONIC ms of the last /replicate from a shard one list ahead
  // (previous= this list: it had a <cluster> change this shard has not had
  // yet); 0: none. frs_replica_list_behind reads it.
  uint64_t list_ahead_seen_ms;
  // 1: this shard's start could not reach that shard, and no link of this
  // shard's has reached it since (its questions here do not count): its
  // link reads down (frs_replica_link_up, stats), though nothing waits for it.
  uint64_t unreached[kMaxReplicaPeers];
  // Per other shard: batches of changes it answered alone applied here
  // (FRS-Replica-Alone), [0] those with changes on this shard's own routes
  // (that shard served them for it), [1] on that shard's routes (a reset,
  // or a batch of another list, moves both). When one moves, each worker
  // refuses the answers it holds on that side: they were judged on a copy
  // without those uses (Replicator::NoteAloneApplied).
  uint64_t alone_applied[kMaxReplicaPeers][2];
  // Per other shard: times this shard told it "behind" (a batch's answer,
  // or a probe's alone N). It answers, so each worker whose link to it is
  // down tries that link again at once instead of within the second: the
  // other shard's routes answer 503 until the uses it lacks arrive.
  uint64_t told_behind[kMaxReplicaPeers];
  // Per other shard: times a worker here learnt it is behind that shard.
  // Each worker learns it on its own link; the others, seeing this move,
  // ask that shard at once instead of at their next idle question (5 s).
  uint64_t learnt_behind[kMaxReplicaPeers];
  // Streams one of whose batches that reset a biz a worker is applying: a
  // claim a word, the stream's hash and the worker's pid (reset_claim.h).
  uint64_t reset_claims[kResetClaims];
  // Per other shard: the signed snapshot asks answered here lately (a hash
  // of each one's nonce, never 0; replica_auth.h). One that comes again is
  // a request taken on the way and sent again within the 300 s its
  // signature holds: refused, since each answer holds this shard's store
  // still for up to kSnapshotHoldNs. A shard asks each time anew.
  uint64_t snapshot_asks[kMaxReplicaPeers][kSnapshotAsksKept];
  // Per other shard: 1 once it asked this shard for a snapshot (it was on a
  // new store then), set before its snapshot.missed line is removed; a
  // catch-up here that missed it then does not mark it either
  // (snapshot_missed.h).
  uint64_t snapshot_asked[kMaxReplicaPeers];
};

// Whether a ring change's handoff has not been reported done here.
inline bool HandoffPending(const ReplicaShared& s) {
  const uint64_t to = CounterGet(s.ring_changed_to);
  return to != 0 && to != CounterGet(s.handed_off);
}

// How long a snapshot may hold the store still: a longer reading answers 503.
inline constexpr int64_t kSnapshotHoldNs = 10LL * 1000 * 1000 * 1000;

// Sixteen lowercase hex digits of v, the most significant first: a stream
// token or hash as names and receipts hold it (the same text as printf's
// %016llx, which the answers' "carried" lines use).
inline std::string Hex16(uint64_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 0; i < 16; ++i) out[static_cast<size_t>(15 - i)] = kHex[(v >> (4 * i)) & 15];
  return out;
}

// "~HEX": how a change stream's name ends under a run's stream_token.
inline std::string StreamTokenSuffix(uint64_t token) { return "~" + Hex16(token); }

// A stream name's 64-bit FNV-1a hash, never 0: how a snapshot names a
// stream in a fixed region.
inline uint64_t StreamHash(std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h == 0 ? 1 : h;
}

// frs_envoy_calls_total's result label, the index of WorkerCounters::envoy_calls.
enum EnvoyCallResult : uint8_t { kEnvoyCallOk, kEnvoyCallOverLimit, kEnvoyCallError, kEnvoyCallResults };
inline constexpr const char* kEnvoyCallResultNames[kEnvoyCallResults] = {"ok", "over_limit", "error"};

struct alignas(64) WorkerCounters {
  uint64_t requests[static_cast<size_t>(CmdLabel::kCount)][kStatusSlots];
  uint64_t latency[kLatencyBuckets];
  uint64_t latency_sum_ns;
  uint64_t connections_accepted, connections_refused, connections_overflow, connections_timed_out;
  uint64_t connections_open;  // a gauge, set by the worker
  uint64_t reloads, reload_failures;
  uint64_t misrouted;                 // requests for a route another shard owns
  uint64_t merged, merge_duplicates;  // handoff nodes received
  uint64_t accept_fd_exhausted;       // accept failed for want of a descriptor (EMFILE/ENFILE)
  uint64_t grpc_held_bytes;           // a gauge: what the gRPC connections hold (GrpcSession::held())
  uint64_t grpc_tls_refused;          // TLS handshakes that failed (Worker::NoteTlsRefused)
  uint64_t tls_not_after;             // a gauge: notAfter (unix s) of the certificate it serves; 0: no TLS
  uint64_t store_file_lost;           // a gauge: 1 while its check each second finds a store file deleted or cut
  uint64_t stats_unstored;            // statistics-by-field updates not stored (added each second)
  // ShouldRateLimit calls (gRPC and /json) by answer: OK, OVER_LIMIT, refused
  // with an error status; and those that named a domain no configuration has.
  uint64_t envoy_calls[kEnvoyCallResults];
  uint64_t envoy_unknown_domain;
  uint64_t unknown_biz;  // requests and batch members naming a biz the running map lacks
  uint64_t held_walks;   // walks over the store a scrape of this worker made itself (server/held_now.h)
  uint64_t pid;          // set by the master when it starts the slot's worker
  uint64_t serving_pid;  // set by that worker once its event loop holds the listening socket
  // The watch over hung workers (server/stall_watch.h): CLOCK_MONOTONIC ms
  // of the loop's last turn (or of a wait for another's work that counts as
  // one), and while a write waits for a store lock a live thread holds, that
  // thread's id and since when (ms).
  uint64_t beat_ms;
  uint64_t lock_wait_tid, lock_wait_since_ms;
  // A gauge: 1 from a failed reopen of <log file> (SIGUSR1) until one succeeds;
  // 0 again when the master starts the slot's next worker (it logs to the
  // master's descriptor until it is asked to reopen), as is the slot's
  // decision_log.open_failed (the new worker opens its own).
  uint64_t log_reopen_failed;
  alignas(64) DecisionLogCounters decision_log;
  alignas(64) ReplicaCounters replica;
  uint64_t biz_allowed[65536], biz_denied[65536], biz_shadow_denied[65536];
  // Leases of a biz's concurrency rule: granted (acquire, update), released,
  // renewed, and found expired (freed at the node's next write).
  uint64_t leases_granted[65536], leases_released[65536], leases_renewed[65536], leases_expired[65536];
  // Reservations (limit/reservation.h): taken (acquire with reserve), settled,
  // and found expired (charged their estimate); held is taken - settled - expired.
  uint64_t res_taken[65536], res_settled[65536], res_expired[65536];
  // [biz id][rule position][result]: like the per-biz arrays, the pages of
  // bizzes never decided are never touched.
  uint64_t rule_decisions[65536][kMaxRulesPerBiz][kRuleResults];
  // [biz id - kFirstEnvoyDescriptorId][result], hits (hits_addend) counted.
  uint64_t envoy_descriptor[kEnvoyDescriptorIds][kEnvoyResults];
  DetailedKeySlot detailed[kDetailedKeys];
  uint64_t detailed_other[kEnvoyDescriptorIds][kEnvoyResults];

  void CountRequest(CmdLabel label, int http_status, uint64_t latency_ns);
};

// What every biz holds now (frs_leases_held, frs_reservations_held) as the
// master's last walk over the store found it (server/held_now.h). The
// master writes all but asked_ms, under `seq`: odd while it writes, so a
// reader that finds it odd or changed reads again. asked_ms is written by
// every worker whose scrape wanted the figures: a timestamp, any writer's
// will do.
struct HeldNowShared {
  uint64_t seq;
  uint64_t asked_ms;        // CLOCK_MONOTONIC ms: the last scrape that wanted them
  uint64_t walked_ms;       // CLOCK_MONOTONIC ms: when the last walk began; 0: none since the last reload
  uint64_t fresh_until_ms;  // a scrape serves that walk's figures until then, else walks itself
  uint64_t walk_us;         // how long the last walk took
  uint64_t walks;           // the master's walks since it started
  uint64_t leases[65536], reservations[65536];  // by biz id
};

struct alignas(64) MasterCounters {
  uint64_t worker_restarts;
  uint64_t stall_kills;      // workers killed because their loop stopped turning (<limits worker_stall_ms>)
  uint64_t lock_recoveries;  // locks the master recovered from dead workers
  uint64_t reloads, reload_failures;
  // 1 from a refused reload until one is applied; 1 while srv.xml as last
  // applied differs from the running one in what only a restart applies.
  uint64_t last_reload_refused, restart_pending;
  // 1 from a failed reopen of <log file> (SIGUSR1: logrotate's postrotate)
  // until one succeeds: the master logs on into the renamed file meanwhile.
  uint64_t log_reopen_failed;
  uint64_t started_unix;
  uint64_t master_pid;  // set by the master once it runs (after daemonizing)
  // Drawn at each start: every change stream a worker of this run names
  // ends in it (~HEX), so that a batch of one, come back to this shard under
  // another name, is known as its own whatever replicator sent it
  // (Handler::OwnStream). Never 0.
  uint64_t stream_token;
  alignas(64) ReplicaShared replica;
  alignas(64) HeldNowShared held;
};

class Metrics {
 public:
  // Maps the region for `workers` slots (before fork).
  static Result<std::unique_ptr<Metrics>> Create(uint32_t workers);
  struct Key {
   private:
    Key() = default;
    friend class Metrics;
  };
  explicit Metrics(Key) {}
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  uint32_t workers() const { return workers_; }
  WorkerCounters& worker(uint32_t i) { return workers_base_[i]; }
  const WorkerCounters& worker(uint32_t i) const { return workers_base_[i]; }
  MasterCounters& master() { return *master_; }
  const MasterCounters& master() const { return *master_; }

  // Appends the Prometheus text exposition (version 0.0.4) of the series
  // metrics_render.cc's table lists. `engine` gives the biz names and the
  // daily statistics, `store` (may be null) its figures.
  void Render(Engine& engine, const Store* store, std::string* out) const;

 private:
  void* base_ = nullptr;
  size_t bytes_ = 0;
  uint32_t workers_ = 0;
  MasterCounters* master_ = nullptr;
  WorkerCounters* workers_base_ = nullptr;
};

}  // namespace frs::server
