// An in-process FRS decision: a program that links libfrs and asks the same
// store a running frsd serves (same srv.xml, same files, same locks).
//
//   inprocess /etc/frs/srv.xml login user:42 [N]
//
// makes N acquires (default 1) of BIZ for KEY and prints one line each.
// Exit 0 when the last one was allowed, 1 when it was denied, 2 on error.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <frs/service.h>
#include <frs/sigbus_guard.h>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s SRV.XML BIZ KEY [N]\n", argv[0]);
    return 2;
  }
  // A store file truncated under this program (an operator, a restore) is
  // then an error of the next operation, not a SIGBUS that kills it.
  frs::InstallSigbusGuard();
  frs::ServiceOpenOptions opts;
  // A demonstration may create the store; a program beside frsd would not.
  opts.create_if_missing = std::getenv("FRS_CREATE") != nullptr;
  frs::Result<frs::Service> svc = frs::OpenFromConfig(argv[1], opts);
  if (!svc.ok()) {
    std::fprintf(stderr, "%s\n", svc.status().ToString().c_str());
    return 2;
  }
  // N: a whole number of acquires, 1 or more (0 or "x" asked nothing, and
  // exited 1 as if denied).
  char* end = nullptr;
  const long n = argc > 4 ? std::strtol(argv[4], &end, 10) : 1;
  if (argc > 4 && (end == argv[4] || *end != '\0' || n < 1 || n > 1000000)) {
    std::fprintf(stderr, "N must be a whole number of acquires, 1 to 1000000, not '%s'\n", argv[4]);
    return 2;
  }
  bool allowed = false;
  for (long i = 0; i < n; ++i) {
    frs::Request req;
    req.cmd = frs::Cmd::kAcquire;
    req.biz = argv[2];
    req.key = argv[3];
    frs::Decision d = svc->engine->Execute(req);
    if (!d.ok()) {
      std::fprintf(stderr, "error: %s\n", d.status.ToString().c_str());
      return 2;
    }
    allowed = d.allowed;
    std::printf("%s count=%lld limit=%lld remaining=%lld retry_after=%lld\n", d.allowed ? "allowed" : "denied",
                static_cast<long long>(d.count), static_cast<long long>(d.limit),
                static_cast<long long>(d.remaining), static_cast<long long>(d.retry_after));
  }
  return allowed ? 0 : 1;
}
