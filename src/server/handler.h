// server/handler.h: routes one parsed HTTP request and writes its response.
//
// POST /frs          the XML protocol (one <request> or a <batch>)
// GET  /acquire|/query?biz=B&key=K[&n=N]   the same answer, 200 or 429 with
//                    RateLimit-* and Retry-After headers
// GET  /health       200 while serving (503 once shutting down)
// GET  /healthcheck  envoyproxy/ratelimit's: 200 "OK" while serving, 503 when not
// POST /json         envoyproxy/ratelimit's ShouldRateLimit in JSON (with
//                    <grpc>: server/envoy_json.h), 200, 429 when over limit
// GET  /metrics      Prometheus text
// GET  /stats?biz=B&by=F[&day=D][&value=V][&top=N]   statistics by key field
// POST /stats        merges statistics sent by another shard (handoff)
//
// Every response is appended, complete (status line, headers, body), to the
// connection's output buffer; the body is built first (a decision in a
// fixed buffer, anything else in a reused scratch string) so that
// Content-Length is known. Nothing on the acquire path allocates
// once the buffers have warmed up. Errors answer the contract's XML error
// with the same HTTP status; a request that fails to decode executes nothing.
//
// One class, a file per concept: handler.cc routes by path (and answers
// the GET form and the pages, inlined into the routing), handler_execute.cc
// runs decoded requests (POST bodies and batches, routing to shards,
// counting), handler_admin.cc the admin endpoints (handoff merges,
// statistics by key field), handler_response.cc writes the status line and
// headers, handler_log.cc the decision log's lines.
//
// Thread safety: one Handler per worker (it owns reused scratch buffers).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "config/srv_config.h"
#include "envoy/rate_limit_service.h"
#include "frs/admin_engine.h"
#include "frs/clock.h"
#include "frs/key.h"
#include "os/unique_fd.h"
#include "server/decision_log.h"
#include "server/envoy_json.h"
#include "server/envoy_log.h"
#include "server/envoy_metrics.h"
#include "server/http_parser.h"
#include "server/log_throttle.h"
#include "server/metrics.h"
#include "server/replicator.h"
#include "server/request_decoder.h"
#include "server/response_encoder.h"

namespace frs::server {

struct HandlerOptions {
  std::string admin_token;  // "" = admin commands refused
  uint32_t max_batch = 64;
  ClusterView cluster;  // no ring: a lone server that owns every route
  SrvConfig::RateLimitFields ratelimit_fields = SrvConfig::RateLimitFields::kDraftAndLegacy;
  // The largest GET /stats answer: beyond it a 413 asks for fewer groups
  // (top, value) rather than the worker building a body of any size (a
  // table keeps up to 1,000,000 groups, each with sketches of up to 34.8 KB).
  size_t max_stats_bytes = size_t{32} << 20;
  // With replicas: the file of changes kept aside for a biz this map has
  // not yet (replica_park.h); "": such changes are skipped (tests).
  std::string park_path{};
  // With replicas: the store directory, for snapshot.missed in /metrics.
  std::string store_dir{};
};

// The handler's settings from srv.xml (token, batch limit, cluster ring).
HandlerOptions HandlerOptionsFor(const SrvConfig& cfg);

// What a handler answers with: the engine, and the store and clock the
// engine was opened on (the store's files are checked for /health, its
// figures shown by stats; the clock stamps the decision log).
struct Backend {
  Backend(AdminEngine* e, Store* s = nullptr, const Clock* c = nullptr)
      : engine(e), store(s), clock(c != nullptr ? c : SystemClock::Default()) {}
  AdminEngine* engine;
  Store* store;  // null: no store to check or show (tests)
  const Clock* clock;
};

// What a /replicate request names (handler_replica.cc).
struct ReplicateQuery;
class GrpcMethods;

class Handler {
 public:
  // `metrics` and `counters` may be null (tests, fuzzing): nothing is counted
  // and /metrics answers without the shared figures.
  Handler(const Backend& backend, const HandlerOptions& opts, Metrics* metrics, WorkerCounters* counters);
  // The digest of the map this worker runs, said in a replica probe's
  // answer ("map D").
  void set_map_digest(std::string d) { map_digest_ = std::move(d); }

  // Answers the complete request whose bytes start at `base` (the body is
  // parsed in place, so `base` is writable). `keep_alive` is what the
  // connection allows; returns whether the connection stays open. `peer`
  // is the connection's peer (the decision log's client; null: unknown).
  bool Handle(const HttpHead& head, char* base, bool keep_alive, int64_t start_ns, std::string* out,
              const IpAddress* peer = nullptr);

