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

namespace {

// Each holder of a flock on `path`, as /proc/locks names it here (0: a
// process of a PID namespace this one cannot see).
template <typename F>
void ForEachHolder(const std::string& path, F&& f) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return;
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
    if (ino == st.st_ino && maj == ::major(st.st_dev) && min == ::minor(st.st_dev)) f(pid);
  }
}

}  // namespace

bool FlockHeld(const std::string& path) {
  bool held = false;
  ForEachHolder(path, [&](long pid) { held |= pid > 0 && pid != ::getpid(); });
  return held;
}

bool FlockHeldBySelf(const std::string& path) {
  bool held = false;
  ForEachHolder(path, [&](long pid) { held |= pid == ::getpid(); });
  return held;
}

uint64_t OwnPidNamespace() {
  struct stat st;
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

uint64_t PidNamespaceNamedIn(const std::string& lock_path) {
  std::ifstream in(lock_path);
  std::string word;
  unsigned long long ns = 0;
  for (std::string line; std::getline(in, line);)
    if (std::istringstream ss(line); (ss >> word >> ns) && word == "pidns") return ns;
  return 0;
}

std::vector<pid_t> FlockHolders(const std::string& path) {
  std::vector<pid_t> out;
  ForEachHolder(path, [&](long pid) {
    if (pid <= 0 || pid == ::getpid()) return;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      if (const pid_t named = LivePidIn(path); named != 0) pid = named;
    if (std::find(out.begin(), out.end(), pid) == out.end()) out.push_back(static_cast<pid_t>(pid));
  });
  return out;
}

}  // namespace frs
