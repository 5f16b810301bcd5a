// SIGHUP re-reads srv.xml with map.xml: what can change live does (admin
// token, allow list (said in the log), limits, log file, cluster), what cannot is logged as
// needing a restart, and a broken srv.xml changes nothing.
#include <gtest/gtest.h>

#include "frsd_harness.h"

namespace frs::e2e {
namespace {

// Rewrites srv.xml with `from` replaced by `to`, sends SIGHUP and waits until
// the reload has reached the workers (or failed).
void Rewrite(Frsd& srv, const std::string& from, const std::string& to) {
  std::string cfg = ReadFile(srv.config());
  size_t p = cfg.find(from);
  ASSERT_NE(p, std::string::npos) << cfg;
  cfg.replace(p, from.size(), to);
  WriteFile(srv.config(), cfg);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// Waits until the log has `n` lines containing `what`.
bool WaitLog(Frsd& srv, const std::string& what, size_t n = 1) {
  for (int i = 0; i < 300; ++i) {
    if (Count(srv.log(), what) >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::string SetRequest(const std::string& token) {
  return "<request cmd=\"set\" biz=\"login\" key=\"k\" count=\"1\" token=\"" + token + "\"/>";
}

TEST(ReloadE2E, TheAdminTokenRotatesWithoutARestart) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  const pid_t pid = srv.pid();
  EXPECT_EQ(Client(srv.port()).Post(SetRequest("s3cret")).status, 200);
  Rewrite(srv, "token=\"s3cret\"", "token=\"rotated\"");
  // And who may connect, which the log says too (it did not).
  Rewrite(srv, "</frs>", "  <allow>127.0.0.0/8</allow>\n</frs>");
  kill(pid, SIGHUP);
  ASSERT_TRUE(WaitLog(srv, "reloaded", 2)) << srv.log();  // both workers
  EXPECT_TRUE(WaitLog(srv, "the admin token changed; applied")) << srv.log();
  EXPECT_TRUE(WaitLog(srv, "srv.xml: <allow> changed (1 range(s)); applied by each worker")) << srv.log();
  // Every worker has the new token: try on several connections.
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(Client(srv.port()).Post(SetRequest("s3cret")).status, 403);
    EXPECT_EQ(Client(srv.port()).Post(SetRequest("rotated")).status, 200);
  }
  EXPECT_EQ(srv.pid(), pid);
}

// The master says once what a reload changes of the bizzes (each worker's
// line said only "reloaded").
TEST(ReloadE2E, TheLogSaysWhichBizzesAReloadAdds) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  std::string map = ReadFile(srv.dir() + "/map.xml");
  const size_t end = map.rfind("</map>");
  ASSERT_NE(end, std::string::npos) << map;
  map.insert(end, "  <biz id=\"900\" name=\"reload_added\"><rule interval=\"60\" max=\"9\"/></biz>\n");
  WriteFile(srv.dir() + "/map.xml", map);
  kill(srv.pid(), SIGHUP);
  ASSERT_TRUE(WaitLog(srv, "reloaded", 2)) << srv.log();
  EXPECT_TRUE(WaitLog(srv, "map.xml: biz(es) 1 added (reload_added)")) << srv.log();

  // Two unnamed token buckets of one interval (named by their place,
  // reload_two_1 and _2), then swapped: the names read the same, and the
  // reload was taken, each key's counts traded between the two limits; and
  // frsd -t said nothing of it (found by an outside run). The reload refuses
  // it now, and frsd -t warns (a restart may be what is meant).
  const std::string a = "<rule algo=\"token_bucket\" interval=\"60\" max=\"10\"/>";
  const std::string b = "<rule algo=\"token_bucket\" interval=\"60\" max=\"60\" burst=\"3\"/>";
  map.insert(map.rfind("</map>"), "  <biz id=\"901\" name=\"reload_two\">" + a + b + "</biz>\n");
  WriteFile(srv.dir() + "/map.xml", map);
  kill(srv.pid(), SIGHUP);
  ASSERT_TRUE(WaitLog(srv, "map.xml: biz(es) 1 added (reload_two)")) << srv.log();
  const std::string swapped = a + b;
  map.replace(map.find(swapped), swapped.size(), b + a);
  WriteFile(srv.dir() + "/map.xml", map);
  const std::string check = std::string(FRSD_PATH) + " -t -c " + srv.config() + " >/dev/null 2>" + srv.dir() + "/t.err";
  const int rc = std::system(check.c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 0) << "a warning: a restart takes the map\n" << ReadFile(srv.dir() + "/t.err");
  EXPECT_NE(ReadFile(srv.dir() + "/t.err")
                .find(
                    "biz 'reload_two': rules 'reload_two_1' and 'reload_two_2' are both token_bucket over 60 s in this "
                    "map and are in another order than in the map running"),
            std::string::npos)
      << ReadFile(srv.dir() + "/t.err");
  EXPECT_NE(ReadFile(srv.dir() + "/t.err").find("(the frsd running on this store, pid "), std::string::npos);
  kill(srv.pid(), SIGHUP);
  EXPECT_TRUE(WaitLog(srv, "reload refused, the old configuration stays")) << srv.log();
  EXPECT_NE(srv.log().find("are in another order than in the map running"), std::string::npos) << srv.log();

  // What a reload would end of what keys hold, frsd -t says before the
  // SIGHUP, as the reload's log says it after (found by an outside run:
  // only the log said it).
  map.erase(map.find("  <biz id=\"901\""), map.find("</map>") - map.find("  <biz id=\"901\""));
  WriteFile(srv.dir() + "/map.xml", map);
  ASSERT_EQ(WEXITSTATUS(std::system(check.c_str())), 0) << ReadFile(srv.dir() + "/t.err");
  EXPECT_NE(ReadFile(srv.dir() + "/t.err")
                .find(") would say: " + srv.dir() + "/map.xml: 1 biz(es) removed (reload_two)"),
            std::string::npos)
      << ReadFile(srv.dir() + "/t.err");
}

// A map edited while frsd was stopped: frsd -t and the start say what the
// edit costs against the map the last run ran (frsd.last), as a reload's log
// says it (found by an outside run: a biz's changed id, which starts each of
// its keys anew, said nothing on a restart). After a clean stop and after a
// kill -9 alike.
TEST(ReloadE2E, AStartSaysWhatTheMapEditedSinceTheLastRunCosts) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  ASSERT_EQ(srv.Stop(), 0) << srv.log();
  const std::string path = srv.dir() + "/map.xml";
  std::string map = ReadFile(path);
  ASSERT_NE(map.find("<biz id=\"1\" name=\"login\""), std::string::npos) << map;
  map.replace(map.find("<biz id=\"1\" name=\"login\""), 24, "<biz id=\"901\" name=\"login\"");
  WriteFile(path, map);
  const std::string check = std::string(FRSD_PATH) + " -t -c " + srv.config() + " >/dev/null 2>" + srv.dir() + "/t.err";
  ASSERT_EQ(WEXITSTATUS(std::system(check.c_str())), 0) << ReadFile(srv.dir() + "/t.err");
  EXPECT_NE(ReadFile(srv.dir() + "/t.err").find("the next start on this store would say (since its last run, pid "),
            std::string::npos)
      << ReadFile(srv.dir() + "/t.err");
  EXPECT_NE(ReadFile(srv.dir() + "/t.err").find("biz 'login' has id 901, not 1: "), std::string::npos)
      << ReadFile(srv.dir() + "/t.err");
  ASSERT_TRUE(srv.Start()) << srv.log();
  EXPECT_TRUE(WaitLog(srv, "warning: since this store's last run: " + path + ": biz 'login' has id 901, not 1: "))
      << srv.log();
  // Killed, then the id put back: frsd -t (against the killed run's map,
  // not the older frsd.last) and the start say so too, once.
  srv.KillAll();
  map.replace(map.find("<biz id=\"901\" name=\"login\""), 26, "<biz id=\"1\" name=\"login\"");
  WriteFile(path, map);
  ASSERT_EQ(WEXITSTATUS(std::system(check.c_str())), 0) << ReadFile(srv.dir() + "/t.err");
  EXPECT_NE(ReadFile(srv.dir() + "/t.err").find("biz 'login' has id 1, not 901: "), std::string::npos)
      << ReadFile(srv.dir() + "/t.err");
  ASSERT_TRUE(srv.Start()) << srv.log();
  EXPECT_TRUE(WaitLog(srv, "warning: since this store's last run: " + path + ": biz 'login' has id 1, not 901: "))
      << srv.log();
  ASSERT_EQ(srv.Stop(), 0) << srv.log();
  ASSERT_TRUE(srv.Start()) << srv.log();  // the same map: nothing said
  EXPECT_EQ(Count(srv.log(), "has id 1, not 901"), 1u) << srv.log();
}

// A client still calling a biz a reload removed (or a typo) was seen only
// in frs_requests_total{status="404"}: counted apart, and logged by each
// worker at most once a minute (found by an outside run).
TEST(ReloadE2E, RequestsForABizTheMapLacksAreCountedAndLogged) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  Client c(srv.port());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.Get("/acquire?biz=no_such_biz&key=k").status, 404);
  EXPECT_EQ(c.Post("<request cmd=\"query\" biz=\"no_such_biz\" key=\"k\"/>").status, 404);
  EXPECT_EQ(Metric(c, "frs_unknown_biz_total"), 4);
  EXPECT_TRUE(WaitLog(srv, "unknown biz 'no_such_biz' (1 such request(s) since this worker's last such line"))
      << srv.log();
  // Once a minute by each worker that met them: at most one line of each.
  EXPECT_LE(Count(srv.log(), "unknown biz 'no_such_biz' ("), 2u) << srv.log();
}

