#include "server/worker.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <optional>

#include "config/service_options.h"
#include "frs/engine.h"
#include "envoy/envoy_rules.h"
#include "frs/store.h"
#include "server/clock_util.h"
#include "server/connection.h"
#include "server/deadline_list.h"
#include "server/decision_log.h"
#include "server/event_loop.h"
#include "server/fd_limit.h"
#include "server/grpc_methods.h"
#include "server/grpc_session.h"
#include "server/handler.h"
#include "server/logger.h"
#include "server/signals.h"
#include "os/sigbus_guard.h"

namespace frs::server {

namespace {

constexpr int64_t kMsNs = 1000000;
constexpr int kMaxAcceptsPerWake = 64;
// How long a turn may hold finished answers before it writes them (see
// held_): long enough for the answers of a few batch requests to go out
// together, short against a request's time-out and its p99.
constexpr int64_t kHoldNs = 100 * 1000;
// The epoll data of the <grpc> listening socket (the HTTP one's is null).
char kGrpcListener;

// The peer of an accepted connection, as the decision log names it.
IpAddress PeerOf(const sockaddr_storage& peer) {
  IpAddress ip;
  if (peer.ss_family == AF_INET) {
    std::memcpy(ip.addr, &reinterpret_cast<const sockaddr_in&>(peer).sin_addr, 4);
  } else if (peer.ss_family == AF_INET6) {
    ip.v6 = true;
    std::memcpy(ip.addr, &reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr, 16);
  }
  return ip;
}

class Worker {
 public:
  Worker(WorkerContext ctx, const Backend& backend)
      : ctx_(std::move(ctx)),
        cfg_(*ctx_.config),
        counters_(ctx_.metrics ? &ctx_.metrics->worker(ctx_.index) : nullptr),
        handler_(backend, HandlerOptionsFor(cfg_), ctx_.metrics, counters_),
        engine_(backend.engine),
        store_(backend.store),
        limits_{cfg_.max_header_bytes, cfg_.max_body_bytes},
        idle_(int64_t{cfg_.idle_timeout_ms} * kMsNs),
        busy_(int64_t{cfg_.request_timeout_ms} * kMsNs) {
    if (ctx_.grpc_listener.valid()) {
      grpc_.emplace(backend.engine, GrpcOptions{cfg_.grpc_headers});
      // /json decides with the gRPC methods' service: one set of rules, one
      // ownership, one set of per-descriptor counters.
      grpc_->set_metrics(&envoy_metrics_);
      grpc_->SetCluster(handler_.options().cluster);
      handler_.set_envoy(&grpc_->rls(), &envoy_metrics_);
    }
  }

  int Run(const sigset_t* wait_mask);
  void set_map_generation(uint64_t g) { map_generation_ = g; }
  // <grpc config>'s files as the master published them (a bundle,
  // envoy/envoy_config.h): compiled and handed to the gRPC methods. The
  // master validated the very bytes; a failure here is said and the old
  // rules stay.
  void ApplyEnvoy(const std::string& bundle);
  // Takes what can change without a restart from a reloaded srv.xml (the
  // master validated it and logs what needs a restart): admin token, allow
  // list, limits, the cluster. Connections already open keep the limits
  // they were accepted with; timeouts apply from each connection's next
  // activity.
  void ApplyLive(const SrvConfig& next);
  // Starts, changes or stops the decision log as `next` says (at start and
  // on a reload); a file that cannot be opened is said in the log and the
  // worker serves on (at start, frsd checked it before forking).
  void ApplyDecisionLog(const SrvConfig& next);

