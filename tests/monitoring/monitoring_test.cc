// The shipped monitoring (conf/monitoring): the alert rules pass promtool's
// check and their own unit tests, and every frs_ metric that the rules and
// the Grafana dashboard use is one that a real frsd exports.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include "e2e/frsd_harness.h"

namespace frs {
namespace {

const std::string kDir = FRS_MONITORING_DIR;

bool HavePromtool() { return std::system("command -v promtool >/dev/null 2>&1") == 0; }

int RunCmd(const std::string& cmd, std::string* out) {
  std::string full = cmd + " 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(Monitoring, AlertRulesPassPromtool) {
  ASSERT_TRUE(HavePromtool()) << "promtool is not installed (tools/setup.sh --test installs prometheus)";
  std::string out;
  EXPECT_EQ(RunCmd("cd '" + kDir + "' && promtool check rules frs-alerts.yml", &out), 0) << out;
  out.clear();
  EXPECT_EQ(RunCmd("cd '" + kDir + "' && promtool test rules frs-alerts.test.yml", &out), 0) << out;
}

// docs/install.md's table names every alert the rules define: an operator
// reads there which alerts exist and what each means.
TEST(Monitoring, TheInstallGuideNamesEveryAlert) {
  const std::string rules = e2e::ReadFile(kDir + "/frs-alerts.yml");
  const std::string guide = e2e::ReadFile(kDir + "/../../docs/install.md");
  ASSERT_FALSE(guide.empty());
  std::regex re("- alert: (Frs[A-Za-z]+)");
  int alerts = 0;
  for (auto it = std::sregex_iterator(rules.begin(), rules.end(), re); it != std::sregex_iterator(); ++it, ++alerts)
    EXPECT_NE(guide.find("`" + (*it)[1].str() + "`"), std::string::npos)
        << (*it)[1].str() << " is not in docs/install.md";
  EXPECT_GE(alerts, 20);
}

// frs_ names in a file, with a histogram's _bucket/_sum/_count folded.
std::set<std::string> MetricNames(const std::string& text) {
  std::set<std::string> names;
  std::regex re("frs_[a-z_]+");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    std::string n = it->str();
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      std::string s(suffix);
      if (n.size() > s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0) n.resize(n.size() - s.size());
    }
    names.insert(n);
  }
  return names;
}

TEST(Monitoring, RulesAndDashboardUseOnlyMetricsFrsdExports) {
  // With <grpc>: the dashboard's Envoy panel uses the per-descriptor series.
  // With replicas (a ring whose other shard does not answer): the replica
  // alerts' series.
  e2e::ServerOptions o;
  o.extra =
      "  <grpc listen=\"127.0.0.1:0\" config=\"envoy\"/>\n"
      "  <cluster self=\"127.0.0.1:1\" replicas=\"1\"><shard>127.0.0.1:1</shard><shard>127.0.0.1:2</shard></cluster>\n";
  e2e::Frsd srv(o);
  std::filesystem::create_directories(srv.dir() + "/envoy");
  e2e::WriteFile(srv.dir() + "/envoy/rl.yaml",
                 "domain: rl\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 5}\n");
  ASSERT_TRUE(srv.Start()) << srv.log();
  e2e::Client c(srv.port());
  e2e::HttpResponse m = c.Get("/metrics");
  ASSERT_EQ(m.status, 200);
  std::set<std::string> exported;
  std::regex help("# HELP (frs_[a-z_]+) ");
  for (auto it = std::sregex_iterator(m.body.begin(), m.body.end(), help); it != std::sregex_iterator(); ++it)
    exported.insert((*it)[1]);
  ASSERT_GT(exported.size(), 10u) << m.body;
  for (const char* file : {"frs-alerts.yml", "frs-dashboard.json"}) {
    std::set<std::string> used = MetricNames(e2e::ReadFile(kDir + "/" + file));
    EXPECT_GT(used.size(), 5u) << file;
    for (const std::string& name : used)
      EXPECT_TRUE(exported.count(name)) << file << " uses " << name << ", which frsd does not export";
  }
}

double Sample(const std::string& exposition, const std::string& series) {
  size_t p = exposition.find("\n" + series + " ");
  if (p == std::string::npos) return -1;
  return std::atof(exposition.c_str() + p + 1 + series.size() + 1);
}

TEST(Monitoring, ProcessSeriesForEveryProcessAndBuildInfo) {
  e2e::Frsd srv;  // two workers
  ASSERT_TRUE(srv.Start()) << srv.log();
  e2e::Client c(srv.port());
  e2e::HttpResponse m = c.Get("/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.header("server"), std::string("frsd/") + FRS_VERSION);
  const double now = static_cast<double>(std::time(nullptr));
  for (const std::string labels :
       {"{process=\"master\"}", "{process=\"worker\",slot=\"0\"}", "{process=\"worker\",slot=\"1\"}"}) {
    EXPECT_GE(Sample(m.body, "process_cpu_seconds_total" + labels), 0) << labels << "\n" << m.body;
    EXPECT_GT(Sample(m.body, "process_resident_memory_bytes" + labels), 1e5) << labels;
    EXPECT_GE(Sample(m.body, "process_open_fds" + labels), 3) << labels;
    EXPECT_GT(Sample(m.body, "process_max_fds" + labels), 0) << labels;
    double start = Sample(m.body, "process_start_time_seconds" + labels);
    EXPECT_GT(start, now - 120) << labels;
    EXPECT_LE(start, now + 1) << labels;
  }
  EXPECT_NE(m.body.find(std::string("frs_build_info{version=\"") + FRS_VERSION + "\""), std::string::npos) << m.body;
  // The master's own descriptors: it is the process that holds every listener.
  std::string fds = "/proc/" + std::to_string(srv.pid()) + "/fd";
  EXPECT_GT(Sample(m.body, "process_open_fds{process=\"master\"}"), 0) << fds;
}

}  // namespace
}  // namespace frs
