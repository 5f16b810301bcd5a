// server/worker_loop.h: the worker process's loop: one epoll loop over its
// listening sockets and its connections, and the state around it.
//
// One concept per file, one class: worker_loop.cc runs the loop and moves
// bytes (read, answer, write held answers, time out, close), worker_accept.cc
// takes connections in (the allow list, the connection limit, the accept
// back-off), worker_reload.cc acts on the signals (reopen, reload, stop) and
// applies a reloaded srv.xml, and worker.cc opens the store and the engine
// and starts it (RunWorker). The loop's small helpers are declared inline
// and defined in worker_loop.cc, their one caller's file, so that they stay
// inlined into the loop.
//
// Thread safety: single-threaded by design (one per worker process).
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/srv_config.h"
#include "frs/engine.h"
#include "server/connection.h"
#include "server/deadline_list.h"
#include "server/decision_log.h"
#include "server/envoy_metrics.h"
#include "server/event_loop.h"
#include "server/fd_limit.h"
#include "server/grpc_methods.h"
#include "server/handler.h"
#include "server/log_throttle.h"
#include "server/worker_context.h"

namespace frs::server {

class Worker {
 public:
  Worker(WorkerContext ctx, const Backend& backend);
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  int Run(const sigset_t* wait_mask);
  void set_map_generation(uint64_t g) { map_generation_ = g; }
  // The digest of the map it runs (frs::MapDigest of the composed map.xml):
  // a replica's probe answer says it, and a link whose other end runs
  // another one logs so (Replicator::CheckPeerMap).
  void SetMapDigest(std::string digest);
  // <grpc config>'s files as the master published them (a bundle,
  // envoy/envoy_config.h): compiled and handed to the gRPC methods. The
  // master validated the very bytes; a failure here is said and the old
  // rules stay.
  void ApplyEnvoy(const std::string& bundle, bool merge_domains);
  // Takes what can change without a restart from a reloaded srv.xml (the
  // master validated it and logs what needs a restart): admin token, allow
  // list, limits, the cluster. Connections already open keep the limits
  // they were accepted with; timeouts apply from each connection's next
  // activity. `previous_list`: the master's record of the shard list before
  // its last change (MapChannel::Map::previous_list), "" for none.
  void ApplyLive(const SrvConfig& next, std::string_view previous_list = {});
  // The shard list before the master's last change of it (a worker forked
  // since): batches its shards queued under it are taken, and a link names
  // it to a shard that still runs it. Before Run().
  void SetPreviousCluster(const std::vector<RingShard>& shards);
  // Starts, changes or stops the decision log as `next` says (at start and
  // on a reload); a file that cannot be opened is said in the log and the
  // worker serves on (at start, frsd checked it before forking).
  void ApplyDecisionLog(const SrvConfig& next);
  // frs_grpc_held_bytes, and memory given back to the system once the
  // gRPC connections have freed much of what they held.
  // Once a second: the store's files checked, the gauges they and the
  // statistics set, idle writer entries handed back, the gRPC bytes sampled.
  void EverySecond();
  void SampleGrpcHeld();
  // Tells the gRPC methods whether this worker is in rotation, given the
  // store files' check made just now; the health watches hear of a change.
  void RefreshGrpcHealth(const Status& files);
  // After a reload: every gRPC health watch hears of a changed status now.
  void PollGrpcWatches();

 private:
  // <cluster replicas="1">: the links to the other shards (server/replicator.h),
  // made at start and again when a reload changes the ring.
  // `reload`: a SIGHUP's new <cluster>, not the worker's start.
  void SetUpReplicas(bool reload = false);
  // At the start: delivers the spools of undelivered changes earlier stops
  // left (replica_spool.h), each by a retired replicator in draining_.
  void TakeSpools(const ReplicaOptions& base);
  // At a graceful stop: what the links still queue goes to a spool file.
  void KeepUndelivered();
  // Once a turn: ship what the turn changed, then release the answers the
  // other holders have acknowledged (refuse: answer 503 for those a lost
  // link leaves unacknowledged).
  void ReplicaTurn(int64_t now);
  // ReplicaTurn's release: every held connection whose answers are now safe
  // (or refused) goes on.
  void ReleaseHeld(int64_t now);
  // The replicators of earlier lists, and those delivering an earlier
  // stop's spool files: each delivers what it holds, then goes. A drain that delivers nothing for kDrainStallNs is
  // logged once as stalled, and once more when it moves again.
  void DrainTurn(int64_t now);
  // Answers held when a <cluster> reload retired their replicator: released
  // (or refused) as that replicator's links acknowledge, as ReplicaTurn does
  // for the live one's; each before its replicator leaves draining_.
  void RetiredWaitTurn(int64_t now);
  // Whether c's held answers still wait on r; if not, they are released, or
  // made 503s (a link they waited on went down under refuse, or they were
  // judged on a copy behind the other holder's).
  bool StillHeld(Connection* c, const Replicator& r);
  static constexpr int64_t kDrainStallNs = 5LL * 1000 * 1000 * 1000;
  static constexpr int64_t kMsNs = 1000000;

