// The Envoy configuration compiled for the engine (envoy/envoy_rules.h) and
// ShouldRateLimit's decisions over a real engine and store
// (envoy/rate_limit_service.h).
#include "envoy/envoy_rules.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/temp_dir.h"
#include "envoy/rate_limit_service.h"
#include "frs/clock.h"

namespace frs::envoy {
namespace {

constexpr int64_t kT0 = 1795000000;  // a Unix second, 20 s into its minute

const char* kYaml = R"(domain: rl
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: category
    value: account
    descriptors:
      - key: source
        value: proxy
        rate_limit: {unit: hour, requests_per_unit: 2}
  - key: client
    value: trial
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: client
    value: internal
    rate_limit: {unlimited: true}
  - key: user
    rate_limit: {name: per_user, unit: day, requests_per_unit: 1}
  - key: plan
    value: premium
    rate_limit:
      unit: day
      requests_per_unit: 100
      replaces: [{name: per_user}]
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
)";

std::string Bundle(const std::string& name, const std::string& text) {
  return name + "\n" + std::to_string(text.size()) + "\n" + text;
}

std::shared_ptr<const EnvoyRules> Rules(const std::string& yaml = kYaml) {
  auto r = EnvoyRules::FromBundle(Bundle("rl.yaml", yaml));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : nullptr;
}

TEST(EnvoyConfig, ErrorsNameFileAndLine) {
  auto r = EnvoyRules::FromBundle(Bundle("x.yaml", "domain: d\ndescriptors:\n  - key: a\n    valu: b\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "x.yaml:4: unknown key 'valu' in a descriptor");
  r = EnvoyRules::FromBundle(Bundle("y.yaml", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day}\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "y.yaml:4: rate_limit without requests_per_unit");
  r = EnvoyRules::FromBundle(Bundle("z.yaml", "domain: [\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("z.yaml:"), std::string::npos);
  r = EnvoyRules::FromBundle(Bundle("w.yaml", "domain: d\ndescriptors:\n  - key: a\n  - key: a\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "w.yaml:4: duplicate descriptor 'a' at this level");
}

TEST(EnvoyRules, FindWalksKeyValueThenKeyAsEnvoyDoes) {
  auto rules = Rules();
  std::string scratch;
  auto find = [&](std::initializer_list<Entry> e) {
    return rules->Find("rl", std::span<const Entry>(e.begin(), e.size()), &scratch);
  };
  const int32_t ra = find({{"remote_address", "10.0.0.1"}});
  ASSERT_GE(ra, 0);
  EXPECT_EQ(rules->limits()[static_cast<size_t>(ra)].biz, "envoy.rl.remote_address");
  EXPECT_EQ(find({{"remote_address", "10.0.0.2"}}), ra);
  // The limit sits on the node the last entry reaches.
  EXPECT_EQ(find({{"category", "account"}}), EnvoyRules::kNoLimit);
  const int32_t nested = find({{"category", "account"}, {"source", "proxy"}});
  ASSERT_GE(nested, 0);
  EXPECT_EQ(rules->limits()[static_cast<size_t>(nested)].path, "category_account.source_proxy");
  EXPECT_EQ(find({{"category", "account"}, {"source", "other"}}), EnvoyRules::kNoLimit);
  EXPECT_EQ(find({{"client", "internal"}}), EnvoyRules::kUnlimited);
  EXPECT_EQ(find({{"unknown", "x"}}), EnvoyRules::kNoLimit);
  EXPECT_EQ(rules->Find("other_domain", std::vector<Entry>{{"remote_address", "x"}}, &scratch),
            EnvoyRules::kNoLimit);
}

TEST(EnvoyRules, ComposeRefusesReservedIdsAndNames) {
  auto rules = Rules();
  auto ok = ComposeMap("<map>\n<biz id=\"1\" name=\"login\"><rule interval=\"60\" max=\"5\"/></biz>\n</map>\n",
                       "map.xml", *rules);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_NE(ok->find("name=\"envoy.rl.remote_address\""), std::string::npos);
  auto bad = ComposeMap("<map>\n<biz id=\"60000\" name=\"x\"><rule interval=\"60\" max=\"5\"/></biz>\n</map>\n",
                        "map.xml", *rules);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("map.xml:2: biz id 60000 is in the range"), std::string::npos);
  bad = ComposeMap("<map>\n<biz id=\"7\" name=\"envoy.x\"><rule interval=\"60\" max=\"5\"/></biz>\n</map>\n",
                   "map.xml", *rules);
  ASSERT_FALSE(bad.ok());
}

class DecideTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rules_ = Rules();
    StoreOptions so;
    so.dir = dir_.path() + "/store";
    so.geometry = StoreGeometry{1, 1024, 8};
    auto s = Store::Open(so);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s.value());
    auto map = ComposeMap("<map>\n</map>\n", "map.xml", *rules_);
    ASSERT_TRUE(map.ok()) << map.status().ToString();
    EngineOptions eo;
    eo.map_text = *map;
    eo.map_path = dir_.path() + "/map.xml";
    eo.store = store_.get();
    eo.stats_dir = so.dir;
    eo.clock = &clock_;
    eo.timezone = "Asia/Kolkata";  // windows stay UTC-aligned all the same
    auto e = Engine::Open(eo);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e.value());
    svc_ = std::make_unique<RateLimitService>(engine_.get());
    svc_->SetRules(rules_);
  }
  RlsAnswer Ask(std::vector<std::vector<Entry>> descriptors, uint64_t hits = 1) {
    RlsRequest req;
    req.domain = "rl";
    req.hits = hits;
    for (auto& e : descriptors) req.descriptors.push_back(RlsDescriptor{std::move(e), false, 0});
    RlsAnswer a;
    svc_->Decide(req, &a);
    EXPECT_TRUE(a.status.ok()) << a.status.ToString();
    return a;
  }
  testing::TempDir dir_;
  FakeClock clock_{kT0 * 1000};
  std::shared_ptr<const EnvoyRules> rules_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<RateLimitService> svc_;
};

TEST_F(DecideTest, PerMinuteLimitWithRemainingAndResetAlignedToTheEpoch) {
  for (uint32_t i = 0; i < 3; ++i) {
    RlsAnswer a = Ask({{{"remote_address", "10.0.0.1"}}});
    EXPECT_EQ(a.overall, Code::kOk);
    EXPECT_EQ(a.statuses[0].remaining, 2 - i);
    EXPECT_EQ(a.statuses[0].until_reset_s, 60 - kT0 % 60);
    ASSERT_TRUE(a.statuses[0].has_limit);
  }
  RlsAnswer over = Ask({{{"remote_address", "10.0.0.1"}}});
  EXPECT_EQ(over.overall, Code::kOverLimit);
  EXPECT_EQ(over.statuses[0].code, Code::kOverLimit);
  EXPECT_EQ(over.statuses[0].remaining, 0u);
  // Another value of the key has its own counter.
  EXPECT_EQ(Ask({{{"remote_address", "10.0.0.2"}}}).overall, Code::kOk);
  clock_.Set((kT0 + 60 - kT0 % 60) * 1000);
  EXPECT_EQ(Ask({{{"remote_address", "10.0.0.1"}}}).overall, Code::kOk);
}

TEST_F(DecideTest, HitsZeroLooksWithoutCounting) {
  Ask({{{"remote_address", "a"}}}, 2);
  for (int i = 0; i < 3; ++i) {
    RlsAnswer a = Ask({{{"remote_address", "a"}}}, 0);
    EXPECT_EQ(a.overall, Code::kOk);
    EXPECT_EQ(a.statuses[0].remaining, 1u);
  }
  EXPECT_EQ(Ask({{{"remote_address", "a"}}}, 2).overall, Code::kOverLimit);  // 2 + 2 > 3: not counted
  EXPECT_EQ(Ask({{{"remote_address", "a"}}}, 1).overall, Code::kOk);
}

TEST_F(DecideTest, UnknownUnlimitedShadowAndOrder) {
  RlsAnswer a = Ask({{{"nothing", "x"}}, {{"client", "internal"}}, {{"client", "trial"}}, {{"client", "trial"}}});
  ASSERT_EQ(a.statuses.size(), 4u);
  EXPECT_FALSE(a.statuses[0].has_limit);
  EXPECT_EQ(a.statuses[0].remaining, 0u);
  EXPECT_FALSE(a.statuses[1].has_limit);
  EXPECT_EQ(a.statuses[1].remaining, 4294967295u);
  // Shadow: the second trial hit is over its limit of 1, answered OK, counted.
  EXPECT_EQ(a.statuses[3].code, Code::kOk);
  EXPECT_TRUE(a.statuses[3].shadow_over);
  EXPECT_EQ(a.overall, Code::kOk);
}

TEST_F(DecideTest, ReplacesDropsTheReplacedLimit) {
  EXPECT_EQ(Ask({{{"user", "u1"}}}).overall, Code::kOk);
  EXPECT_EQ(Ask({{{"user", "u1"}}}).overall, Code::kOverLimit);
  RlsAnswer a = Ask({{{"user", "u1"}}, {{"plan", "premium"}}});
  EXPECT_EQ(a.overall, Code::kOk);
  EXPECT_FALSE(a.statuses[0].has_limit);
  EXPECT_TRUE(a.statuses[1].has_limit);
  EXPECT_EQ(a.statuses[1].remaining, 99u);
}

TEST_F(DecideTest, ZeroRequestsPerUnitDeniesEveryHit) {
  EXPECT_EQ(Ask({{{"blocked", "x"}}}).overall, Code::kOverLimit);
}

}  // namespace
}  // namespace frs::envoy
