#include "server/listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "os/whole_file.h"

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

uint16_t BoundPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port
                                        : reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
}

void SetPort(sockaddr_storage* ss, uint16_t port) {
  if (ss->ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(ss)->sin6_port = htons(port);
  else reinterpret_cast<sockaddr_in*>(ss)->sin_port = htons(port);
}

}  // namespace

Result<Listeners> OpenListeners(const std::string& host, uint16_t port, uint32_t count, bool reuseport, int backlog) {
  sockaddr_storage ss;
  socklen_t len = 0;
  Status s = MakeAddress(host, port, &ss, &len);
  if (!s.ok()) return s;
  std::string what = (ss.ss_family == AF_INET6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  if (port != 0) {
    // The probe: fails when anyone (another frsd included) listens there.
    auto probe = BindOne(ss, len, /*reuseport=*/false, what);
    if (!probe.ok()) return probe.status();
  }
  Listeners out;
  out.fds.reserve(count);
  if (!reuseport) {
    auto fd = BindOne(ss, len, /*reuseport=*/false, what);
    if (!fd.ok()) return fd.status();
    if (listen(fd->get(), backlog) != 0) return Status::FromErrno("listen on " + what, errno);
    out.port = BoundPort(fd->get());
    if (out.port == 0) return Status::FromErrno("getsockname of " + what, errno);
    for (uint32_t i = 1; i < count; ++i) {
      os::UniqueFd dup(fcntl(fd->get(), F_DUPFD_CLOEXEC, 0));
      if (!dup.valid()) return Status::FromErrno("dup of the listening socket", errno);
      out.fds.push_back(std::move(dup));
    }
    out.fds.insert(out.fds.begin(), std::move(fd.value()));
    return out;
  }
  for (uint32_t i = 0; i < count; ++i) {
    auto fd = BindOne(ss, len, /*reuseport=*/true, what);
    if (!fd.ok()) return fd.status();
    if (listen(fd->get(), backlog) != 0) return Status::FromErrno("listen on " + what, errno);
    if (i == 0) {
      // The group's port: the kernel's choice for 0, which the rest then join.
      out.port = BoundPort(fd->get());
      if (out.port == 0) return Status::FromErrno("getsockname of " + what, errno);
      SetPort(&ss, out.port);
    }
    out.fds.push_back(std::move(fd.value()));
  }
  return out;
}

namespace {
// What stands at a Unix socket path: free (nothing, or a socket no server
// answers at, *stale), or the reason it cannot be listened on.
Status ProbeUnixPath(const std::string& path, sockaddr_un* sa, socklen_t* len, bool* stale) {
  *sa = sockaddr_un{};
  sa->sun_family = AF_UNIX;
  *stale = false;
  if (path.empty() || path.size() >= sizeof sa->sun_path)
    return Status::InvalidArgument("the socket path " + path + " is empty or too long");
  std::memcpy(sa->sun_path, path.data(), path.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return Status::FromErrno("cannot look at " + path, errno);
    const std::string dir = std::filesystem::path(path).parent_path().string();
    if (!dir.empty() && (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)))
      return Status::InvalidArgument("cannot listen on " + path + ": its directory " + dir + " does not exist");
    return Status::OK();
  }
  if (S_ISLNK(st.st_mode))  // even one to a stale socket, or to nothing: what it leads to is not this path's
    return Status::InvalidArgument(path + " is a symbolic link: not replaced (give the socket's own path)");
  if (!S_ISSOCK(st.st_mode)) return Status::InvalidArgument(path + " exists and is not a socket: not replaced");
  // Someone answering there is another server: leave it alone.
  os::UniqueFd probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) return Status::FromErrno("socket", errno);
  if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(sa), *len) == 0)
    return Status::InvalidArgument("cannot listen on " + path + ": a server listens there already");
  if (errno != ECONNREFUSED) return Status::FromErrno("cannot probe the socket " + path, errno);
  *stale = true;
  return Status::OK();
}
}  // namespace

Status CheckUnixListenPath(const std::string& path) {
  sockaddr_un sa;
  socklen_t len = 0;
  bool stale = false;
  return ProbeUnixPath(path, &sa, &len, &stale);
}

Result<Listeners> OpenUnixListener(const std::string& path, uint32_t mode, uint32_t count, int backlog) {
  sockaddr_un sa;
  socklen_t len = 0;
  bool stale = false;
  if (Status s = ProbeUnixPath(path, &sa, &len, &stale); !s.ok()) return s;
  const auto* addr = reinterpret_cast<const sockaddr*>(&sa);
  if (stale && ::unlink(path.c_str()) != 0) return Status::FromErrno("cannot remove the stale socket " + path, errno);
  os::UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::FromErrno("socket", errno);
  if (bind(fd.get(), addr, len) != 0) return Status::FromErrno("cannot listen on " + path, errno);
  if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    return Status::FromErrno("cannot set the permissions of " + path, err);
  }
  if (listen(fd.get(), backlog) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    return Status::FromErrno("listen on " + path, err);
  }
  Listeners out;
  out.fds.reserve(count);
  out.fds.push_back(std::move(fd));
  for (uint32_t i = 1; i < count; ++i) {
    os::UniqueFd dup(fcntl(out.fds.front().get(), F_DUPFD_CLOEXEC, 0));
    if (!dup.valid()) {
      const int err = errno;
      ::unlink(path.c_str());
      return Status::FromErrno("dup of the listening socket", err);
    }
    out.fds.push_back(std::move(dup));
  }
  return out;
}

void RemoveUnixListener(const std::string& path, FileIdentity bound) {
  // Only the socket bound here: whatever took the name since is not ours.
  struct stat st;
  if (bound.ino != 0 && ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == bound.dev &&
      st.st_ino == bound.ino)
    ::unlink(path.c_str());
}

Status PublishListenAddress(const std::string& path, const std::string& name, bool synced) {
  // Whole, so that a reader never sees half a name.
  return os::WriteFileWhole(path, name + "\n", {.sync_file = synced, .sync_dir = synced}).status();
}

}  // namespace frs::server