TEST(ReloadE2E, WhatNeedsARestartIsLoggedAndKept) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  const uint16_t port = srv.port();
  // A port nobody binds: a reload only logs it.
  Rewrite(srv, "port=\"0\"", "port=\"" + std::to_string(port == 1 ? 2 : 1) + "\"");
  Rewrite(srv, "<workers>2</workers>", "<workers>3</workers>");
  kill(srv.pid(), SIGHUP);
  ASSERT_TRUE(WaitLog(srv, "reloaded", 2)) << srv.log();
  const std::string log = srv.log();
  EXPECT_EQ(Count(log, "srv.xml: <listen> changed"), 1u) << log;
  EXPECT_EQ(Count(log, "srv.xml: <workers> changed (2 -> 3): this needs a restart"), 1u) << log;
  EXPECT_EQ(Client(port).Get("/health").status, 200);  // still on the old port
}

// A broken srv.xml changes nothing: a value out of range, or a <timezone>
// this machine does not have (it needs a restart like any <timezone>, and
// that start would fail: refused as broken, not called valid).
TEST(ReloadE2E, ABrokenSrvXmlChangesNothing) {
  for (const std::string broken : {"<limits batch=\"0\"/>", "<timezone>Mars/Olympus</timezone>"}) {
    Frsd srv;
    ASSERT_TRUE(srv.Start()) << srv.log();
    Rewrite(srv, "token=\"s3cret\"", "token=\"rotated\"");
    Rewrite(srv, "</frs>", broken + "</frs>");
    kill(srv.pid(), SIGHUP);
    ASSERT_TRUE(WaitLog(srv, "reload refused, the old configuration stays")) << srv.log();
    EXPECT_EQ(Count(srv.log(), "are valid; reloading"), 0u) << srv.log();
    if (broken.find("Mars") != std::string::npos) {
      EXPECT_EQ(Count(srv.log(), "<timezone>: unknown time zone 'Mars/Olympus'"), 1u) << srv.log();
    }
    EXPECT_EQ(Client(srv.port()).Post(SetRequest("s3cret")).status, 200);
    EXPECT_EQ(Client(srv.port()).Post(SetRequest("rotated")).status, 403);
  }
}

