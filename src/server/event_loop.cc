#include "server/event_loop.h"

#include <cerrno>

namespace frs::server {

Status EventLoop::Init() {
  epfd_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!epfd_.valid()) return Status::FromErrno("epoll_create1", errno);
  return Status::OK();
}

Status EventLoop::Add(int fd, uint32_t events, void* ptr) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = ptr;
  if (epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return Status::FromErrno("epoll_ctl(ADD)", errno);
  return Status::OK();
}

void EventLoop::Remove(int fd) { epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, fd, nullptr); }

std::span<const epoll_event> EventLoop::Wait(int timeout_ms, const sigset_t* sigmask) {
  int n = epoll_pwait(epfd_.get(), events_, kMaxEvents, timeout_ms, sigmask);
  if (n <= 0) return {};
  return {events_, static_cast<size_t>(n)};
}

}  // namespace frs::server
