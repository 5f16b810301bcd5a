// tests/common/wait_exit.h: how a child process of a test ended.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>

namespace frs::testing {

// Reaps `pid`: its exit code, or 128 + the signal that killed it (as a shell says).
inline int WaitExit(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace frs::testing
