// tests/frsctl/ctl_runner.h: runs the frsctl binary the way an operator does
// (a shell command, TZ=UTC, standard input from a file) and captures its exit
// code and output, or kills it part way. Shared by frsctl_test.cc,
// grow_test.cc and upgrade_test.cc.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/files.h"

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

// Runs FRSCTL_PATH (or `program`) with `-c config` (none when empty) and
// `args`, `input` on its standard input; its output goes through files in `dir`.
inline CtlRun RunCtl(const std::string& dir, const std::string& config, const std::vector<std::string>& args,
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
