// frs/lock_holders.h: which processes hold a flock(2) on a file, read from
// /proc/locks without taking one (a probe lock, however brief, could make a
// starting frsd take this reader for a running one): whether frsd serves a
// store is whether a live process holds its frsd.lock (frs/store_dir.h).
//
// Thread safety: reads /proc; no state.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace frs {

// The pids other than this process's holding a flock on `path` (empty when
// none, or when /proc/locks cannot be read). A holder that has exited while
// its children keep the lock (frsd's launcher, which forks the master and
// returns) is named by the pid the file itself holds, when that lives.
std::vector<pid_t> FlockHolders(const std::string& path);

}  // namespace frs
