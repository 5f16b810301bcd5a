#include "server/pidfile.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "os/output_file.h"

namespace frs::server {
namespace {

// Reads /proc/PID/`file` into `buf` (NUL-terminated, `size` - 1 bytes at
// most): the bytes read, or -1 when there is no such process.
ssize_t ReadProc(long pid, const char* file, char* buf, size_t size) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%ld/%s", pid, file);
  os::UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return -1;
  const ssize_t n = ::read(fd.get(), buf, size - 1);
  buf[n > 0 ? n : 0] = '\0';
  return n;
}

// Whether process `pid` here runs the program `name` (its /proc comm).
bool Runs(long pid, const char* name) {
  char comm[32];
  const ssize_t n = ReadProc(pid, "comm", comm, sizeof comm);
  const size_t len = std::strlen(name);
  return n == static_cast<ssize_t>(len + 1) && std::strncmp(comm, name, len) == 0 && comm[len] == '\n';
}

bool IsFrsd(long pid) { return Runs(pid, "frsd"); }

// Whether process `pid` here is on its way out: a zombie, or one with a
// SIGKILL pending (its exit under way: an frsd master after kill -9, whose
// workers closed the locks at their start). Its lock goes with its files:
// a start a few milliseconds after `kill -9` of a shard's processes found
// it still held and was refused (found from outside: 2 starts in 12). A
// pid of another PID namespace that names a dying process here costs the
// wait, then the same refusal.
bool Dying(long pid) {
  char buf[4096];
  if (ReadProc(pid, "status", buf, sizeof buf) <= 0) return false;
  if (const char* st = std::strstr(buf, "\nState:\t"); st != nullptr && (st[8] == 'Z' || st[8] == 'X')) return true;
  for (const char* field : {"\nSigPnd:\t", "\nShdPnd:\t"}) {
    const char* at = std::strstr(buf, field);
    if (at != nullptr && (std::strtoull(at + 9, nullptr, 16) >> (SIGKILL - 1) & 1) != 0) return true;
  }
  return false;
}

// Waits, at most 2 s, for the lock a dying holder (Dying) still has.
bool LockOnceTheHolderIsGone(int fd) {
  for (int i = 0; i < 200; ++i) {
    ::usleep(10000);
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
  }
  return false;
}

long PidIn(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  return n > 0 ? std::strtol(buf, nullptr, 10) : 0;
}

}  // namespace

Result<LockFile> LockFile::Acquire(const std::string& path, const std::string& what) {
  // A holder that stops removes its pid file under its lock (Remove): a
  // start that opened the file just before then locks a file no path names
  // any more, and a third start would lock the path's new one beside it.
  // So the lock is kept only while the path still names the file locked.
  for (int attempt = 0;; ++attempt) {
    bool replaced = false;
    Result<LockFile> got = AcquireOnce(path, what, &replaced);
    if (!replaced || attempt == 3) return got;
  }
}

