#include "os/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace frs::os {

namespace {

bool TakesOutput(mode_t mode) { return S_ISREG(mode) || S_ISCHR(mode); }

// Whether a process running as root must not follow a link at `path`: its
// directory is one another user may write (a service user's log or store
// directory), where that user could have planted the link to have root
// write frsd's lines (keys sent by any client among them) into any file.
// A link in a directory only root writes (/dev/stdout) is root's own.
bool LinkNotToFollow(const std::string& path) {
  if (::geteuid() != 0) return false;
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  struct stat d;
  if (::stat(dir.c_str(), &d) != 0) return true;
  return d.st_uid != 0 || (d.st_mode & (S_IWGRP | S_IWOTH)) != 0;
}

}  // namespace

const char* FileKindName(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a file";
}

std::string NotRegularWords(const std::string& path, mode_t mode) {
  return path + " is " + FileKindName(mode) + ", not a regular file";
}

Status CheckOutputPath(const std::string& path, std::string_view what) {
  // What the open would say, said without opening: `frsd -t` creates nothing,
  // yet must not pass a path that the start and a reload refuse.
  auto cannot = [&](int err) { return Status::FromErrno("cannot open the " + std::string(what) + " " + path, err); };
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (!TakesOutput(st.st_mode))
      return Status::InvalidArgument("the " + std::string(what) + " " + NotRegularWords(path, st.st_mode));
    return ::access(path.c_str(), W_OK) == 0 ? Status::OK() : cannot(errno);
  }
  if (errno != ENOENT) return cannot(errno);
  // Absent: the open creates it in its directory, which must be one we may write.
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0) return cannot(errno);
  if (!S_ISDIR(st.st_mode)) return cannot(ENOTDIR);
  return ::access(dir.c_str(), W_OK | X_OK) == 0 ? Status::OK() : cannot(errno);
}

Result<UniqueFd> OpenForAppend(const std::string& path, std::string_view what) {
  const bool no_link = LinkNotToFollow(path);
  UniqueFd fd(::open(path.c_str(),
                     O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (no_link ? O_NOFOLLOW : 0),
                     0640));
  if (!fd.valid()) {
    const int err = errno;
    if (no_link && err == ELOOP)
      return Status::InvalidArgument("the " + std::string(what) + " " + path +
                                     " is a symbolic link in a directory another user than root may write: "
                                     "running as root, frsd does not write through it (name the file it points to, "
                                     "or run frsd as that directory's owner)");
    struct stat st;
    // ENXIO: a FIFO no one reads (or a socket); said as what it is.
    if (::stat(path.c_str(), &st) == 0 && !TakesOutput(st.st_mode))
      return Status::InvalidArgument("the " + std::string(what) + " " + NotRegularWords(path, st.st_mode));
    return Status::FromErrno("cannot open the " + std::string(what) + " " + path, err);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("cannot open the " + std::string(what) + " " + path, errno);
  if (!TakesOutput(st.st_mode))
    return Status::InvalidArgument("the " + std::string(what) + " " + NotRegularWords(path, st.st_mode));
  const int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl < 0 || ::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK) != 0)
    return Status::FromErrno("cannot open the " + std::string(what) + " " + path, errno);
  return fd;
}

}  // namespace frs::os
