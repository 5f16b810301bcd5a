// server/pidfile.h: exclusive ownership of the pid file and of the store.
//
// Both are flock(2) locks held for the life of the master: the kernel drops
// them when the process dies however it dies, so a stale pid file never
// blocks a restart, and a second frsd on the same pid file or store refuses
// to start with a message naming the file and the running pid. The store
// lock is a separate file (frsd.lock) in the store directory, so frsctl,
// which maps the store files while frsd runs, is not affected.
//
// Workers must not inherit these descriptors (a worker outliving a killed
// master would keep the lock): the master closes them in each child.
//
// Thread safety: none needed (master only).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "frs/status.h"
#include "os/unique_fd.h"

namespace frs::server {

class LockFile {
 public:
  // Creates/opens `path` and takes an exclusive, non-blocking flock.
  // `what` names the resource in the refusal ("pid file", "store").
  static Result<LockFile> Acquire(const std::string& path, const std::string& what);

  LockFile(LockFile&&) = default;
  LockFile& operator=(LockFile&&) = default;

  // Replaces the file's content with "PID\n", and "pidns N\n" after it when
  // `pidns` is not 0 (the store lock: frs/lock_holders.h says why; a pid
  // file stays one number, as scripts read it).
  Status WritePid(pid_t pid, uint64_t pidns = 0);
  // Unlinks the file (on a clean stop; we still hold the lock).
  void Remove();
  int fd() const { return fd_.get(); }
  // Closes the descriptor without unlinking (in a forked child).
  void CloseInChild() { fd_.reset(); }

 private:
  // One try; *replaced: the path no longer names the file it locked.
  static Result<LockFile> AcquireOnce(const std::string& path, const std::string& what, bool* replaced);
  LockFile(os::UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  os::UniqueFd fd_;
  std::string path_;
};

}  // namespace frs::server
