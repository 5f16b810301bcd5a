// frs/unique_fd.h: a move-only owned file descriptor.
//
// The descriptors FRS opens are held by these, so that no return path (an
// error value, an early exit of a loop) leaks one: the store's lock file, a
// spool, a socket. (A few classes that own one descriptor for their whole
// life, such as the HTTP client's socket and the inotify watch, close it
// in their own destructors.) Closing is the destructor's; release() hands the
// descriptor to a caller that takes its ownership.
//
// Thread safety: a value used by one thread at a time.
#pragma once

#include <unistd.h>

#include <utility>

namespace frs {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace frs
