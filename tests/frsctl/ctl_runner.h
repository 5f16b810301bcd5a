// tests/frsctl/ctl_runner.h: runs frsctl's command line as an operator's
// shell would (TZ=UTC, standard input from a file, its output to files) and
// captures its exit code and output, or kills the program part way. Shared by
// frsctl_test.cc, grow_test.cc and upgrade_test.cc.
//
// RunCtl runs the command line in this process (command_line.h), the same
// code frsctl's main runs: a sanitized program's start and exit cost 0.1-0.2
// CPU-s, ten times a command's own work, and these suites run hundreds. What
// only the program has (its signal handlers, an exit by signal, a second
// identity after setresuid) is RunCtlProgram's: the binary, through the shell.
// LeakSanitizer still checks the commands: what one leaks is found when the
// test program exits.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio_ext.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "command_line.h"
#include "common/files.h"
#include "frs/sigbus_guard.h"

extern char** environ;

namespace frs::ctl::ctl_test {

// The map of the frsctl tests: every algorithm, windows long enough that
// nothing moves during a test (login's, 600 s, is the shortest), with `api`
// as the third biz (token_bucket, each test's own attributes).
inline std::string SlowMap(const std::string& api) {
  return "<map>\n"
         "  <biz id=\"1\" name=\"login\"><rule interval=\"600\" max=\"5\"/></biz>\n"
         "  <biz id=\"2\" name=\"ad_user\">\n"
         "    <rule algo=\"calendar\" interval=\"86400\" max=\"3\"/>\n"
         "    <rule algo=\"sliding\" interval=\"3600\" max=\"1\"/>\n"
         "  </biz>\n" +
         api +
         "  <biz id=\"4\" name=\"partner\"><rule algo=\"fixed\" interval=\"3600\" max=\"1000\" borrow=\"300\"/></biz>\n"
         "</map>\n";
}

struct CtlRun {
  int rc = -1;
  std::string out, err;
};

// Single-quoted for the shell.
inline std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

using frs::testing::ReadFile;

// Runs `program` (FRSCTL_PATH or another: frsd) with `-c config` (none when
// empty) and `args` through the shell, `input` on its standard input; its
// output goes through files in `dir`.
inline CtlRun RunCtlProgram(const std::string& dir, const std::string& config, const std::vector<std::string>& args,
                            const std::string& input = "", const std::string& program = FRSCTL_PATH) {
  std::string cmd = "TZ=UTC " + Quote(program);
  if (!config.empty()) cmd += " -c " + Quote(config);
  for (const auto& a : args) cmd += " " + Quote(a);
  std::ofstream(dir + "/stdin") << input;
  cmd += " <" + Quote(dir + "/stdin") + " >" + Quote(dir + "/stdout") + " 2>" + Quote(dir + "/stderr");
  const int status = std::system(cmd.c_str());
  CtlRun r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFile(dir + "/stdout");
  r.err = ReadFile(dir + "/stderr");
  return r;
}

// Standard input, output and error of this process moved to files for one
// command line, and back (the C streams' buffers flushed or dropped at each
// move, so no byte crosses between a command and the test). A standard
// descriptor the test started without is closed again afterwards.
class StdioRedirect {
 public:
  StdioRedirect(const std::string& in, const std::string& out, const std::string& err) {
    std::fflush(stdout);
    std::fflush(stderr);
    for (int fd = 0; fd < 3; ++fd) saved_[fd] = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    const int fds[3] = {Above2(::open(in.c_str(), O_RDONLY | O_CLOEXEC)),
                        Above2(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)),
                        Above2(::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644))};
    for (int fd = 0; fd < 3; ++fd) {
      if (fds[fd] < 0 || ::dup2(fds[fd], fd) < 0) {
        if (error_.empty()) error_ = std::string("cannot move the standard streams to files: ") + std::strerror(errno);
      }
      if (fds[fd] >= 0) ::close(fds[fd]);
    }
    Fresh();
  }
  ~StdioRedirect() {
    std::fflush(stdout);
    std::fflush(stderr);
    for (int fd = 0; fd < 3; ++fd) {
      if (saved_[fd] < 0) {
        ::close(fd);
        continue;
      }
      ::dup2(saved_[fd], fd);
      ::close(saved_[fd]);
    }
    Fresh();
  }
  StdioRedirect(const StdioRedirect&) = delete;
  StdioRedirect& operator=(const StdioRedirect&) = delete;
  // Empty when the streams were moved; else why not.
  const std::string& error() const { return error_; }

 private:
  // A descriptor the open got below 3 (a standard one was closed) would be
  // closed by the dup2 loop after it took its place.
  static int Above2(int fd) {
    if (fd < 0 || fd > 2) return fd;
    const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    ::close(fd);
    return moved;
  }
  // stdin's read-ahead and end-of-file belong to the file it read; stdout's
  // error flag (export checks it) to the file it wrote.
  static void Fresh() {
    __fpurge(stdin);
    std::clearerr(stdin);
    std::clearerr(stdout);
    std::cin.clear();
    std::cout.clear();
  }
  int saved_[3] = {-1, -1, -1};
  std::string error_;
};

