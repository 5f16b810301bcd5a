// frsctl: the FRS admin CLI (docs/frsctl.md). The process around the command
// line (command_line.h): how it takes signals and buffers its output.
#include <signal.h>

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "command_line.h"
#include "format.h"
#include "frs/sigbus_guard.h"
#include "frs/stop_request.h"

int main(int argc, char** argv) {
  // Ctrl-C or SIGTERM must not kill frsctl inside a chain it holds: the
  // operation in hand finishes (or a walk stops between chains) and frsctl
  // exits with a message. Before, an interrupted `reset` left a lock that
  // only a waiter's liveness check could recover.
  struct sigaction sa {};
  sa.sa_handler = [](int) { frs::RequestStop(); };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  frs::InstallSigbusGuard();  // a truncated store file is an error, not a crash
  // A file past `ulimit -f` (a store init or grow makes, an export) is a
  // failed write (EFBIG) said with its file, not a death by SIGXFSZ that
  // leaves the file half made.
  ::signal(SIGXFSZ, SIG_IGN);
  // A TZ glibc cannot read would show UTC under the zone's name: say so, and
  // label the times UTC.
  const char* tzdir = std::getenv("TZDIR");
  const std::string tz_problem =
      frs::ctl::TimeZoneProblem(std::getenv("TZ"), tzdir != nullptr && *tzdir != '\0' ? tzdir : "/usr/share/zoneinfo");
  if (!tz_problem.empty()) {
    std::fprintf(stderr, "frsctl: warning: %s\n", tz_problem.c_str());
    ::setenv("TZ", "UTC0", 1);
    ::tzset();
  }
  // Dumps and exports to a pipe or a file go out in large writes; on a
  // terminal lines stay line-buffered, so that a note on standard error
  // comes after the output it follows (an import's summary and its
  // warning about evictions came in the other order).
  static char outbuf[1 << 16];
  if (::isatty(STDOUT_FILENO) == 0) std::setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
  return frs::ctl::RunCommandLine(argc, argv);
}
