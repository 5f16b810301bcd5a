#include "server/listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace frs::server {

namespace {

Status MakeAddress(const std::string& host, uint16_t port, sockaddr_storage* ss, socklen_t* len) {
  std::memset(ss, 0, sizeof *ss);
  auto* v4 = reinterpret_cast<sockaddr_in*>(ss);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    *len = sizeof(sockaddr_in);
    return Status::OK();
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(ss);
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    *len = sizeof(sockaddr_in6);
    return Status::OK();
  }
  return Status::InvalidArgument("listen host \"" + host + "\" is not an IPv4 or IPv6 address");
}

Result<os::UniqueFd> BindOne(const sockaddr_storage& ss, socklen_t len, bool reuseport, const std::string& what) {
  os::UniqueFd fd(socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::FromErrno("socket", errno);
  int one = 1;
  // SO_REUSEADDR: restart while old connections of ours sit in TIME_WAIT.
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (reuseport && setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
    return Status::FromErrno("setsockopt(SO_REUSEPORT)", errno);
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&ss), len) != 0)
    return Status::FromErrno("cannot listen on " + what, errno);
  return fd;
}

}  // namespace

Result<std::vector<os::UniqueFd>> OpenListeners(const std::string& host, uint16_t port, uint32_t count,
                                                bool reuseport, int backlog) {
  sockaddr_storage ss;
  socklen_t len = 0;
  Status s = MakeAddress(host, port, &ss, &len);
  if (!s.ok()) return s;
  std::string what = (ss.ss_family == AF_INET6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  {
    // The probe: fails when anyone (another frsd included) listens there.
    auto probe = BindOne(ss, len, /*reuseport=*/false, what);
    if (!probe.ok()) return probe.status();
  }
  std::vector<os::UniqueFd> out;
  out.reserve(count);
  if (!reuseport) {
    auto fd = BindOne(ss, len, /*reuseport=*/false, what);
    if (!fd.ok()) return fd.status();
    if (listen(fd->get(), backlog) != 0) return Status::FromErrno("listen on " + what, errno);
    for (uint32_t i = 1; i < count; ++i) {
      os::UniqueFd dup(fcntl(fd->get(), F_DUPFD_CLOEXEC, 0));
      if (!dup.valid()) return Status::FromErrno("dup of the listening socket", errno);
      out.push_back(std::move(dup));
    }
    out.insert(out.begin(), std::move(fd.value()));
    return out;
  }
  for (uint32_t i = 0; i < count; ++i) {
    auto fd = BindOne(ss, len, /*reuseport=*/true, what);
    if (!fd.ok()) return fd.status();
    if (listen(fd->get(), backlog) != 0) return Status::FromErrno("listen on " + what, errno);
    out.push_back(std::move(fd.value()));
  }
  return out;
}

}  // namespace frs::server
