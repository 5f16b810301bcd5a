// tests/server/replica_peer.h: the other holder of a Replicator's links,
// played by a test: a listening socket on loopback whose connections the
// test accepts, reads and answers (or closes) when it chooses, so that the
// replicator's every state is reached in a known order.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <memory>
#include <string>
#include <utility>

#include "common/read_request.h"
#include "frs/ring.h"
#include "os/unique_fd.h"
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
  static std::string ReadRequest(int c) { return frs::testing::ReadRequest(c); }
  // A receiver's acknowledgement of batch `seq`, the connection kept.
  static void Acknowledge(int c, uint64_t seq) { Answer(c, 200, "applied\nseq " + std::to_string(seq) + "\n"); }
  // An answer of `status` with `body`, the connection kept.
  static void Answer(int c, int status = 200, const std::string& body = "") {
    const std::string a = "HTTP/1.1 " + std::to_string(status) +
                          " X\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    ASSERT_EQ(::send(c, a.data(), a.size(), MSG_NOSIGNAL), static_cast<ssize_t>(a.size()));
  }

 private:
  os::UniqueFd fd_;
  uint16_t port_ = 0;
};

}  // namespace frs::testing
