// server/signals.h: signal handlers that only set flags.
//
// The master and each worker block the signals they handle and unblock them
// only inside their wait call (ppoll / epoll_pwait with the mask returned
// here), so a signal is never lost between checking a flag and sleeping.
//
// Thread safety: process-wide state, main thread only.
#pragma once

#include <signal.h>

#include "frs/status.h"

namespace frs::server {

struct SignalFlags {
  volatile sig_atomic_t terminate = 0;  // the signal that asked for the stop (SIGTERM, SIGINT), else 0
  volatile sig_atomic_t reload = 0;     // SIGHUP
  volatile sig_atomic_t reopen = 0;     // SIGUSR1
  volatile sig_atomic_t child = 0;      // SIGCHLD
};

SignalFlags& Signals();

// Installs the flag-setting handlers (SIGCHLD too when `want_child`),
// ignores SIGPIPE and the other signals frsd gives no meaning to (USR2,
// ALRM, VTALRM, PROF, XCPU, XFSZ, IO, PWR, STKFLT, the real-time ones),
// blocks the handled signals, and fills `wait_mask` with the
// mask to install while waiting (the previous mask, handled signals open).
Status InstallSignalHandlers(bool want_child, sigset_t* wait_mask);

// What a master or a worker sets up first: the SIGBUS guard (a store file
// truncated under the process answers errors instead of killing it,
// os/sigbus_guard.h), then the handlers above. False, said in the log, when
// the handlers cannot be installed.
bool SetUpProcessSignals(bool want_child, sigset_t* wait_mask);

// Runs the handlers of signals that are pending while blocked, by opening
// `wait_mask` for an instant; true when there were any. epoll_pwait lets a
// signal in only when it sleeps, so a worker whose every wait finds events
// ready (a saturating load) calls this now and then, or a stop or a reload
// would wait for a quiet moment.
bool DeliverPendingSignals(const sigset_t* wait_mask);

}  // namespace frs::server
