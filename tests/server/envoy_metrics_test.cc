// Envoy's per-descriptor counters (server/envoy_metrics.h) without a server:
// envoyproxy/ratelimit's near_limit arithmetic, over_limit and shadow_mode,
// and the bound on detailed_metric's series.
#include "server/envoy_metrics.h"

#include <gtest/gtest.h>

#include <deque>
#include <regex>

#include "common/envoy_yaml.h"

namespace frs::server {
namespace {

const std::string kYaml =
    frs::testing::EnvoyDomain("rl") +
    frs::testing::EnvoyDescriptor("user", "", "detailed_metric: true", "{unit: day, requests_per_unit: 10}") +
    frs::testing::EnvoyDescriptor("trial", "", "shadow_mode: true", "{unit: day, requests_per_unit: 10}");

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
  void Answer(EnvoyMetrics& m, size_t li, std::string value, uint64_t hits, int64_t before, bool over) {
    const envoy::CompiledLimit& l = rules->limits()[li];
    values.push_back(std::move(value));
    envoy::RlsRequest req;
    req.domain = "rl";
    req.descriptors.resize(1);
    req.descriptors[0].entries.push_back({li == 0 ? "user" : "trial", values.back()});
    envoy::RlsAnswer a;
    a.statuses.resize(1);
    envoy::RlsStatus& st = a.statuses[0];
    st.has_limit = true;
    st.limit = &l;
    st.hits = hits;
    st.before = before;
    st.after = before + static_cast<int64_t>(hits);
    st.near_threshold = 8;
    st.remaining = over ? 0 : static_cast<uint32_t>(10 - st.after);
    if (over) (l.shadow_mode ? st.shadow_over : st.over) = true;
    st.near = !over && st.after > 8;
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
  EXPECT_LE(series, kDetailedKeys);
  EXPECT_GT(series, kDetailedKeys / 2);  // the table is used, not skipped
  EXPECT_GE(other, 500u);
}

}  // namespace
}  // namespace frs::server
