#include "server/logger.h"

#include <fcntl.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "os/output_file.h"

namespace frs::server {

Logger& Logger::Get() {
  static Logger logger;
  return logger;
}

Status Logger::Configure(const std::string& path, const std::string& role) {
  const std::string old = path_;
  path_ = path;
  role_ = role;
  // Not opened, it is not where lines go: path() says so (a refused start
  // wrote its reason twice on stderr, taking stderr for the log file).
  Status s = Reopen();
  if (!s.ok()) path_ = old;
  return s;
}

void Logger::SetRole(const std::string& role) { role_ = role; }

Status Logger::UseFile(const std::string& configured) {
  const std::string& target = configured.empty() ? default_path_ : configured;
  if (target == path_) return Status::OK();
  const std::string old = path_;
  path_ = target;
  Status s = Reopen();
  if (!s.ok()) path_ = old;
  return s;
}

Status Logger::Reopen() {
  if (path_.empty()) {
    fd_.store(2, std::memory_order_release);
    return Status::OK();
  }
  // Never waits on the path (a FIFO no one reads): see os/output_file.h.
  Result<os::UniqueFd> fd = os::OpenForAppend(path_, "log file");
  if (!fd.ok()) return fd.status();
  // Another thread (a decision log's writer) may be writing to the current
  // descriptor: the new file goes in under the same number (dup3 swaps it
  // atomically), so no write ever lands on a number closed and reused.
  const int old = fd_.load(std::memory_order_acquire);
  if (old > 2 && ::dup3(fd->get(), old, O_CLOEXEC) >= 0) return Status::OK();  // `fd` closes its own number
  fd_.store(fd->release(), std::memory_order_release);
  return Status::OK();
}

void Logger::Log(const char* fmt, ...) {
  char line[2048];
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  int n = std::snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ frsd[%d] %s: ", tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                        static_cast<int>(tv.tv_usec / 1000), static_cast<int>(getpid()), role_.c_str());
  if (n < 0) return;
  size_t len = static_cast<size_t>(n) < sizeof line ? static_cast<size_t>(n) : sizeof line - 1;
  va_list ap;
  va_start(ap, fmt);
  int m = std::vsnprintf(line + len, sizeof line - len, fmt, ap);
  va_end(ap);
  if (m > 0) len += static_cast<size_t>(m) < sizeof line - len ? static_cast<size_t>(m) : sizeof line - len - 1;
  // Keep one event on one line even when a message carries a newline.
  for (size_t i = 0; i < len; ++i)
    if (line[i] == '\n') line[i] = ' ';
  if (len >= sizeof line - 1) len = sizeof line - 2;
  line[len++] = '\n';
  // After a line cut short (a full disk): a newline ends it, and a line says
  // how many went unwritten, so that no two events share a line and none
  // goes missing unsaid. All of it one write, as every line is.
  char out[sizeof line + 192];
  size_t o = 0;
  const bool torn = torn_.exchange(false, std::memory_order_acq_rel);
  const uint64_t lost = lost_.exchange(0, std::memory_order_acq_rel);
  if (torn) out[o++] = '\n';
  if (lost > 0) {
    const int k = std::snprintf(out + o, sizeof out - o - len,
                                "%.*s%llu log line(s) before this one could not be written whole (a full disk?)\n", n,
                                line, static_cast<unsigned long long>(lost));
    if (k > 0) o += std::min<size_t>(static_cast<size_t>(k), sizeof out - o - len - 1);
  }
  std::memcpy(out + o, line, len);
  o += len;
  ssize_t w;
  do {
    w = ::write(fd_.load(std::memory_order_acquire), out, o);
  } while (w < 0 && errno == EINTR);
  if (w == static_cast<ssize_t>(o)) return;
  // Not written whole: this line is lost, with those the note would have
  // told of; a part written leaves a line open.
  lost_.fetch_add(lost + 1, std::memory_order_acq_rel);
  if (w > 0 || torn) torn_.store(true, std::memory_order_release);
}

}  // namespace frs::server
