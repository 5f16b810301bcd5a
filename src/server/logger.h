// server/logger.h: one line per event, to stderr or to the log file.
//
// Each line is "2026-11-22T01:54:13.123Z frsd[PID] ROLE: text" and is written
// with a single write(2) on an O_APPEND descriptor, so lines of the master
// and of every worker interleave whole. Reopen() (SIGUSR1) reopens the file
// after a log rotation. On a full disk a line may be cut or lost: the next
// line written starts on a line of its own, after one that says how many
// this process could not write.
//
// Thread safety: a process-wide object; Log() may be called from any thread,
// Configure()/Reopen() only from the main thread.
#pragma once

#include <atomic>
#include <string>

#include "frs/status.h"

namespace frs::server {

class Logger {
 public:
  static Logger& Get();

  // `path` "" logs to stderr. `role` is "master" or "worker 3".
  Status Configure(const std::string& path, const std::string& role);
  void SetRole(const std::string& role);
  Status Reopen();
  // Where lines go when srv.xml names no <log file> ("" = stderr; a daemon
  // logs next to its store).
  void SetDefaultPath(const std::string& path) { default_path_ = path; }
  // A reload changed <log file> (`configured`, "" = the default): switches
  // to it, or keeps the current file when the new one cannot be opened.
  Status UseFile(const std::string& configured);
  const std::string& path() const { return path_; }
  // Where a start without <log file> logs, for an operator to read:
  // "\"PATH\"", or "standard error".
  std::string DefaultTarget() const {
    return default_path_.empty() ? std::string("standard error") : "\"" + default_path_ + "\"";
  }
  void Log(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

 private:
  Logger() = default;
  std::string path_;
  std::string default_path_;
  std::string role_ = "frsd";
  std::atomic<int> fd_{2};  // read by any thread that logs; see Reopen
  // A write cut short (a full disk) left part of a line: the next one
  // starts with a newline. Lines not written whole since are counted and
  // said by the next line that is.
  std::atomic<bool> torn_{false};
  std::atomic<uint64_t> lost_{0};
};

#define FRS_LOG(...) ::frs::server::Logger::Get().Log(__VA_ARGS__)

}  // namespace frs::server
