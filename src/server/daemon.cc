#include "server/daemon.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace frs::server {

namespace {

// Points descriptors `first`..`last` at /dev/null.
void ToDevNull(int first, int last) {
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0) return;
  for (int fd = first; fd <= last; ++fd) dup2(null, fd);
  if (null > 2) ::close(null);
}

// Sends the launcher its verdict ('R' ready, 'F' failed) and closes the pipe.
void Tell(int* notify_fd, char verdict) {
  [[maybe_unused]] ssize_t w = ::write(*notify_fd, &verdict, 1);
  ::close(*notify_fd);
  *notify_fd = -1;
}

}  // namespace

Status Daemon::Daemonize() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  pid_t pid = fork();
  if (pid < 0) return Status::FromErrno("fork", errno);
  if (pid > 0) {
    // The original process: wait for the daemon's verdict.
    ::close(fds[1]);
    char c = 0;
    ssize_t n;
    do {
      n = ::read(fds[0], &c, 1);
    } while (n < 0 && errno == EINTR);
    int st = 0;
    waitpid(pid, &st, 0);  // the intermediate child exits at once
    _exit(n == 1 && c == 'R' ? 0 : 1);
  }
  ::close(fds[0]);
  if (setsid() < 0) return Status::FromErrno("setsid", errno);
  pid = fork();
  if (pid < 0) return Status::FromErrno("fork", errno);
  if (pid > 0) _exit(0);
  notify_fd_ = fds[1];
  daemonized_ = true;
  umask(027);
  if (chdir("/") != 0) return Status::FromErrno("chdir /", errno);
  ToDevNull(0, 1);
  return Status::OK();
}

void Daemon::Ready() {
  if (notify_fd_ < 0) return;
  Tell(&notify_fd_, 'R');
  ToDevNull(2, 2);
}

void Daemon::Failed() {
  if (notify_fd_ < 0) return;
  Tell(&notify_fd_, 'F');
}

void Daemon::CloseInChild() {
  if (notify_fd_ >= 0) ::close(notify_fd_);
  notify_fd_ = -1;
  // A worker of a daemon must not keep the launcher's stderr either: a
  // caller reading it (out=$(frsd ... 2>&1)) waits for every holder to close
  // it. Workers log to the log file; their stderr is /dev/null.
  if (daemonized_) ToDevNull(2, 2);
}

}  // namespace frs::server
