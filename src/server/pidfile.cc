#include "server/pidfile.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "os/output_file.h"

namespace frs::server {

Result<LockFile> LockFile::Acquire(const std::string& path, const std::string& what) {
  // O_NONBLOCK and fstat: a FIFO is refused, never waited on (a regular
  // file ignores the flag).
  os::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0644));
  if (!fd.valid()) return Status::FromErrno("cannot open the " + what + " lock " + path, errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("cannot open the " + what + " lock " + path, errno);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("the " + what + " " + os::NotRegularWords(path, st.st_mode));
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return Status::FromErrno("cannot lock " + path, errno);
    char buf[32] = {};
    ssize_t n = pread(fd.get(), buf, sizeof buf - 1, 0);
    long pid = n > 0 ? std::strtol(buf, nullptr, 10) : 0;
    std::string who = pid > 0 ? "frsd (pid " + std::to_string(pid) + ")" : "another frsd";
    // Named by what it guards (the store's directory, not its lock file).
    const size_t slash = path.rfind('/');
    const std::string guarded = what == "store" && slash != std::string::npos ? path.substr(0, slash) : path;
    return Status::Busy(who + " is already running with the " + what + " " + guarded);
  }
  return LockFile(std::move(fd), path);
}

Status LockFile::WritePid(pid_t pid) {
  char buf[32];
  int n = std::snprintf(buf, sizeof buf, "%d\n", static_cast<int>(pid));
  if (ftruncate(fd_.get(), 0) != 0) return Status::FromErrno(path_, errno);
  if (pwrite(fd_.get(), buf, static_cast<size_t>(n), 0) != n) return Status::FromErrno(path_, errno);
  return Status::OK();
}

void LockFile::Remove() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

}  // namespace frs::server
