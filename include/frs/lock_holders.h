// frs/lock_holders.h: which processes hold a flock(2) on a file, read from
// /proc/locks without taking one (a probe lock, however brief, could make a
// starting frsd take this reader for a running one): whether frsd serves a
// store is whether a live process holds its frsd.lock (frs/store_dir.h).
//
// Thread safety: reads /proc; no state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace frs {

// The pids other than this process's holding a flock on `path` (empty when
// none, or when /proc/locks cannot be read). A holder that has exited while
// its children keep the lock (frsd's launcher, which forks the master and
// returns) is named by the pid the file itself holds, when that lives.
std::vector<pid_t> FlockHolders(const std::string& path);

// Whether a process other than this one that this one can see holds a
// flock on `path` (/proc/locks leaves out a holder of a PID namespace this
// one does not contain).
bool FlockHeld(const std::string& path);

// Whether this process holds a flock on `path` (through any descriptor).
bool FlockHeldBySelf(const std::string& path);

// This process's PID namespace: the inode of /proc/self/ns/pid (0 when it
// cannot be read).
uint64_t OwnPidNamespace();

// The PID namespace a store lock names (frsd writes "PID\npidns N\n" into
// frsd.lock): 0 when it names none (an frsd of 0.3.0 wrote its pid only).
// A lock's owner is a thread id of its own namespace: a process of another
// namespace reads it as some other thread, and would take over a lock that
// a live frsd holds.
uint64_t PidNamespaceNamedIn(const std::string& lock_path);

}  // namespace frs