  // A request that could not be parsed (400/411/413/431) or timed out (408):
  // the answer always closes the connection.
  // `path`: the request's target without its query when its request line
  // was read (else empty): the doors that answer plain text answer so here too.
  void HandleFailure(int status, std::string_view msg, int64_t start_ns, std::string* out, std::string_view path = {});

  // 503 for a connection over the worker's limit (closes).
  static void AppendOverloaded(std::string* out);
  // The 503 of a use whose change the route's other holder did not take
  // (<cluster on_replica_down="refuse">): the use is counted here.
  // `down`: a link down under on_replica_down="refuse"; else the other
  // holder's alone uses this answer was judged without. No Connection
  // header: the connection adds the one of the answer it replaces.
  static void AppendReplicaRefused(bool down, std::string* out);

  void set_shutting_down(bool v) { shutting_down_ = v; }
  // Why the server should be taken out of rotation (/health, /healthcheck,
  // gRPC health): OK while serving.
  Status Unhealthy() const;
  // The same, given what Store::CheckFiles said just now (the worker's
  // check each second), so that the files are not looked at twice.
  Status UnhealthyGiven(const Status& files) const;
  // A reload (SIGHUP) changed the token or the cluster.
  void SetOptions(const HandlerOptions& opts);
  const HandlerOptions& options() const { return opts_; }
  // The worker's decision log (null: none, the default): recorded decisions
  // of query, update and acquire are written to it.
  void set_decision_log(DecisionLog* log) { decision_log_ = log; }
  // Envoy's rate limit service (with <grpc>; null: /json answers 404 and
  // /metrics has no per-descriptor series): the worker's, shared with its
  // gRPC methods, and the per-descriptor counters; `grpc` answers for
  // /healthcheck what Check answers (healthy_with_config).
  void set_envoy(envoy::RateLimitService* rls, EnvoyMetrics* metrics, const GrpcMethods* grpc) {
    rls_ = rls;
    envoy_metrics_ = metrics;
    grpc_ = grpc;
  }
  // <cluster replicas="1">: the worker's links (null: none). Routes this
  // shard is successor of are served, and refused while a link is down
  // with on_replica_down="refuse".
  void set_replicator(Replicator* r) { repl_ = r; }
  // The map was reloaded: biz names may have changed.
  void MapReloaded() {
    bizzes_.clear();
    bizzes_loaded_ = false;
  }
  // Applies the replica changes kept aside (replica_park.h) whose biz this
  // map now has: after each reload, and at the worker's start.
  void TakeParkedChanges();

