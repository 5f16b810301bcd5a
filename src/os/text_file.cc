#include "os/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "os/output_file.h"
#include "os/path_access.h"
#include "os/unique_fd.h"

namespace frs::os {

Result<std::string> ReadTextFile(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK: a FIFO opens at once instead of waiting for a writer, and
  // is then refused (a read of it would wait as long).
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) {
    if (errno == ENOENT) return Status::NotFound(path + ": no such file");
    // Whose file it is and as whom this runs: the fix is the user or the
    // mode, which a bare "Permission denied" leaves to guess.
    if (errno == EACCES || errno == EPERM) return Status::IOError(PermissionWords(path));
    return Status::FromErrno(path, errno);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(path + ":0", errno);
  // The path once, at "line 0" (the whole file), as a parse error names it.
  if (!S_ISREG(st.st_mode)) return Status::IOError(path + ":0: " + NotRegularWords("this", st.st_mode));
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t got = ::read(fd.get(), buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(path + ":0", errno);
    }
    if (got == 0) return text;
    text.append(buf, static_cast<size_t>(got));
    if (text.size() > max_bytes)
      return Status::InvalidArgument(path + ":0: larger than " + std::to_string(max_bytes >> 20) + " MiB");
  }
}

LineIndex::LineIndex(std::string path, std::string_view text) : path_(std::move(path)) {
  starts_.push_back(0);
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') starts_.push_back(i + 1);
  }
}

size_t LineIndex::LineOf(ptrdiff_t offset) const {
  if (offset < 0) return 0;
  auto it = std::upper_bound(starts_.begin(), starts_.end(), static_cast<size_t>(offset));
  return static_cast<size_t>(it - starts_.begin());
}

std::string LineIndex::At(ptrdiff_t offset, std::string_view msg) const {
  return path_ + ":" + std::to_string(LineOf(offset)) + ": " + std::string(msg);
}

}  // namespace frs::os
