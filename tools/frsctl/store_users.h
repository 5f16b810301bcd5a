// frsctl/store_users.h: who is using a store, for the commands that need it
// stopped (`grow`).
//
// A store is in use when any of these holds:
//   1. the pid file srv.xml names holds the pid of a live process that is
//      frsd (its /proc/PID/exe, comm or argv[0] is `frsd`);
//   2. frsd's store lock, DIR/frsd.lock (server/pidfile.h), is held: some frsd
//      master runs on this directory, whatever its pid file;
//   3. a process maps one of the store's files (/proc/PID/maps, matched by
//      device and inode, or by path): an frsd worker, an frsctl, a program
//      linking libfrs;
//   4. a process has one of the files open: every opener holds a shared
//      flock(2) on each file for as long as it has it mapped
//      (os/mapped_file.h), so an exclusive non-blocking flock fails. This also
//      catches processes whose maps this user may not read (not root).
// Each refusal is a Busy status naming the pid (and the process name) and
// what to do.
//
// Thread safety: free functions and move-only values, used by one thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "frs/lock_holders.h"
#include "frs/status.h"
#include "frs/unique_fd.h"

namespace frs::ctl {

struct StoreUser {
  pid_t pid = 0;
  std::string name;  // /proc/PID/comm
  std::string file;  // the store file it maps or holds
};

// The pid of a live frsd that `pidfile` names; 0 when the file is absent or
// names no live frsd (a stale pid file, or a pid reused by another program).
pid_t LiveFrsdFromPidFile(const std::string& pidfile);

// Processes other than this one that map any of `paths`.
std::vector<StoreUser> ProcessesMapping(const std::vector<std::string>& paths);

// FlockHolders (the pids holding a flock on a file): frs/lock_holders.h.

// "pid 123 (frsd)" for each user, comma-separated.
std::string DescribeUsers(const std::vector<StoreUser>& users);

// Exclusive flocks, held until destroyed (or Release()).
class ExclusiveLocks {
 public:
  ExclusiveLocks() = default;
  ExclusiveLocks(ExclusiveLocks&&) = default;
  ExclusiveLocks& operator=(ExclusiveLocks&&) = default;

  // Takes LOCK_EX | LOCK_NB on every path (which must exist). A path some
  // other process holds is Busy, naming the path and the holders' pids;
  // then no lock is kept.
  static Result<ExclusiveLocks> Take(const std::vector<std::string>& paths);
  void Release() { fds_.clear(); }

 private:
  std::vector<UniqueFd> fds_;
};

// frsd's store lock DIR/frsd.lock, taken as frsd takes it (exclusive flock),
// so that no frsd starts on the directory while it is held. Created when
// missing, owned like the directory (so that frsd, running as its own user,
// can still open it later). Busy names the frsd that holds it.
Result<UniqueFd> TakeFrsdStoreLock(const std::string& dir);

}  // namespace frs::ctl