 private:
  // From the HTTP listener, or the <grpc> one (`grpc`).
  void Accept(int64_t now, bool grpc = false);
  int ListenerFd(bool grpc) const { return grpc ? ctx_.grpc_listener.get() : ctx_.listener.get(); }
  void AddListeners();
  void RemoveListeners();
  // Read, then Settle.
  void OnEvent(Connection* c, uint32_t events, int64_t now);
  // Takes what the event says waits on c's socket into its buffer.
  void Read(Connection* c, uint32_t events, int64_t now);
  // OnEvent inside the exception boundary.
  void Serve(Connection* c, uint32_t events, int64_t now);
  // The exception boundary: runs fn(); anything it throws closes c alone.
  template <class Fn>
  void Guarded(Connection* c, Fn fn);
  void ServeAgain(int64_t now);
  bool Flush(Connection* c);
  void Settle(Connection* c, int64_t now);
  // Holds c's finished answer until WriteHeld (Settle while holding_).
  void Hold(Connection* c);
  // Writes the held answers once the oldest has waited kHoldNs.
  void WriteHeldIfDue();
  // Writes every held answer: Settle for each, Guarded.
  void WriteHeld(int64_t now);
  void Close(Connection* c);
  void BeginShutdown(int64_t now);
  void HandleSignals(int64_t now);
  void Expire(int64_t now);
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
  SrvConfig cfg_;  // as started, with the live settings of the last reload
  std::optional<AllowList> allow_;  // replaces ctx_.allow after a reload
  WorkerCounters* counters_;
  DecisionLogCounters own_log_counters_{};  // without a metrics region
  EnvoyMetrics envoy_metrics_{counters_};   // Envoy's per-descriptor counters, in counters_
  Handler handler_;
  std::optional<GrpcMethods> grpc_;  // with <grpc>
  std::string envoy_bundle_;         // applied to grpc_
  std::unique_ptr<DecisionLog> decision_log_;  // null: no <decisions>
  Engine* engine_;
  Store* store_;
  ConnectionLimits limits_;
  EventLoop loop_;
  DeadlineList idle_, busy_;
  // Indexed by fd; the epoll data pointer is the Connection (null: listener).
  std::vector<std::unique_ptr<Connection>> conns_;
  // Connections are registered once, edge-triggered (event_loop.h): the
  // kernel reports a socket when input arrives, not while input waits, so
  // input left on a socket is remembered here and read on a later turn.
  std::vector<uint8_t> unread_;      // by fd: input may be waiting on the socket
  // by fd: the peer's end (FIN, reset or error) was reported. It may come
  // with the last bytes of input, and a short read that takes them does not
  // consume it: the connection must read once more to see it.
  std::vector<uint8_t> ended_;
  std::vector<uint8_t> queued_;      // by fd: in again_
  std::vector<Connection*> again_;   // to read on the next turn of the loop
  std::vector<Connection*> turn_;    // again_ of the turn being served
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
  bool holding_ = false;             // inside a turn: Settle holds answers
  std::vector<uint8_t> held_flag_;   // by fd: in held_
  std::vector<Connection*> held_;    // answers to write (null: closed since)
  int64_t held_since_ = 0;           // when the oldest held answer was ready
  int64_t next_signal_check_ = 0;
  std::vector<uint64_t> progress_seen_;
  uint64_t open_ = 0;
  bool stopping_ = false;
  bool accept_paused_ = false;
  int64_t fd_backoff_until_ = 0;   // not accepting before this (EMFILE)
  int64_t fd_logged_at_ = 0;       // the last EMFILE line (0: none yet)
  uint64_t fd_unlogged_ = 0;       // EMFILE failures since that line
  uint64_t map_generation_ = 0;  // of the map channel, applied
  bool store_broken_logged_ = false;
  int64_t stop_deadline_ = 0;
  pid_t parent_ = getppid();
  int64_t next_parent_check_ = 0;
};

int Worker::Run(const sigset_t* wait_mask) {
  Status s = loop_.Init();
  if (s.ok()) s = loop_.Add(ctx_.listener.get(), cfg_.reuseport ? EPOLLIN : EPOLLIN | EPOLLEXCLUSIVE, nullptr);
  if (s.ok() && grpc_)
    s = loop_.Add(ctx_.grpc_listener.get(), cfg_.reuseport ? EPOLLIN : EPOLLIN | EPOLLEXCLUSIVE, &kGrpcListener);
  if (!s.ok()) {
    FRS_LOG("cannot start the event loop: %s", s.ToString().c_str());
    return 1;
  }
  SetOpenGauge();  // a replacement starts from its predecessor's stale value
  reading_.reserve(EventLoop::kMaxEvents);
  FRS_LOG("serving (listen socket %d)", ctx_.listener.get());
  if (counters_) CounterSet(counters_->serving_pid, static_cast<uint64_t>(getpid()));  // the master's READY=1
  for (;;) {
    int64_t now = MonoNs();
    int64_t due = -1;
    for (int64_t d : {idle_.NextDueIn(now), busy_.NextDueIn(now)})
      if (d >= 0 && (due < 0 || d < due)) due = d;
    int timeout_ms = due < 0 ? 1000 : static_cast<int>(std::min<int64_t>(1000, due / kMsNs + 1));
    if (stopping_) timeout_ms = std::min(timeout_ms, 50);
    if (accept_paused_) timeout_ms = std::min(timeout_ms, 50);  // look again soon whether to resume
    if (!again_.empty()) timeout_ms = 0;  // input is waiting on a socket already
    auto events = loop_.Wait(timeout_ms, wait_mask);
    now = MonoNs();
    // A handler runs only when the wait returns EINTR, with no events: a
    // stop that closes connections here never leaves one in `events`.
    HandleSignals(now);
    holding_ = true;
    // Every ready connection is read first, then each is answered: the
    // kernel's receive path runs for all of them in a row, then the parser,
    // engine and store, each phase finding its code (more than its data)
    // still in the cache the previous connection left it in (paired, 3-5 %
    // more GETs per CPU-second and 11-16 % less user CPU; batches, whose
    // members already run in a row, +1 %: docs/performance.md section 10).
    for (const epoll_event& ev : events) {
      if (ev.data.ptr == nullptr || ev.data.ptr == &kGrpcListener) {
        if (!stopping_) Accept(now, ev.data.ptr == &kGrpcListener);
        continue;
      }
      auto* c = static_cast<Connection*>(ev.data.ptr);
      const size_t idx = static_cast<size_t>(c->fd());
      Guarded(c, [&] { Read(c, ev.events, now); });
      if (idx >= conns_.size() || conns_[idx].get() != c) continue;  // closed by its error
      reading_.push_back(c);  // room reserved in Run: cannot throw
      reading_flag_[idx] = 1;
    }
    for (size_t i = 0; i < reading_.size(); ++i) {
      Connection* c = reading_[i];
      if (c == nullptr) continue;  // closed since it was read
      reading_flag_[static_cast<size_t>(c->fd())] = 0;
      Guarded(c, [&] { Settle(c, now); });
      WriteHeldIfDue();
    }
    reading_.clear();
    ServeAgain(now);
    holding_ = false;
    WriteHeld(now);
    // A saturating load keeps every wait from sleeping, and only a sleeping
    // wait lets signals in: look for pending ones every 10 ms.
    if (now >= next_signal_check_) {
      next_signal_check_ = now + 10 * kMsNs;
      if (DeliverPendingSignals(wait_mask)) HandleSignals(now);
    }
    Expire(now);
    if (!stopping_) BalanceAccepting();
    if (stopping_ && (open_ == 0 || now >= stop_deadline_)) break;
    // The master died without stopping us (PR_SET_PDEATHSIG covers most
    // cases; this covers a master that died before we set it).
    // Reparenting changes getppid() whoever the new parent is.
    if (now >= next_parent_check_) {
      next_parent_check_ = now + 1000 * kMsNs;
      // A store file deleted or truncated under us: said loudly once, and
      // every request of that file is answered 503 from now on.
      if (Status fs = store_->CheckFiles(); !fs.ok() && !store_broken_logged_) {
        FRS_LOG("STORE FILE LOST: %s", fs.message().c_str());
        store_broken_logged_ = true;
      }
      // An idle worker's writer entries go to whoever waits for one.
      store_->ReleaseIdleWriters();
      if (getppid() != parent_ && !stopping_) {
        FRS_LOG("the master is gone; stopping");
        BeginShutdown(now);
      }
    }
  }
  if (open_ > 0) FRS_LOG("stopping with %llu connection(s) still busy", static_cast<unsigned long long>(open_));
  for (auto& c : conns_)
    if (c) Close(c.get());
  return 0;
}

void Worker::HandleSignals(int64_t now) {
  SignalFlags& f = Signals();
  if (f.reopen) {
    f.reopen = 0;
    Status s = Logger::Get().Reopen();
    if (!s.ok()) FRS_LOG("cannot reopen the log file: %s", s.ToString().c_str());
    // Its writer thread writes out what it holds to the old file first.
    if (decision_log_) decision_log_->Reopen();
  }
  if (f.reload) {
    f.reload = 0;
    // The map the master validated and published, never the file itself.
    Status s;
    uint64_t generation = map_generation_;
    if (ctx_.map_channel) {
      Result<MapChannel::Map> m = ctx_.map_channel->Read();
      std::optional<SrvConfig> next;
      if (!m.ok()) {
        s = m.status();
      } else if (m->generation != map_generation_) {
        if (!m->srv_text.empty()) {
          auto parsed = LoadSrvConfigText(cfg_.path, &m->srv_text);
          if (parsed.ok()) next = std::move(parsed.value());
          else s = parsed.status();
        }
        if (s.ok()) s = engine_->ReloadText(m->text, next ? next->map_path : cfg_.map_path);
        if (s.ok()) ApplyEnvoy(m->envoy_text);
        if (s.ok() && next) ApplyLive(*next);
      }
      if (m.ok()) generation = m->generation;
    } else {
      s = engine_->Reload(cfg_.map_path);
    }
    if (s.ok()) {
      if (generation != map_generation_ || !ctx_.map_channel) {
        handler_.MapReloaded();
        FRS_LOG("reloaded %s (map generation %llu)", cfg_.map_path.c_str(), static_cast<unsigned long long>(generation));
        if (counters_) CounterAdd(counters_->reloads);
      }
      map_generation_ = generation;
    } else {
      FRS_LOG("reload refused, the old map stays: %s", s.message().c_str());
      if (counters_) CounterAdd(counters_->reload_failures);
    }
  }
  if (f.terminate && !stopping_) BeginShutdown(now);
}

void Worker::ApplyLive(const SrvConfig& next) {
  if (next.allow != cfg_.allow) {
    auto parsed = AllowList::Parse(next.allow);
    if (!parsed.ok()) {
      FRS_LOG("the reloaded <allow> list is refused, the old one stays: %s", parsed.status().message().c_str());
    } else {
      allow_.emplace(std::move(parsed.value()));
      cfg_.allow = next.allow;
    }
  }
  if (next.logfile != cfg_.logfile) {
    if (Status s = Logger::Get().UseFile(next.logfile); !s.ok())
      FRS_LOG("cannot switch the log file, logging here still: %s", s.message().c_str());
    else
      cfg_.logfile = next.logfile;
  }
  cfg_.admin_token = next.admin_token;
  cfg_.grpc_headers = next.grpc_headers;
  cfg_.grpc_max_streams = next.grpc_max_streams;
  if (grpc_) grpc_->SetOptions(GrpcOptions{cfg_.grpc_headers});
  cfg_.max_header_bytes = next.max_header_bytes;
  cfg_.max_body_bytes = next.max_body_bytes;
  cfg_.max_connections = next.max_connections;
  cfg_.idle_timeout_ms = next.idle_timeout_ms;
  cfg_.request_timeout_ms = next.request_timeout_ms;
  cfg_.max_batch = next.max_batch;
  cfg_.ratelimit_fields = next.ratelimit_fields;
  cfg_.map_path = next.map_path;
  cfg_.cluster_shards = next.cluster_shards;
  // A self that follows <listen> follows the port really bound (port="0").
  cfg_.cluster_self = next.cluster_self_derived ? ListenName(cfg_.host, cfg_.port) : next.cluster_self;
  cfg_.cluster_enforce = next.cluster_enforce;
  ApplyDecisionLog(next);
  limits_ = ConnectionLimits{cfg_.max_header_bytes, cfg_.max_body_bytes};
  idle_.set_timeout(int64_t{cfg_.idle_timeout_ms} * kMsNs);
  busy_.set_timeout(int64_t{cfg_.request_timeout_ms} * kMsNs);
  handler_.SetOptions(HandlerOptionsFor(cfg_));
  if (grpc_) grpc_->SetCluster(handler_.options().cluster);
}

void Worker::ApplyDecisionLog(const SrvConfig& next) {
  if (next.decisions_file.empty()) {
    if (decision_log_) {
      handler_.set_decision_log(nullptr);
      decision_log_.reset();  // writes out what it holds
      FRS_LOG("decision log stopped");
    }
    cfg_.decisions_file.clear();
    return;
  }
  DecisionLogOptions o;
  o.file = next.decisions_file;
  o.record_all = next.decisions_all;
  o.sample = next.decisions_sample;
  if (decision_log_) {
    decision_log_->SetOptions(o);
  } else {
    auto log = DecisionLog::Open(o, counters_ ? &counters_->decision_log : &own_log_counters_);
    if (!log.ok()) {
      FRS_LOG("%s; decisions are not logged (fix it and reload)", log.status().message().c_str());
      return;
    }
    decision_log_ = std::move(log.value());
    handler_.set_decision_log(decision_log_.get());
  }
  cfg_.decisions_file = next.decisions_file;
  cfg_.decisions_all = next.decisions_all;
  cfg_.decisions_sample = next.decisions_sample;
}

bool Worker::ShouldPauseAccepting() const {
  // With SO_REUSEPORT each worker has its own queue, which nobody else would
  // serve; with one worker there is nobody to leave connections to.
  if (cfg_.reuseport || !ctx_.metrics || cfg_.workers < 2) return false;
  const uint64_t high = uint64_t{cfg_.max_connections} * 7 / 8;
  if (open_ < high) return false;
  for (uint32_t w = 0; w < ctx_.metrics->workers(); ++w) {
    if (w == ctx_.index) continue;
    const uint64_t theirs = CounterGet(ctx_.metrics->worker(w).connections_open);
    if (theirs < open_ && theirs < cfg_.max_connections) return true;
  }
  return false;  // everyone is as full: accept up to the limit, then answer 503
}

void Worker::BalanceAccepting() {
  const bool pause = ShouldPauseAccepting() || MonoNs() < fd_backoff_until_;
  if (pause == accept_paused_) return;
  if (pause) {
    RemoveListeners();
  } else {
    AddListeners();
  }
  accept_paused_ = pause;
}

void Worker::RemoveListeners() {
  loop_.Remove(ctx_.listener.get());
  if (grpc_) loop_.Remove(ctx_.grpc_listener.get());
}

void Worker::AddListeners() {
  const uint32_t ev = cfg_.reuseport ? EPOLLIN : EPOLLIN | EPOLLEXCLUSIVE;
  // A failure leaves that socket out until the next pause and resume; the
  // other listener still accepts.
  if (!loop_.Add(ctx_.listener.get(), ev, nullptr).ok()) FRS_LOG("cannot resume accepting HTTP connections");
  if (grpc_ && !loop_.Add(ctx_.grpc_listener.get(), ev, &kGrpcListener).ok())
    FRS_LOG("cannot resume accepting gRPC connections");
}

void Worker::ApplyEnvoy(const std::string& bundle) {
  if (!grpc_ || bundle == envoy_bundle_) return;
  auto rules = envoy::EnvoyRules::FromBundle(bundle);
  if (!rules.ok()) {
    FRS_LOG("the Envoy configuration is refused, the old one stays: %s", rules.status().message().c_str());
    return;
  }
  grpc_->SetRules(std::move(rules.value()));
  envoy_bundle_ = bundle;
}

void Worker::FdExhausted(int err, int64_t now) {
  fd_backoff_until_ = now + kFdBackoffNs;
  if (counters_) CounterAdd(counters_->accept_fd_exhausted);
  if (fd_logged_at_ == 0 || now - fd_logged_at_ >= kFdLogEveryNs) {
    FRS_LOG("accept: %s; not accepting for %lld ms (%llu more such failure(s) since the last line): raise the open "
            "file limit (LimitNOFILE=, ulimit -n) or lower <limits connections>",
            std::strerror(err), static_cast<long long>(kFdBackoffNs / kMsNs),
            static_cast<unsigned long long>(fd_unlogged_));
    fd_logged_at_ = now;
    fd_unlogged_ = 0;
  } else {
    ++fd_unlogged_;
  }
  BalanceAccepting();
}

void Worker::BeginShutdown(int64_t now) {
  stopping_ = true;
  stop_deadline_ = now + int64_t{kDrainMs} * kMsNs;
  handler_.set_shutting_down(true);
  if (grpc_) grpc_->set_shutting_down(true);
  if (!accept_paused_) RemoveListeners();
  ctx_.listener.reset();
  ctx_.grpc_listener.reset();
  FRS_LOG("stopping: %llu connection(s) open", static_cast<unsigned long long>(open_));
  for (auto& slot : conns_) {
    Connection* c = slot.get();
    if (!c) continue;
    c->BeginShutdown();
    Settle(c, now);
  }
}

void Worker::Accept(int64_t now, bool grpc) {
  // From a shared queue take one connection per wake-up, so the next one
  // goes to whichever worker is idle rather than to this one.
  const int max_accepts = cfg_.reuseport ? kMaxAcceptsPerWake : 1;
  for (int i = 0; i < max_accepts; ++i) {
    sockaddr_storage peer;
    socklen_t plen = sizeof peer;
    int fd = accept4(ListenerFd(grpc), reinterpret_cast<sockaddr*>(&peer), &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) FdExhausted(errno, now);
      return;
    }
    os::UniqueFd sock(fd);
    const AllowList* allow = allow_ ? &*allow_ : ctx_.allow;
    if (allow && !allow->Allows(reinterpret_cast<sockaddr*>(&peer))) {
      if (counters_) CounterAdd(counters_->connections_refused);
      continue;
    }
    bool refuse = false;
    if (open_ >= cfg_.max_connections) {
      if (counters_) CounterAdd(counters_->connections_overflow);
      if (grpc) continue;  // closed: no HTTP/1.1 503 for an HTTP/2 client
      if (open_ >= uint64_t{cfg_.max_connections} + OverflowBudget()) {
        // Far past the limit: no room even to linger.
        std::string resp;
        Handler::AppendOverloaded(&resp);
        [[maybe_unused]] ssize_t w = send(fd, resp.data(), resp.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        continue;
      }
      // The 503 must reach the client: closing a socket whose request we
      // have not read sends a reset that destroys the answer. It is sent,
      // our side shut down, and the request read and dropped (lingering),
      // within the request time-out, from a small budget above the limit.
      refuse = true;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    size_t idx = static_cast<size_t>(fd);
    if (conns_.size() <= idx) {
      conns_.resize(idx + 1);
      unread_.resize(idx + 1);
      ended_.resize(idx + 1);
      queued_.resize(idx + 1);
      held_flag_.resize(idx + 1);
      reading_flag_.resize(idx + 1);
      progress_seen_.resize(idx + 1);
    }
    auto conn = std::make_unique<Connection>(std::move(sock), limits_, &handler_);
    conn->set_peer(PeerOf(peer));
    if (grpc) {
      auto session = GrpcSession::Create(
          &*grpc_, GrpcLimits{cfg_.grpc_max_streams, cfg_.max_header_bytes, cfg_.max_body_bytes});
      if (!session.ok()) {
        FRS_LOG("cannot start an HTTP/2 session: %s", session.status().message().c_str());
        continue;
      }
      conn->UseGrpc(std::move(session.value()));
    }
    Connection* c = conn.get();
    if (!loop_.Add(fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, c).ok()) continue;  // conn (and fd) dropped here
    conns_[idx] = std::move(conn);
    unread_[idx] = ended_[idx] = 0;
    queued_[idx] = held_flag_[idx] = reading_flag_[idx] = 0;
    progress_seen_[idx] = 0;
    ++open_;
    if (counters_) CounterAdd(counters_->connections_accepted);
    SetOpenGauge();
    // A connection must send its first complete request within the request
    // time-out: connections that send nothing (an idle flood) are reclaimed
    // by themselves instead of holding slots for the idle time-out.
    busy_.Append(c, now);
    if (grpc) Settle(c, now);  // the server's SETTINGS go out at once
    if (refuse) {
      std::string resp;
      Handler::AppendOverloaded(&resp);
      c->Refuse(resp);
      Settle(c, now);
    }
  }
}

bool Worker::Flush(Connection* c) {
  while (c->WantsWrite()) {
    std::string_view out = c->PendingOutput();
    ssize_t n = send(c->fd(), out.data(), out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c->Consumed(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    c->Abort();
    return false;
  }
  return true;
}

void Worker::OnEvent(Connection* c, uint32_t events, int64_t now) {
  Read(c, events, now);
  Settle(c, now);
}

void Worker::Read(Connection* c, uint32_t events, int64_t now) {
  const size_t idx = static_cast<size_t>(c->fd());
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) unread_[idx] = 1;
  if (events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) ended_[idx] = 1;
  if (unread_[idx]) {
    std::span<char> room = c->ReadSpace();
    if (!room.empty()) {
      ssize_t n;
      do {
        n = recv(c->fd(), room.data(), room.size(), 0);
      } while (n < 0 && errno == EINTR);
      if (n > 0) {
        c->Produced(static_cast<size_t>(n), now);
        // A short read took all there was; input that arrives later is
        // reported again. A full one may have left some, and the peer's
        // end is seen only by a read that returns 0 or an error.
        unread_[idx] = static_cast<size_t>(n) == room.size() || ended_[idx];
      } else if (n == 0) {
        c->PeerClosed();
        unread_[idx] = ended_[idx] = 0;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        unread_[idx] = ended_[idx];
      } else {
        c->Abort();
      }
    } else if (c->WantsRead() || (events & (EPOLLERR | EPOLLHUP))) {
      // No room although it wants input: the buffer holds more than any
      // legal request (the parser would have refused it), so never spin on
      // a readable socket we cannot read.
      c->Abort();
    }
  }
}

template <class Fn>
void Worker::Guarded(Connection* c, Fn fn) {
  const int fd = c->fd();
  // Nothing thrown while serving one connection (an allocation failure) may
  // take the worker and its other clients down; that connection is closed
  // instead.
  try {
    fn();
  } catch (const std::exception& e) {
    FRS_LOG("closing a connection after an internal error: %s", e.what());
    size_t idx = static_cast<size_t>(fd);
    if (idx < conns_.size() && conns_[idx].get() == c) Close(c);
  }
}

void Worker::Serve(Connection* c, uint32_t events, int64_t now) {
  Guarded(c, [&] { OnEvent(c, events, now); });
}

void Worker::ServeAgain(int64_t now) {
  // Serve the connections left with input on their sockets (or requests in
  // their buffers) after this turn's events: one read each per turn, so a
  // client that keeps sending cannot starve the others. Close takes a
  // closed connection out of again_.
  turn_.swap(again_);
  for (size_t i = 0; i < turn_.size(); ++i) {
    Connection* c = turn_[i];
    if (c == nullptr) continue;  // closed while waiting its turn
    queued_[static_cast<size_t>(c->fd())] = 0;
    Serve(c, 0, now);
    WriteHeldIfDue();
  }
  turn_.clear();
}

void Worker::Hold(Connection* c) {
  const size_t idx = static_cast<size_t>(c->fd());
  if (held_flag_[idx]) return;
  if (held_.empty()) held_since_ = MonoNs();
  held_flag_[idx] = 1;
  held_.push_back(c);
}

void Worker::WriteHeldIfDue() {
  if (held_.empty()) return;
  const int64_t now = MonoNs();
  if (now - held_since_ >= kHoldNs) WriteHeld(now);
}

void Worker::WriteHeld(int64_t now) {
  const bool holding = holding_;
  holding_ = false;
  for (size_t i = 0; i < held_.size(); ++i) {
    Connection* c = held_[i];
    if (c == nullptr) continue;  // closed while held
    held_flag_[static_cast<size_t>(c->fd())] = 0;
    Guarded(c, [&] { Settle(c, now); });
  }
  held_.clear();
  holding_ = holding;
}

// Runs the state machine to a resting point: answer what is buffered, write
// what can be written (which may unblock more buffered requests), then close,
// or queue the connection for the next turn and set its deadline.
void Worker::Settle(Connection* c, int64_t now) {
  bool more = false;  // four rounds and still answering: the rest next turn
  for (int round = 0;; ++round) {
    const uint64_t progress = c->progress();
    c->Process();
    if (holding_ && c->WantsWrite()) {
      // Written with the turn's other answers; WriteHeld settles it then.
      Hold(c);
      return;
    }
    if (!Flush(c)) break;
    if (c->NeedsLinger()) {
      shutdown(c->fd(), SHUT_WR);
      c->StartLinger();
    }
    // Stop unless draining output made room for more buffered requests.
    if (c->WantsWrite() || !c->WantsRead() || c->state() != Connection::State::kOpen) break;
    if (!c->Busy()) break;
    if (round == 3) {
      // Only while requests are being answered: a partial request left in
      // the buffer waits for its bytes, not for another turn.
      more = c->progress() != progress;
      break;
    }
  }
  if (c->Done()) {
    Close(c);
    return;
  }
  size_t idx = static_cast<size_t>(c->fd());
  // Input left on the socket while the connection could not take it (a
  // full buffer, output past the high-water mark), or complete requests
  // left in its buffer after four rounds, are taken up next turn: no epoll
  // event is due for either.
  // gRPC calls received whole and left unanswered (a bounded number per
  // Process) are answered next turn too, unless the socket is full (its
  // EPOLLOUT comes first).
  if ((((unread_[idx] || more) && c->WantsRead()) || (c->HasBacklog() && !c->WantsWrite())) && !queued_[idx]) {
    queued_[idx] = 1;
    again_.push_back(c);
  }
  if (c->Busy()) {
    // A fresh request deadline only for progress (a request answered, output
    // drained), never for a trickle of bytes: a slow client cannot hold a
    // connection forever. gRPC: due request_timeout after its oldest
    // unanswered stream began, however many others were answered since.
    if (c->list() != &busy_ || c->progress() != progress_seen_[idx]) {
      const int64_t since = c->BusySinceNs();
      if (since >= 0 && since < now) busy_.AppendSince(c, since);
      else busy_.Append(c, now);
    }
    progress_seen_[idx] = c->progress();
  } else if (c->progress() == 0) {
    // Not one request answered yet: the deadline set at accept stands.
    if (c->list() != &busy_) busy_.Append(c, now);
  } else {
    idle_.Append(c, now);
  }
}

void Worker::Close(Connection* c) {
  size_t idx = static_cast<size_t>(c->fd());
  idle_.Remove(c);
  busy_.Remove(c);
  loop_.Remove(c->fd());
  if (held_flag_[idx]) {
    std::replace(held_.begin(), held_.end(), c, static_cast<Connection*>(nullptr));
    held_flag_[idx] = 0;
  }
  if (reading_flag_[idx]) {
    std::replace(reading_.begin(), reading_.end(), c, static_cast<Connection*>(nullptr));
    reading_flag_[idx] = 0;
  }
  if (queued_[idx]) {
    for (std::vector<Connection*>* list : {&again_, &turn_})
      std::replace(list->begin(), list->end(), c, static_cast<Connection*>(nullptr));
    queued_[idx] = 0;
  }
  unread_[idx] = ended_[idx] = 0;
  conns_[idx].reset();  // closes the fd
  --open_;
  SetOpenGauge();
}

void Worker::Expire(int64_t now) {
  for (DeadlineList* list : {&idle_, &busy_}) {
    while (DeadlineNode* n = list->Expired(now)) {
      auto* c = static_cast<Connection*>(n);
      if (list == &busy_) {
        // gRPC: the stream the deadline was set for may have been reset by
        // the client since; the oldest one left may still have time.
        const int64_t since = c->BusySinceNs();
        if (since >= 0 && since + list->timeout_ns() > now) {
          list->AppendSince(c, since);
          continue;
        }
      }
      list->Remove(c);
      if (counters_) CounterAdd(counters_->connections_timed_out);
      c->OnTimeout();
      Settle(c, now);
      // Settle re-listed it (a 408 still being written, lingering): its next
      // deadline is a full timeout away, so the loop ends.
    }
  }
}

}  // namespace

int RunWorker(WorkerContext ctx) {
  Logger::Get().SetRole("worker " + std::to_string(ctx.index));
  // Die with the master: a worker must never outlive it (a new master could
  // not take the store lock while orphans serve the old map).
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  // A truncated store file answers errors instead of killing the worker.
  os::InstallSigbusGuard();
  sigset_t wait_mask;
  Status s = InstallSignalHandlers(/*want_child=*/false, &wait_mask);
  if (!s.ok()) {
    FRS_LOG("%s", s.ToString().c_str());
    return 1;
  }
  const SrvConfig& cfg = *ctx.config;
  StoreOptions so = StoreOptionsFor(cfg, /*create_if_missing=*/false);
  so.on_recovery = [](const std::string& what) { FRS_LOG("store lock recovered: %s", what.c_str()); };
  auto store = Store::Open(so);
  if (!store.ok()) {
    FRS_LOG("cannot open the store: %s", store.status().message().c_str());
    return kExitFatalConfig;
  }
  // The master's current map (a respawned worker too): the bytes it
  // validated, not whatever map.xml holds at this moment.
  EngineOptions eo = EngineOptionsFor(cfg, store.value().get());
  uint64_t generation = 0;
  std::string envoy_bundle;  // <grpc config>, as the master published it
  std::optional<SrvConfig> live;  // srv.xml as last reloaded (a respawned worker)
  if (ctx.map_channel) {
    Result<MapChannel::Map> m = ctx.map_channel->Read();
    if (!m.ok()) {
      FRS_LOG("cannot read the master's map: %s", m.status().message().c_str());
      return kExitFatalConfig;
    }
    eo.map_text = std::move(m->text);
    envoy_bundle = std::move(m->envoy_text);
    generation = m->generation;
    if (!m->srv_text.empty()) {
      auto parsed = LoadSrvConfigText(cfg.path, &m->srv_text);
      if (parsed.ok()) live = std::move(parsed.value());
    }
  }
  auto engine = AdminEngine::Open(eo);
  if (!engine.ok()) {
    FRS_LOG("cannot load the map: %s", engine.status().message().c_str());
    return kExitFatalConfig;
  }
  int rc = 1;
  try {
    Worker w(std::move(ctx), Backend(engine.value().get(), store.value().get(), eo.clock));
    w.set_map_generation(generation);
    w.ApplyEnvoy(envoy_bundle);
    if (live) w.ApplyLive(*live);
    else w.ApplyDecisionLog(cfg);
    rc = w.Run(&wait_mask);
  } catch (const std::exception& e) {
    FRS_LOG("worker stopped by an internal error: %s", e.what());
  }
  engine.value().reset();
  store.value().reset();
  return rc;
}

}  // namespace frs::server
