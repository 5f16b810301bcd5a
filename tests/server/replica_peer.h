// tests/server/replica_peer.h: the other holder of a Replicator's links,
// played by a test: a listening socket on loopback whose connections the
// test accepts, reads and answers (or closes) when it chooses, so that the
// replicator's every state is reached in a known order; and the fixture of
// the tests that drive a Replicator against it, turn by turn.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "common/read_request.h"
#include "frs/ring.h"
#include "os/unique_fd.h"
#include "server/event_loop.h"
#include "server/replica_auth.h"
#include "server/replicator.h"

namespace frs::testing {

class ReplicaPeer {
 public:
  ReplicaPeer() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd_.get(), 8) != 0 ||
        ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
      fd_.reset();
    port_ = ntohs(a.sin_port);
  }
  std::string name() const { return "127.0.0.1:" + std::to_string(port_); }
  bool ok() const { return fd_.valid(); }
  // A sync replicator's options on a ring of two, this shard 127.0.0.1:1
  // (never dialled) and the peer: every route's other holder is the peer.
  server::ReplicaOptions TwoShardOptions() const {
    server::ReplicaOptions o;
    auto ring = Ring::Make({RingShard{"127.0.0.1:1"}, RingShard{name()}});
    EXPECT_TRUE(ring.ok()) << ring.status().ToString();
    if (ring.ok()) o.ring = std::make_shared<const Ring>(std::move(ring.value()));
    o.self_index = 0;
    o.self = "127.0.0.1:1";
    o.sync = true;
    o.timeout_ms = 200;
    o.token = "t";
    o.stream = "127.0.0.1:1/1.1";
    return o;
  }
  // A connection that came, or an invalid fd after `wait_ms`.
  os::UniqueFd Accept(int wait_ms = 2000) {
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, wait_ms) != 1) return os::UniqueFd();
    return os::UniqueFd(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  }
  // The request read; its signature's nonce is kept for the next answer's
  // proof, as a shard holding the token "t" answers (replica_auth.h).
  static std::string ReadRequest(int c) {
    std::string r = frs::testing::ReadRequest(c);
    const size_t n = r.find(", n=");
    LastNonce() = n == std::string::npos ? std::string() : r.substr(n + 4, r.find(',', n + 4) - (n + 4));
    return r;
  }
  // A receiver's acknowledgement of batch `seq`, the connection kept.
  static void Acknowledge(int c, uint64_t seq) { Answer(c, 200, "applied\nseq " + std::to_string(seq) + "\n"); }
  // An answer of `status` with `body`, the connection kept, with the proof
  // of the last request read (`proven` false: none, as something at the
  // shard's address without the token answers).
  static void Answer(int c, int status = 200, const std::string& body = "", bool proven = true) {
    const std::string a = AnswerText(status, body, proven);
    ASSERT_EQ(::send(c, a.data(), a.size(), MSG_NOSIGNAL), static_cast<ssize_t>(a.size()));
  }
  static std::string AnswerText(int status, const std::string& body, bool proven = true) {
    std::string a =
        "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    if (proven && !LastNonce().empty())
      a += std::string(server::kReplicaProofHeader) + ": " +
           server::ReplicaAnswerProof("t", LastNonce(), status, body) + "\r\n";
    return a + "\r\n" + body;
  }
  static std::string& LastNonce() {
    static std::string nonce;
    return nonce;
  }

 private:
  os::UniqueFd fd_;
  uint16_t port_ = 0;
};

// A Replicator whose one link goes to a ReplicaPeer, and the worker's loop
// for it, one turn at a time at a clock the test sets.
class ReplicatorFixture : public ::testing::Test {
 protected:
  // `tune` changes the peer's two-shard options first.
  void Open(const std::function<void(server::ReplicaOptions&)>& tune = {}) {
    ASSERT_TRUE(peer_.ok());
    ASSERT_TRUE(loop_.Init().ok());
    server::ReplicaOptions o = peer_.TwoShardOptions();
    ASSERT_TRUE(o.ring);
    if (tune) tune(o);
    repl_ = std::make_unique<server::Replicator>(std::move(o), nullptr, &loop_);
  }
  // One turn of the worker's loop for the replicator, at `now_ns`.
  void Turn(int64_t now_ns, int wait_ms = 20) {
    repl_->Pump(now_ns);
    for (const epoll_event& ev : loop_.Wait(wait_ms, nullptr))
      if (repl_->OwnsTag(ev.data.ptr)) repl_->OnEvent(ev.data.ptr, now_ns);
  }
  // The clock changes are stamped with (the engine's: unix ms).
  static int64_t UnixMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  ReplicaPeer peer_;
  server::EventLoop loop_;
  std::unique_ptr<server::Replicator> repl_;
};

}  // namespace frs::testing