// TZ=UTC for one command line, and back. (setenv and tzset race with a
// thread that reads the time zone: the frsctl tests run none beside it.)
class UtcForOneRun {
 public:
  UtcForOneRun() : had_(std::getenv("TZ") != nullptr), saved_(had_ ? std::getenv("TZ") : "") {
    ::setenv("TZ", "UTC", 1);
    ::tzset();
  }
  ~UtcForOneRun() {
    had_ ? ::setenv("TZ", saved_.c_str(), 1) : ::unsetenv("TZ");
    ::tzset();
  }
  UtcForOneRun(const UtcForOneRun&) = delete;
  UtcForOneRun& operator=(const UtcForOneRun&) = delete;

 private:
  bool had_;
  std::string saved_;
};

// Runs frsctl's command line in this process with `-c config` (none when
// empty) and `args`, `input` on its standard input, TZ=UTC; another
// `program`, or a run with FRS_TEST_HANDOFF_CRASH set (its crash points
// _exit), runs through the shell (RunCtlProgram). A command that changed
// this process's identity (the store-owner switch of a root run on another
// user's store: command_line.h) ends the test program, since every later
// TEST would run as that user: such a test runs the program.
inline CtlRun RunCtl(const std::string& dir, const std::string& config, const std::vector<std::string>& args,
                     const std::string& input = "", const std::string& program = FRSCTL_PATH) {
  if (program != FRSCTL_PATH || std::getenv("FRS_TEST_HANDOFF_CRASH") != nullptr)
    return RunCtlProgram(dir, config, args, input, program);
  // What frsctl's main installs that a test may need: a store file cut
  // short is an error, not this process's death (a second call does nothing).
  frs::InstallSigbusGuard();
  std::vector<std::string> words{"frsctl"};
  if (!config.empty()) words.insert(words.end(), {"-c", config});
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::ofstream(dir + "/stdin") << input;
  const uid_t uid = ::geteuid();
  CtlRun r;
  std::string redirect_error;
  {
    UtcForOneRun utc;
    StdioRedirect io(dir + "/stdin", dir + "/stdout", dir + "/stderr");
    redirect_error = io.error();
    if (redirect_error.empty()) r.rc = frs::ctl::RunCommandLine(static_cast<int>(words.size()), argv.data());
  }
  if (::geteuid() != uid) {
    std::fprintf(stderr, "frsctl %s changed this test process's user (%u to %u): run it with RunCtlProgram\n",
                 args.empty() ? "" : args[0].c_str(), static_cast<unsigned>(uid), static_cast<unsigned>(::geteuid()));
    std::_Exit(1);
  }
  r.out = ReadFile(dir + "/stdout");
  r.err = redirect_error.empty() ? ReadFile(dir + "/stderr") : redirect_error;
  return r;
}

// Spawns FRSCTL_PATH with `-c config` and `args` (its output discarded) and
// SIGKILLs it after `delay`: an operation killed at some instant.
inline void RunCtlKilledAfter(const std::string& config, const std::vector<std::string>& args,
                              std::chrono::microseconds delay) {
  std::vector<std::string> words{FRSCTL_PATH, "-c", config};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, words[0].c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return;
  std::this_thread::sleep_for(delay);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace frs::ctl::ctl_test
