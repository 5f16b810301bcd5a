#include "frs/lock_holders.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace frs {
namespace {

// The pid a lock file names (frsd writes its master's into frsd.lock and
// its pid file), if that process lives; else 0.
pid_t LivePidIn(const std::string& path) {
  std::ifstream in(path);
  long pid = 0;
  if (!(in >> pid) || pid <= 0 || pid > INT_MAX) return 0;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM ? static_cast<pid_t>(pid) : 0;
}

}  // namespace

std::vector<pid_t> FlockHolders(const std::string& path) {
  std::vector<pid_t> out;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return out;
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; waiters have "->"
    // after the number and hold nothing.
    std::istringstream ss(line);
    std::string num, kind, advisory, mode, dev;
    long pid = 0;
    if (!(ss >> num >> kind) || kind == "->" || !(ss >> advisory >> mode >> pid >> dev)) continue;
    unsigned maj = 0, min = 0;
    unsigned long ino = 0;
    if (std::sscanf(dev.c_str(), "%x:%x:%lu", &maj, &min, &ino) != 3) continue;
    if (ino != st.st_ino || maj != ::major(st.st_dev) || min != ::minor(st.st_dev) || pid <= 0 || pid == ::getpid())
      continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      if (const pid_t named = LivePidIn(path); named != 0) pid = named;
    if (std::find(out.begin(), out.end(), pid) == out.end()) out.push_back(static_cast<pid_t>(pid));
  }
  return out;
}

}  // namespace frs
