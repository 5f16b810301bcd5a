// server/sd_notify.h: systemd's readiness protocol (Type=notify), without
// libsystemd: one datagram of "KEY=VALUE" lines to the AF_UNIX socket named
// by $NOTIFY_SOCKET (a path, or "@name" in the abstract namespace).
//
// frsd's master sends READY=1 once every worker serves, RELOADING=1 and
// READY=1 around a SIGHUP reload, STOPPING=1 when it begins to stop, and
// STATUS= lines a `systemctl status` shows. Without $NOTIFY_SOCKET every
// call does nothing.
//
// Thread safety: the master's thread only.
#pragma once

#include <string>

namespace frs::server {

class SdNotifier {
 public:
  // Reads $NOTIFY_SOCKET and removes it from the environment, so that the
  // workers (which must not speak for the service) do not inherit it.
  static SdNotifier FromEnvironment();
  bool enabled() const { return !address_.empty(); }
  // Sends `state` (e.g. "READY=1\nSTATUS=serving"); errors are ignored, as
  // systemd itself does: a lost datagram shows as a start time-out there.
  void Notify(const std::string& state) const;

 private:
  std::string address_;
};

}  // namespace frs::server
