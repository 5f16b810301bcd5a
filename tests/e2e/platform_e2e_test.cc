// The platform's questions against a live frsd: statistics by key field
// (GET /stats, its token, kill -9 of every process) and rule changes by
// SIGHUP that keep what each key counted, per algorithm.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>

#include "common/stats_map.h"
#include "frsd_harness.h"

namespace frs::e2e {
namespace {

// Waits until the log has `n` lines containing `what`.
bool WaitLogCount(Frsd& srv, const std::string& what, size_t n) {
  for (int i = 0; i < 500; ++i) {
    const std::string log = srv.log();
    size_t count = 0;
    for (size_t p = log.find(what); p != std::string::npos; p = log.find(what, p + 1)) ++count;
    if (count >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The attribute `name` of the <group value="value"> of a /stats answer.
uint64_t GroupAttr(const std::string& xml, const std::string& value, const std::string& name) {
  const size_t g = xml.find("<group value=\"" + value + "\"");
  if (g == std::string::npos) return UINT64_MAX;
  const std::string line = xml.substr(g, xml.find("/>", g) - g);
  return std::stoull(Attr(line, name).empty() ? "18446744073709551615" : Attr(line, name));
}

const std::string kStatsMap = "<map>\n" + testing::StatsApiBiz(4) + "</map>\n";

TEST(PlatformE2E, StatisticsByFieldSurviveKillMinusNineOfEveryProcess) {
  ServerOptions o;
  o.map = kStatsMap;
  Frsd srv(o);
  ASSERT_TRUE(srv.Start()) << srv.log();
  // Acknowledged answers only: what the clients saw is what must be there.
  std::map<std::string, uint64_t> requests, allowed, by_iface;
  {
    Client c(srv.port());
    for (int u = 0; u < 40; ++u)
      for (int i = 0; i < 6; ++i) {
        const std::string app = u % 3 == 0 ? "app9" : "app7";
        const std::string iface = "if" + std::to_string(i % 2);
        const auto r = c.Get("/acquire?biz=api&key=" + app + "%7Cu" + std::to_string(u) + "%7C" + iface);
        ASSERT_TRUE(r.status == 200 || r.status == 429) << r.status;
        ++requests[app];
        allowed[app] += r.status == 200;
        ++by_iface[app + "|" + iface];
      }
    ASSERT_EQ(c.Get("/acquire?biz=api&key=only%7Ctwo").status, 200);  // a field error
  }
  srv.KillAll();
  ASSERT_TRUE(srv.Start()) << srv.log();
  Client c(srv.port());
  const auto r = c.Get("/stats?biz=api&by=app&token=s3cret");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Attr(r.body, "field_errors"), "1") << r.body;
  for (const std::string app : {"app7", "app9"}) {
    EXPECT_EQ(GroupAttr(r.body, app, "requests"), requests[app]) << r.body;
    EXPECT_EQ(GroupAttr(r.body, app, "allowed"), allowed[app]) << r.body;
    EXPECT_EQ(GroupAttr(r.body, app, "denied"), requests[app] - allowed[app]) << r.body;
    EXPECT_EQ(GroupAttr(r.body, app, "units"), allowed[app]) << r.body;
  }
  EXPECT_EQ(GroupAttr(r.body, "app9", "distinct_user"), 14u) << r.body;
  EXPECT_EQ(GroupAttr(r.body, "app7", "distinct_user"), 26u) << r.body;
  const auto by = c.Get("/stats?biz=api&by=iface,app", "Authorization: Bearer s3cret\r\n");
  ASSERT_EQ(by.status, 200) << by.body;
  for (const auto& [group, n] : by_iface) EXPECT_EQ(GroupAttr(by.body, group, "requests"), n) << by.body;
  const auto top = c.Get("/stats?biz=api&by=app&top=1&token=s3cret");
  EXPECT_NE(top.body.find("value=\"app7\""), std::string::npos) << top.body;
  EXPECT_EQ(top.body.find("value=\"app9\""), std::string::npos) << top.body;
}

TEST(PlatformE2E, StatsNeedTheAdminTokenAndSayWhatIsWrong) {
  ServerOptions o;
  o.map = kStatsMap;
  Frsd srv(o);
  ASSERT_TRUE(srv.Start()) << srv.log();
  Client c(srv.port());
  EXPECT_EQ(c.Get("/stats?biz=api&by=app").status, 403);
  EXPECT_EQ(c.Get("/stats?biz=api&by=app&token=wrong").status, 403);
  EXPECT_EQ(c.Get("/stats?biz=api&by=app", "Authorization: Bearer s3cret\r\n").status, 200);
  const auto no_by = c.Get("/stats?biz=api&token=s3cret");
  EXPECT_EQ(no_by.status, 400);
  const auto bad_by = c.Get("/stats?biz=api&by=user&token=s3cret");
  EXPECT_EQ(bad_by.status, 404);
  EXPECT_NE(bad_by.body.find("by=&quot;app,iface&quot;"), std::string::npos) << bad_by.body;
  EXPECT_EQ(c.Get("/stats?biz=nope&by=app&token=s3cret").status, 404);
  EXPECT_EQ(c.Get("/stats?biz=api&by=app&day=2026-13-01&token=s3cret").status, 400);
  EXPECT_EQ(c.Get("/stats?biz=api&by=app&top=x&token=s3cret").status, 400);
  // value= given empty filtered nothing (every group came back).
  const auto empty_value = c.Get("/stats?biz=api&by=app&value=&token=s3cret");
  EXPECT_EQ(empty_value.status, 400);
  EXPECT_NE(empty_value.body.find("value is empty"), std::string::npos) << empty_value.body;
  // A day with no file answers no groups.
  const auto old_day = c.Get("/stats?biz=api&by=app&day=2020-01-01&token=s3cret");
  EXPECT_EQ(old_day.status, 200);
  EXPECT_EQ(Attr(old_day.body, "groups"), "0") << old_day.body;
  // A merge changes counts: refused without the token.
  EXPECT_EQ(c.Post("<stats biz=\"api\" by=\"app\" day=\"2026-01-01\"/>", "/stats").status, 403);
}

// Every algorithm, with named rules: 3 uses, then the interval changes by
// SIGHUP. Widened 1 h -> 2 h, each key holds its 3 uses.
TEST(PlatformE2E, AWidenedIntervalKeepsEveryAlgorithmsUses) {
  const std::string map = R"(<map>
  <biz id="1" name="f"><rule name="r" algo="fixed" interval="3600" max="10"/></biz>
  <biz id="2" name="c"><rule name="r" algo="calendar" interval="3600" max="10"/></biz>
  <biz id="3" name="s"><rule name="r" algo="sliding" interval="3600" max="10"/></biz>
  <biz id="4" name="sb"><rule name="r" algo="sliding" interval="3600" max="500"/></biz>
  <biz id="5" name="t"><rule name="r" algo="token_bucket" interval="3600" max="10"/></biz>
</map>
)";
  ServerOptions o;
  o.map = map;
  Frsd srv(o);
  ASSERT_TRUE(srv.Start()) << srv.log();
  const std::vector<std::string> bizzes = {"f", "c", "s", "sb", "t"};
  {
    Client c(srv.port());
    for (const std::string& b : bizzes)
      for (int i = 0; i < 3; ++i) ASSERT_EQ(c.Get("/acquire?biz=" + b + "&key=k").status, 200);
  }
  std::string m = map;
  for (size_t p; (p = m.find("interval=\"3600\"")) != std::string::npos;) m.replace(p, 15, "interval=\"7200\"");
  WriteFile(srv.dir() + "/map.xml", m);
  kill(srv.pid(), SIGHUP);
  ASSERT_TRUE(WaitLogCount(srv, "reloaded", 2)) << srv.log();
  Client c(srv.port());
  for (const std::string& b : bizzes) {
    const auto r = c.Get("/query?biz=" + b + "&key=k");
    EXPECT_EQ(Attr(r.body, "count"), "3") << b << ": " << r.body;
    EXPECT_EQ(Attr(r.body, "interval"), "7200") << b << ": " << r.body;
  }
  // The next use counts on top of them (a calendar window's start is its
  // new window's: a use does not restart it).
  for (const std::string& b : bizzes) {
    const auto r = c.Get("/acquire?biz=" + b + "&key=k");
    EXPECT_EQ(Attr(r.body, "count"), "4") << b << ": " << r.body;
  }
  // A worker that starts after the change (kill -9 of one) knows it too:
  // the history is in the store directory.
  const std::vector<pid_t> workers = srv.Workers();
  ASSERT_FALSE(workers.empty());
  const std::string before = srv.log();
  size_t serving = 0;
  for (size_t p = before.find("serving"); p != std::string::npos; p = before.find("serving", p + 1)) ++serving;
  for (pid_t w : workers) kill(w, SIGKILL);
  ASSERT_TRUE(WaitLogCount(srv, "serving", serving + workers.size())) << srv.log();
  for (pid_t w : srv.Workers()) EXPECT_EQ(std::count(workers.begin(), workers.end(), w), 0);
  for (int i = 0; i < 4; ++i) {
    Client again(srv.port());
    EXPECT_EQ(Attr(again.Get("/query?biz=t&key=k").body, "count"), "4");
    EXPECT_EQ(Attr(again.Get("/query?biz=f&key=k").body, "count"), "4");
  }
}

// The map of the next test: biz s and biz a of one rule each, biz two of two.
std::string ThreeBizMap(const std::string& s_rule, const std::string& a_rule, const std::vector<std::string>& two) {
  std::string map = "<map>\n  <biz id=\"1\" name=\"s\">" + s_rule + "</biz>\n  <biz id=\"2\" name=\"a\">" + a_rule +
                    "</biz>\n  <biz id=\"3\" name=\"two\">\n";
  for (const std::string& rule : two) map += "    " + rule + "\n";
  return map + "  </biz>\n</map>\n";
}

// Narrowed: the uses still inside the new window count; a changed
// algorithm starts fresh; reordered rules keep their counts by name.
TEST(PlatformE2E, ANarrowedWindowKeepsWhatIsInsideAndRulesFollowTheirNames) {
  const std::string map = ThreeBizMap(R"(<rule name="r" algo="sliding" interval="3600" max="10"/>)",
                                      R"(<rule name="r" algo="fixed" interval="3600" max="10"/>)",
                                      {R"(<rule name="hourly" algo="fixed" interval="3600" max="10"/>)",
                                       R"(<rule name="burst" algo="sliding" interval="60" max="20"/>)"});
  ServerOptions o;
  o.map = map;
  Frsd srv(o);
  ASSERT_TRUE(srv.Start()) << srv.log();
  {
    Client c(srv.port());
    for (int i = 0; i < 3; ++i) ASSERT_EQ(c.Get("/acquire?biz=s&key=k").status, 200);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(c.Get("/acquire?biz=a&key=k").status, 200);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(c.Get("/acquire?biz=two&key=k").status, 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(2300));
    ASSERT_EQ(c.Get("/acquire?biz=s&key=k").status, 200);  // the only use of the last 2 s
    ASSERT_EQ(c.Get("/acquire?biz=two&key=k").status, 200);
  }
  const std::string changed = ThreeBizMap(R"(<rule name="r" algo="sliding" interval="2" max="10"/>)",
                                          R"(<rule name="r" algo="sliding" interval="3600" max="10"/>)",
                                          {R"(<rule name="burst" algo="sliding" interval="120" max="20"/>)",
                                           R"(<rule name="hourly" algo="fixed" interval="7200" max="10"/>)"});
  WriteFile(srv.dir() + "/map.xml", changed);
  kill(srv.pid(), SIGHUP);
  ASSERT_TRUE(WaitLogCount(srv, "reloaded", 2)) << srv.log();
  Client c(srv.port());
  EXPECT_EQ(Attr(c.Get("/query?biz=s&key=k").body, "count"), "1");  // 3 uses fell out of 2 s
  EXPECT_EQ(Attr(c.Get("/query?biz=a&key=k").body, "count"), "0");  // fixed -> sliding: fresh
  const std::string two = c.Get("/query?biz=two&key=k").body;
  const std::regex rule("<rule algo=\"(\\w+)\" interval=\"(\\d+)\" count=\"(\\d+)\"[^>]*name=\"(\\w+)\"");
  std::map<std::string, std::string> counts;
  for (auto it = std::sregex_iterator(two.begin(), two.end(), rule); it != std::sregex_iterator(); ++it)
    counts[(*it)[4]] = (*it)[3];
  EXPECT_EQ(counts["hourly"], "4") << two;
  EXPECT_EQ(counts["burst"], "4") << two;
}

}  // namespace
}  // namespace frs::e2e