// Another geometry for the running store is no change that waits for a
// restart: that restart would refuse the store. The reload is refused as
// broken (it was applied, called valid, with a restart pending).
TEST(ReloadE2E, AStoreGeometryTheStoreDoesNotHaveIsRefused) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  Rewrite(srv, "keynodes=\"4096\"", "keynodes=\"8192\"");
  kill(srv.pid(), SIGHUP);
  ASSERT_TRUE(WaitLog(srv, "reload refused, the old configuration stays")) << srv.log();
  const std::string log = srv.log();
  EXPECT_EQ(Count(log, "<store> says files=2 keynodes=8192 chain=8, but the store in "), 1u) << log;
  EXPECT_EQ(Count(log, "has files=2 keynodes=4096 chain=8: a restart would refuse it"), 1u) << log;
  EXPECT_EQ(Count(log, "are valid; reloading"), 0u) << log;
  Client c(srv.port());
  EXPECT_EQ(Metric(c, "frs_config_last_reload_successful"), 0);
  EXPECT_EQ(Metric(c, "frs_config_restart_pending"), 0);
  // Back to the store's geometry: applied.
  Rewrite(srv, "keynodes=\"8192\"", "keynodes=\"4096\"");
  kill(srv.pid(), SIGHUP);
  ASSERT_TRUE(WaitLog(srv, "are valid; reloading")) << srv.log();
  ASSERT_TRUE(WaitFor([&] { return Metric(c, "frs_config_last_reload_successful") == 1; }, 3000));
}

