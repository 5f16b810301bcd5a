// frsctl against a live frsd: get sees what the server counted, and set/del
// change what the server answers next, while it serves.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/temp_dir.h"

extern char** environ;

namespace frs::ctl {
namespace {

// One GET over a fresh connection; returns the HTTP status (0 when no answer).
int HttpGet(uint16_t port, const std::string& target) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int status = 0;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      std::string resp;
      char buf[4096];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) resp.append(buf, static_cast<size_t>(n));
      if (resp.size() > 12 && resp.compare(0, 5, "HTTP/") == 0) status = std::atoi(resp.c_str() + 9);
    }
  }
  ::close(fd);
  return status;
}

int Ctl(const std::string& config, const std::string& args) {
  std::string cmd = std::string("TZ=UTC '") + FRSCTL_PATH + "' -c '" + config + "' " + args + " >/dev/null 2>&1";
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string CtlOut(const std::string& config, const std::string& args) {
  std::string cmd = std::string("TZ=UTC '") + FRSCTL_PATH + "' -c '" + config + "' " + args + " 2>&1";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

TEST(FrsctlLiveTest, GetSetDelWhileFrsdServes) {
  testing::TempDir dir;
  std::ofstream(dir / "map.xml")
      << "<map><biz id=\"1\" name=\"login\"><rule interval=\"600\" max=\"5\"/></biz>"
         "<biz id=\"2\" name=\"login_attempts_per_ip_address\"><rule interval=\"600\" max=\"1\"/></biz></map>\n";
  // Port 0: frsd binds one of its own and names it in data/frsd.listen.
  std::ofstream(dir / "srv.xml") << "<frs><listen host=\"127.0.0.1\" port=\"0\"/><workers>1</workers><map>map.xml</map>"
                                    "<store dir=\"data\" files=\"2\" keynodes=\"256\" chain=\"8\"/>"
                                    "<timezone>UTC</timezone></frs>\n";
  const std::string config = dir / "srv.xml";
  std::string frsd = FRSD_PATH;
  char* argv[] = {frsd.data(), const_cast<char*>("-c"), const_cast<char*>(config.c_str()),
                  const_cast<char*>("--foreground"), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(::posix_spawn(&pid, frsd.c_str(), nullptr, nullptr, argv, environ), 0);
  bool up = false;
  uint16_t port = 0;
  for (int i = 0; i < 100 && !up; ++i) {
    std::ifstream listen(dir / "data/frsd.listen");
    std::string name;
    if (port == 0 && std::getline(listen, name) && name.rfind(':') != std::string::npos)
      port = static_cast<uint16_t>(std::atoi(name.c_str() + name.rfind(':') + 1));
    up = port != 0 && HttpGet(port, "/health") == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (up) {
    for (int i = 0; i < 3; ++i) EXPECT_EQ(HttpGet(port, "/acquire?biz=login&key=live"), 200);
    EXPECT_EQ(Ctl(config, "get login live"), 0);
    EXPECT_NE(CtlOut(config, "get --json login live").find("\"count\":3"), std::string::npos);

    EXPECT_EQ(Ctl(config, "set login live 5"), 0);
    EXPECT_EQ(HttpGet(port, "/query?biz=login&key=live"), 429);  // the server sees the new count
    EXPECT_NE(CtlOut(config, "explain login live").find("denied by rule 1"), std::string::npos);

    EXPECT_EQ(Ctl(config, "del login live"), 0);
    EXPECT_EQ(HttpGet(port, "/query?biz=login&key=live"), 200);
    EXPECT_EQ(Ctl(config, "get login live"), 1);
    EXPECT_EQ(Ctl(config, "verify"), 0);

    // An export imported back while frsd serves is a rollback of its keys:
    // done, and said.
    EXPECT_EQ(HttpGet(port, "/acquire?biz=login&key=back"), 200);
    EXPECT_EQ(Ctl(config, "export '" + (dir / "b.jsonl") + "'"), 0);
    EXPECT_EQ(HttpGet(port, "/acquire?biz=login&key=back"), 200);
    const std::string back = CtlOut(config, "import '" + (dir / "b.jsonl") + "'");
    EXPECT_NE(back.find("warning: frsd (pid " + std::to_string(pid) + ") serves this store"), std::string::npos)
        << back;
    EXPECT_NE(CtlOut(config, "get --json login back").find("\"count\":1"), std::string::npos);

    // top --denied with a biz name longer than its column's 16: the columns
    // after it stay under their heads (the count ends where "denied" does).
    EXPECT_EQ(HttpGet(port, "/acquire?biz=login_attempts_per_ip_address&key=ip1"), 200);
    EXPECT_EQ(HttpGet(port, "/acquire?biz=login_attempts_per_ip_address&key=ip1"), 429);
    const std::string top = CtlOut(config, "top --denied");
    const size_t head = top.find("biz "), row = top.find("login_attempts_per_ip_address ");
    ASSERT_NE(head, std::string::npos) << top;
    ASSERT_NE(row, std::string::npos) << top;
    const size_t head_denied = top.find("denied", head) + 6 - head;
    const size_t row_count = top.find(" 1  ", row) + 2 - row;
    EXPECT_EQ(head_denied, row_count) << top;

    // frsctl shows the limits frsd enforces, not map.xml as edited since and
    // not reloaded yet, nor a broken one, which frsd refuses while it serves
    // on (that stopped every command); a reload applied, the new ones.
    const std::string pid_words = "is not the map frsd (pid " + std::to_string(pid) + ") runs";
    ASSERT_EQ(HttpGet(port, "/acquire?biz=login&key=seen"), 200);
    const std::string second =
        "<biz id=\"2\" name=\"login_attempts_per_ip_address\"><rule interval=\"600\" "
        "max=\"1\"/></biz></map>\n";
    std::ofstream(dir / "map.xml") << "<map><biz id=\"1\" name=\"login\"><rule interval=\"600\" max=\"2\"/></biz>"
                                   << second;
    std::string got = CtlOut(config, "get --json login seen");
    EXPECT_NE(got.find("\"limit\":5"), std::string::npos) << got;
    EXPECT_NE(got.find(pid_words), std::string::npos) << got;
    // A biz the edited map.xml adds is unknown to the map frsd runs: said
    // of that map, not of map.xml, which names it.
    std::ofstream(dir / "map.xml") << "<map><biz id=\"1\" name=\"login\"><rule interval=\"600\" max=\"2\"/></biz>"
                                   << "<biz id=\"3\" name=\"fresh\"><rule interval=\"600\" max=\"1\"/></biz>" << second;
    got = CtlOut(config, "get fresh k");
    EXPECT_NE(got.find("unknown biz \"fresh\": the map the running frsd runs ("), std::string::npos) << got;
    std::ofstream(dir / "map.xml") << "<map><biz id=\"1\" name=\"login\"><rule interval=";
    got = CtlOut(config, "get --json login seen");
    EXPECT_NE(got.find("\"limit\":5"), std::string::npos) << got;
    EXPECT_NE(got.find(pid_words), std::string::npos) << got;
    std::ofstream(dir / "map.xml") << "<map><biz id=\"1\" name=\"login\"><rule interval=\"600\" max=\"2\"/></biz>"
                                   << second;
    ASSERT_EQ(::kill(pid, SIGHUP), 0);
    for (int i = 0; i < 200 && got.find(pid_words) != std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      got = CtlOut(config, "get --json login seen");
    }
    EXPECT_EQ(got.find(pid_words), std::string::npos) << got;
    EXPECT_NE(got.find("\"limit\":2"), std::string::npos) << got;
    // A <timezone> that waits for a restart: windows in the zone frsd counts.
    std::ofstream(dir / "srv.xml") << "<frs><listen host=\"127.0.0.1\" port=\"0\"/><workers>1</workers>"
                                      "<map>map.xml</map><store dir=\"data\" files=\"2\" keynodes=\"256\" "
                                      "chain=\"8\"/><timezone>Asia/Kolkata</timezone></frs>\n";
    got = CtlOut(config, "get login seen");
    EXPECT_NE(got.find("srv.xml's <timezone> is Asia/Kolkata, frsd (pid " + std::to_string(pid) +
                       ") runs UTC until it is restarted"),
              std::string::npos)
        << got;

    // A store file lost under a running frsd: recreating it now would make
    // a file frsd does not map (it answers 503 for it until restarted), so
    // init refuses, naming the frsd.
    ASSERT_EQ(::unlink((dir / "data/frs.1.store").c_str()), 0);
    const std::string init = CtlOut(config, "init --recreate-missing");
    EXPECT_NE(init.find("is running on this store"), std::string::npos) << init;
    EXPECT_EQ(Ctl(config, "init --recreate-missing"), 3);
    EXPECT_FALSE(std::filesystem::exists(dir / "data/frs.1.store"));
    // Every file gone: refused alike (it made a new store that frsd, which
    // counts on in the files it maps, never saw).
    ASSERT_EQ(::unlink((dir / "data/frs.0.store").c_str()), 0);
    EXPECT_NE(CtlOut(config, "init").find("is running on this store"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(dir / "data/frs.0.store"));
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(up) << "frsd did not answer /health on port " << port;
  // A clean stop takes back what it said it runs.
  EXPECT_FALSE(std::filesystem::exists(dir / "data/frsd.running"));
}

}  // namespace
}  // namespace frs::ctl
