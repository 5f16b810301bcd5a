// GET /metrics as Metrics::Render writes it: every series docs/protocol.md
// lists is there with the type the table gives, and the whole text, for
// counters each set to its own value, is pinned byte for byte.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "server/clock_util.h"
#include "server/fake_engine.h"
#include "server/held_now.h"

namespace frs::server {
namespace {

// Every counter Render reads, each given a value of its own, in both
// worker slots, so that a series reading the wrong counter shows.
std::unique_ptr<Metrics> FilledMetrics() {
  std::unique_ptr<Metrics> m = Metrics::Create(2).value();
  MasterCounters& master = m->master();
  CounterSet(master.started_unix, 1763790000);
  CounterSet(master.worker_restarts, 3);
  CounterSet(master.lock_recoveries, 5);
  CounterSet(master.stall_kills, 11);
  // Worker 1 serves and turned its loop 4.5 s ago; worker 0's slot, whose
  // last turn is older, has no worker (it died, pid 0): not counted.
  const uint64_t now_ms = static_cast<uint64_t>(MonoNs() / 1000000);
  CounterSet(m->worker(1).pid, 4242);
  CounterSet(m->worker(1).serving_pid, 4242);
  CounterSet(m->worker(1).beat_ms, now_ms - 4500);
  CounterSet(m->worker(0).beat_ms, now_ms - 60000);
  CounterSet(master.reload_failures, 7);
  CounterSet(master.last_reload_refused, 1);
  CounterSet(master.restart_pending, 1);
  CounterSet(m->worker(1).log_reopen_failed, 1);  // the master's reopen succeeded, a worker's did not
  for (uint32_t w = 0; w < 2; ++w) {
    WorkerCounters& c = m->worker(w);
    const uint64_t k = w + 1;  // worker 1 counts twice what worker 0 does
    c.CountRequest(CmdLabel::kAcquire, 200, 30'000 * k);
    c.CountRequest(CmdLabel::kAcquire, 429, 700'000 * k);
    c.CountRequest(CmdLabel::kNone, 400, 2'000'000'000);
    c.CountRequest(CmdLabel::kJson, 999, 10);  // an unknown status counts as 500
    c.CountRequest(CmdLabel::kNone, 501, 10);  // a 501 as itself (it counted as 500)
    CounterSet(c.decision_log.lines, 100 * k);
    CounterSet(c.decision_log.dropped_full, 10 * k);
    CounterSet(c.decision_log.dropped_failed, 1 * k);
    CounterSet(c.connections_accepted, 11 * k);
    CounterSet(c.connections_refused, 13 * k);
    CounterSet(c.connections_overflow, 17 * k);
    CounterSet(c.connections_timed_out, 19 * k);
    CounterSet(c.connections_open, 23 * k);
    CounterSet(c.reloads, 29 * k);
    CounterSet(c.reload_failures, 31 * k);
    CounterSet(c.misrouted, 37 * k);
    CounterSet(c.merged, 41 * k);
    CounterSet(c.merge_duplicates, 43 * k);
    CounterSet(c.accept_fd_exhausted, 47 * k);
    CounterSet(c.grpc_held_bytes, 53 * k);
    CounterSet(c.grpc_tls_refused, 59 * k);
    // The earliest of the workers' certificates: worker 1's.
    CounterSet(c.tls_not_after, 2'000'000'000 - 100'000'000 * k);
    CounterSet(c.store_file_lost, w);  // worker 1's check found one
    CounterSet(c.stats_unstored, 61 * k);
    CounterSet(c.envoy_calls[kEnvoyCallOk], 1009 * k);
    CounterSet(c.envoy_calls[kEnvoyCallOverLimit], 1013 * k);
    CounterSet(c.envoy_calls[kEnvoyCallError], 1019 * k);
    CounterSet(c.envoy_unknown_domain, 1021 * k);
    CounterSet(c.unknown_biz, 1031 * k);
    CounterSet(c.biz_allowed[1], 61 * k);
    CounterSet(c.biz_denied[1], 67 * k);
    CounterSet(c.biz_shadow_denied[2], 71 * k);
    CounterSet(c.leases_granted[3], 73 * k);
    CounterSet(c.leases_released[3], 79 * k);
    CounterSet(c.leases_renewed[3], 83 * k);
    CounterSet(c.leases_expired[3], 89 * k);
    CounterSet(c.leases_expired[1],
               97 * k);  // a biz without a concurrency rule: its four series shown while one is nonzero
    CounterSet(c.res_taken[4], 101 * k);
    CounterSet(c.res_settled[4], 103 * k);
    CounterSet(c.res_expired[4], 107 * k);
    CounterSet(c.res_taken[2], 109 * k);  // no reservations="N": shown while nonzero
    CounterSet(c.rule_decisions[1][0][0], 113 * k);
    CounterSet(c.rule_decisions[1][1][1], 127 * k);
    CounterSet(c.rule_decisions[2][0][2], 131 * k);
    CounterSet(c.rule_decisions[5][0][1], 137 * k);  // a biz that never decided: its nonzero series only
  }
  return m;
}

void FillEngine(testing::FakeEngine* engine) {
  testing::FakeEngine& e = *engine;
  e.bizzes = {{1, "login", Mode::kEnforce, {"per_ip", "per_user"}},
              {2, "api", Mode::kShadow, {"burst"}},
              {3, "pool", Mode::kEnforce, {"inflight"}, {}, ':', "", true, false},
              {4, "llm", Mode::kEnforce, {"tokens"}, {}, ':', "tokens", false, true},
              {5, "q\"uote", Mode::kEnforce, {"r\\1"}},
              {6, "idle", Mode::kEnforce, {"never"}}};
  e.today = 20400;
  e.daily_stats = {{1, "login", {{20400, 10, 7, 3, 2}, {20399, 99, 99, 0, 9}}},
                   {2, "api", {{20399, 5, 5, 0, 1}}},  // nothing today: 0
                   {3, "pool", {}}};
}

std::string Rendered() {
  std::unique_ptr<Metrics> m = FilledMetrics();
  testing::FakeEngine e;
  FillEngine(&e);
  std::string out;
  m->Render(e, nullptr, &out);
  return out;
}

// "# TYPE name type" lines of `text`, in order.
std::vector<std::pair<std::string, std::string>> Types(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> types;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    static const std::regex kType(R"(# TYPE (\S+) (\S+))");
    std::smatch m;
    if (std::regex_match(line, m, kType)) types.emplace_back(m[1], m[2]);
  }
  return types;
}

// docs/protocol.md's metric table: {name: type}. A row may list several
// names: "`a_x_total`, `_y_total`" (the second takes the first's name
// without its last two words) or "`a` / `b`".
std::map<std::string, std::string> DocumentedTypes() {
  std::ifstream f(FRS_SOURCE_DIR "/docs/protocol.md");
  std::map<std::string, std::string> types;
  bool in_table = false;
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("| metric | type |", 0) == 0) in_table = true;
    if (!in_table) continue;
    if (line.rfind("|", 0) != 0) break;
    static const std::regex kRow(R"(^\| ([^|]*) \| (counter|gauge|histogram) \|)");
    std::smatch row;
    if (!std::regex_search(line, row, kRow)) continue;
    const std::string names = row[1], type = row[2];
    std::string first;
    static const std::regex kName("`([a-z_]+)`");
    for (auto it = std::sregex_iterator(names.begin(), names.end(), kName); it != std::sregex_iterator(); ++it) {
      std::string name = (*it)[1];
      if (name.front() == '_') {
        const size_t cut = first.rfind('_', first.rfind('_') - 1);
        name = first.substr(0, cut) + name;
      } else if (first.empty()) {
        first = name;
      }
      types[name] = type;
    }
  }
  return types;
}

TEST(MetricsRender, EverySeriesOfTheDocsTableIsRenderedWithItsType) {
  const std::map<std::string, std::string> documented = DocumentedTypes();
  ASSERT_GT(documented.size(), 50u) << "docs/protocol.md's metric table was not read";
  std::set<std::string> rendered;
  for (const auto& [name, type] : Types(Rendered())) {
    EXPECT_TRUE(rendered.insert(name).second) << name << " has two TYPE lines";
    auto it = documented.find(name);
    if (it == documented.end()) {
      ADD_FAILURE() << name << " is rendered but not in docs/protocol.md's metric table";
      continue;
    }
    EXPECT_EQ(type, it->second) << name;
  }
  // Series that other functions render beside Metrics::Render (handler.cc):
  // the leases and reservations held and their walks (held_now_test.cc), Envoy's
  // descriptors and the replica links.
  const auto elsewhere = [](const std::string& name) {
    return name == "frs_leases_held" || name == "frs_reservations_held" || name.rfind("frs_held_", 0) == 0 ||
           name.rfind("frs_envoy_", 0) == 0 || name.rfind("frs_replica_", 0) == 0;
  };
  for (const auto& [name, type] : documented) {
    if (elsewhere(name)) continue;
    EXPECT_TRUE(rendered.count(name)) << name << " is documented but Metrics::Render lost it";
  }
}

// The series RenderHeldNow adds (server/held_now.h) are in the table too,
// with their types.
TEST(MetricsRender, TheHeldSeriesAreDocumented) {
  std::unique_ptr<Metrics> m = Metrics::Create(1).value();
  HeldNowScrape scrape;
  scrape.bizzes = {AdminEngine::BizHeldNow{20, "inflight", 1, 0, true, false},
                   AdminEngine::BizHeldNow{21, "tokens", 0, 2, false, true}};
  std::string text;
  RenderHeldNow(scrape, *m, &text);
  const std::map<std::string, std::string> documented = DocumentedTypes();
  std::set<std::string> names;
  for (const auto& [name, type] : Types(text)) {
    names.insert(name);
    auto it = documented.find(name);
    if (it == documented.end()) ADD_FAILURE() << name << " is rendered but not in docs/protocol.md's metric table";
    else EXPECT_EQ(type, it->second) << name;
  }
  EXPECT_EQ(names.size(), 5u) << text;
}

// The text up to the process series (those read /proc), with the build's
// compiler named as a placeholder, is metrics_render.txt: a series lost,
// renamed, retyped, moved, or reading another counter changes it. (After
// a deliberate change to /metrics, write the new text there and read the
// diff.)
TEST(MetricsRender, TheTextIsPinned) {
  std::string text = Rendered();
  text = text.substr(0, text.find("# HELP process_"));
  text = std::regex_replace(text, std::regex(R"(compiler="[^"]*")"), "compiler=\"CC\"");
  std::ifstream f(FRS_SOURCE_DIR "/tests/server/metrics_render.txt");
  std::stringstream pinned;
  pinned << f.rdbuf();
  ASSERT_FALSE(pinned.str().empty()) << "tests/server/metrics_render.txt was not read";
  EXPECT_EQ(text, pinned.str());
}

TEST(MetricsRender, AStreamHashIsSpelledAsPrintfsSixteenHexDigits) {
  // Receipts already in stores (park/BIZ/HEX) and the answers' "carried"
  // lines (%016llx) hold these words: a change of spelling would make a
  // record taken again count twice.
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{0xabcdef0123456789}, ~uint64_t{0}}) {
    char printed[20];
    std::snprintf(printed, sizeof printed, "%016llx", static_cast<unsigned long long>(v));
    EXPECT_EQ(Hex16(v), printed);
    EXPECT_EQ(StreamTokenSuffix(v), std::string("~") + printed);
  }
}

}  // namespace
}  // namespace frs::server
