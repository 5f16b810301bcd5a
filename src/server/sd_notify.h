// server/sd_notify.h: systemd's readiness protocol (Type=notify), without
// libsystemd: one datagram of "KEY=VALUE" lines to the AF_UNIX socket named
// by $NOTIFY_SOCKET (a path, or "@name" in the abstract namespace).
//
// frsd's master sends READY=1 once every worker serves, RELOADING=1 and
// READY=1 around a SIGHUP reload, STOPPING=1 when it begins to stop, and
// STATUS= lines a `systemctl status` shows. Without $NOTIFY_SOCKET every
// call does nothing. Under WatchdogSec= ($WATCHDOG_USEC, and $WATCHDOG_PID
// when set naming this process) it sends WATCHDOG=1 at half that period from
// its loop, so that systemd restarts a master that stopped turning (a hung
// worker is the master's own watch, server/stall_watch.h).
//
// Thread safety: the master's thread only.
#pragma once

#include <cstdint>
#include <string>

namespace frs::server {

class SdNotifier {
 public:
  // Reads $NOTIFY_SOCKET (and $WATCHDOG_USEC, $WATCHDOG_PID) and removes
  // them from the environment, so that the workers (which must not speak for
  // the service) do not inherit them.
  static SdNotifier FromEnvironment();
  bool enabled() const { return !address_.empty(); }
  // The watchdog's period in microseconds when it is this process's to keep
  // ($WATCHDOG_PID unset or getpid(): a daemonized frsd is not the process
  // systemd started); 0: none.
  int64_t WatchdogUsec() const;
  // Sends `state` (e.g. "READY=1\nSTATUS=serving"); errors are ignored, as
  // systemd itself does: a lost datagram shows as a start time-out there.
  void Notify(const std::string& state) const;

 private:
  std::string address_;
  int64_t watchdog_usec_ = 0;
  long watchdog_pid_ = 0;  // 0: any
};

}  // namespace frs::server
