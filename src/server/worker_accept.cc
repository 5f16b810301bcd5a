#include "server/worker_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "server/clock_util.h"
#include "server/grpc_session.h"
#include "server/logger.h"

namespace frs::server {

namespace {

constexpr int kMaxAcceptsPerWake = 64;

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

}  // namespace

void Worker::Accept(int64_t now, bool grpc) {
  // From a shared queue take one connection per wake-up, so the next one
  // goes to whichever worker is idle rather than to this one.
  const int max_accepts = ListenEvents(grpc) & EPOLLEXCLUSIVE ? 1 : kMaxAcceptsPerWake;
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
    // <allow> is of IP addresses: a Unix socket's clients are whoever its
    // permissions let in.
    if (allow && peer.ss_family != AF_UNIX && !allow->Allows(reinterpret_cast<sockaddr*>(&peer))) {
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
    if (peer.ss_family != AF_UNIX) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    size_t idx = static_cast<size_t>(fd);
    if (conns_.size() <= idx) {
      conns_.resize(idx + 1);
      unread_.resize(idx + 1);
      ended_.resize(idx + 1);
      queued_.resize(idx + 1);
      held_flag_.resize(idx + 1);
      reading_flag_.resize(idx + 1);
      repl_flag_.resize(idx + 1);
      progress_seen_.resize(idx + 1);
    }
    auto conn = std::make_unique<Connection>(std::move(sock), limits_, &handler_);
    if (peer.ss_family != AF_UNIX) conn->set_peer(PeerOf(peer));
    conn->set_replicator(repl_.get());
    if (grpc) {
      auto session = GrpcSession::Create(&*grpc_, GrpcLimits{.max_streams = cfg_.grpc_max_streams,
                                                             .max_header_bytes = cfg_.max_header_bytes,
                                                             .max_message_bytes = cfg_.max_body_bytes,
                                                             .worker = &grpc_budget_});
      if (!session.ok()) {
        FRS_LOG("cannot start an HTTP/2 session: %s", session.status().message().c_str());
        continue;
      }
      conn->UseGrpc(std::move(session.value()));
      if (tls_) {
        auto tls = TlsStream::Create(tls_);
        if (!tls.ok()) {
          FRS_LOG("cannot start a TLS session: %s", tls.status().message().c_str());
          continue;
        }
        conn->UseTls(std::move(tls.value()));
      }
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
  // A failure leaves that socket out until the next pause and resume; the
  // other listener still accepts.
  if (!loop_.Add(ctx_.listener.get(), ListenEvents(false), nullptr).ok())
    FRS_LOG("cannot resume accepting HTTP connections");
  if (grpc_ && !loop_.Add(ctx_.grpc_listener.get(), ListenEvents(true), &grpc_tag_).ok())
    FRS_LOG("cannot resume accepting gRPC connections");
}

void Worker::PublishTlsExpiry() {
  if (counters_ && tls_)
    CounterSet(counters_->tls_not_after, static_cast<uint64_t>(std::max<int64_t>(tls_->not_after(), 0)));
}

void Worker::ReloadTls() {
  if (!tls_) return;
  auto tls = TlsContext::Load(TlsFilesOf(cfg_));
  if (!tls.ok()) {
    FRS_LOG("TLS files refused, the previous certificate stays: %s", tls.status().message().c_str());
    return;
  }
  tls_ = std::move(tls.value());
  PublishTlsExpiry();
  if (ctx_.index == 0) FRS_LOG("TLS: %s reloaded (new connections use it)", cfg_.grpc_tls_cert.c_str());
}

void Worker::FdExhausted(int err, int64_t now) {
  fd_backoff_until_ = now + kFdBackoffNs;
  if (counters_) CounterAdd(counters_->accept_fd_exhausted);
  if (uint64_t count = 0; fd_log_.Note(now, &count)) {
    FRS_LOG(
        "accept: %s; not accepting for %lld ms (%llu more such failure(s) since the last line): raise the open "
        "file limit (LimitNOFILE=, ulimit -n) or lower <limits connections>",
        std::strerror(err), static_cast<long long>(kFdBackoffNs / kMsNs), static_cast<unsigned long long>(count - 1));
  }
  BalanceAccepting();
}

}  // namespace frs::server