Result<LockFile> LockFile::AcquireOnce(const std::string& path, const std::string& what, bool* replaced) {
  // O_NONBLOCK and fstat: a FIFO is refused, never waited on (a regular
  // file ignores the flag).
  // O_NOFOLLOW: the store directory (and often the pid file's) is the
  // service user's; a link planted there would have an frsd started as root
  // write its pid into whatever file the link names.
  os::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW, 0644));
  if (!fd.valid() && errno == ELOOP)
    return Status::InvalidArgument("the " + what + " lock " + path +
                                   " is a symbolic link: frsd does not follow one there (remove it)");
  if (!fd.valid()) return Status::FromErrno("cannot open the " + what + " lock " + path, errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("cannot open the " + what + " lock " + path, errno);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("the " + what + " " + os::NotRegularWords(path, st.st_mode));
  bool locked = flock(fd.get(), LOCK_EX | LOCK_NB) == 0;
  if (!locked && errno != EWOULDBLOCK) return Status::FromErrno("cannot lock " + path, errno);
  if (!locked && PidIn(fd.get()) > 0 && Dying(PidIn(fd.get()))) locked = LockOnceTheHolderIsGone(fd.get());
  // Gone between the lock's refusal and Dying's look: its lock went with it.
  if (!locked) locked = flock(fd.get(), LOCK_EX | LOCK_NB) == 0;
  if (!locked) {
    const long pid = PidIn(fd.get());
    // Named as a pid to kill only when that process is an frsd here. The
    // holder emptied the file when it took the lock, so a pid in it is the
    // holder's own, written in its PID namespace: one that is no frsd here
    // is an frsd of another container, or of another machine sharing the
    // directory, and killing that number here would hit something else.
    std::string who;
    if (pid > 0 && IsFrsd(pid)) who = "frsd (pid " + std::to_string(pid) + ")";
    else if (pid > 0 && what == "store" && Runs(pid, "frsctl"))
      // frsctl grow and upgrade hold the store's lock as frsd does, to the end.
      return Status::Busy("frsctl (pid " + std::to_string(pid) + ": a grow or an upgrade) holds the store " +
                          path.substr(0, path.rfind('/')) + ": start frsd once it has ended");
    else if (pid > 0)
      who = "another frsd (its lock names pid " + std::to_string(pid) +
            ", no frsd here: one in another PID namespace, a container's, or on another machine sharing the "
            "directory)";
    else who = "another frsd (its pid is not written yet)";
    // Named by what it guards (the store's directory, not its lock file).
    const size_t slash = path.rfind('/');
    const std::string guarded = what == "store" && slash != std::string::npos ? path.substr(0, slash) : path;
    return Status::Busy(who + " is already running with the " + what + " " + guarded);
  }
  struct stat now;
  if (::lstat(path.c_str(), &now) != 0 || now.st_ino != st.st_ino || now.st_dev != st.st_dev) {
    *replaced = true;  // removed (or replaced) since it was opened: again
    return Status::Busy("the " + what + " lock " + path + " was removed while it was taken");
  }
  // What an earlier holder wrote goes at once: until WritePid, a second
  // start reads no pid, not one of a process that is gone (or, reused,
  // another program's). Blanked in place, not truncated: a truncation gave
  // the file's block back, and on a disk that filled after a clean stop the
  // start's next file took it, so that the pid could not be written and the
  // start was refused.
  // Its size as the lock found it (`now`): an earlier holder may have
  // written its pid between the fstat above and the lock.
  if (now.st_size > 0) {
    const size_t n = static_cast<size_t>(std::min<off_t>(now.st_size, 64));
    std::string blank(n, ' ');
    blank.back() = '\n';
    if (::pwrite(fd.get(), blank.data(), n, 0) != static_cast<ssize_t>(n) ||
        (now.st_size > static_cast<off_t>(n) && ::ftruncate(fd.get(), static_cast<off_t>(n)) != 0))
      return Status::FromErrno("cannot clear the " + what + " lock " + path, errno);
  }
  return LockFile(std::move(fd), path);
}

Status LockFile::WritePid(pid_t pid, uint64_t pidns) {
  char buf[64];
  int n = pidns != 0 ? std::snprintf(buf, sizeof buf, "%d\npidns %llu\n", static_cast<int>(pid),
                                     static_cast<unsigned long long>(pidns))
                     : std::snprintf(buf, sizeof buf, "%d\n", static_cast<int>(pid));
  // Over what is there, then cut to its length: the file keeps its block.
  if (const ssize_t w = pwrite(fd_.get(), buf, static_cast<size_t>(n), 0); w != n)
    return w < 0 ? Status::FromErrno(path_, errno) : Status::IOError(path_ + ": a short write (a full disk?)");
  if (ftruncate(fd_.get(), n) != 0) return Status::FromErrno(path_, errno);
  return Status::OK();
}

void LockFile::Remove() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

}  // namespace frs::server
