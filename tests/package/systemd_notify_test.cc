// frsd speaks systemd's readiness protocol when started with NOTIFY_SOCKET
// (Type=notify in frsd.service): READY=1 once it serves, RELOADING=1 then
// READY=1 around a SIGHUP, STOPPING=1 when it stops, and nothing reaches
// the socket from the workers; WATCHDOG=1 under WatchdogSec=.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <string>
#include <vector>

#include "e2e/frsd_harness.h"

namespace frs {
namespace {

class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path.c_str());
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    // SCM_CREDENTIALS tells which process sent each datagram.
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
  }
  ~NotifySocket() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool bound() const { return bound_; }
  // The next datagram within `ms`, with its sender's pid; "" on time-out.
  std::string Next(int ms, pid_t* sender) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return "";
    char buf[4096];
    char control[CMSG_SPACE(sizeof(ucred))];
    iovec iov{buf, sizeof buf};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(fd_, &m, 0);
    if (n < 0) return "";
    *sender = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        ucred cred;
        std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
        *sender = cred.pid;
      }
    return std::string(buf, static_cast<size_t>(n));
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(SystemdNotify, ReadyReloadingStoppingFromTheMasterOnly) {
  e2e::Frsd srv;
  NotifySocket sock(srv.dir() + "/notify.sock");
  ASSERT_TRUE(sock.bound());
  ::setenv("NOTIFY_SOCKET", (srv.dir() + "/notify.sock").c_str(), 1);
  srv.WriteConfig();
  srv.Spawn();
  ::unsetenv("NOTIFY_SOCKET");

  // Read READY=1 as it comes, before anything waits for the server (a start
  // under ASan on a busy machine took more than 5 s).
  pid_t sender = 0;
  std::string msg = sock.Next(e2e::Frsd::kStartTimeoutMs, &sender);
  EXPECT_NE(msg.find("READY=1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("MAINPID=" + std::to_string(srv.pid())), std::string::npos) << msg;
  EXPECT_EQ(sender, srv.pid());
  // READY=1 means every worker serves (each logs so before it says so), not
  // merely that they were forked.
  const std::string log = srv.log();
  size_t serving = 0;
  for (size_t p = log.find("serving (listen socket"); p != std::string::npos;
       p = log.find("serving (listen socket", p + 1))
    ++serving;
  EXPECT_EQ(serving, 2u) << log;
  ASSERT_TRUE(srv.WaitHealthy(e2e::Frsd::kStartTimeoutMs)) << srv.log();

  ::kill(srv.pid(), SIGHUP);
  msg = sock.Next(5000, &sender);
  EXPECT_EQ(msg, "RELOADING=1");
  msg = sock.Next(5000, &sender);
  EXPECT_EQ(msg.rfind("READY=1", 0), 0u) << msg;
  EXPECT_EQ(sender, srv.pid());

  const pid_t master = srv.pid();
  EXPECT_EQ(srv.Stop(), 0);
  msg = sock.Next(5000, &sender);
  EXPECT_EQ(msg, "STOPPING=1");
  EXPECT_EQ(sender, master);
  EXPECT_EQ(sock.Next(300, &sender), "") << "a further datagram came from pid " << sender;
}

// Under WatchdogSec= systemd sets WATCHDOG_USEC (and WATCHDOG_PID): the
// master says WATCHDOG=1 every half period from its loop, and no worker
// says anything. A WATCHDOG_PID naming another process (frsd
// daemonized itself) keeps no watch.
std::vector<std::string> DatagramsFor(NotifySocket& sock, int ms, std::vector<pid_t>* senders) {
  std::vector<std::string> out;
  const int64_t end = e2e::NowMs() + ms;
  for (int64_t left = ms; left > 0; left = end - e2e::NowMs()) {
    pid_t sender = 0;
    std::string msg = sock.Next(static_cast<int>(left), &sender);
    if (msg.empty()) break;
    out.push_back(msg);
    senders->push_back(sender);
  }
  return out;
}

TEST(SystemdNotify, WatchdogFromTheMasterEveryHalfPeriod) {
  e2e::Frsd srv;
  NotifySocket sock(srv.dir() + "/notify.sock");
  ASSERT_TRUE(sock.bound());
  ::setenv("NOTIFY_SOCKET", (srv.dir() + "/notify.sock").c_str(), 1);
  ::setenv("WATCHDOG_USEC", "400000", 1);
  srv.WriteConfig();
  srv.Spawn();
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ASSERT_TRUE(srv.WaitHealthy(e2e::Frsd::kStartTimeoutMs)) << srv.log();
  std::vector<pid_t> senders;
  const std::vector<std::string> got = DatagramsFor(sock, 1000, &senders);
  size_t pings = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] == "WATCHDOG=1") {
      ++pings;
      EXPECT_EQ(senders[i], srv.pid());
    }
  // One every 200 ms: five in the second; three allow for a loaded machine.
  EXPECT_GE(pings, 3u);
  EXPECT_EQ(srv.Stop(), 0);
}

TEST(SystemdNotify, NoWatchdogWhenItNamesAnotherProcess) {
  e2e::Frsd srv;
  NotifySocket sock(srv.dir() + "/notify.sock");
  ASSERT_TRUE(sock.bound());
  ::setenv("NOTIFY_SOCKET", (srv.dir() + "/notify.sock").c_str(), 1);
  ::setenv("WATCHDOG_USEC", "200000", 1);
  ::setenv("WATCHDOG_PID", "1", 1);
  srv.WriteConfig();
  srv.Spawn();
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("WATCHDOG_PID");
  ASSERT_TRUE(srv.WaitHealthy(e2e::Frsd::kStartTimeoutMs)) << srv.log();
  std::vector<pid_t> senders;
  for (const std::string& m : DatagramsFor(sock, 600, &senders)) EXPECT_NE(m, "WATCHDOG=1");
  EXPECT_EQ(srv.Stop(), 0);
}

TEST(SystemdNotify, NothingWithoutTheVariable) {
  e2e::Frsd srv;
  NotifySocket sock(srv.dir() + "/notify.sock");
  ::unsetenv("NOTIFY_SOCKET");
  ASSERT_TRUE(srv.Start()) << srv.log();
  ::kill(srv.pid(), SIGHUP);
  pid_t sender = 0;
  EXPECT_EQ(sock.Next(500, &sender), "");
}

}  // namespace
}  // namespace frs
