// server/daemon.h: detaching from the terminal.
//
// Daemonize() forks twice (setsid in between) so the server is not a session
// leader and cannot reacquire a terminal; the original process exits 0 only
// after the daemon reports that it started (or exits 1 with the daemon's
// error already printed), so a service manager or script that runs `frsd -c
// ...` sees a failure as a failure.
//
// Thread safety: call before any thread exists.
#pragma once

#include "frs/status.h"

namespace frs::server {

class Daemon {
 public:
  // In the daemon: returns OK (the parent processes never return). stdin
  // and stdout are /dev/null; stderr stays until Ready().
  Status Daemonize();
  // Tells the waiting parent we are serving; redirects stderr to /dev/null.
  void Ready();
  // Tells the waiting parent we failed (it exits 1).
  void Failed();
  // In a forked worker: drop our copy of the start-up pipe, so the waiting
  // parent sees the master's verdict, not the worker's lifetime, and (when
  // daemonized) the launcher's stderr, so nothing of ours holds it after
  // Ready().
  void CloseInChild();

 private:
  int notify_fd_ = -1;
  bool daemonized_ = false;
};

}  // namespace frs::server