  // From the HTTP listener, or the <grpc> one (`grpc`).
  void Accept(int64_t now, bool grpc = false);
  int ListenerFd(bool grpc) const { return grpc ? ctx_.grpc_listener.get() : ctx_.listener.get(); }
  // epoll events of a listening socket: EPOLLEXCLUSIVE on a shared one (a
  // <grpc unix> socket is always shared, <listen reuseport> or not).
  uint32_t ListenEvents(bool grpc) const {
    return cfg_.reuseport && !(grpc && !cfg_.grpc_unix.empty()) ? EPOLLIN : EPOLLIN | EPOLLEXCLUSIVE;
  }
  // <grpc cert>: this worker's files read again (SIGHUP); a set that does
  // not load is said and the current one stays.
  void ReloadTls();
  // The served certificate's notAfter in this slot's gauge (a date before
  // 1970 or none: 0, no sample).
  void PublishTlsExpiry();
  void AddListeners();
  void RemoveListeners();
  // Read, then Settle.
  inline void OnEvent(Connection* c, uint32_t events, int64_t now);
  // Takes what the event says waits on c's socket into its buffer.
  void Read(Connection* c, uint32_t events, int64_t now);
  // OnEvent inside the exception boundary.
  inline void Serve(Connection* c, uint32_t events, int64_t now);
  // The exception boundary: runs fn(); anything it throws closes c alone.
  template <class Fn>
  inline void Guarded(Connection* c, Fn fn);
  inline void ServeAgain(int64_t now);
  inline bool Flush(Connection* c);
  void Settle(Connection* c, int64_t now);
  // Holds c's finished answer until WriteHeld (Settle while holding_).
  inline void Hold(Connection* c);
  // Writes the held answers once the oldest has waited kHoldNs.
  inline void WriteHeldIfDue();
  // Writes every held answer: Settle for each, Guarded.
  void WriteHeld(int64_t now);
  void Close(Connection* c);
  void BeginShutdown(int64_t now);
  void HandleSignals(int64_t now);
  inline void Expire(int64_t now);
  // Takes the listening socket out of this worker's epoll set while it holds
  // 7/8 of its connection limit or more and a sibling holds fewer, so EPOLLEXCLUSIVE
  // wakes the siblings instead (nginx's accept back-off); puts it back once
  // that is no longer so.
  void BalanceAccepting();
  bool ShouldPauseAccepting() const;
  uint32_t OverflowBudget() const { return server::OverflowBudget(cfg_.max_connections); }
  // Out of descriptors (EMFILE/ENFILE): the listening socket stays readable
  // and accept fails at once, so a worker that kept it in its epoll set spun
  // (3.48 million log lines in 9 s). It is taken out for kFdBackoffNs, as
  // nginx disables accept events for a while, and the line is said at most
  // once per kFdLogEveryNs with the count of the failures in between.
  void FdExhausted(int err, int64_t now);
  static constexpr int64_t kFdBackoffNs = 500 * kMsNs;
  static constexpr int64_t kFdLogEveryNs = 10000 * kMsNs;
  void SetOpenGauge() {
    if (counters_) CounterSet(counters_->connections_open, open_);
  }

