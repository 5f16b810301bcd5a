#include "server/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "os/unique_fd.h"

namespace frs::server {

SdNotifier SdNotifier::FromEnvironment() {
  SdNotifier n;
  const char* env = std::getenv("NOTIFY_SOCKET");
  if (env && (env[0] == '/' || env[0] == '@') && std::strlen(env) < sizeof(sockaddr_un::sun_path)) n.address_ = env;
  ::unsetenv("NOTIFY_SOCKET");
  // Strictly digits, as systemd writes them; anything else keeps no watch.
  auto number = [](const char* v) -> long long {
    if (v == nullptr || *v == '\0') return 0;
    char* end = nullptr;
    errno = 0;
    const long long x = std::strtoll(v, &end, 10);
    return errno == 0 && *end == '\0' && x > 0 ? x : 0;
  };
  if (!n.address_.empty()) {
    n.watchdog_usec_ = number(std::getenv("WATCHDOG_USEC"));
    n.watchdog_pid_ = static_cast<long>(number(std::getenv("WATCHDOG_PID")));
  }
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("WATCHDOG_PID");
  return n;
}

int64_t SdNotifier::WatchdogUsec() const {
  if (address_.empty() || watchdog_usec_ <= 0) return 0;
  return watchdog_pid_ == 0 || watchdog_pid_ == static_cast<long>(::getpid()) ? watchdog_usec_ : 0;
}

void SdNotifier::Notify(const std::string& state) const {
  if (address_.empty()) return;
  os::UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, address_.data(), address_.size());
  if (sa.sun_path[0] == '@') sa.sun_path[0] = '\0';  // the abstract namespace
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size());
  (void)::sendto(fd.get(), state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&sa), len);
}

}  // namespace frs::server
