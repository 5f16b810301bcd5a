#include "os/only_zeros.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace frs::os {

Result<bool> HoldsOnlyZeros(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno("fstat", errno);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("not a regular file");
  const off_t size = st.st_size;
  char buf[65536];
  off_t at = 0;
  while (at < size) {
    // The next written extent; ENXIO: none left, only a hole to the end. A
    // file system without SEEK_DATA (EINVAL) has every byte read.
    off_t data = ::lseek(fd, at, SEEK_DATA);
    if (data < 0 && errno == ENXIO) return true;
    if (data < 0 && errno != EINVAL) return Status::FromErrno("lseek(SEEK_DATA)", errno);
    if (data < 0) data = at;
    off_t hole = ::lseek(fd, data, SEEK_HOLE);
    if (hole < 0) hole = size;
    for (at = data; at < hole;) {
      const size_t want = static_cast<size_t>(std::min<off_t>(hole - at, static_cast<off_t>(sizeof buf)));
      const ssize_t n = ::pread(fd, buf, want, at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno("pread", errno);
      if (n == 0) return true;  // cut shorter since the fstat
      if (std::any_of(buf, buf + n, [](char c) { return c != 0; })) return false;
      at += n;
    }
  }
  return true;
}

}  // namespace frs::os
