// tests/common/nginx_runner.h: runs Debian's nginx for a test.
//
// The test supplies the `http { ... }` body; the runner writes a config that
// keeps every path (pid, logs, temp files) inside the test's temp dir, runs
// nginx in the foreground without a master (one process), waits until it
// answers on `port`, and stops it by its pid. Never by name.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "e2e/frsd_harness.h"

namespace frs::testing {

inline std::string NginxBinary() {
  for (const char* p : {"/usr/sbin/nginx", "/usr/bin/nginx"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

class Nginx {
 public:
  // `dir`: a private temp dir; `http_body`: what goes inside `http { }`.
  Nginx(const std::string& dir, const std::string& http_body) : dir_(dir) {
    std::filesystem::create_directories(dir_ + "/tmp");
    std::ofstream f(dir_ + "/nginx.conf");
    if (::geteuid() == 0) f << "user root;\n";
    f << "daemon off;\nmaster_process off;\nworker_processes 1;\n"
      << "pid " << dir_ << "/nginx.pid;\nerror_log " << dir_ << "/error.log warn;\n"
      << "events { worker_connections 1024; }\n"
      << "http {\n  access_log off;\n"
      << "  client_body_temp_path " << dir_ << "/tmp/body;\n  proxy_temp_path " << dir_ << "/tmp/proxy;\n"
      << "  fastcgi_temp_path " << dir_ << "/tmp/fcgi;\n  uwsgi_temp_path " << dir_ << "/tmp/uwsgi;\n"
      << "  scgi_temp_path " << dir_ << "/tmp/scgi;\n"
      << http_body << "\n}\n";
  }
  ~Nginx() { Stop(); }
  Nginx(const Nginx&) = delete;
  Nginx& operator=(const Nginx&) = delete;

  // Starts nginx and waits until `port` accepts; false (with the error log
  // readable through log()) when it does not.
  bool Start(uint16_t port, int timeout_ms = 5000) {
    const std::string bin = NginxBinary();
    if (bin.empty()) return false;
    pid_ = ::fork();
    if (pid_ == 0) {
      std::string conf = dir_ + "/nginx.conf";
      ::execl(bin.c_str(), bin.c_str(), "-p", dir_.c_str(), "-c", conf.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      int st;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      e2e::Client c;
      if (c.Connect(port, 200)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGQUIT);
    for (int i = 0; i < 300; ++i) {
      int st;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  std::string log() const { return e2e::ReadFile(dir_ + "/error.log"); }

 private:
  std::string dir_;
  pid_t pid_ = -1;
};

}  // namespace frs::testing
