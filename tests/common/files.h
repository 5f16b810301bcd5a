// tests/common/files.h: a whole file read or written at once.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

namespace frs::testing {

// Its bytes; "" when it cannot be read, what was read before an error
// otherwise. With read(2), not a stream: libstdc++'s filebuf throws when a
// read fails, and reading /proc/PID/... of a process that just exited fails
// with ESRCH, which aborted a test that looked at a dying worker.
inline std::string ReadFile(const std::string& path) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// Replaces its contents with `text`.
inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace frs::testing