TEST(ReloadE2E, LimitsAndTheLogFileChangeLive) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  std::string big(2000, 'x');
  const std::string body =
      "<request cmd=\"query\" biz=\"login\" key=\"" + std::string(200, 'k') + "\"/>" + "<!--" + big + "-->";
  EXPECT_EQ(Client(srv.port()).Post(body).status, 200);
  Rewrite(srv, "</frs>", "<limits body_bytes=\"1024\"/><log file=\"switched.log\"/></frs>");
  kill(srv.pid(), SIGHUP);
  std::string switched;
  // Each worker's "reloaded ... (map generation N)" line lands in the new file.
  for (int i = 0; i < 1000 && Count(switched, "(map generation") < 2; ++i) {  // up to 10 s on a loaded machine
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    switched = ReadFile(srv.dir() + "/switched.log");
  }
  EXPECT_EQ(Count(switched, "(map generation"), 2u) << srv.log() << switched;
  EXPECT_EQ(Count(switched, "logging here from now on"), 1u) << switched;
  // The log says what changed of <limits>, as of every other live setting.
  EXPECT_EQ(Count(switched, "srv.xml: <limits> changed (body_bytes 65536 -> 1024); applied by each worker"), 1u)
      << switched;
  EXPECT_EQ(Client(srv.port()).Post(body).status, 413);
  // <log file> taken out again: the line says where logging goes, not "".
  Rewrite(srv, "<log file=\"switched.log\"/>", "");
  kill(srv.pid(), SIGHUP);
  ASSERT_TRUE(WaitLog(srv, "logging here from now on")) << srv.log() << ReadFile(srv.dir() + "/switched.log");
  switched = ReadFile(srv.dir() + "/switched.log");
  EXPECT_EQ(Count(switched, "srv.xml: <log file> removed; switching to "), 1u) << switched;
  EXPECT_EQ(Count(switched, "changed to \"\""), 0u) << switched;
}

}  // namespace
}  // namespace frs::e2e

namespace frs::e2e {
namespace {

TEST(ReloadE2E, ABrokenClusterIsRefusedAndTheOldRingStays) {
  ServerOptions o;
  o.extra = "  <cluster self=\"127.0.0.1:1\"><shard>127.0.0.1:1</shard><shard>127.0.0.1:2</shard></cluster>\n";
  Frsd srv(o);
  ASSERT_TRUE(srv.Start()) << srv.log();
  const std::string before = Client(srv.port()).Post("<request cmd=\"stats\"/>").body;
  ASSERT_NE(before.find("shards=\"2\""), std::string::npos) << before;
  // A shard listed twice: the reload is refused whole, map included.
  Rewrite(srv, "<shard>127.0.0.1:2</shard>", "<shard>127.0.0.1:1</shard>");
  kill(srv.pid(), SIGHUP);
  ASSERT_TRUE(WaitLog(srv, "reload refused, the old configuration stays")) << srv.log();
  EXPECT_NE(srv.log().find("listed twice"), std::string::npos) << srv.log();
  const std::string after = Client(srv.port()).Post("<request cmd=\"stats\"/>").body;
  EXPECT_EQ(after.substr(after.find("<cluster")), before.substr(before.find("<cluster")));
  // With <listen port="0">, a list naming the port it bound under another
  // self (two names of this shard) is refused once the port is known: the
  // parse alone took it (found by an outside run).
  const std::string own = "127.0.0.1:" + std::to_string(srv.port());
  Rewrite(srv, "<shard>127.0.0.1:1</shard><shard>127.0.0.1:1</shard>",
          "<shard>127.0.0.1:1</shard><shard>" + own + "</shard>");
  kill(srv.pid(), SIGHUP);
  ASSERT_TRUE(WaitLog(srv, "reload refused, the old configuration stays", 2)) << srv.log();
  EXPECT_NE(srv.log().find("names this shard twice: as its self 127.0.0.1:1 and as " + own), std::string::npos)
      << srv.log();
}

}  // namespace
}  // namespace frs::e2e
