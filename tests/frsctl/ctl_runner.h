// tests/frsctl/ctl_runner.h: runs the frsctl binary the way an operator does
// (a shell command, TZ=UTC, standard input from a file) and captures its exit
// code and output. Shared by frsctl_test.cc and grow_test.cc.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace frs::ctl::ctl_test {

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

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs FRSCTL_PATH with `-c config` (none when empty) and `args`, `input` on
// its standard input; its output goes through files in `dir`.
inline CtlRun RunCtl(const std::string& dir, const std::string& config, const std::vector<std::string>& args,
                     const std::string& input = "") {
  std::string cmd = "TZ=UTC " + Quote(FRSCTL_PATH);
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

}  // namespace frs::ctl::ctl_test
