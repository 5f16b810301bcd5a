// frsctl/store_users.cc: finding the processes that use a store (see
// store_users.h): pid files, /proc/PID/{exe,comm,cmdline,maps}, /proc/locks.
#include "store_users.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "frs/store_dir.h"

namespace frs::ctl {
namespace {

// A /proc file's or a pid file's text; empty when it cannot be read (the
// process is gone) or is not a regular file (a FIFO would block the read).
std::string ReadSmall(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::string();
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return in ? text.str() : std::string();
}

std::string Comm(pid_t pid) {
  std::string c = ReadSmall("/proc/" + std::to_string(pid) + "/comm");
  while (!c.empty() && (c.back() == '\n' || c.back() == '\0')) c.pop_back();
  return c.empty() ? "?" : c;
}

// The last path component, without the " (deleted)" the kernel appends to
// the exe of a binary replaced by an upgrade.
std::string BaseName(std::string p) {
  constexpr std::string_view kDeleted = " (deleted)";
  if (p.size() > kDeleted.size() && p.compare(p.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0)
    p.resize(p.size() - kDeleted.size());
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// Its state in /proc/PID/stat is Z (or X): dead, only not reaped yet.
bool Zombie(pid_t pid) {
  const std::string stat = ReadSmall("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');  // the command may hold ') '
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  return stat[paren + 2] == 'Z' || stat[paren + 2] == 'X';
}

bool IsFrsd(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  char buf[PATH_MAX];
  ssize_t n = ::readlink((proc + "/exe").c_str(), buf, sizeof buf - 1);
  if (n > 0 && BaseName(std::string(buf, static_cast<size_t>(n))) == "frsd") return true;
  if (Comm(pid) == "frsd") return true;
  std::string cmdline = ReadSmall(proc + "/cmdline");
  std::string argv0 = cmdline.substr(0, cmdline.find('\0'));
  return !argv0.empty() && BaseName(argv0) == "frsd";
}

// A file's identity as /proc/PID/maps and /proc/locks print it.
struct FileId {
  unsigned major = 0, minor = 0;
  unsigned long inode = 0;
  std::string path;  // canonical
};

std::vector<FileId> IdsOf(const std::vector<std::string>& paths) {
  std::vector<FileId> out;
  for (const std::string& p : paths) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) continue;
    FileId id;
    id.major = ::major(st.st_dev);
    id.minor = ::minor(st.st_dev);
    id.inode = st.st_ino;
    char real[PATH_MAX];
    id.path = ::realpath(p.c_str(), real) ? real : p;
    out.push_back(id);
  }
  return out;
}

}  // namespace

pid_t LiveFrsdFromPidFile(const std::string& pidfile) {
  if (pidfile.empty()) return 0;
  std::string text = ReadSmall(pidfile);
  char* end = nullptr;
  long pid = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || pid <= 0 || pid > INT_MAX || pid == ::getpid()) return 0;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return 0;
  // A zombie (killed, its parent not yet reaped it: an init that reaps
  // slowly after a kill -9) answers kill(0) but holds nothing.
  if (Zombie(static_cast<pid_t>(pid))) return 0;
  return IsFrsd(static_cast<pid_t>(pid)) ? static_cast<pid_t>(pid) : 0;
}

std::vector<StoreUser> ProcessesMapping(const std::vector<std::string>& paths) {
  std::vector<StoreUser> users;
  const std::vector<FileId> ids = IdsOf(paths);
  if (ids.empty()) return users;
  // Closed on every way out of the walk (tools/ see only include/frs/, which
  // has no owned directory stream).
  const std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
  if (proc == nullptr) return users;
  const pid_t self = ::getpid();
  while (const dirent* e = ::readdir(proc.get())) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*e->d_name == '\0' || *end != '\0' || pid <= 0 || pid == self) continue;
    // Threads share the maps of their process: /proc lists processes only.
    std::ifstream maps("/proc/" + std::string(e->d_name) + "/maps");
    if (!maps) continue;  // gone, or another user's process (not root): flock catches those
    std::set<std::string> seen;
    for (std::string line; std::getline(maps, line);) {
      // address perms offset major:minor inode   path
      unsigned maj = 0, min = 0;
      unsigned long ino = 0;
      int consumed = 0;
      if (std::sscanf(line.c_str(), "%*s %*s %*s %x:%x %lu %n", &maj, &min, &ino, &consumed) < 3 || ino == 0) continue;
      std::string path = consumed > 0 ? line.substr(static_cast<size_t>(consumed)) : "";
      constexpr std::string_view kDeleted = " (deleted)";
      if (path.size() > kDeleted.size() && path.ends_with(kDeleted)) path.resize(path.size() - kDeleted.size());
      for (const FileId& id : ids) {
        // Device and inode; the path too, for file systems (overlayfs) whose
        // maps show the inode of a lower layer.
        bool same = (ino == id.inode && maj == id.major && min == id.minor) || (!path.empty() && path == id.path);
        if (same && seen.insert(id.path).second) {
          users.push_back(StoreUser{static_cast<pid_t>(pid), Comm(static_cast<pid_t>(pid)), id.path});
        }
      }
    }
  }
  std::sort(users.begin(), users.end(), [](const StoreUser& a, const StoreUser& b) { return a.pid < b.pid; });
  return users;
}

