// server/event_loop.h: a minimal epoll loop (level-triggered).
//
// Level-triggered keeps the connection code simple and fair: a connection
// that still has buffered input is reported again on the next wait, so no
// handler has to drain a socket in one go and one busy client cannot starve
// the others. EPOLLERR/EPOLLHUP are delivered to the handler, which sees the
// error on its next read.
//
// Thread safety: one loop per thread (per worker process).
#pragma once

#include <signal.h>
#include <sys/epoll.h>

#include <cstdint>
#include <span>

#include "frs/status.h"
#include "os/unique_fd.h"

namespace frs::server {

class EventLoop {
 public:
  static constexpr int kMaxEvents = 256;

  Status Init();
  Status Add(int fd, uint32_t events, void* ptr);
  Status Modify(int fd, uint32_t events, void* ptr);
  void Remove(int fd);
  // Waits at most timeout_ms (-1 forever) with `sigmask` installed during the
  // wait; returns the ready events (empty on timeout or signal).
  std::span<const epoll_event> Wait(int timeout_ms, const sigset_t* sigmask);

 private:
  os::UniqueFd epfd_;
  epoll_event events_[kMaxEvents];
};

}  // namespace frs::server
