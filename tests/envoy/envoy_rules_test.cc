// The Envoy configuration compiled for the engine (envoy/envoy_rules.h) and
// ShouldRateLimit's decisions over a real engine and store
// (envoy/rate_limit_service.h).
#include "envoy/envoy_rules.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "common/envoy_yaml.h"
#include "common/temp_dir.h"
#include "envoy/rate_limit_service.h"
#include "frs/change.h"
#include "frs/clock.h"
#include "frs/key.h"
#include "frs/ring.h"
#include "limit/map_config.h"

namespace frs::envoy {
namespace {

constexpr int64_t kT0 = 1795000000;  // a Unix second, 20 s into its minute

const std::string kYaml = testing::EnvoyDomain("rl") +
                          testing::EnvoyDescriptor("remote_address", "", "", "{unit: minute, requests_per_unit: 3}") +
                          R"(  - key: category
    value: account
    descriptors:
      - key: source
        value: proxy
        rate_limit: {unit: hour, requests_per_unit: 2}
)" + testing::EnvoyDescriptor("client", "trial", "shadow_mode: true", "{unit: second, requests_per_unit: 1}") +
                          testing::EnvoyDescriptor("client", "internal", "", "{unlimited: true}") + R"(  - key: user
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
  r = EnvoyRules::FromBundle(
      Bundle("y.yaml", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: concurrent, lease: 5}\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "y.yaml:4: rate_limit without requests_per_unit");
  r = EnvoyRules::FromBundle(Bundle("m.yaml", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {<<: 5}\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "m.yaml:4: the merge key '<<' takes a map or a list of maps");
  r = EnvoyRules::FromBundle(Bundle("z.yaml", "domain: [\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("z.yaml:"), std::string::npos);
  r = EnvoyRules::FromBundle(Bundle("w.yaml", "domain: d\ndescriptors:\n  - key: a\n  - key: a\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "w.yaml:4: duplicate descriptor 'a' at this level");
  // Upstream files a descriptor under key_value: key a_b and key a with
  // value b are one there (its loader panics), so the file is refused here.
  r = EnvoyRules::FromBundle(Bundle("c.yaml", "domain: d\ndescriptors:\n  - key: a_b\n  - key: a\n    value: b\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "c.yaml:4: duplicate descriptor 'a_b' at this level (key 'a_b' above is named alike: envoyproxy/ratelimit "
            "joins key and value with '_')");
  // At other levels they are two.
  EXPECT_TRUE(EnvoyRules::FromBundle(Bundle("l.yaml",
                                            "domain: d\ndescriptors:\n  - key: a_b\n  - key: x\n    descriptors:\n"
                                            "      - key: a\n        value: b\n"))
                  .ok());
}

// What envoyproxy/ratelimit's reader (yaml.v2) takes, meaning what it means
// there: a merge key, a requests_per_unit left out (0: no request), an empty
// rate_limit (no limit), `value: ~` (the key alone). Each was refused.
TEST(EnvoyConfig, UpstreamsYamlReadingsMeanWhatTheyMeanThere) {
  auto rules = Rules(R"(domain: d
descriptors:
  - key: a
    rate_limit: &rl {unit: minute, requests_per_unit: 5}
  - key: b
    rate_limit: {<<: *rl, requests_per_unit: 7}
  - key: b2
    rate_limit:
      <<: [*rl, {unit: day, name: later}]
  - key: c
    rate_limit: {unit: hour}
  - key: c2
    rate_limit: {unit: hour, requests_per_unit: ~}
  - key: g
    rate_limit: {requests_per_unit: 100, <<: *rl}
  - key: h
    rate_limit: {<<: *rl, name: h1, <<: {requests_per_unit: 9}}
  - key: e
    rate_limit:
  - key: f
    value: ~
    rate_limit: {unit: second, requests_per_unit: 3}
)");
  ASSERT_NE(rules, nullptr);
  std::string scratch;
  auto limit_of = [&](const char* key, const char* value) -> const CompiledLimit* {
    const Entry e[1] = {{key, value}};
    const int32_t i = rules->Find("d", e, &scratch);
    return i < 0 ? nullptr : &rules->limits()[static_cast<size_t>(i)];
  };
  ASSERT_NE(limit_of("b", "x"), nullptr);
  EXPECT_EQ(limit_of("b", "x")->limit.requests_per_unit, 7u);  // its own key over the merged one
  EXPECT_EQ(limit_of("b", "x")->limit.unit, Unit::kMinute);
  ASSERT_NE(limit_of("b2", "x"), nullptr);
  EXPECT_EQ(limit_of("b2", "x")->limit.unit, Unit::kMinute);  // the first merged map's unit
  EXPECT_EQ(limit_of("b2", "x")->limit.requests_per_unit, 5u);
  EXPECT_EQ(limit_of("b2", "x")->name, "later");  // what only the later one gives
  ASSERT_NE(limit_of("c", "x"), nullptr);
  EXPECT_EQ(limit_of("c", "x")->limit.requests_per_unit, 0u);
  ASSERT_NE(limit_of("c2", "x"), nullptr);
  EXPECT_EQ(limit_of("c2", "x")->limit.requests_per_unit, 0u);
  // Where the `<<` stands, as yaml.v2 applies it: the merged keys replace
  // the own ones written before it (g: 5, not 100), and a second `<<`
  // applies after the first (h: 9).
  ASSERT_NE(limit_of("g", "x"), nullptr);
  EXPECT_EQ(limit_of("g", "x")->limit.requests_per_unit, 5u);
  ASSERT_NE(limit_of("h", "x"), nullptr);
  EXPECT_EQ(limit_of("h", "x")->limit.requests_per_unit, 9u);
  EXPECT_EQ(limit_of("h", "x")->name, "h1");
  EXPECT_EQ(limit_of("e", "x"), nullptr);
  ASSERT_NE(limit_of("f", "any"), nullptr);
  EXPECT_EQ(limit_of("f", "any")->limit.requests_per_unit, 3u);
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
  EXPECT_EQ(rules->Find("other_domain", std::vector<Entry>{{"remote_address", "x"}}, &scratch), EnvoyRules::kNoLimit);
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
  bad = ComposeMap("<map>\n<biz id=\"7\" name=\"envoy.x\"><rule interval=\"60\" max=\"5\"/></biz>\n</map>\n", "map.xml",
                   *rules);
  ASSERT_FALSE(bad.ok());
}

TEST(EnvoyRules, AnEmptyMapAsOneElementTakesTheDescriptors) {
  // Found from outside: <map/>, accepted alone, was refused as "no </map>"
  // once <grpc config> was set.
  auto rules = Rules();
  for (const char* empty : {"<map/>\n", "<?xml version=\"1.0\"?>\n<!-- <map> -->\n<map\n/>"}) {
    auto m = ComposeMap(empty, "map.xml", *rules);
    ASSERT_TRUE(m.ok()) << empty << ": " << m.status().ToString();
    EXPECT_NE(m->find("name=\"envoy.rl.remote_address\""), std::string::npos) << *m;
  }
  EXPECT_FALSE(ComposeMap("<map", "map.xml", *rules).ok());
}

TEST(EnvoyRules, AClosingMapTagWithBlanksTakesTheDescriptors) {
  // Found from outside: a closing tag with blanks before its '>' (valid
  // XML, accepted alone) was refused as "no </map>" once <grpc config> was
  // set; a name that only begins so is not one.
  auto rules = Rules();
  for (const char* closing : {"</map >\n", "</map\n>", "</map\t\r\n >"}) {
    const std::string map =
        std::string("<map>\n<biz id=\"1\" name=\"login\"><rule interval=\"60\" max=\"5\"/></biz>\n") + closing;
    auto m = ComposeMap(map, "map.xml", *rules);
    ASSERT_TRUE(m.ok()) << closing << ": " << m.status().ToString();
    EXPECT_NE(m->find("name=\"envoy.rl.remote_address\""), std::string::npos) << *m;
  }
  EXPECT_FALSE(ComposeMap("<map>\n</mapping>\n", "map.xml", *rules).ok());
}

class DecideTest : public ::testing::Test {
 protected:
  void SetUp() override { Init(kYaml); }
  void Init(const std::string& yaml) {
    // A second Init (another configuration) closes the first's store first.
    svc_.reset();
    engine_.reset();
    store_.reset();
    rules_ = Rules(yaml);
    ASSERT_TRUE(rules_);
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
  RlsAnswer AskAny(std::vector<std::vector<Entry>> descriptors, uint64_t hits = 1) {
    RlsRequest req;
    req.domain = "rl";
    req.hits = hits;
    for (auto& e : descriptors) req.descriptors.push_back(RlsDescriptor{std::move(e), false, 0});
    RlsAnswer a;
    svc_->Decide(req, &a);
    return a;
  }
  RlsAnswer Ask(std::vector<std::vector<Entry>> descriptors, uint64_t hits = 1) {
    RlsAnswer a = AskAny(std::move(descriptors), hits);
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

// A reload that changes a descriptor's unit starts its count from zero, as
// upstream's cache key (domain, entries, window) does; the same unit keeps
// it, whatever requests_per_unit becomes.
TEST_F(DecideTest, AChangedUnitStartsFromZeroAndAChangedLimitKeepsTheCount) {
  EXPECT_EQ(Ask({{{"remote_address", "10.0.0.9"}}}).statuses[0].remaining, 2u);
  EXPECT_EQ(Ask({{{"remote_address", "10.0.0.9"}}}).statuses[0].remaining, 1u);
  std::string per_minute = kYaml;
  const std::string was = "{unit: minute, requests_per_unit: 3}";
  per_minute.replace(per_minute.find(was), was.size(), "{unit: minute, requests_per_unit: 5}");
  Init(per_minute);
  EXPECT_EQ(Ask({{{"remote_address", "10.0.0.9"}}}).statuses[0].remaining, 2u);  // 3 of 5
  std::string per_hour = kYaml;
  per_hour.replace(per_hour.find(was), was.size(), "{unit: hour, requests_per_unit: 10}");
  Init(per_hour);
  RlsAnswer a = Ask({{{"remote_address", "10.0.0.9"}}});
  EXPECT_EQ(a.statuses[0].remaining, 9u);  // 1 of 10: the minute's 3 are not carried into the hour
  EXPECT_EQ(a.statuses[0].until_reset_s, 3600 - kT0 % 3600);
}

// With replicas, a descriptor whose route's other holder the server
// refuses now (its link down under refuse, or this shard behind it) is
// refused before anything is counted, as the HTTP side refuses the route.
TEST_F(DecideTest, ARouteWhoseOtherHolderIsRefusedIsUnavailableAndCountsNothing) {
  auto ring = Ring::Make({{"127.0.0.1:1"}, {"127.0.0.1:2"}});
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  auto shared = std::make_shared<const Ring>(std::move(ring.value()));
  bool refusing = true;
  long asked = -2;
  int side = -1;     // the route's side the last call named (1: the other holder's)
  int refuses = -1;  // the side refused (-1: both)
  Ownership own{shared, 0, true, true, nullptr, [&](long peer, bool as_successor) {
                  asked = peer;
                  side = as_successor ? 1 : 0;
                  return refusing && (refuses < 0 || refuses == side);
                }};
  svc_->SetOwnership(own);
  // A value whose route this shard (index 0) holds, as owner or successor:
  // with two shards, every route.
  RlsAnswer a = AskAny({{{"remote_address", "10.0.0.7"}}});
  EXPECT_FALSE(a.status.ok());
  EXPECT_NE(a.status.message().find("does not take its changes now"), std::string::npos) << a.status.message();
  EXPECT_EQ(asked, 1);
  ASSERT_NE(side, -1);
  // Behind the other holder on the other side's routes only: this route is
  // served.
  refuses = 1 - side;
  EXPECT_EQ(Ask({{{"remote_address", "10.0.0.7"}}}).statuses[0].remaining, 2u);  // the refused call counted nothing
  refusing = false;
  EXPECT_EQ(Ask({{{"remote_address", "10.0.0.7"}}}).statuses[0].remaining, 1u);
}

// Envoy's calls spread over a replicated route's two holders, which both
// grant a unit: concurrent place: each draws its half of the serials, as
// the HTTP side's requests do (frs/decision.h), so that a give-back ended
// by serial on the other holder ends no other client's lease there (found
// by a review: these drew from one sequence).
TEST_F(DecideTest, AConcurrentGrantDrawsThisHoldersHalfOfTheSerials) {
  Init(testing::EnvoyDomain("rl") +
       testing::EnvoyDescriptor("job", "", "", "{unit: concurrent, requests_per_unit: 9, lease: 60}"));
  struct Grants final : ChangeSink {
    void OnChange(const Change& c) override {
      if (c.kind == Change::Kind::kEvent && c.event == Change::Event::kLeaseGrant) serials.push_back(c.item);
    }
    std::vector<uint32_t> serials;
  } grants;
  engine_->SetChangeSink(&grants);
  auto ring = Ring::Make({{"127.0.0.1:1"}, {"127.0.0.1:2"}});
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  auto shared = std::make_shared<const Ring>(std::move(ring.value()));
  // With two shards each holds every route: the owner of some, the
  // successor of the others. A key of each kind.
  std::string owned, followed;
  for (int i = 0; owned.empty() || followed.empty(); ++i) {
    const std::string v = "j" + std::to_string(i);
    const std::vector<Entry> e{{"job", v}};
    std::string key;
    CounterKey(e, &key);
    const uint32_t pos = Ring::HashRoute(Ring::RouteOf(key, {}));
    (shared->OwnerOfHash(pos) == 0 ? owned : followed) = v;
  }
  svc_->SetOwnership(Ownership{shared, 0, true, true, nullptr, {}});
  for (const std::string& v : {owned, owned, followed, followed}) Ask({{{"job", v}}});
  ASSERT_EQ(grants.serials.size(), 4u);
  EXPECT_EQ(grants.serials[0] % 2, 1u);
  EXPECT_EQ(grants.serials[1] % 2, 1u);
  EXPECT_EQ(grants.serials[2] % 2, 0u);
  EXPECT_EQ(grants.serials[3] % 2, 0u);
  engine_->SetChangeSink(nullptr);
}

TEST_F(DecideTest, HitsZeroLooksWithoutCounting) {
  Ask({{{"remote_address", "a"}}}, 2);
  for (int i = 0; i < 3; ++i) {
    RlsAnswer a = Ask({{{"remote_address", "a"}}}, 0);
    EXPECT_EQ(a.overall, Code::kOk);
    EXPECT_EQ(a.statuses[0].remaining, 1u);
  }
  // 2 + 2 > 3: over, and counted as upstream's counter counts every hit, so
  // the next single hit is over too (4 + 1 > 3).
  EXPECT_EQ(Ask({{{"remote_address", "a"}}}, 2).overall, Code::kOverLimit);
  EXPECT_EQ(Ask({{{"remote_address", "a"}}}, 1).overall, Code::kOverLimit);
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

// Header values Envoy forwards may hold any byte: each is a key the store
// takes, limited like any other, and none fails the call.
TEST_F(DecideTest, AnyDescriptorBytesAreLimitedNormally) {
  const std::string tab = "a\tb", bad_utf8 = "x\xff\xc3(y", c1 = "z\xc2\x85", del = "d\x7f";
  const std::string long_a = std::string(1000, 'v') + "A", long_b = std::string(1000, 'v') + "B";
  // 237 ASCII bytes then a 2-byte character: a cut at byte 238 splits it.
  const std::string split = std::string(222, 's') + "\xc3\xa9" + std::string(40, 't');
  for (const std::string& v : {tab, bad_utf8, c1, del, long_a, long_b, split}) {
    std::string key;
    std::vector<Entry> e{{"remote_address", v}};
    CounterKey(e, &key);
    EXPECT_EQ(ValidateKeyBytes(key), "") << key;
    for (uint32_t i = 0; i < 3; ++i) {
      RlsAnswer a = Ask({{{"remote_address", v}}});
      ASSERT_EQ(a.overall, Code::kOk);
      EXPECT_EQ(a.statuses[0].remaining, 2 - i);
    }
    EXPECT_EQ(Ask({{{"remote_address", v}}}).overall, Code::kOverLimit) << key;
  }
  // Escaping is one-to-one: "%09" written out is not the tab.
  EXPECT_EQ(Ask({{{"remote_address", "a%09b"}}}).statuses[0].remaining, 2u);
  std::string ka, kb;
  std::vector<Entry> ea{{"remote_address", long_a}}, eb{{"remote_address", long_b}};
  CounterKey(ea, &ka);
  CounterKey(eb, &kb);
  EXPECT_NE(ka, kb);
  EXPECT_LE(ka.size(), kMaxKeyBytes);
}

const char* kTwoLevelYaml = R"(domain: rl
descriptors:
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: minute, requests_per_unit: 1}
)";

// envoyproxy/ratelimit joins key_value pairs with '_': a=1_b_2,b=3 and
// a=1,b=2_b_3 are one cache key there, two counters here.
TEST_F(DecideTest, ValuesHoldingTheSeparatorAreCountedApart) {
  Init(kTwoLevelYaml);
  EXPECT_EQ(Ask({{{"a", "1_b_2"}, {"b", "3"}}}).overall, Code::kOk);
  EXPECT_EQ(Ask({{{"a", "1"}, {"b", "2_b_3"}}}).overall, Code::kOk);
  EXPECT_EQ(Ask({{{"a", "1"}, {"b", "2_b_3"}}}).overall, Code::kOverLimit);
  // The last value's '_' is not ambiguous: it is written as it is.
  std::string key;
  std::vector<Entry> e{{"a", "x_y"}, {"b", "u_v"}};
  CounterKey(e, &key);
  EXPECT_EQ(key, "a_x%5Fy_b_u_v");
  e = {{"remote_address", "10.0.0.1"}};
  CounterKey(e, &key);
  EXPECT_EQ(key, "remote_address_10.0.0.1");
  // A value spelling another key's cut-and-hashed form is not that key.
  const std::string long_value(300, 'v');
  e = {{"a", long_value}, {"b", "w"}};
  std::string hashed;
  CounterKey(e, &hashed);
  ASSERT_NE(hashed.find('#'), std::string::npos);
  ASSERT_TRUE(hashed.starts_with("a_"));
  Init(R"(domain: rl
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
)");
  std::vector<Entry> one{{"a", long_value}};
  CounterKey(one, &hashed);
  const std::string spelled_value = hashed.substr(2);
  std::vector<Entry> spelled{{"a", spelled_value}};
  CounterKey(spelled, &key);
  EXPECT_NE(key, hashed);
  EXPECT_EQ(Ask({one}).overall, Code::kOk);
  EXPECT_EQ(Ask({spelled}).overall, Code::kOk);
}

TEST_F(DecideTest, EveryKeyIsCheckedBeforeAnyIsCountedAndTheCallIsBounded) {
  RlsAnswer a = AskAny({});
  EXPECT_EQ(a.status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(a.status.message(), "rate limit descriptor list must not be empty");
  std::vector<std::vector<Entry>> many(65, std::vector<Entry>{{"remote_address", "m"}});
  a = AskAny(many);
  EXPECT_EQ(a.status.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(a.status.message().find("at most 64"), std::string::npos);
  // Nothing was counted by the refused call.
  EXPECT_EQ(Ask({{{"remote_address", "m"}}}, 0).statuses[0].remaining, 3u);
  many.resize(64);
  EXPECT_TRUE(AskAny(many).status.ok());
}

TEST_F(DecideTest, OverLimitAnswersZeroRemainingAndALookAtTheLimitIsOk) {
  // What the biz statistics hold today (requests, denied), over every biz.
  const auto today = [&] {
    std::pair<uint64_t, uint64_t> t{0, 0};
    for (const BizStats& b : engine_->DailyStats())
      for (const BizStatsDay& d : b.days)
        if (d.day == engine_->Today()) t.first += d.requests, t.second += d.denied;
    return t;
  };
  Ask({{{"remote_address", "o"}}}, 3);
  const auto counted = today();
  EXPECT_EQ(counted.first, 1u);
  // Exactly at the limit: a look is OK with nothing left (upstream denies
  // only past the limit: after > limit).
  RlsAnswer a = Ask({{{"remote_address", "o"}}}, 0);
  EXPECT_EQ(a.overall, Code::kOk);
  EXPECT_EQ(a.statuses[0].remaining, 0u);
  // A look is no hit, in the biz statistics as in upstream's: it counted a
  // denial the answer (OK) did not give.
  EXPECT_EQ(today(), counted);
  a = Ask({{{"remote_address", "o"}}}, 1);  // 4 > 3
  EXPECT_EQ(a.statuses[0].code, Code::kOverLimit);
  EXPECT_EQ(a.statuses[0].remaining, 0u);
  a = Ask({{{"remote_address", "o"}}}, 0);  // past the limit: a look is over
  EXPECT_EQ(a.overall, Code::kOverLimit);
  EXPECT_EQ(a.statuses[0].remaining, 0u);
  // The headers' descriptor, as upstream picks it: the first with the
  // fewest remaining, but an OVER_LIMIT one wins.
  Ask({{{"remote_address", "p"}}}, 3);
  a = Ask({{{"remote_address", "p"}}, {{"remote_address", "o"}}}, 0);
  EXPECT_EQ(a.statuses[0].code, Code::kOk);
  EXPECT_EQ(a.statuses[0].remaining, 0u);
  EXPECT_EQ(a.tightest, 1);
  a = Ask({{{"category", "account"}, {"source", "proxy"}}, {{"remote_address", "p"}}}, 0);
  EXPECT_EQ(a.statuses[0].remaining, 2u);
  EXPECT_EQ(a.tightest, 1);
}

TEST_F(DecideTest, HitsAddendIsClampedToTheEnginesBound) {
  RlsRequest req;
  req.domain = "rl";
  req.descriptors.push_back(RlsDescriptor{{{"remote_address", "big"}}, true, uint64_t{1} << 40});
  RlsAnswer a;
  svc_->Decide(req, &a);
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(a.statuses[0].hits, 2147483647u);
  EXPECT_EQ(a.overall, Code::kOverLimit);
}

// A count stops at 2^32 - 1: a call whose hits take it there says the
// count before it as the engine read it, not the count less the hits (found
// from outside: the metrics then split 2,147,483,647 hits into 1 over_limit
// and 858,993,406 near_limit). Near the top with a limit of 2^32 - 1.
TEST_F(DecideTest, ACallThatTakesTheCountToItsTopSaysTheCountBefore) {
  Init(testing::EnvoyDomain("rl") +
       testing::EnvoyDescriptor("u_max", "", "", "{unit: hour, requests_per_unit: 4294967295}"));
  const int64_t before[] = {0, 2147483647, 4294967294, 4294967295};
  for (int64_t b : before) {
    RlsAnswer a = Ask({{{"u_max", "k"}}}, 2147483647);
    ASSERT_EQ(a.statuses.size(), 1u);
    EXPECT_EQ(a.statuses[0].before, b);
    EXPECT_EQ(a.statuses[0].after, std::min<int64_t>(b + 2147483647, 4294967295));
    EXPECT_EQ(a.statuses[0].code, b + 2147483647 >= 4294967295 ? Code::kOverLimit : Code::kOk) << b;
  }
}

TEST_F(DecideTest, ZeroRequestsPerUnitDeniesEveryHitAndCountsIt) {
  for (int i = 0; i < 3; ++i) {
    RlsAnswer a = Ask({{{"blocked", "y"}}});
    EXPECT_EQ(a.overall, Code::kOverLimit);
    EXPECT_EQ(a.statuses[0].remaining, 0u);
  }
  Request q;
  q.biz = "envoy.rl.blocked";
  q.key = "blocked_y";
  q.cmd = Cmd::kQuery;
  Decision d = engine_->Execute(q);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.rules[0].count, 3);
  // A look is not past 0.
  EXPECT_EQ(Ask({{{"blocked", "z"}}}, 0).overall, Code::kOk);
}

const char* kWildYaml = R"(domain: rl
descriptors:
  - key: foo
    value: bar
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: foo
    value: foo*
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: foo
    value: a*z
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: foo
    rate_limit: {unit: minute, requests_per_unit: 4}
)";

// envoyproxy/ratelimit's README example: exact value, then wildcard, then
// the key alone; each value a wildcard matches has a counter of its own.
TEST_F(DecideTest, WildcardValuesMatchAfterExactOnesWithACounterPerValue) {
  Init(kWildYaml);
  auto limit_of = [&](const std::string& v) {
    return Ask({{{"foo", v}}}, 0).statuses[0].limit->limit.requests_per_unit;
  };
  EXPECT_EQ(limit_of("bar"), 1u);
  EXPECT_EQ(limit_of("foo1"), 2u);
  EXPECT_EQ(limit_of("foo"), 2u);  // '*' matches nothing too
  EXPECT_EQ(limit_of("abcz"), 3u);
  EXPECT_EQ(limit_of("az"), 3u);
  EXPECT_EQ(limit_of("abc"), 4u);
  EXPECT_EQ(limit_of("xfoo"), 4u);
  for (const char* v : {"foo1", "foo2"}) {
    EXPECT_EQ(Ask({{{"foo", v}}}).overall, Code::kOk);
    EXPECT_EQ(Ask({{{"foo", v}}}).overall, Code::kOk);
    EXPECT_EQ(Ask({{{"foo", v}}}).overall, Code::kOverLimit) << v;
  }
}

const char* kReplacesYaml = R"(domain: rl
descriptors:
  - key: a
    rate_limit: {name: la, unit: minute, requests_per_unit: 1, replaces: [{name: lb}]}
  - key: b
    rate_limit: {name: lb, unit: minute, requests_per_unit: 1, replaces: [{name: lc}]}
  - key: c
    rate_limit: {name: lc, unit: minute, requests_per_unit: 1}
  - key: vip
    rate_limit: {unlimited: true, replaces: [{name: lc}]}
)";

// Two passes: a replaced limit's own replaces still count, whatever order.
TEST_F(DecideTest, ReplacesIsOrderIndependentAndWorksFromUnlimited) {
  Init(kReplacesYaml);
  for (auto order : {std::vector<std::string>{"a", "b", "c"}, std::vector<std::string>{"c", "b", "a"}}) {
    std::vector<std::vector<Entry>> d;
    for (const std::string& k : order) d.push_back({{k, "x"}});
    RlsAnswer a = Ask(d, 0);
    for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(a.statuses[i].has_limit, order[i] == "a") << order[i];
  }
  RlsAnswer a = Ask({{{"c", "x"}}, {{"vip", "x"}}}, 0);
  EXPECT_FALSE(a.statuses[0].has_limit);
  EXPECT_EQ(a.statuses[1].remaining, 4294967295u);
}

TEST(EnvoyConfig, RefusesSelfReplaceAndLimitsPastUint32) {
  auto r = EnvoyRules::FromBundle(
      Bundle("s.yaml",
             "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {name: x, unit: day, requests_per_unit: 1, "
             "replaces: [{name: x}]}\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "s.yaml:3: rate limit 'x' replaces itself");
  r = EnvoyRules::FromBundle(Bundle("r.yaml",
                                    "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: day\n      "
                                    "requests_per_unit: 4294967296\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "r.yaml:6: requests_per_unit '4294967296' is not 0..4294967295 (decimal digits only)");
  r = EnvoyRules::FromBundle(Bundle("r.yaml",
                                    "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: day\n      "
                                    "requests_per_unit: 4294967295\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->limits()[0].limit.requests_per_unit, 4294967295u);
}

// A new name whose slot is an existing name's, and which sorts before it,
// took that name's id when ids were probed over all names in name order.
TEST(EnvoyIds, AnAssignedIdNeverMovesAndARemovedOneIsNotReused) {
  const std::string old_name = "envoy.rl.m";
  std::string intruder;
  for (int i = 0; intruder.empty(); ++i) {
    const std::string c = "envoy.rl.a" + std::to_string(i);
    if (EnvoyIdSlot(c) == EnvoyIdSlot(old_name)) intruder = c;
  }
  EnvoyIds table;
  std::vector<uint16_t> ids;
  ASSERT_TRUE(AssignEnvoyIds({old_name, "envoy.rl.z"}, {}, &table, &ids).ok());
  const uint16_t m = ids[0], z = ids[1];
  EXPECT_EQ(m, kFirstEnvoyBizId + EnvoyIdSlot(old_name));
  ASSERT_TRUE(AssignEnvoyIds({intruder, old_name, "envoy.rl.z"}, {}, &table, &ids).ok());
  EXPECT_EQ(ids[1], m);
  EXPECT_EQ(ids[2], z);
  EXPECT_NE(ids[0], m);
  const uint16_t intruder_id = ids[0];
  // old_name removed: its id stays reserved; back again, it has it again.
  ASSERT_TRUE(AssignEnvoyIds({intruder, "envoy.rl.other"}, {}, &table, &ids).ok());
  EXPECT_EQ(ids[0], intruder_id);
  EXPECT_NE(ids[1], m);
  ASSERT_TRUE(AssignEnvoyIds({old_name}, {}, &table, &ids).ok());
  EXPECT_EQ(ids[0], m);
  // The table travels as text (envoy.ids, the bundle) unchanged.
  EXPECT_EQ(ParseEnvoyIds(FormatEnvoyIds(table)), table);
}

// The master's view of a reload: the table persisted as text (envoy.ids)
// is what the next Compile starts from.
std::shared_ptr<const EnvoyRules> CompileWith(const std::vector<std::pair<std::string, std::string>>& files,
                                              std::string* ids_text) {
  std::string bundle;
  for (const auto& [name, text] : files) bundle += Bundle(name, text);
  auto cfg = ParseEnvoyBundle(bundle);
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
  if (!cfg.ok()) return nullptr;
  cfg->ids = ParseEnvoyIds(*ids_text);
  EnvoyIds table;
  auto rules = EnvoyRules::Compile(cfg.value(), &table);
  EXPECT_TRUE(rules.ok()) << rules.status().ToString();
  *ids_text = FormatEnvoyIds(table);
  // A worker compiles the same bundle with the table the master wrote: the
  // same names and ids.
  cfg->ids = ParseEnvoyIds(*ids_text);
  auto again = EnvoyRules::Compile(cfg.value());
  EXPECT_TRUE(again.ok());
  if (rules.ok() && again.ok())
    for (size_t i = 0; i < rules.value()->limits().size(); ++i) {
      EXPECT_EQ(again.value()->limits()[i].biz, rules.value()->limits()[i].biz);
      EXPECT_EQ(again.value()->limits()[i].biz_id, rules.value()->limits()[i].biz_id);
    }
  return rules.ok() ? rules.value() : nullptr;
}

const CompiledLimit* LimitOf(const EnvoyRules& rules, const std::string& domain, const std::string& path) {
  for (const CompiledLimit& l : rules.limits())
    if (l.domain == domain && l.path == path) return &l;
  return nullptr;
}

// Domain x.z with key z and domain x with z under z both spelled
// envoy.x.z.z: a reload adding x gave it x.z's id and counts.
TEST(EnvoyIds, TwoPathsNeverShareANameOrAnIdAcrossReloads) {
  const std::string xz = "domain: x.z\ndescriptors:\n  - key: z\n    rate_limit: {unit: day, requests_per_unit: 1}\n";
  const std::string x =
      "domain: x\ndescriptors:\n  - key: z\n    descriptors:\n      - key: z\n"
      "        rate_limit: {unit: day, requests_per_unit: 1}\n";
  std::string ids;
  auto first = CompileWith({{"xz.yaml", xz}}, &ids);
  ASSERT_TRUE(first);
  const CompiledLimit* before = LimitOf(*first, "x.z", "z");
  ASSERT_TRUE(before);
  EXPECT_EQ(before->biz, "envoy.x.z.z");  // a name of today's stays
  auto second = CompileWith({{"xz.yaml", xz}, {"x.yaml", x}}, &ids);
  ASSERT_TRUE(second);
  const CompiledLimit* kept = LimitOf(*second, "x.z", "z");
  const CompiledLimit* added = LimitOf(*second, "x", "z.z");
  ASSERT_TRUE(kept && added);
  EXPECT_EQ(kept->biz, before->biz);
  EXPECT_EQ(kept->biz_id, before->biz_id);
  EXPECT_NE(added->biz, kept->biz);
  EXPECT_NE(added->biz_id, kept->biz_id);
  // x.z removed and added again: its name and id come back to it, not to x.
  auto third = CompileWith({{"x.yaml", x}}, &ids);
  ASSERT_TRUE(third);
  EXPECT_EQ(LimitOf(*third, "x", "z.z")->biz_id, added->biz_id);
  auto fourth = CompileWith({{"x.yaml", x}, {"xz.yaml", xz}}, &ids);
  ASSERT_TRUE(fourth);
  EXPECT_EQ(LimitOf(*fourth, "x.z", "z")->biz_id, before->biz_id);
  EXPECT_EQ(LimitOf(*fourth, "x", "z.z")->biz_id, added->biz_id);
}

// Within one domain: a key holding '.' and a key under another, and bytes a
// biz name cannot hold, spell one name too.
TEST(EnvoyIds, KeyJoinsAndReplacedBytesNeverShareAnId) {
  const std::string one =
      "domain: d\ndescriptors:\n  - key: a.b\n    rate_limit: {unit: day, requests_per_unit: 1}\n"
      "  - key: p q\n    rate_limit: {unit: day, requests_per_unit: 1}\n";
  const std::string two =
      "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n"
      "        rate_limit: {unit: day, requests_per_unit: 1}\n"
      "  - key: p_q\n    rate_limit: {unit: day, requests_per_unit: 1}\n" +
      one.substr(one.find("  - key: a.b"));
  std::string ids;
  auto first = CompileWith({{"d.yaml", one}}, &ids);
  ASSERT_TRUE(first);
  auto second = CompileWith({{"d.yaml", two}}, &ids);
  ASSERT_TRUE(second);
  std::set<uint16_t> seen;
  for (const CompiledLimit& l : second->limits()) EXPECT_TRUE(seen.insert(l.biz_id).second) << l.biz;
  // Nor one label set in /metrics (descriptor="a.b").
  std::set<std::string> labels;
  for (const CompiledLimit& l : second->limits()) EXPECT_TRUE(labels.insert(l.path).second) << l.path;
  // The display paths are alike too ("a.b"): the limits by their identity.
  for (const CompiledLimit& l : first->limits()) {
    const CompiledLimit* now = nullptr;
    for (const CompiledLimit& m : second->limits())
      if (m.identity == l.identity) now = &m;
    ASSERT_TRUE(now);
    EXPECT_EQ(now->biz_id, l.biz_id) << l.identity;
    EXPECT_EQ(now->biz, l.biz) << l.identity;
  }
}

// envoy.ids of an earlier release: NAME ID lines, names bound to no path.
// Each path keeps its name and id, the second of two spelled alike too.
TEST(EnvoyIds, NamesOfAnEarlierTableStay) {
  const std::string yaml =
      "domain: d\ndescriptors:\n  - key: a.b\n    rate_limit: {unit: day, requests_per_unit: 1}\n"
      "  - key: a\n    descriptors:\n      - key: b\n        rate_limit: {unit: day, requests_per_unit: 1}\n";
  std::string ids;
  auto first = CompileWith({{"d.yaml", yaml}}, &ids);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->limits()[0].biz, "envoy.d.a.b");
  EXPECT_TRUE(first->limits()[1].biz.starts_with("envoy.d.a.b."));
  EnvoyIds old = ParseEnvoyIds(ids);
  for (EnvoyIdEntry& e : old) e.path.clear();
  std::string old_text = FormatEnvoyIds(old);
  auto again = CompileWith({{"d.yaml", yaml}}, &old_text);
  ASSERT_TRUE(again);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(again->limits()[i].biz, first->limits()[i].biz);
    EXPECT_EQ(again->limits()[i].biz_id, first->limits()[i].biz_id);
  }
  EXPECT_EQ(old_text, ids);  // bound now, as the table written fresh
}

// The tree's lookup joined key and value with a byte a YAML key may hold.
TEST(EnvoyRules, AKeyHoldingTheLookupSeparatorIsItsOwnDescriptor) {
  auto rules = Rules(
      "domain: rl\ndescriptors:\n  - key: a\n    value: b\n    rate_limit: {unit: day, requests_per_unit: 1}\n"
      "  - key: \"a\\x1fb\"\n    rate_limit: {unit: day, requests_per_unit: 2}\n");
  ASSERT_TRUE(rules);
  std::string scratch;
  std::vector<Entry> kv{{"a", "b"}};
  const std::string odd =
      "a\x1f"
      "b";
  std::vector<Entry> k{{odd, "v"}};
  const int32_t f1 = rules->Find("rl", kv, &scratch), f2 = rules->Find("rl", k, &scratch);
  ASSERT_GE(f1, 0);
  ASSERT_GE(f2, 0);
  EXPECT_EQ(rules->limits()[static_cast<size_t>(f1)].limit.requests_per_unit, 1u);
  EXPECT_EQ(rules->limits()[static_cast<size_t>(f2)].limit.requests_per_unit, 2u);
}

TEST(EnvoyRules, ComposeFindsTheClosingTagOutsideComments) {
  auto rules = Rules();
  auto ok = ComposeMap(
      "<map>\n<biz id=\"1\" name=\"login\"><rule interval=\"60\" max=\"5\"/></biz>\n</map>\n"
      "<!-- an old </map> -->\n",
      "map.xml", *rules);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  auto map = limit::ParseMap(*ok, "map.xml");
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->bizzes.size(), rules->limits().size() + 1);
  EXPECT_EQ(XmlCommentText("a--b---c"), "a-_b-_-c");
}

}  // namespace
}  // namespace frs::envoy
