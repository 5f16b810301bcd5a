// The decision log through a real frsd of two workers: one whole, valid
// JSON line per recorded decision under concurrent clients (denied ones,
// then all after a reload), nothing lost or repeated across a rotation
// (rename + SIGUSR1), and a full disk that costs lines, counted, never
// answers.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "e2e/frsd_harness.h"

namespace frs::e2e {
namespace {

const char* kLogMap = R"(<map>
  <biz id="7" name="low">
    <rule interval="3600" max="3"/>
  </biz>
  <biz id="8" name="shadowlow" mode="shadow">
    <rule interval="3600" max="1"/>
  </biz>
</map>
)";

ServerOptions LogOptions(const std::string& decisions) {
  ServerOptions o;
  o.workers = 2;
  o.map = kLogMap;
  o.extra = "  " + decisions + "\n";
  return o;
}

// Every line of `path` is checked by a real JSON parser (python3): an
// object whose first fields are the contract's, in its order. Returns the
// number of lines, or -1 (with the reason on stderr) when one is not; with
// `torn` N, up to N lines that are no JSON (a worker killed inside a write)
// are skipped, not counted.
long ValidJsonLines(const std::string& path, int torn = 0) {
  const std::string script = path + ".check.py";
  WriteFile(script, R"(import json, sys
fields = ["ts", "biz", "key", "rule", "allowed", "n", "count", "limit", "remaining", "retry_after", "route", "client"]
data = open(sys.argv[1], "rb").read()
torn = int(sys.argv[2])
if data and not data.endswith(b"\n"):
    sys.exit("the file ends inside a line")
n = 0
for raw in data.split(b"\n")[:-1]:
    try:
        o = json.loads(raw.decode("utf-8"))
    except ValueError:
        torn -= 1
        assert torn >= 0, raw
        continue
    assert list(o)[:12] == fields, raw
    assert o["biz"] in ("low", "shadowlow"), raw
    assert o["client"] == "127.0.0.1", raw
    n += 1
print(n)
)");
  FILE* p = ::popen(("python3 '" + script + "' '" + path + "' " + std::to_string(torn)).c_str(), "r");
  if (!p) return -1;
  char buf[64] = {};
  const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  const int st = ::pclose(p);
  return got && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? std::atol(buf) : -1;
}

std::vector<std::string> Lines(const std::string& path) {
  std::vector<std::string> out;
  const std::string text = ReadFile(path);
  size_t start = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

struct Tally {
  std::atomic<long> answered{0}, denied{0}, shadow{0}, failed{0};  // shadow: would_deny="1"
};

// `clients` connections at once, each `per_client` requests: GET /acquire
// on ten keys (three uses each), a POST whose key carries a quote and a
// backslash, and a batch of two queries; the denials each saw are summed.
void RunClients(Frsd& srv, int clients, int per_client, Tally* t, const std::string& prefix = "k") {
  std::vector<std::thread> threads;
  const uint16_t port = srv.port();
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([=] {
      Client cl(port);
      for (int i = 0; i < per_client; ++i) {
        HttpResponse r;
        const int kind = i % 10;
        if (kind == 8) {
          r = cl.Post("<request cmd=\"acquire\" biz=\"low\" key=\"" + prefix + "q&quot;\\" + std::to_string(i % 3) +
                      "\"/>");
          if (r.status == 200) {
            t->answered += 1;
            t->denied += Attr(r.body, "allowed") == "0";
          }
        } else if (kind == 9) {
          r = cl.Post("<batch><request cmd=\"query\" biz=\"low\" key=\"" + prefix +
                      "0\"/><request cmd=\"query\" biz=\"shadowlow\" key=\"" + prefix + "s\"/></batch>");
          if (r.status == 200) {
            t->answered += 2;
            // Members: <response code="0" allowed="0" ...> per member.
            t->denied += static_cast<long>(Count(r.body, "<response code=\"0\" allowed=\"0\""));
            t->shadow += static_cast<long>(Count(r.body, "would_deny=\"1\""));
          }
        } else {
          r = cl.Get("/acquire?biz=" + std::string(kind == 7 ? "shadowlow" : "low") + "&key=" + prefix +
                     std::to_string((c + i) % 10));
          if (r.status == 200 || r.status == 429) {
            t->answered += 1;
            t->denied += r.status == 429;
            t->shadow += static_cast<long>(Count(r.body, "would_deny=\"1\""));
          }
        }
        if (r.status != 200 && r.status != 429) t->failed += 1;
      }
    });
  for (auto& th : threads) th.join();
}

TEST(DecisionLogE2E, OneWholeValidLinePerDeniedDecisionThenPerDecisionAfterAReload) {
  Frsd srv(LogOptions("<decisions file=\"decisions.log\"/>"));
  ASSERT_TRUE(srv.Start()) << srv.log();
  const std::string log = srv.dir() + "/decisions.log";
  Tally first;
  RunClients(srv, 40, 30, &first);
  EXPECT_EQ(first.failed, 0);
  ASSERT_GT(first.denied, 600);
  ASSERT_GT(first.shadow, 50);  // shadow mode answers allowed; its would-be denials are recorded too
  // Reload with record="all": one line per decision from then on.
  std::string conf = ReadFile(srv.config());
  conf.replace(conf.find("<decisions file=\"decisions.log\"/>"), 33,
               "<decisions file=\"decisions.log\" record=\"all\"/>");
  WriteFile(srv.config(), conf);
  // Everything of the first phase is out before the reload is asked for
  // (the writers' pace is 50 ms), so the phases can be told apart.
  const size_t recorded = static_cast<size_t>(first.denied + first.shadow);
  ASSERT_TRUE(WaitFor([&] { return Lines(log).size() >= recorded; }, 5000)) << Lines(log).size() << " of " << recorded;
  const std::vector<std::string> phase1 = Lines(log);
  ASSERT_EQ(phase1.size(), recorded);
  ASSERT_TRUE(srv.ReloadAndWait()) << srv.log();
  Tally second;
  RunClients(srv, 40, 30, &second, "m");
  EXPECT_EQ(second.failed, 0);
  // A route as long as the request line allows still makes its line: one
  // of 2.6 KB and more made none, so a client kept its decisions out.
  {
    Client c(srv.port());
    ASSERT_EQ(c.Get("/acquire?biz=low&key=longroute&route=" + std::string(4000, 'r')).status, 200);
    second.answered += 1;
  }
  EXPECT_EQ(srv.Stop(), 0);  // a stop writes out what the workers hold

  ASSERT_EQ(ValidJsonLines(log), static_cast<long>(phase1.size() + second.answered)) << srv.log();
  const std::string all = ReadFile(log);
  const size_t long_line = all.find("\"key\":\"longroute\"");
  ASSERT_NE(long_line, std::string::npos);
  EXPECT_NE(all.find(std::string(1024, 'r') + "...\",\"client\"", long_line), std::string::npos);
  EXPECT_NE(all.find("\"truncated\":true}", long_line), std::string::npos);
  size_t shadow = 0, denied = 0;
  for (const std::string& l : phase1) {
    EXPECT_NE(l.find("\"allowed\":false"), std::string::npos) << l;
    shadow += l.find("\"shadow\":true") != std::string::npos;
    denied += l.find("\"shadow\":true") == std::string::npos;
  }
  EXPECT_EQ(denied, static_cast<size_t>(first.denied));
  EXPECT_EQ(shadow, static_cast<size_t>(first.shadow));
  // The key with a quote and a backslash, decoded from the XML and escaped.
  EXPECT_NE(ReadFile(log).find("\"key\":\"kq\\\"\\\\1\""), std::string::npos);
}

TEST(DecisionLogE2E, ARotationUnderLoadLosesAndRepeatsNoLine) {
  Frsd srv(LogOptions("<decisions file=\"decisions.log\" record=\"all\"/>"));
  ASSERT_TRUE(srv.Start()) << srv.log();
  const std::string log = srv.dir() + "/decisions.log";
  // Each request a key of its own, so each line is unique: a line written
  // twice would show as a duplicate, a lost one as a shortfall.
  std::atomic<long> answered{0}, failed{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> runners;
  const uint16_t port = srv.port();
  for (int r = 0; r < 8; ++r)
    runners.emplace_back([&, r] {
      Client c(port);
      for (int i = 0; !stop; ++i) {
        const int st = c.Get("/acquire?biz=low&key=r" + std::to_string(r) + "-" + std::to_string(i)).status;
        (st == 200 ? answered : failed) += 1;
      }
    });
  ASSERT_TRUE(WaitFor([&] { return answered >= 2000; }, 10000));
  ASSERT_EQ(std::rename(log.c_str(), (log + ".1").c_str()), 0);
  kill(srv.pid(), SIGUSR1);
  ASSERT_TRUE(WaitFor([&] { return !Lines(log).empty(); }, 5000)) << "no line reached the new file";
  const long after = answered;
  ASSERT_TRUE(WaitFor([&] { return answered >= after + 2000; }, 10000));
  stop = true;
  for (auto& th : runners) th.join();
  EXPECT_EQ(srv.Stop(), 0);
  EXPECT_EQ(failed, 0);

  const long old_lines = ValidJsonLines(log + ".1"), new_lines = ValidJsonLines(log);
  ASSERT_GT(old_lines, 0);
  ASSERT_GT(new_lines, 0);
  EXPECT_EQ(old_lines + new_lines, answered);
  std::set<std::string> keys;
  for (const std::string& f : {log + ".1", log})
    for (const std::string& l : Lines(f)) {
      const size_t k = l.find("\"key\":\"");
      ASSERT_NE(k, std::string::npos) << l;
      EXPECT_TRUE(keys.insert(l.substr(k, l.find('"', k + 7) - k)).second) << "written twice: " << l;
    }
  EXPECT_EQ(keys.size(), static_cast<size_t>(answered));
}

// A worker killed (kill -9) with lines in its buffer: they are lost, and
// counted as dropped, so that lines and drops still add up to the decisions
// (56 of them were neither in a check from outside).
TEST(DecisionLogE2E, LinesAWorkerTookWithItAreCounted) {
  Frsd srv(LogOptions("<decisions file=\"decisions.log\" record=\"all\"/>"));
  ASSERT_TRUE(srv.Start()) << srv.log();
  std::atomic<long> answered{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> runners;
  const uint16_t port = srv.port();
  for (int r = 0; r < 4; ++r)
    runners.emplace_back([&, r] {
      Client c(port);
      for (int i = 0; !stop; ++i) {
        if (c.Get("/acquire?biz=low&key=k" + std::to_string(r) + "-" + std::to_string(i)).status == 200) ++answered;
        else c.Connect(port);  // its worker died under it
      }
    });
  ASSERT_TRUE(WaitFor([&] { return answered >= 1000; }, 10000));
  const std::vector<pid_t> workers = srv.Workers();
  ASSERT_EQ(workers.size(), 2u);
  for (pid_t w : workers) kill(w, SIGKILL);
  // Both reaped (the master counts what each held as it reaps it).
  ASSERT_TRUE(WaitFor(
      [&] {
    const std::string log = srv.log();
    return log.find("worker 0 (pid") != std::string::npos && log.find("worker 1 (pid") != std::string::npos;
      },
      5000))
      << srv.log();
  const long after = answered;
  ASSERT_TRUE(WaitFor([&] { return answered >= after + 200; }, 10000));
  stop = true;
  for (auto& th : runners) th.join();
  Client m(port);
  const double decisions = Metric(m, "frs_biz_allowed_total{biz=\"low\",id=\"7\"}") +
                           Metric(m, "frs_biz_denied_total{biz=\"low\",id=\"7\"}");
  // Once the survivors wrote theirs out, lines and drops are the decisions,
  // within one a killed worker: a kill between a decision's count and its
  // line's (under), or between the line's count and its place in the
  // buffer (over).
  auto accounted = [&] {
    return Metric(m, "frs_decision_log_lines_total") + Metric(m, "frs_decision_log_dropped_total");
  };
  ASSERT_TRUE(WaitFor([&] { return accounted() >= decisions - 2; }, 5000))
      << accounted() << " lines and drops for " << decisions << " decisions\n"
      << srv.log();
  const double lines = Metric(m, "frs_decision_log_lines_total"), dropped = Metric(m, "frs_decision_log_dropped_total");
  EXPECT_LE(lines + dropped, decisions + 2) << lines << " + " << dropped;
  if (dropped > 0) {
    EXPECT_NE(srv.log().find("decision log line(s) not yet written with it"), std::string::npos);
  }
  EXPECT_EQ(srv.Stop(), 0);
  // The file holds what was counted written, and more when a kill came
  // between a write and its count (those counted dropped); a kill inside a
  // write may tear one line, and the next writer's first line with it.
  const long in_file = ValidJsonLines(srv.dir() + "/decisions.log", /*torn=*/2);
  EXPECT_GE(in_file, static_cast<long>(lines) - 2);
  EXPECT_LE(in_file, static_cast<long>(decisions));
}

// A rotation whose new file cannot be opened (a directory in its place):
// the lines go on into the renamed file, nothing is lost, /metrics says so,
// and the writer opens the file by itself once it can, with no second
// SIGUSR1 (it kept the renamed file forever, unseen).
TEST(DecisionLogE2E, AReopenThatFailsIsSeenAndTriedAgainUntilItOpens) {
  Frsd srv(LogOptions("<decisions file=\"decisions.log\" record=\"all\"/>"));
  ASSERT_TRUE(srv.Start()) << srv.log();
  const std::string log = srv.dir() + "/decisions.log";
  Client c(srv.port());
  auto acquire = [&](int i) { return c.Get("/acquire?biz=low&key=reopen" + std::to_string(i)).status; };
  ASSERT_EQ(acquire(0), 200);
  ASSERT_TRUE(WaitFor([&] { return Lines(log).size() == 1; }, 3000));
  ASSERT_EQ(std::rename(log.c_str(), (log + ".1").c_str()), 0);
  ASSERT_TRUE(std::filesystem::create_directory(log));
  kill(srv.pid(), SIGUSR1);
  ASSERT_TRUE(WaitFor([&] { return Metric(c, "frs_log_last_reopen_successful") == 0; }, 3000)) << srv.log();
  ASSERT_EQ(acquire(1), 200);
  ASSERT_TRUE(WaitFor([&] { return Lines(log + ".1").size() == 2; }, 3000)) << "the line did not reach the old file";
  std::filesystem::remove(log);
  ASSERT_TRUE(WaitFor([&] { return Metric(c, "frs_log_last_reopen_successful") == 1; }, 8000)) << srv.log();
  ASSERT_EQ(acquire(2), 200);
  ASSERT_TRUE(WaitFor([&] { return Lines(log).size() == 1; }, 3000)) << "no line reached the new file";
  EXPECT_EQ(srv.Stop(), 0);
  EXPECT_EQ(ValidJsonLines(log + ".1") + ValidJsonLines(log), 3);
  const std::string said = srv.log();
  EXPECT_NE(said.find("trying again every 5 s"), std::string::npos) << said;
  EXPECT_NE(said.find("decision log " + log + " opened"), std::string::npos) << said;
}

// A reload that takes <decisions> out ends the failing file's alarm: no log,
// nothing failing (it read 0 until frsd restarted).
TEST(DecisionLogE2E, AReloadWithoutTheLogEndsItsFailure) {
  Frsd srv(LogOptions("<decisions file=\"decisions.log\"/>"));
  ASSERT_TRUE(srv.Start()) << srv.log();
  const std::string log = srv.dir() + "/decisions.log";
  Client c(srv.port());
  // A directory where the file was. The second worker's writer may open
  // (create) the file only after the first rename, on a loaded machine:
  // moved aside again until the name is free.
  ASSERT_TRUE(WaitFor(
      [&] {
    std::error_code ec;
    if (std::filesystem::is_directory(log, ec)) return true;
    std::filesystem::rename(log, log + ".1", ec);
    return std::filesystem::create_directory(log, ec);
      },
      3000));
  EXPECT_TRUE(std::filesystem::exists(log + ".1")) << "frsd never made its log";
  kill(srv.pid(), SIGUSR1);
  ASSERT_TRUE(WaitFor([&] { return Metric(c, "frs_log_last_reopen_successful") == 0; }, 3000)) << srv.log();
  std::string conf = ReadFile(srv.config());
  conf.erase(conf.find("<decisions file=\"decisions.log\"/>"), 33);
  WriteFile(srv.config(), conf);
  ASSERT_TRUE(srv.ReloadAndWait()) << srv.log();
  EXPECT_TRUE(WaitFor([&] { return Metric(c, "frs_log_last_reopen_successful") == 1; }, 3000)) << srv.log();
  EXPECT_EQ(srv.Stop(), 0);
}

TEST(DecisionLogE2E, AFullDiskCostsLinesCountedNeverAnswers) {
  // /dev/full: every write fails with ENOSPC, as on a full disk (no root
  // needed, unlike tests/common/small_disk.h's tmpfs).
  Frsd srv(LogOptions("<decisions file=\"/dev/full\"/>"));
  ASSERT_TRUE(srv.Start()) << srv.log();
  Tally t;
  const int64_t start = NowMs();
  RunClients(srv, 40, 30, &t);
  EXPECT_EQ(t.failed, 0);
  EXPECT_EQ(t.answered, 40 * 30 + 40 * 3);
  EXPECT_LT(NowMs() - start, 20000);
  Client c(srv.port());
  // Denials plus the shadow biz's would-be denials are recorded; all fail.
  ASSERT_TRUE(WaitFor([&] { return Metric(c, "frs_decision_log_dropped_total") >= t.denied; }, 5000))
      << Metric(c, "frs_decision_log_dropped_total") << " dropped, " << t.denied << " denied";
  EXPECT_EQ(Metric(c, "frs_decision_log_lines_total"), 0);
  EXPECT_EQ(c.Get("/health").status, 200);
  EXPECT_EQ(srv.Stop(), 0);
}

TEST(DecisionLogE2E, AnUnwritableFileRefusesTheStartNamingIt) {
  Frsd srv(LogOptions("<decisions file=\"/nonexistent-dir/decisions.log\"/>"));
  srv.WriteConfig();
  ASSERT_GT(srv.Spawn(), 0);
  ASSERT_TRUE(srv.Exited(5000));
  EXPECT_NE(srv.exit_status(), 0);
  EXPECT_NE(srv.log().find("cannot open the decision log /nonexistent-dir/decisions.log"), std::string::npos)
      << srv.log();
}

// A FIFO (a log shipper that is down) blocks an open(2) for writing until
// a reader comes: named as the decision log it must be refused, by the check,
// the start and a reload, never waited on.
TEST(DecisionLogE2E, AFifoIsRefusedByTheCheckAndTheStartNamingIt) {
  Frsd srv(LogOptions("<decisions file=\"decisions.fifo\"/>"));
  const std::string fifo = srv.dir() + "/decisions.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  srv.WriteConfig();
  ASSERT_GT(srv.Spawn({"-t", "-c", srv.config()}), 0);
  ASSERT_TRUE(srv.Exited(5000));
  EXPECT_EQ(WEXITSTATUS(srv.exit_status()), 1) << srv.log();
  EXPECT_NE(srv.log().find(fifo + " is a FIFO, not a regular file"), std::string::npos) << srv.log();

  const size_t checked = srv.log().size();
  ASSERT_GT(srv.Spawn(), 0);
  ASSERT_TRUE(srv.Exited(5000)) << "the start waits on the FIFO: " << srv.log();
  EXPECT_NE(srv.exit_status(), 0);
  const std::string started = srv.log().substr(checked);
  EXPECT_NE(started.find(fifo + " is a FIFO, not a regular file"), std::string::npos) << started;
  // At srv.xml's line, as -t and a reload say it (the start named no line:
  // found by an outside run).
  EXPECT_NE(started.find("srv.xml:"), std::string::npos) << started;
}

TEST(DecisionLogE2E, AReloadOntoAFifoIsRefusedAndEveryWorkerAnswers) {
  ServerOptions o = LogOptions("");
  Frsd srv(o);
  ASSERT_TRUE(srv.Start()) << srv.log();
  const std::string fifo = srv.dir() + "/decisions.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string conf = ReadFile(srv.config());
  conf.replace(conf.find("</frs>"), 6, "<decisions file=\"decisions.fifo\" record=\"all\"/></frs>");
  WriteFile(srv.config(), conf);
  EXPECT_FALSE(srv.ReloadAndWait(5000)) << srv.log();
  EXPECT_NE(srv.log().find(fifo + " is a FIFO, not a regular file"), std::string::npos) << srv.log();
  // Every worker answers (each connection lands on one; a few reach both).
  for (int i = 0; i < 8; ++i) {
    Client c(srv.port(), 2000);
    ASSERT_EQ(c.Get("/acquire?biz=low&key=f" + std::to_string(i)).status, 200) << srv.log();
  }
  EXPECT_EQ(srv.Stop(), 0);
}

TEST(DecisionLogE2E, PerRuleSeriesNameEachRule) {
  ServerOptions o;
  o.map = R"(<map><biz id="3" name="ad"><rule name="daily" algo="calendar" interval="86400" max="3"/>
<rule name="hourly" algo="sliding" interval="3600" max="1"/></biz><biz id="4" name="idle"><rule interval="60" max="1"/></biz></map>)";
  Frsd srv(o);
  ASSERT_TRUE(srv.Start()) << srv.log();
  Client c(srv.port());
  EXPECT_EQ(c.Get("/acquire?biz=ad&key=u1").status, 200);
  EXPECT_EQ(c.Get("/acquire?biz=ad&key=u1").status, 429);
  const std::string m = c.Get("/metrics").body;
  EXPECT_NE(m.find("frs_rule_decisions_total{biz=\"ad\",rule=\"daily\",result=\"allowed\"} 2\n"), std::string::npos)
      << m;
  EXPECT_NE(m.find("frs_rule_decisions_total{biz=\"ad\",rule=\"daily\",result=\"denied\"} 0\n"), std::string::npos)
      << m;
  EXPECT_NE(m.find("frs_rule_decisions_total{biz=\"ad\",rule=\"hourly\",result=\"allowed\"} 1\n"), std::string::npos)
      << m;
  EXPECT_NE(m.find("frs_rule_decisions_total{biz=\"ad\",rule=\"hourly\",result=\"denied\"} 1\n"), std::string::npos)
      << m;
  // A biz that has not decided has no series yet.
  EXPECT_EQ(m.find("frs_rule_decisions_total{biz=\"idle\""), std::string::npos) << m;
}

}  // namespace
}  // namespace frs::e2e