 private:
  // Additional response headers.
  struct Extra {
    const Decision* rate = nullptr;  // the RateLimit fields (and Retry-After) of this decision
    int64_t now_s = 0;
    std::string_view unit;           // its biz's quota unit ("": requests)
    bool violated = false;           // a denial names the rules that denied (FRS-Violated-Policies)
    const char* allow = nullptr;     // 405: Allow
    std::string_view replica_proof;  // FRS-Replica-Proof of a signed /replicate's answer (replica_auth.h)
  };
  void Respond(int status, bool keep_alive, int version, const char* content_type, const Extra* extra, bool head_only,
               std::string* out);
  // `bearer`: the request's Authorization Bearer token ("" when none),
  // which an admin command without its own `token` attribute is judged by.
  bool HandlePost(char* body, size_t len, std::string_view query, std::string_view bearer, CmdLabel* label,
                  int* status);
  bool HandleMerges(int* status);
  // Gives every routed member its route's ring position; false (the answer
  // in body_) when a batch's members route differently without ?route=, or
  // another shard owns the route and the cluster enforces ownership.
  bool RouteRequests(std::span<WireRequest> reqs, std::string_view route_param, int* status);
  // GET /acquire, /query and /auth (`auth`: 204/403 and no body). A denial
  // of /acquire or /query whose client prefers application/problem+json
  // (`accept`) answers draft-11's quota-exceeded problem: *problem is set.
  bool HandleGetForm(Cmd cmd, bool auth, std::string_view query, const AcceptPrefs& accept, Extra* extra, int* status,
                     bool* problem);
  // The quota-exceeded problem (RFC 9457) of denial d, into body_.
  void ProblemBody(const Decision& d);
  // GET /stats (statistics by key field) and POST /stats (a handoff's merge).
  void HandleStatsBy(const HttpHead& head, const char* base, std::string_view query, int* status);
  // POST /stats, the token checked: merges the body's groups (under `receipt`).
  void MergeStatsBy(std::string_view body, const std::string& receipt, int* status);
  // /replicate: changes from another shard, and what a returning shard asks
  // (handler_replica.cc).
  void HandleReplicate(const HttpHead& head, const char* base, std::string_view query, Extra* extra, int* status);
  // Its authentication: a request signed under the admin token (replica_auth.h;
  // *nonce its nonce) or the token itself; false: refused (403), answered.
  bool ReplicateAuthorized(const HttpHead& head, const char* base, const ReplicateQuery& q, std::string* nonce,
                           int* status);
  // `nonce`: the signed request's ("": the token itself was sent).
  void ReplicateAuthorizedRequest(const HttpHead& head, const char* base, const ReplicateQuery& q,
                                  std::string_view nonce, int* status);
  // Whether `stream` is one of this shard's workers' (or a spool one of
  // them delivers): a batch of it came back to the shard that made it.
  bool OwnStream(std::string_view stream) const;
  ReplicaLinksView LinksView() const;
  std::vector<std::pair<uint32_t, size_t>> BizzesNotInMap(std::span<const Change> changes, size_t skip);
  // The changes of the bizzes `unknown` (BizzesNotInMap's), from change
  // `skip` on: kept aside (replica_park.h) in `park` for the reload that
  // brings them, before the batch is applied (KeepChangesOfNoBiz says why);
  // what was kept, and what not, counted and said (at most once a minute)
  // by NoteChangesOfNoBiz once the batch is applied, or taken out of the
  // file again (`size_before`) by UnkeepChangesOfNoBiz when it is not.
  struct KeptOfNoBiz {
    size_t kept = 0, unkept = 0, failed = 0;
    uint32_t failed_biz = 0;
    std::string why;
    int64_t size_before = -1;  // the file's length before the records (-1: not known, nothing written)
  };
  KeptOfNoBiz KeepChangesOfNoBiz(std::span<const Change> changes, size_t skip, const ReplicateQuery& q,
                                 std::span<const std::pair<uint32_t, size_t>> unknown,
                                 const Result<os::UniqueFd>& park);
  void NoteChangesOfNoBiz(const KeptOfNoBiz& k, const ReplicateQuery& q,
                          std::span<const std::pair<uint32_t, size_t>> unknown);
  void UnkeepChangesOfNoBiz(const KeptOfNoBiz& k, const Result<os::UniqueFd>& park);
  // Its forms, once the sender is known to be another shard of this
  // <cluster> (`peer`: its index in the ring the request is of), which runs
  // this shard's list, the one before it, or the one after it.
  enum class ListOf { kSame, kEarlier, kLater };
  void ReplicateReceive(const HttpHead& head, const char* base, const ReplicateQuery& q, ListOf list, size_t peer,
                        int* status);
  // Which routes `changes` are on: bit 0 this shard's own, bit 1 others'.
  uint8_t AloneSides(std::span<const Change> changes) const;
  // `sides`: with the alone_routes line (not for a sender on another list).
  void ReplicatePending(size_t peer, bool sides, int* status);
  // What this shard answered alone for `peer` and `peer` lacks
  // (handler_replica.cc): a batch's answer says "behind N" when not 0, and
  // on whose routes (Replicator::AloneIn reads them).
  struct Ahead {
    uint64_t n = 0;
    uint64_t on_own = 0, on_peers = 0;  // on this shard's routes, on `peer`'s (a reset on both)
  };
  Ahead AheadOf(size_t peer) const;
  void ReplicateSnapshot(const ReplicateQuery& q, long peer, std::string_view nonce, int* status);
  // The changes kept aside here on the routes shard `peer` holds, as a
  // snapshot carries them (replica_park.h: ParkedRecordsFor).
  Result<std::string> ParkedFor(long peer) const;
  std::string ParkedForSnapshot(long peer) const;
  void AppendCarriedLines(size_t pi);
  // Removes shard `peer` from snapshot.missed (snapshot_missed.h), said.
  void ForgetMissedSnapshotOf(long peer);
  // Logs (at most once a minute per sender) that `peer` runs the <cluster> list after
  // this shard's (its digest `theirs`), whose changes are taken meanwhile.
  void NoteSenderAhead(std::string_view peer, std::string_view theirs);
  // Logs (at most once a minute per peer and kind) a /replicate refused as the
  // two shards' <cluster lease_key> differ, naming the peer, never a key.
  void LogKeyRefusal(std::string_view peer, const char* what, bool peer_keyless, bool self_keyless);
  // A /replicate batch, snapshot ask or question (naming a key) from a shard keyed otherwise:
  // answered 409 (true), logged and counted.
  bool RefusedForLeaseKey(const HttpHead& head, const ReplicateQuery& q, int* status);
  // Runs one request into decisions_[0] and appends its answer to body_.
  bool ExecuteOne(const WireRequest& r, int* status);
  void ErrorBody(int code, std::string_view msg, int* status);
  // A plain-text body (the /json and /healthcheck errors, as envoyproxy/ratelimit's).
  void TextBody(int code, std::string_view msg, int* status);
  // POST /json; sets *json when the body is JSON (else it is plain text).
  void HandleJson(std::string_view body, bool* json, int* status);
  void CountDecision(const WireRequest& r, const Decision& d);
  // The leases a decision granted, released, renewed or found expired.
  void CountLeases(const WireRequest& r, const Decision& d);
  // The reservations a decision took, settled or found expired (from CountLeases).
  void CountReservations(const Decision& d);
  // A request (or batch member) answered 404 for naming a biz the map
  // lacks: counted, and logged at most once a minute by each worker.
  void NoteUnknownBiz(const Decision& d);
  // Writes d to the decision log (it wants it).
  void LogDecision(const WireRequest& r, const Decision& d);
  // The name of biz `id` in the current map (a request may name it by id).
  std::string_view BizName(const WireRequest& r, uint16_t id);
  // The biz of `id` as the current map has it (name, fields, unit), or null.
  const BizInfo* BizOf(uint16_t id) {
    if (!bizzes_loaded_) LoadBizzes();
    return id < bizzes_.size() && !bizzes_[id].name.empty() ? &bizzes_[id] : nullptr;
  }
  // The quota unit of biz `id` in the current map ("": requests).
  std::string_view BizUnit(uint16_t id) {
    const BizInfo* b = BizOf(id);
    return b != nullptr ? std::string_view(b->unit) : std::string_view();
  }
  // Fills bizzes_ from the current map.
  void LoadBizzes();
  // The Server and Date lines, rebuilt once a second; `now_s` is the time
  // when the caller has it (a decision's), else 0.
  std::string_view ServerAndDate(int64_t now_s);
  // The answer's body: one decision's, else body_.
  std::string_view Body() const { return decision_.data() ? decision_ : std::string_view(body_); }

