// Envoy's per-descriptor counters (server/envoy_metrics.h) without a server:
// envoyproxy/ratelimit's near_limit arithmetic, over_limit and shadow_mode,
// and the bound on detailed_metric's series.
#include "server/envoy_metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "common/envoy_yaml.h"
#include "common/temp_dir.h"
#include "server/logger.h"

namespace frs::server {
namespace {

const std::string kYaml =
    frs::testing::EnvoyDomain("rl") +
    frs::testing::EnvoyDescriptor("user", "", "detailed_metric: true", "{unit: day, requests_per_unit: 10}") +
    frs::testing::EnvoyDescriptor("trial", "", "shadow_mode: true", "{unit: day, requests_per_unit: 10}") +
    frs::testing::EnvoyDescriptor("seat", "", "", "{unit: concurrent, requests_per_unit: 3, lease: 60}") +
    frs::testing::EnvoyDescriptor("top", "", "", "{unit: year, requests_per_unit: 4294967295}");
const char* const kDescriptorKeys[] = {"user", "trial", "seat", "top"};

struct Fixture {
  Fixture() {
    auto dom = envoy::ParseEnvoyYaml(kYaml, "rl.yaml");
    EXPECT_TRUE(dom.ok()) << dom.status().message();
    envoy::EnvoyConfig cfg;
    cfg.domains.push_back(std::move(dom.value()));
    rules = envoy::EnvoyRules::Compile(cfg).value();
    metrics = Metrics::Create(2).value();
  }
  // One descriptor `key`=`value` of limit `li` (10 a day, near past 8):
  // `hits` hits counted on `before` (every hit counts, as upstream's), over
  // the limit (`over`) or not.
  void Answer(EnvoyMetrics& m, size_t li, std::string value, uint64_t hits, int64_t before, bool over,
              uint64_t near_threshold = 8) {
    const envoy::CompiledLimit& l = rules->limits()[li];
    values.push_back(std::move(value));
    envoy::RlsRequest req;
    req.domain = "rl";
    req.descriptors.resize(1);
    req.descriptors[0].entries.push_back({kDescriptorKeys[li], values.back()});
    envoy::RlsAnswer a;
    a.statuses.resize(1);
    envoy::RlsStatus& st = a.statuses[0];
    st.has_limit = true;
    st.limit = &l;
    st.hits = hits;
    st.before = before;
    st.after = before + static_cast<int64_t>(hits);
    st.near_threshold = near_threshold;
    st.remaining = over ? 0 : static_cast<uint32_t>(l.limit.requests_per_unit - st.after);
    if (over) (l.shadow_mode ? st.shadow_over : st.over) = true;
    st.near = !over && static_cast<uint64_t>(st.after) > near_threshold;
    // The counter key names a detailed_metric descriptor's series.
    if (l.detailed_metric) st.metric_key = std::string(li == 0 ? "user_" : "trial_") + values.back();
    m.Count(req, a);
  }
  uint64_t Value(const std::string& text, const std::string& series) {
    const size_t p = text.find("\n" + series + " ");
    return p == std::string::npos ? ~uint64_t{0} : std::stoull(text.substr(p + series.size() + 2));
  }
  std::string Render() {
    std::string out;
    RenderEnvoyMetrics(*metrics, *rules, &out);
    return out;
  }
  std::shared_ptr<const envoy::EnvoyRules> rules;
  std::unique_ptr<Metrics> metrics;
  std::deque<std::string> values;  // the entries' views point here
};

std::string S(const char* descriptor, const char* result) {
  return std::string("frs_envoy_descriptor_hits_total{domain=\"rl\",descriptor=\"") + descriptor + "\",result=\"" +
         result + "\"}";
}

TEST(EnvoyMetrics, CountsAsEnvoyproxyRatelimitAcrossWorkers) {
  Fixture f;
  EnvoyMetrics w0(&f.metrics->worker(0)), w1(&f.metrics->worker(1));
  f.Answer(w0, 0, "a", 7, 0, false);   // 0 -> 7: under floor(0.8 x 10) = 8
  f.Answer(w1, 0, "a", 3, 7, false);   // 7 -> 10: two of three hits past 8
  f.Answer(w0, 0, "a", 2, 10, true);   // denied: both hits over
  f.Answer(w1, 1, "t", 4, 10, true);   // shadow: over and let through
  f.Answer(w1, 0, "a", 0, 10, false);  // a look counts nothing
  const std::string m = f.Render();
  EXPECT_EQ(f.Value(m, S("user", "total")), 12u) << m;
  EXPECT_EQ(f.Value(m, S("user", "within_limit")), 10u);
  EXPECT_EQ(f.Value(m, S("user", "near_limit")), 2u);
  EXPECT_EQ(f.Value(m, S("user", "over_limit")), 2u);
  EXPECT_EQ(f.Value(m, S("user", "shadow_mode")), 0u);
  EXPECT_EQ(f.Value(m, S("trial", "over_limit")), 4u);
  EXPECT_EQ(f.Value(m, S("trial", "shadow_mode")), 4u);
  EXPECT_EQ(f.Value(m, S("trial", "within_limit")), 0u);
  // Both workers met key "user_a": one series.
  EXPECT_EQ(f.Value(m,
                    "frs_envoy_descriptor_detailed_hits_total{domain=\"rl\",descriptor=\"user\",key=\"user_a\","
                    "result=\"total\"}"),
            12u)
      << m;
}

// A count stops at 2^32-1, which is past a limit of 2^32-1: a hit landing
// on the top is over_limit only, never near_limit as well (near + over was
// twice the hits there).
TEST(EnvoyMetrics, AtTheTopOfA32BitLimitAHitIsOverNotNearToo) {
  Fixture f;
  EnvoyMetrics w0(&f.metrics->worker(0));
  const int64_t top = 4294967295;
  const uint64_t near = 3435973836;              // floor(0.8 x limit)
  f.Answer(w0, 3, "t", 2, top - 2, true, near);  // lands on 2^32-2, then on the top
  f.Answer(w0, 3, "t", 1, top - 1, true, near);  // the count stays at the top
  f.Answer(w0, 3, "t", 5, top - 5, true, near);  // saturated: its before is a lower bound
  const std::string m = f.Render();
  EXPECT_EQ(f.Value(m, S("top", "total")), 8u) << m;
  EXPECT_EQ(f.Value(m, S("top", "over_limit")), 3u);
  EXPECT_EQ(f.Value(m, S("top", "near_limit")), 5u);  // 1 + 0 + 4: never more than the hits
}

// unit: concurrent takes one place (a lease) whatever hits_addend says: its
// series count one hit per call, not the addend.
TEST(EnvoyMetrics, AnInFlightDescriptorCountsOneHitACall) {
  Fixture f;
  EnvoyMetrics w0(&f.metrics->worker(0));
  f.Answer(w0, 2, "s", 5, 0, false);  // a place taken
  f.Answer(w0, 2, "s", 5, 3, true);   // none free
  const std::string m = f.Render();
  EXPECT_EQ(f.Value(m, S("seat", "total")), 2u) << m;
  EXPECT_EQ(f.Value(m, S("seat", "within_limit")), 1u);
  EXPECT_EQ(f.Value(m, S("seat", "over_limit")), 1u);
}

// Calls for domains no file names are logged once a period; the other
// domains asked for in between are named in the next line, so that a second
// typo does not hide behind the first's line.
TEST(EnvoyMetrics, TheUnknownDomainLineNamesTheOthersAskedForSinceTheLast) {
  frs::testing::TempDir dir;
  const std::string path = dir / "frsd.log";
  ASSERT_TRUE(Logger::Get().Configure(path, "worker 0").ok());
  Fixture f;
  EnvoyMetrics w0(&f.metrics->worker(0), /*log_period_ns=*/100'000'000);
  auto ask = [&](std::string domain) {
    f.values.push_back(std::move(domain));
    envoy::RlsRequest req;
    req.domain = f.values.back();
    envoy::RlsAnswer a;
    a.unknown_domain = true;
    w0.Count(req, a);
  };
  auto log = [&] {
    std::ifstream in(path);
    std::stringstream all;
    all << in.rdbuf();
    return all.str();
  };
  ask("nope");  // logged at once
  // "y\xff\x01%\"": bytes that are not UTF-8, a control character, '%' and
  // '"' are written %XX, as Envoy's keys are (JSON's \u00ff named a
  // character the client never sent).
  for (const char* d : {"zz", "nope", "zz", "y\xff\x01%\"", "a1", "a2", "a3"}) ask(d);  // within the period
  // The next line comes with the first call after the period: asked until then.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (log().find("domain \"last\"") == std::string::npos && std::chrono::steady_clock::now() < give_up) {
    ask("last");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(Logger::Get().Configure("", "frsd").ok());
  const std::string text = log();
  EXPECT_NE(text.find("Envoy asked for domain \"nope\", which no <grpc config> file names: answered OK with no limit "
                      "(1 since the last such line; "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Envoy asked for domain \"last\", which no <grpc config> file names: answered OK with no limit "
                      "("),
            std::string::npos)
      << text;
  // The first four others, each once, and that there were more.
  EXPECT_NE(text.find("; also asked for since: \"zz\", \"nope\", \"y%FF%01%25%22\", \"a1\", and others; "
                      "frs_envoy_unknown_domain_total counts each)"),
            std::string::npos)
      << text;
  EXPECT_EQ(CounterGet(f.metrics->worker(0).envoy_unknown_domain), f.values.size());
}

TEST(EnvoyMetrics, DetailedSeriesAreBoundedAndTheRestSummedInOther) {
  Fixture f;
  EnvoyMetrics w0(&f.metrics->worker(0));
  const int n = static_cast<int>(kDetailedKeys) + 500;
  for (int i = 0; i < n; ++i) f.Answer(w0, 0, "v" + std::to_string(i) + "\n\xff", 1, 1, false);
  const std::string m = f.Render();
  std::regex total(
      R"re(frs_envoy_descriptor_detailed_hits_total\{domain="rl",descriptor="user",key="([^"]*)",result="total"\} (\d+))re");
  uint64_t sum = 0, series = 0, other = 0;
  for (auto it = std::sregex_iterator(m.begin(), m.end(), total); it != std::sregex_iterator(); ++it) {
    const std::string key = (*it)[1];
    sum += std::stoull((*it)[2]);
    if (key == "~other") other = std::stoull((*it)[2]);
    else ++series;
    EXPECT_EQ(key.find_first_of("\n\xff"), std::string::npos) << "a label carries only printable ASCII";
  }
  EXPECT_EQ(sum, static_cast<uint64_t>(n));  // nothing lost
  // Exactly the first kDetailedKeys keys have their own series (a probe
  // window over the slots filled about two thirds of them).
  EXPECT_EQ(series, kDetailedKeys);
  EXPECT_EQ(other, 500u);
}

// The totals of the detailed series by key label (user_VALUE).
std::map<std::string, uint64_t> DetailedTotals(const std::string& m) {
  std::regex total(
      R"re(frs_envoy_descriptor_detailed_hits_total\{domain="rl",descriptor="user",key="([^"]*)",result="total"\} (\d+))re");
  std::map<std::string, uint64_t> out;
  for (auto it = std::sregex_iterator(m.begin(), m.end(), total); it != std::sregex_iterator(); ++it)
    out[(*it)[1]] += std::stoull((*it)[2]);
  return out;
}

// A respawned worker carries on its predecessor's slots: a key it had goes
// on in its series, a new one takes the next free slot, and once every slot
// is taken a new key goes to ~other.
TEST(EnvoyMetrics, ARespawnedWorkerFindsItsPredecessorsKeysAndTheirFreeSlots) {
  Fixture f;
  {
    EnvoyMetrics before(&f.metrics->worker(1));
    for (int i = 0; i < 10; ++i) f.Answer(before, 0, "p" + std::to_string(i), 1, 1, false);
  }
  EnvoyMetrics after(&f.metrics->worker(1));
  for (int i = 0; i < 15; ++i) f.Answer(after, 0, "p" + std::to_string(i), 1, 1, false);
  auto totals = DetailedTotals(f.Render());
  EXPECT_EQ(totals.size(), 15u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(totals["user_p" + std::to_string(i)], i < 10 ? 2u : 1u) << i;

  for (int i = 15; i < static_cast<int>(kDetailedKeys); ++i) f.Answer(after, 0, "p" + std::to_string(i), 1, 1, false);
  EnvoyMetrics again(&f.metrics->worker(1));
  f.Answer(again, 0, "p3", 1, 1, false);
  f.Answer(again, 0, "late", 1, 1, false);
  totals = DetailedTotals(f.Render());
  EXPECT_EQ(totals["user_p3"], 3u);
  EXPECT_EQ(totals.count("user_late"), 0u);
  EXPECT_EQ(totals["~other"], 1u);
  EXPECT_EQ(totals.size(), kDetailedKeys + 1);
}

// A key past 103 bytes is cut and ends in a hash; one that is not cut can
// never be written to equal it (a 120-byte key once could: the cut label's
// own prefix, '~' and hash), so two keys never share a series.
TEST(EnvoyMetrics, ACutKeysLabelIsNoUncutKeysLabel) {
  Fixture f;
  EnvoyMetrics w0(&f.metrics->worker(0));
  f.Answer(w0, 0, std::string(200, 'a'), 1, 1, false);
  auto totals = DetailedTotals(f.Render());
  ASSERT_EQ(totals.size(), 1u);
  const std::string cut = totals.begin()->first;
  ASSERT_EQ(cut.size(), kDetailedKeyBytes) << cut;
  EXPECT_EQ(cut.substr(0, 103), "user_" + std::string(98, 'a'));
  EXPECT_EQ(cut[103], '~');
  // The same label as a value of its own ("user_" comes before it): a series
  // of its own, cut too, whatever it spells.
  f.Answer(w0, 0, cut.substr(5), 1, 1, false);
  f.Answer(w0, 0, std::string(98, 'a'), 1, 1, false);  // 103 bytes: not cut
  totals = DetailedTotals(f.Render());
  EXPECT_EQ(totals.size(), 3u);
  EXPECT_EQ(totals[cut], 1u);
  EXPECT_EQ(totals["user_" + std::string(98, 'a')], 1u);
}

}  // namespace
}  // namespace frs::server
