#include "server/signals.h"

#include <string.h>

#include <cerrno>
#include <cstring>

#include "os/sigbus_guard.h"
#include "server/logger.h"

namespace frs::server {

namespace {
SignalFlags g_flags;

void OnSignal(int sig) {
  switch (sig) {
    case SIGTERM:
    case SIGINT: g_flags.terminate = sig; break;
    case SIGHUP: g_flags.reload = 1; break;
    case SIGUSR1: g_flags.reopen = 1; break;
    case SIGCHLD: g_flags.child = 1; break;
    default: break;
  }
}

constexpr int kHandled[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGCHLD};

// Signals whose default ends the process and that frsd gives no meaning:
// one sent by mistake (a USR2 meant for another daemon, a profiler's timer)
// ended a worker, or the master and with it the whole server. Ignored, as
// SIGPIPE is. SIGXFSZ ignored makes a write past RLIMIT_FSIZE fail (EFBIG),
// reported as any failed write. SIGQUIT keeps its core dump, asked for on
// purpose; the faults (SEGV, BUS, ILL, FPE, ABRT, TRAP, SYS) keep theirs.
// Ignoring SIGPROF and SIGVTALRM leaves gprof's and gperftools' sampling
// without ticks (perf and valgrind need none); ignoring SIGXCPU lets a soft
// RLIMIT_CPU pass, to the hard one's SIGKILL.
constexpr int kIgnored[] = {SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGIO, SIGPWR, SIGSTKFLT};
}  // namespace

SignalFlags& Signals() { return g_flags; }

Status InstallSignalHandlers(bool want_child, sigset_t* wait_mask) {
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  if (sigaction(SIGPIPE, &ign, nullptr) != 0) return Status::FromErrno("sigaction(SIGPIPE)", errno);
  // The others, and the real-time signals (glibc's own, below SIGRTMIN, are
  // not ours to set): one that cannot be ignored (a sandbox's) is said, and
  // keeps its default; no reason not to serve.
  auto ignore = [&](int sig) {
    if (sigaction(sig, &ign, nullptr) != 0)
      FRS_LOG("cannot ignore signal %d (%s): %s; it keeps its default", sig, strsignal(sig), std::strerror(errno));
  };
  for (int sig : kIgnored) ignore(sig);
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) ignore(sig);

  sigset_t block;
  sigemptyset(&block);
  for (int sig : kHandled) {
    if (sig == SIGCHLD && !want_child) continue;
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sigfillset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(sig, &sa, nullptr) != 0) return Status::FromErrno("sigaction", errno);
    sigaddset(&block, sig);
  }
  sigset_t old;
  if (sigprocmask(SIG_BLOCK, &block, &old) != 0) return Status::FromErrno("sigprocmask", errno);
  *wait_mask = old;
  for (int sig : kHandled) sigdelset(wait_mask, sig);
  return Status::OK();
}

bool DeliverPendingSignals(const sigset_t* wait_mask) {
  sigset_t pending;
  if (sigpending(&pending) != 0) return false;
  bool any = false;
  for (int sig = 1; sig < NSIG && !any; ++sig)
    any = sigismember(&pending, sig) == 1 && sigismember(wait_mask, sig) == 0;
  if (!any) return false;
  sigset_t blocked;
  pthread_sigmask(SIG_SETMASK, wait_mask, &blocked);  // the pending handlers run here
  pthread_sigmask(SIG_SETMASK, &blocked, nullptr);
  return true;
}

bool SetUpProcessSignals(bool want_child, sigset_t* wait_mask) {
  os::InstallSigbusGuard();
  Status s = InstallSignalHandlers(want_child, wait_mask);
  if (!s.ok()) FRS_LOG("%s", s.ToString().c_str());
  return s.ok();
}

}  // namespace frs::server