  AdminEngine* engine_;
  Store* store_;
  const Clock* clock_;
  HandlerOptions opts_;
  Metrics* metrics_;
  WorkerCounters* counters_;
  bool shutting_down_ = false;
  DecisionLog* decision_log_ = nullptr;
  const IpAddress* peer_ = nullptr;  // of the request being answered
  std::string_view route_param_;     // POST /frs?route=R of the request being answered
  std::vector<BizInfo> bizzes_;      // by id, filled once a map as the log and the fields need them
  bool bizzes_loaded_ = false;       // bizzes_ is the current map's
  envoy::RateLimitService* rls_ = nullptr;
  EnvoyMetrics* envoy_metrics_ = nullptr;
  const GrpcMethods* grpc_ = nullptr;
  Replicator* repl_ = nullptr;
  // Per peer (a few: the shards of a <cluster>) and kind (batch, snapshot),
  // when a /replicate of it refused for its <cluster lease_key> was last
  // logged (CLOCK_MONOTONIC s): a sender retrying each second is logged
  // once a minute.
  std::vector<std::pair<std::string, int64_t>> key_refusals_logged_;
  // Per sender, when NoteSenderAhead last logged it (CLOCK_MONOTONIC s).
  std::vector<std::pair<std::string, int64_t>> ahead_logged_;
  EnvoyDecisionLog envoy_log_;
  EnvoyJson json_;
  envoy::RlsRequest rls_req_;
  envoy::RlsAnswer rls_answer_;

  // Reused per request. A single decision (GET, one POST <request>) is
  // written into decision_buf_ and copied once, after the head, into the
  // output; every other body is built in body_.
  char decision_buf_[kMaxDecisionBytes];
  std::string_view decision_;
  std::string body_;
  // body_'s room kept from one answer to the next: more is given back.
  static constexpr size_t kKeepBodyBytes = size_t{1} << 20;
  std::string biz_buf_, key_buf_, id_buf_;
  XmlRequestDecoder decoder_;
  std::vector<WireRequest> wire_;
  std::vector<Request> reqs_;
  std::vector<Decision> decisions_;
  int64_t date_sec_ = -1;
  char date_[128] = {};
  size_t date_len_ = 0;
  std::string map_digest_;      // set_map_digest
  LogThrottle no_biz_changes_;  // KeepChangesOfNoBiz: kept aside
  LogThrottle no_biz_skipped_;  // KeepChangesOfNoBiz: not kept (the file full, an I/O error)
  // /replicate refused for its credentials, one throttle per reason (the
  // token, the signature's form, the clocks, the self, the signature): a
  // minute of one reason hides no other.
  LogThrottle token_refusals_[5];
  LogThrottle unknown_biz_log_;  // NoteUnknownBiz
  std::string replica_proof_;    // Extra::replica_proof's bytes
};

}  // namespace frs::server