std::string DescribeUsers(const std::vector<StoreUser>& users) {
  std::string out;
  std::set<pid_t> done;
  for (const StoreUser& u : users) {
    if (!done.insert(u.pid).second) continue;
    out += (out.empty() ? "" : ", ") + ("pid " + std::to_string(u.pid) + " (" + u.name + ")");
  }
  return out;
}

namespace {
std::string DescribeHolders(const std::string& path) {
  std::vector<StoreUser> users;
  for (pid_t pid : FlockHolders(path)) users.push_back(StoreUser{pid, Comm(pid), path});
  return users.empty() ? "another process" : DescribeUsers(users);
}
}  // namespace

Result<ExclusiveLocks> ExclusiveLocks::Take(const std::vector<std::string>& paths) {
  ExclusiveLocks out;
  for (const std::string& p : paths) {
    UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return Status::FromErrno(p, errno);
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) return Status::FromErrno("cannot lock " + p, errno);
      return Status::Busy(DescribeHolders(p) + " has " + p +
                          " open (every process using the store holds it): stop it first");
    }
    out.fds_.push_back(std::move(fd));
  }
  return out;
}

Result<UniqueFd> TakeFrsdStoreLock(const std::string& dir) {
  const std::string path = store_dir::In(dir, store_dir::kStoreLock);
  // O_NOFOLLOW: the store directory is the service user's, and frsctl runs
  // as root (grow, upgrade from the package's postinst): a link planted
  // there would have root create, and hand to that user, any file it names.
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid() && errno == ENOENT) {
    fd.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    struct stat d;
    // Owned like the directory: frsd (its own user) opens it read-write.
    if (fd.valid() && ::stat(dir.c_str(), &d) == 0 && ::fchown(fd.get(), d.st_uid, d.st_gid) != 0 && errno != EPERM)
      return Status::FromErrno("cannot give " + path + " the owner of " + dir, errno);
  }
  if (!fd.valid() && errno == ELOOP)
    return Status::InvalidArgument("the store lock " + path +
                                   " is a symbolic link: frsctl does not follow one in a store directory (remove it)");
  if (!fd.valid()) return Status::FromErrno("cannot open the store lock " + path, errno);
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return Status::FromErrno("cannot lock " + path, errno);
    std::string who = DescribeHolders(path);
    if (who == "another process") {
      char buf[32] = {};
      ssize_t n = ::pread(fd.get(), buf, sizeof buf - 1, 0);
      long pid = n > 0 ? std::strtol(buf, nullptr, 10) : 0;
      if (pid > 0) who = "frsd (pid " + std::to_string(pid) + ")";
    }
    return Status::Busy(who + " holds the store lock " + path +
                        ": frsd is running on this store (or another grow is); stop it first");
  }
  // Its holder's pid, as frsd writes its own: an frsd started meanwhile names
  // this frsctl, not the pid an earlier frsd left in the file.
  // Written over what is there, then cut to its length: the file keeps its
  // block (truncated to 0, it gave it back, and on a full disk frsd's next
  // start could not write its pid there).
  const std::string pid = std::to_string(::getpid()) + "\n";
  const ssize_t wrote = ::pwrite(fd.get(), pid.data(), pid.size(), 0);
  if (wrote != static_cast<ssize_t>(pid.size()))
    return wrote < 0 ? Status::FromErrno("cannot write the store lock " + path, errno)
                     : Status::IOError("cannot write the store lock " + path + ": a short write (a full disk?)");
  if (::ftruncate(fd.get(), static_cast<off_t>(pid.size())) != 0)
    return Status::FromErrno("cannot write the store lock " + path, errno);
  return fd;
}

}  // namespace frs::ctl
