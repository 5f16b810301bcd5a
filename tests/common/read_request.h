// tests/common/read_request.h: one whole HTTP request read from a socket (its
// head, then Content-Length bytes of body), for the tests' stand-in servers
// (a shard that answers replicas, a proxy's canned page). What came, whole
// or not, once the request is whole, the peer closes, or `timeout_ms` passes
// without a byte.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <string>

namespace frs::testing {

inline std::string ReadRequest(int c, int timeout_ms = 2000) {
  std::string in;
  char buf[4096];
  for (;;) {
    const size_t head = in.find("\r\n\r\n");
    if (head != std::string::npos) {
      const size_t at = in.find("Content-Length: ");
      const size_t body = at == std::string::npos ? 0 : std::stoul(in.substr(at + 16));
      if (in.size() >= head + 4 + body) return in;
    }
    pollfd p{c, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) != 1) return in;
    const ssize_t n = ::recv(c, buf, sizeof buf, 0);
    if (n <= 0) return in;
    in.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace frs::testing