  WorkerContext ctx_;
  SrvConfig cfg_;                          // as started, with the live settings of the last reload
  std::optional<AllowList> allow_;         // replaces ctx_.allow after a reload
  std::shared_ptr<const TlsContext> tls_;  // <grpc cert>: new connections' TLS (null: plain)
  WorkerCounters* counters_;
  DecisionLogCounters own_log_counters_{};  // without a metrics region
  EnvoyMetrics envoy_metrics_{counters_};   // Envoy's per-descriptor counters, in counters_
  Handler handler_;
  std::optional<GrpcMethods> grpc_;   // with <grpc>
  std::unique_ptr<Replicator> repl_;  // with <cluster replicas="1">
  // Replicators of the lists before ring changes, still delivering what
  // they queued (Replicator::Retire); dropped once empty.
  std::vector<std::unique_ptr<Replicator>> draining_;
  // The spool file each replicator of draining_ that delivers one took, and
  // its slot in this worker's ReplicaCounters::spool_hash.
  struct SpoolFile {
    const Replicator* replicator;
    std::string path;
    long slot;
    os::UniqueFd lock;  // its flock: no other worker takes it while this one delivers
  };
  std::vector<SpoolFile> spool_files_;
  std::string map_digest_;                     // SetMapDigest
  std::optional<ReplicaOptions> spool_base_;   // for the spools taken once a slot frees
  size_t drain_left_ = 0;                      // changes draining_ held when it last delivered one (or grew)
  int64_t drain_moved_ns_ = 0;                 // then (0: no drain under way)
  bool drain_stalled_ = false;                 // the stall was logged, its end not yet
  std::shared_ptr<const Ring> previous_ring_;  // the list before the last <cluster> change (null: none)
  std::vector<Connection*> repl_wait_;         // connections holding answers for replicas (null: released)
  std::vector<uint8_t> repl_flag_;             // by fd: in repl_wait_ (1) or retired_wait_ (kWaitsOnRetired)
  static constexpr uint8_t kWaitsOnRetired = 2;
  struct RetiredWait {
    Connection* c;        // null: closed while it waited
    const Replicator* r;  // in draining_ until c is released
  };
  std::vector<RetiredWait> retired_wait_;
  std::string envoy_bundle_;                   // applied to grpc_
  std::unique_ptr<DecisionLog> decision_log_;  // null: no <decisions>
  AdminEngine* engine_;
  Store* store_;
  ConnectionLimits limits_;
  EventLoop loop_;
  DeadlineList idle_, busy_;
  // Connections lingering briefly (Connection::LingersBriefly): a second,
  // or the request time-out when that is shorter.
  DeadlineList brief_;
  static constexpr int64_t kBriefLingerNs = 1'000'000'000;
  // What its gRPC connections buffer, <grpc buffered_bytes>: declared before
  // conns_, so that it outlives the sessions that give their bytes back.
  GrpcBudget grpc_budget_;
  // Indexed by fd; the epoll data pointer is the Connection (null: listener).
  std::vector<std::unique_ptr<Connection>> conns_;
  // Connections are registered once, edge-triggered (event_loop.h): the
  // kernel reports a socket when input arrives, not while input waits, so
  // input left on a socket is remembered here and read on a later turn.
  std::vector<uint8_t> unread_;  // by fd: input may be waiting on the socket
  // by fd: the peer's end (FIN, reset or error) was reported. It may come
  // with the last bytes of input, and a short read that takes them does not
  // consume it: the connection must read once more to see it.
  std::vector<uint8_t> ended_;
  std::vector<uint8_t> queued_;     // by fd: in again_
  std::vector<Connection*> again_;  // to read on the next turn of the loop
  std::vector<Connection*> turn_;   // again_ of the turn being served
  // The turn's connections read and not answered yet (null: closed since).
  std::vector<Connection*> reading_;
  std::vector<uint8_t> reading_flag_;  // by fd: in reading_
  // Answers are written after the turn's requests are answered (or once the
  // oldest has waited kHoldNs), not one by one as each is ready: a client
  // with several connections here, asleep in its own event loop, is woken
  // by its first answer and finds the others with it. Each answer written
  // at once woke it again, and on loopback that wake-up is the writer's
  // kernel time: held answers cut frsd's kernel time per batch request of
  // 64 members by a fifth or more (docs/performance.md section 9).
  bool holding_ = false;            // inside a turn: Settle holds answers
  std::vector<uint8_t> held_flag_;  // by fd: in held_
  std::vector<Connection*> held_;   // answers to write (null: closed since)
  int64_t held_since_ = 0;          // when the oldest held answer was ready
  // TLS handshakes refused (a client certificate of another CA or of a name
  // not allowed, a client without one, no h2 in ALPN): counted each, logged
  // at most once a minute with how many since the last line, so that a
  // misconfigured Envoy fleet is visible and a flood of bad handshakes does
  // not flood the log.
  void NoteTlsRefused(const std::string& why, const IpAddress* peer);
  LogThrottle tls_refused_log_;
  int64_t next_signal_check_ = 0;
  std::vector<uint64_t> progress_seen_;
  // The gRPC connections' held bytes at their highest since the last
  // malloc_trim (SampleGrpcHeld, once a second).
  size_t grpc_held_peak_ = 0;
  bool grpc_healthy_ = true;  // health as the watches last heard it (EverySecond)
  static constexpr size_t kTrimAfterBytes = size_t{4} << 20;
  uint64_t open_ = 0;
  bool stopping_ = false;
  pid_t master_pid_ = ::getppid();  // the master that forked it: another parent later means it died
  bool accept_paused_ = false;
  int64_t fd_backoff_until_ = 0;       // not accepting before this (EMFILE)
  LogThrottle fd_log_{kFdLogEveryNs};  // the EMFILE lines
  uint64_t map_generation_ = 0;        // of the map channel, applied
  bool store_broken_logged_ = false;
  uint64_t stats_unstored_published_ = 0;  // this process's part of WorkerCounters::stats_unstored
  int64_t stop_deadline_ = 0;
  // A stop goes on delivering replica changes until this (BeginShutdown).
  int64_t replica_stop_deadline_ = 0;
  bool ReplicasDelivering() const;
  // What the retired (not spooled) replicators still hold, per shard of the
  // current list, into ReplicaCounters::retired_held and retired_down.
  void PublishRetired();
  pid_t parent_ = getppid();
  // The epoll data of the <grpc> listening socket (the HTTP one's is null).
  char grpc_tag_ = 0;
  int64_t next_parent_check_ = 0;
};

}  // namespace frs::server
