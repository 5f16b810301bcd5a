// tests/e2e/frsd_harness.h: runs a real frsd for end-to-end tests.
//
// Each test gets a temp dir (testing::TempDir) with srv.xml, map.xml and the store,
// and an frsd started --foreground from FRSD_PATH on <listen port="0">: frsd
// binds a port the kernel chooses and writes it to data/frsd.listen, which
// port() reads. No port is ever picked here and handed on, so tests running
// side by side cannot take each other's. Processes are stopped by pid, never
// by name. A small blocking HTTP client speaks to it.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/example_conf.h"
#include "common/files.h"
#include "common/temp_dir.h"

namespace frs::e2e {

inline int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

using testing::ReadFile;
using testing::WriteFile;

// A candidate port for a program that cannot bind port 0 and report what it
// got (nginx, HAProxy, Caddy): it may be taken again before that program
// binds it, so whoever uses it retries on another when the program says the
// address is in use (ListensOn tells whether the program itself holds it).
// frsd never needs one: it listens on port 0.
inline uint16_t CandidatePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// True when process `pid` itself holds a socket listening on 127.0.0.1:port
// (from /proc/net/tcp and /proc/PID/fd): "the port accepts" alone would also
// be true of another test's process that holds the same port.
inline bool ListensOn(pid_t pid, uint16_t port) {
  char want[32];
  std::snprintf(want, sizeof want, "0100007F:%04X", port);
  std::vector<std::string> inodes;
  std::istringstream tcp(ReadFile("/proc/net/tcp"));
  std::string line;
  std::getline(tcp, line);  // the heading
  while (std::getline(tcp, line)) {
    std::istringstream cols(line);
    std::string sl, local, remote, state, skip, inode;
    cols >> sl >> local >> remote >> state;
    for (int i = 0; i < 5; ++i) cols >> skip;  // tx:rx tr:when retrnsmt uid timeout
    cols >> inode;
    if (local == want && state == "0A") inodes.push_back("socket:[" + inode + "]");
  }
  if (inodes.empty()) return false;
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(fds.c_str());
  if (!d) return false;
  bool found = false;
  while (dirent* e = readdir(d)) {
    char target[64];
    ssize_t n = readlink((fds + "/" + e->d_name).c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = 0;
    for (const std::string& i : inodes) found = found || i == target;
  }
  closedir(d);
  return found;
}

// A socket bound to a loopback port the kernel picks, held for as long as
// it lives (nobody else can take the port). Not listening, connections to
// the port are refused; listening, the kernel accepts them into its backlog
// and nobody answers: a server alive but stuck.
class LoopbackPort {
 public:
  explicit LoopbackPort(bool listening) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && (!listening || listen(fd_, 16) == 0) &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port_ = ntohs(a.sin_port);
  }
  ~LoopbackPort() { close(fd_); }
  LoopbackPort(const LoopbackPort&) = delete;
  LoopbackPort& operator=(const LoopbackPort&) = delete;
  uint16_t port() const { return port_; }  // 0: it could not bind (or listen)

 private:
  int fd_;
  uint16_t port_ = 0;
};

// Connections refused: a shard that is gone.
class RefusingPort : public LoopbackPort {
 public:
  RefusingPort() : LoopbackPort(false) {}
};

// Connections taken, never answered: a shard paused or stuck.
class SilentPort : public LoopbackPort {
 public:
  SilentPort() : LoopbackPort(true) {}
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  bool ok() const { return status != 0; }
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// A blocking HTTP/1.1 client on one connection (reads by Content-Length).
class Client {
 public:
  Client() = default;
  explicit Client(uint16_t port, int timeout_ms = 5000) { Connect(port, timeout_ms); }
  ~Client() { Close(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool Connect(uint16_t port, int timeout_ms = 5000) {
    Close();
    timeout_ms_ = timeout_ms;
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      Close();
      return false;
    }
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    buf_.clear();
    return true;
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  bool Send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads one response; status 0 on EOF, error or timeout.
  HttpResponse Read() {
    HttpResponse r;
    size_t hdr_end;
    while ((hdr_end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!Fill()) return r;
    std::string head = buf_.substr(0, hdr_end);
    std::istringstream hs(head);
    std::string line;
    std::getline(hs, line);
    if (line.rfind("HTTP/1.", 0) != 0 || line.size() < 12) return r;
    int status = std::atoi(line.c_str() + 9);
    while (std::getline(hs, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      size_t c = line.find(':');
      if (c == std::string::npos) continue;
      std::string name = line.substr(0, c);
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      std::string value = line.substr(c + 1);
      while (!value.empty() && value[0] == ' ') value.erase(0, 1);
      r.headers[name] = value;
    }
    size_t len = static_cast<size_t>(std::atoll(r.header("content-length").c_str()));
    while (buf_.size() < hdr_end + 4 + len)
      if (!Fill()) return HttpResponse{};
    r.body = buf_.substr(hdr_end + 4, len);
    buf_.erase(0, hdr_end + 4 + len);
    r.status = status;
    if (status == 100) return Read();
    return r;
  }

  HttpResponse Get(const std::string& target, const std::string& extra = "") {
    if (!Send("GET " + target + " HTTP/1.1\r\nHost: t\r\n" + extra + "\r\n")) return {};
    return Read();
  }
  HttpResponse Post(const std::string& body, const std::string& path = "/frs") {
    if (!Send(PostBytes(body, path))) return {};
    return Read();
  }
  static std::string PostBytes(const std::string& body, const std::string& path = "/frs") {
    return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
           body;
  }
  // True when the server closed the connection (EOF) within the timeout.
  bool WaitClosed() {
    while (Fill()) {
    }
    return eof_;
  }

 private:
  bool Fill() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms_) <= 0) return false;
    char tmp[65536];
    ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  int timeout_ms_ = 5000;
  bool eof_ = false;
  std::string buf_;
};

// <attr>="value" out of an XML answer ("" when absent).
inline std::string Attr(const std::string& xml, const std::string& name, size_t from = 0) {
  std::string pat = " " + name + "=\"";
  size_t p = xml.find(pat, from);
  if (p == std::string::npos) return "";
  p += pat.size();
  return xml.substr(p, xml.find('"', p) - p);
}

// The example map (conf/map.xml) and two bizzes of the end-to-end tests' own:
// one in shadow mode, one whose limit no test reaches.
inline std::string DefaultMap() {
  return testing::ExampleMapWith(
      "  <biz id=\"5\" name=\"shadowed\" mode=\"shadow\">\n    <rule interval=\"60\" max=\"1\"/>\n  </biz>\n"
      "  <biz id=\"6\" name=\"big\">\n    <rule interval=\"3600\" max=\"1000000\"/>\n  </biz>\n");
}

struct ServerOptions {
  uint32_t workers = 2;
  uint64_t nofile = 0;  // RLIMIT_NOFILE (soft and hard) for frsd; 0: inherited
  uint64_t fsize = 0;   // RLIMIT_FSIZE (soft and hard) for frsd, in bytes; 0: inherited
  std::string token = "s3cret";
  std::string extra;  // more srv.xml elements
  std::string map = DefaultMap();
};

// One test's frsd, its directory and its port.
class Frsd {
 public:
  explicit Frsd(ServerOptions opts = {}) : opts_(std::move(opts)), dir_(tmp_.path()) {
    WriteFile(dir_ + "/map.xml", opts_.map);
  }
  ~Frsd() {
    Kill();
    if (getenv("FRS_E2E_KEEP")) tmp_.Keep();
  }
  Frsd(const Frsd&) = delete;
  Frsd& operator=(const Frsd&) = delete;

  const std::string& dir() const { return dir_; }
  // The port frsd listens on: for <listen port="0"> (the default here), the
  // one it wrote to data/frsd.listen, waited for up to 5 s after a spawn
  // (0 when it never came: frsd failed, see log()).
  uint16_t port() {
    if (port_ == 0 && config_port_ == 0) port_ = ReadListenFile(5000);
    return port_;
  }
  pid_t pid() const { return pid_; }
  std::string config() const { return dir_ + "/srv.xml"; }
  std::string log() const { return ReadFile(dir_ + "/frsd.stderr"); }
  std::string listen_file() const { return dir_ + "/data/frsd.listen"; }

  // srv.xml with <listen port>: 0 (the kernel chooses; what tests use) or a
  // port frsd is already known to hold (a shard told its own address).
  void WriteConfig(uint16_t port = 0) {
    config_port_ = port;
    port_ = port;
    std::ostringstream x;
    x << "<frs>\n  <listen host=\"127.0.0.1\" port=\"" << port << "\"/>\n  <workers>" << opts_.workers
      << "</workers>\n  <map>map.xml</map>\n  <store dir=\"data\" files=\"2\" keynodes=\"4096\" chain=\"8\"/>\n"
      << "  <pidfile>frsd.pid</pidfile>\n  <admin token=\"" << opts_.token << "\"/>\n"
      << "  <flush interval_ms=\"200\"/>\n"
      << opts_.extra << "</frs>\n";
    WriteFile(config(), x.str());
  }

  // How long a start may take before a test calls it failed. A start under
  // ASan creates and syncs its store files: beside a parallel build on two
  // cores one took more than 5 s. A healthy start is seen at once, so only a
  // failure waits this long.
  static constexpr int kStartTimeoutMs = 20000;

  // Starts frsd --foreground and waits for /health.
  bool Start() {
    if (!std::filesystem::exists(config())) WriteConfig(0);
    return Spawn() > 0 && WaitHealthy(kStartTimeoutMs);
  }

  // The address in data/frsd.listen ("127.0.0.1:PORT"), waited for up to
  // timeout_ms while frsd runs; 0 when it does not come.
  uint16_t ReadListenFile(int timeout_ms) {
    int64_t end = NowMs() + timeout_ms;
    for (;;) {
      struct stat st {};
      const bool stale = ::stat(listen_file().c_str(), &st) == 0 && st.st_ino == stale_listen_ino_;
      std::string line = stale ? std::string() : ReadFile(listen_file());
      size_t colon = line.rfind(':');
      if (colon != std::string::npos && !line.empty() && line.back() == '\n')
        return static_cast<uint16_t>(std::atoi(line.c_str() + colon + 1));
      if (NowMs() >= end || Exited(0)) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // SIGHUP, then waits until every worker has logged the reload ("reloaded
  // ... (map generation N)"); false when it was refused or did not come.
  bool ReloadAndWait(int timeout_ms = 10000) {
    auto count = [this](const std::string& what) {
      const std::string text = log();
      size_t n = 0;
      for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
      return n;
    };
    const size_t done = count("(map generation"), refused = count("reload refused");
    kill(pid_, SIGHUP);
    int64_t end = NowMs() + timeout_ms;
    while (NowMs() < end) {
      if (count("reload refused") > refused) return false;
      if (count("(map generation") >= done + opts_.workers) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // Runs frsd with `args` (no wait for health); returns its pid.
  pid_t Spawn(std::vector<std::string> args = {}) {
    if (args.empty()) args = {"-c", config(), "--foreground"};
    // Its log is frsd.stderr when it runs in the foreground without a <log file>.
    foreground_ = std::find(args.begin(), args.end(), "--foreground") != args.end() &&
                  ReadFile(config()).find("<log ") == std::string::npos;
    log_offset_ = log().size();
    // Everything the child needs is built before fork: other test threads
    // may hold the allocator's lock at the moment of the fork.
    std::string err = dir_ + "/frsd.stderr";
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(FRSD_PATH));
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (config_port_ == 0) {
      // The last run's address is not this one's. A file a killed run left
      // stays (the new run's start says it finds one): this run's is told
      // from it by its inode, frsd writing its own by a rename.
      struct stat st {};
      stale_listen_ino_ = ::stat(listen_file().c_str(), &st) == 0 ? st.st_ino : 0;
      port_ = 0;
    }
    pid_t pid = fork();
    if (pid == 0) {
      if (opts_.nofile != 0) {
        rlimit rl{opts_.nofile, opts_.nofile};
        setrlimit(RLIMIT_NOFILE, &rl);
      }
      if (opts_.fsize != 0) {
        rlimit rl{opts_.fsize, opts_.fsize};
        setrlimit(RLIMIT_FSIZE, &rl);
      }
      int fd = open(err.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 2);
        dup2(fd, 1);
      }
      execv(FRSD_PATH, argv.data());
      _exit(127);
    }
    pid_ = pid;
    status_ = -1;
    return pid;
  }

  // /health answers, and (frsd --foreground, whose log is ours to read)
  // every worker serves: the first worker answers /health while the master
  // may still be forking the next, and a test that then counted the workers,
  // read their metrics or signalled them raced that fork (found by running
  // the end-to-end tests 20 times over).
  bool WaitHealthy(int timeout_ms) {
    int64_t end = NowMs() + timeout_ms;
    if (port_ == 0 && config_port_ == 0) port_ = ReadListenFile(timeout_ms);
    bool healthy = false;
    while (NowMs() < end) {
      if (Exited(0)) return false;
      if (!healthy) {
        Client c;
        healthy = port_ != 0 && c.Connect(port_, 1000) && c.Get("/health").status == 200;
      }
      if (healthy && (!foreground_ || ServingSinceSpawn() >= opts_.workers)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // Workers that logged "serving" since the last Spawn.
  size_t ServingSinceSpawn() const {
    const std::string text = log();
    size_t n = 0;
    for (size_t p = text.find("serving (listen socket", log_offset_); p != std::string::npos;
         p = text.find("serving (listen socket", p + 1))
      ++n;
    return n;
  }

  // True once the frsd process has exited (waits up to timeout_ms).
  bool Exited(int timeout_ms) {
    if (pid_ <= 0) return true;
    int64_t end = NowMs() + timeout_ms;
    for (;;) {
      int st = 0;
      pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        status_ = st;
        pid_ = 0;
        return true;
      }
      if (NowMs() >= end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  int exit_status() const { return status_; }

  // SIGTERM and wait; returns the exit code (-1 when it had to be killed).
  int Stop(int timeout_ms = 6000) {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    if (Exited(timeout_ms)) return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
    Kill();
    return -1;
  }
  void Kill() {
    if (pid_ <= 0) return;
    std::vector<pid_t> workers = Workers();
    kill(pid_, SIGKILL);
    for (pid_t w : workers) kill(w, SIGKILL);
    Exited(5000);
  }
  // kill -9 of every process (master first, then its workers).
  void KillAll() {
    std::vector<pid_t> workers = Workers();
    kill(pid_, SIGKILL);
    for (pid_t w : workers) kill(w, SIGKILL);
    Exited(5000);
    for (pid_t w : workers)
      for (int i = 0; i < 200 && kill(w, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // The master's children, from /proc.
  std::vector<pid_t> Workers() const {
    std::vector<pid_t> out;
    if (pid_ <= 0) return out;
    DIR* d = opendir("/proc");
    if (!d) return out;
    while (dirent* e = readdir(d)) {
      pid_t p = static_cast<pid_t>(std::atoi(e->d_name));
      if (p <= 0) continue;
      std::string stat = ReadFile("/proc/" + std::string(e->d_name) + "/stat");
      size_t rp = stat.rfind(')');
      if (rp == std::string::npos) continue;
      char state = 0;
      int ppid = 0;
      if (std::sscanf(stat.c_str() + rp + 1, " %c %d", &state, &ppid) == 2 && ppid == pid_ && state != 'Z')
        out.push_back(p);
    }
    closedir(d);
    return out;
  }

  std::string Acquire(Client& c, const std::string& biz, const std::string& key, int n = 1) {
    return c.Post("<request cmd=\"acquire\" biz=\"" + biz + "\" key=\"" + key + "\" n=\"" + std::to_string(n) + "\"/>")
        .body;
  }

 private:
  ServerOptions opts_;
  testing::TempDir tmp_{"frsd-e2e"};
  std::string dir_;
  uint16_t config_port_ = 0;    // what srv.xml says
  uint16_t port_ = 0;           // what frsd holds (0: not known yet)
  ino_t stale_listen_ino_ = 0;  // the listen file a killed run left, at the last Spawn
  bool foreground_ = false;     // the last Spawn logs to frsd.stderr (see Spawn)
  size_t log_offset_ = 0;       // frsd.stderr's size at the last Spawn
  pid_t pid_ = 0;
  int status_ = -1;
};

// Whether `cond` becomes true within `timeout_ms` (asked every 10 ms): for
// what no log line or answer announces.
inline bool WaitFor(const std::function<bool()>& cond, int timeout_ms) {
  const int64_t end = NowMs() + timeout_ms;
  while (!cond()) {
    if (NowMs() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// The value of the series `series` (name and labels as /metrics writes
// them); -1 when absent.
inline double Metric(Client& c, const std::string& series) {
  const std::string body = c.Get("/metrics").body;
  const size_t p = body.find("\n" + series + " ");
  return p == std::string::npos ? -1 : std::atof(body.c_str() + p + series.size() + 2);
}

// The value of frs_leases_held or frs_reservations_held `series` as the
// store was at `since_ms` (NowMs(); default: this call) or later: from a
// walk that began then or after (the master walks for the scrapes about
// once a second, and the answer says how old its figures are:
// frs_held_age_seconds; server/held_now.h). Both clocks are
// CLOCK_MONOTONIC. -1 when absent, -2 when no such walk came in 5 s.
inline double HeldMetric(Client& c, const std::string& series, int64_t since_ms = 0) {
  const int64_t asked = std::max(since_ms, NowMs());
  const int64_t end = asked + 5000;
  for (;;) {
    const int64_t sent = NowMs();
    const std::string body = c.Get("/metrics").body;
    const size_t a = body.find("\nfrs_held_age_seconds ");
    const size_t p = body.find("\n" + series + " ");
    if (a == std::string::npos || p == std::string::npos) return -1;
    const auto age_ms = static_cast<int64_t>(std::atof(body.c_str() + a + 22) * 1000 + 0.5);
    if (sent - age_ms - 1 >= asked) return std::atof(body.c_str() + p + series.size() + 2);
    if (NowMs() >= end) return -2;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// One frsd for every TEST of a suite (each on keys of its own), on the
// example map plus Suite::kBizzes; a test may restart it in place
// (server_->KillAll(), then Start()). c_ is connected to it before each TEST.
template <class Suite>
class SharedFrsdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions o;
    o.map = testing::ExampleMapWith(Suite::kBizzes);
    if constexpr (requires { Suite::kExtra; }) o.extra = Suite::kExtra;  // more srv.xml elements, if any
    server_ = std::make_unique<Frsd>(o);
    ASSERT_TRUE(server_->Start()) << server_->log();
  }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override { ASSERT_TRUE(c_.Connect(server_->port())); }

  std::string Req(const std::string& attrs) { return c_.Post("<request " + attrs + "/>").body; }
  std::string Count(const std::string& biz, const std::string& key) {
    return Attr(Req("cmd=\"query\" biz=\"" + biz + "\" key=\"" + key + "\""), "count");
  }

  inline static std::unique_ptr<Frsd> server_;
  Client c_;
};

}  // namespace frs::e2e
