// tests/common/nginx_runner.h: runs Debian's nginx for a test.
//
// The test supplies the `http { ... }` body; the runner writes a config that
// keeps every path (pid, logs, temp files) inside the test's temp dir, runs
// nginx in the foreground without a master (one process), waits until that
// process itself listens on every port it was given, and stops it by its pid.
// Never by name. nginx cannot bind port 0 and say what it got, so its ports
// are candidates: StartOnCandidatePorts tries again on new ones when nginx
// says an address is in use (another test took one first).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

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
  Nginx(const std::string& dir, const std::string& http_body) : dir_(dir) { Configure(http_body); }
  ~Nginx() { Stop(); }
  Nginx(const Nginx&) = delete;
  Nginx& operator=(const Nginx&) = delete;

  void Configure(const std::string& http_body) {
    std::filesystem::create_directories(dir_ + "/tmp");
    std::ofstream f(dir_ + "/nginx.conf", std::ios::trunc);
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

  // Starts nginx and waits until it listens on every one of `ports`; false
  // (with the error log readable through log()) when it does not.
  bool Start(const std::vector<uint16_t>& ports, int timeout_ms = 5000) {
    const std::string bin = NginxBinary();
    if (bin.empty()) return false;
    Stop();
    std::error_code ec;
    std::filesystem::remove(dir_ + "/error.log", ec);  // this attempt's errors only
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
      bool all = true;
      for (uint16_t p : ports) all = all && e2e::ListensOn(pid_, p);
      if (all) return true;
      // nginx retries a bind for 2.5 s before it gives up: no need to wait.
      if (AddressInUse()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Stop();
    return false;
  }
  bool Start(uint16_t port, int timeout_ms = 5000) { return Start(std::vector<uint16_t>{port}, timeout_ms); }

  // True when the last start failed because a port was taken.
  bool AddressInUse() const { return log().find("Address already in use") != std::string::npos; }

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

// Starts `nginx` listening on `count` candidate ports, its http body written
// by `body(ports)`; on "address in use" it tries again on new candidates (at
// most 5 times). The ports it listens on, or an empty vector.
inline std::vector<uint16_t> StartOnCandidatePorts(
    Nginx& nginx, size_t count, const std::function<std::string(const std::vector<uint16_t>&)>& body) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::set<uint16_t> distinct;
    while (distinct.size() < count) distinct.insert(e2e::CandidatePort());
    std::vector<uint16_t> ports(distinct.begin(), distinct.end());
    nginx.Configure(body(ports));
    if (nginx.Start(ports)) return ports;
    if (!nginx.AddressInUse()) return {};
  }
  return {};
}

}  // namespace frs::testing
