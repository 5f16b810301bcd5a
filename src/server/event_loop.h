// server/event_loop.h: a minimal epoll loop.
//
// The worker registers each connection once, edge-triggered for input and
// output (the listening socket stays level-triggered). Edge-triggered is the
// fair choice under load: the kernel queues a socket when its input
// arrives, so a turn serves connections in the order their requests came.
// Level-triggered re-queues every socket it reported ahead of those that
// became ready meanwhile, so a fast client was served again before a
// request that had waited a whole turn, and the 99th percentile at 64
// connections was twice the median (docs/performance.md, section 7). The
// worker remembers input it left on a socket and reads it on its next turn.
// EPOLLRDHUP, EPOLLERR and EPOLLHUP are remembered too: the peer's end may
// come with the last bytes of input, and only one more read sees it.
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
  void Remove(int fd);
  // Waits at most timeout_ms (-1 forever) with `sigmask` installed during the
  // wait; returns the ready events (empty on timeout or signal).
  std::span<const epoll_event> Wait(int timeout_ms, const sigset_t* sigmask);

 private:
  os::UniqueFd epfd_;
  epoll_event events_[kMaxEvents];
};

}  // namespace frs::server
