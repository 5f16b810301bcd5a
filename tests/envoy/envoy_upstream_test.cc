// envoyproxy/ratelimit's configuration keys, units and settings as the
// rate limit service answers them (envoy/rate_limit_service.h) over a real
// engine and store: share_threshold, quota_mode, value_to_metric, metadata,
// week/month/year windows, a descriptor's own limit, the global settings.
#include <gtest/gtest.h>

#include "common/temp_dir.h"
#include "envoy/envoy_rules.h"
#include "envoy/rate_limit_service.h"
#include "frs/clock.h"
#include "frs/engine.h"
#include "frs/store.h"

namespace frs::envoy {
namespace {

constexpr int64_t kT0 = 1795000000;

const char* kYaml = R"(domain: up
descriptors:
  - key: path
    value: "/files/*"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    value: "/api/*"
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: tenant
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: org
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: w
    rate_limit: {unit: week, requests_per_unit: 5}
  - key: mo
    rate_limit: {unit: month, requests_per_unit: 5}
  - key: y
    rate_limit: {unit: year, requests_per_unit: 5}
  - key: huge
    rate_limit: {unit: second, requests_per_unit: 4294967295}
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 10}
  - key: inflight
    rate_limit: {unit: concurrent, requests_per_unit: 2, lease: 30}
  - key: meta
    metadata:
      team: payments
      tier: 2
      nested: {on_call: "yes", flag: yes}
    rate_limit: {unit: minute, requests_per_unit: 10}
)";

class UpstreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = EnvoyRules::FromBundle("up.yaml\n" + std::to_string(std::string(kYaml).size()) + "\n" + kYaml);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    rules_ = r.value();
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
    auto e = Engine::Open(eo);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e.value());
    svc_ = std::make_unique<RateLimitService>(engine_.get());
    svc_->SetRules(rules_);
  }
  RlsAnswer Ask(std::vector<RlsDescriptor> d, uint64_t hits = 1, std::string_view domain = "up") {
    RlsRequest req;
    req.domain = domain;
    req.hits = hits;
    req.descriptors = std::move(d);
    RlsAnswer a;
    svc_->Decide(req, &a);
    EXPECT_TRUE(a.status.ok()) << a.status.ToString();
    return a;
  }
  static RlsDescriptor D(std::vector<Entry> e) { return RlsDescriptor{std::move(e), false, 0}; }
  // Today's daily statistics of a biz (zeros when it counted nothing yet).
  BizStatsDay TodayOf(std::string_view biz) const {
    for (const BizStats& b : engine_->DailyStats())
      if (b.name == biz && !b.days.empty() && b.days.front().day == engine_->Today()) return b.days.front();
    return BizStatsDay{};
  }
  // As Envoy sends a descriptor whose action has is_negative_hits (at
  // stream done, with apply_on_stream_done).
  static RlsDescriptor Neg(std::vector<Entry> e, uint64_t hits = 1) {
    RlsDescriptor d{std::move(e), true, hits};
    d.negative = true;
    return d;
  }
  static RlsDescriptor Own(std::vector<Entry> e, uint32_t rpu, int64_t unit) {
    RlsDescriptor d{std::move(e), false, 0};
    d.has_limit = true;
    d.limit_rpu = rpu;
    d.limit_unit = unit;
    return d;
  }
  testing::TempDir dir_;
  FakeClock clock_{kT0 * 1000};
  std::shared_ptr<const EnvoyRules> rules_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<RateLimitService> svc_;
};

TEST_F(UpstreamTest, ShareThresholdCountsEveryMatchedValueInOneCounter) {
  EXPECT_EQ(Ask({D({{"path", "/files/a"}})}).statuses[0].remaining, 2u);
  EXPECT_EQ(Ask({D({{"path", "/files/b"}})}).statuses[0].remaining, 1u);
  EXPECT_EQ(Ask({D({{"path", "/files/c"}})}).statuses[0].remaining, 0u);
  EXPECT_EQ(Ask({D({{"path", "/files/d"}})}).overall, Code::kOverLimit);
  // Without share_threshold each value has its own counter.
  EXPECT_EQ(Ask({D({{"path", "/api/a"}})}).statuses[0].remaining, 2u);
  EXPECT_EQ(Ask({D({{"path", "/api/b"}})}).statuses[0].remaining, 2u);
}

// is_negative_hits as envoyproxy/ratelimit takes it: the count lowered,
// never below 0, and the answer OK even on a key past its limit.
TEST_F(UpstreamTest, NegativeHitsGiveBackToARateLimitNeverBelowZero) {
  EXPECT_EQ(Ask({D({{"plain", "p"}})}).statuses[0].remaining, 0u);
  EXPECT_EQ(Ask({D({{"plain", "p"}})}).overall, Code::kOverLimit);
  RlsAnswer back = Ask({Neg({{"plain", "p"}}, 5)});
  EXPECT_EQ(back.overall, Code::kOk);
  EXPECT_EQ(back.statuses[0].code, Code::kOk);
  EXPECT_EQ(back.statuses[0].after, 0);
  EXPECT_EQ(back.statuses[0].before, 2);
  EXPECT_EQ(back.statuses[0].remaining, 1u);
  EXPECT_EQ(Ask({D({{"plain", "p"}})}).overall, Code::kOk);
  // The request's hits_addend when the descriptor has none; a key never
  // counted stays so.
  EXPECT_EQ(Ask({Neg({{"plain", "q"}})}, 3).statuses[0].remaining, 1u);
  EXPECT_EQ(Ask({D({{"plain", "q"}})}).overall, Code::kOk);
}

// unit: concurrent as Envoy drives it: +1 when a request starts, -1 (a
// negative hit) when its stream is done, whatever the +1 answered: a
// denied request's -1 ends nobody's lease.
TEST_F(UpstreamTest, ConcurrentLimitHoldsAPlacePerRequestUntilItsStreamIsDone) {
  const std::vector<Entry> k = {{"inflight", "u42"}};
  RlsAnswer a = Ask({D(k)});
  EXPECT_EQ(a.statuses[0].code, Code::kOk);
  EXPECT_TRUE(a.statuses[0].lease_granted);
  EXPECT_EQ(a.statuses[0].remaining, 1u);
  EXPECT_EQ(a.statuses[0].limit_value().rls_unit(), 0);  // UNKNOWN: no window
  EXPECT_EQ(Ask({D(k)}).statuses[0].remaining, 0u);
  RlsAnswer c = Ask({D(k)});  // a third in flight: refused
  EXPECT_EQ(c.overall, Code::kOverLimit);
  EXPECT_FALSE(c.statuses[0].lease_granted);
  // It took no place: the count before it is the count after (from which
  // the metrics split its hit: all over_limit, none near_limit; before, 1
  // before and 2 after made it a near_limit hit too).
  EXPECT_EQ(c.statuses[0].before, 2);
  EXPECT_EQ(c.statuses[0].after, 2);
  // The refused one's stream is done: both others still hold their place.
  const BizStatsDay before = TodayOf("envoy.up.inflight");
  RlsAnswer cd = Ask({Neg(k)});
  EXPECT_EQ(cd.overall, Code::kOk);
  EXPECT_EQ(cd.statuses[0].leases_given_back, 0u);
  // A give-back is no decision: not a request, not a denial (it was read as
  // a query of the full key, and counted one of each).
  EXPECT_EQ(TodayOf("envoy.up.inflight").requests, before.requests);
  EXPECT_EQ(TodayOf("envoy.up.inflight").denied, before.denied);
  EXPECT_EQ(Ask({D(k)}).overall, Code::kOverLimit);
  Ask({Neg(k)});
  EXPECT_EQ(Ask({D(k)}).overall, Code::kOverLimit);
  Ask({Neg(k)});
  // The first request's stream is done: a place frees, and one more passes.
  RlsAnswer ad = Ask({Neg(k)});
  EXPECT_EQ(ad.statuses[0].leases_given_back, 1u);
  EXPECT_EQ(ad.statuses[0].remaining, 1u);
  EXPECT_EQ(Ask({D(k)}).overall, Code::kOk);
  EXPECT_EQ(Ask({D(k)}).overall, Code::kOverLimit);
  // Another key has places of its own; hits_addend 0 looks.
  EXPECT_EQ(Ask({D({{"inflight", "u7"}})}).statuses[0].remaining, 1u);
  RlsDescriptor look = D({{"inflight", "u7"}});
  look.has_hits = true;
  EXPECT_EQ(Ask({look}).statuses[0].remaining, 1u);
}

// An Envoy that dies sends no -1: the place frees at the lease's expiry
// (granted at second t, held until t + lease + 1), counted expired.
TEST_F(UpstreamTest, AConcurrentPlaceNobodyGivesBackExpiresWithinLeasePlusOneSecond) {
  const std::vector<Entry> k = {{"inflight", "crash"}};
  Ask({D(k)});
  Ask({D(k)});
  EXPECT_EQ(Ask({D(k)}).overall, Code::kOverLimit);
  Ask({Neg(k)});  // the refused one's stream done
  clock_.Advance(30 * 1000);
  EXPECT_EQ(Ask({D(k)}).overall, Code::kOverLimit);  // held for `lease` s at least
  Ask({Neg(k)});
  clock_.Advance(1000 + 999);
  RlsAnswer a = Ask({D(k)});
  EXPECT_EQ(a.overall, Code::kOk);
  EXPECT_EQ(a.statuses[0].leases_expired, 2u);
  EXPECT_EQ(a.statuses[0].remaining, 1u);
  // A late -1 of a dead request ends the one live lease: fungible, as
  // Envoy's give-back names no lease (docs/integrations.md).
  EXPECT_EQ(Ask({Neg(k)}).statuses[0].leases_given_back, 1u);
  EXPECT_EQ(Ask({Neg(k)}).statuses[0].leases_given_back, 0u);
}

TEST_F(UpstreamTest, QuotaModeIsOverOverallOnlyWhenEveryQuotaDescriptorIs) {
  Ask({D({{"tenant", "t"}})});
  // tenant over (quota), org within (quota): the status says OVER_LIMIT, the
  // overall code OK.
  RlsAnswer a = Ask({D({{"tenant", "t"}}), D({{"org", "o"}})});
  EXPECT_EQ(a.statuses[0].code, Code::kOverLimit);
  EXPECT_EQ(a.statuses[1].code, Code::kOk);
  EXPECT_EQ(a.overall, Code::kOk);
  // Both quota descriptors over: OVER_LIMIT.
  Ask({D({{"org", "o"}})});
  EXPECT_EQ(Ask({D({{"tenant", "t"}}), D({{"org", "o"}})}).overall, Code::kOverLimit);
  // A non-quota descriptor over is OVER_LIMIT whatever the quota ones say.
  Ask({D({{"plain", "p"}})});
  EXPECT_EQ(Ask({D({{"plain", "p"}}), D({{"org", "fresh"}})}).overall, Code::kOverLimit);
}

TEST_F(UpstreamTest, GlobalQuotaAndShadowSettings) {
  RlsSettings s;
  s.global_quota = true;
  svc_->SetSettings(s);
  Ask({D({{"plain", "q"}})});
  RlsAnswer a = Ask({D({{"plain", "q"}}), D({{"plain", "r"}})});
  EXPECT_EQ(a.statuses[0].code, Code::kOverLimit);
  EXPECT_EQ(a.overall, Code::kOk);
  s = RlsSettings{};
  s.global_shadow = true;
  svc_->SetSettings(s);
  a = Ask({D({{"plain", "q"}})});
  EXPECT_EQ(a.statuses[0].code, Code::kOverLimit);  // the status stays
  EXPECT_EQ(a.overall, Code::kOk);
  EXPECT_TRUE(a.global_shadowed);
}

TEST_F(UpstreamTest, WeekMonthYearWindowsCountFromTheEpoch) {
  EXPECT_EQ(Ask({D({{"w", "a"}})}).statuses[0].until_reset_s, 604800 - kT0 % 604800);
  EXPECT_EQ(Ask({D({{"mo", "a"}})}).statuses[0].until_reset_s, 2592000 - kT0 % 2592000);
  EXPECT_EQ(Ask({D({{"y", "a"}})}).statuses[0].until_reset_s, 31536000 - kT0 % 31536000);
  // The next week starts a new count.
  for (int i = 0; i < 5; ++i) Ask({D({{"w", "b"}})});
  EXPECT_EQ(Ask({D({{"w", "b"}})}, 0).statuses[0].remaining, 0u);
  clock_.Set((kT0 + 604800 - kT0 % 604800) * 1000);
  EXPECT_EQ(Ask({D({{"w", "b"}})}).statuses[0].remaining, 4u);
}

TEST_F(UpstreamTest, RequestsPerUnitUpToUint32) {
  RlsAnswer a = Ask({D({{"huge", "h"}})}, 1000);
  EXPECT_EQ(a.overall, Code::kOk);
  EXPECT_EQ(a.statuses[0].remaining, 4294967295u - 1000);
  // The top limit is enforced: the count stops at 2^32-1, and a count there
  // is past it (before, it was never more than the limit: granted forever).
  // A call counts at most 2^31-1 hits.
  a = Ask({D({{"huge", "h"}})}, 2147483647);
  EXPECT_EQ(a.overall, Code::kOk);
  EXPECT_EQ(a.statuses[0].remaining, 4294967295u - 1000 - 2147483647);
  a = Ask({D({{"huge", "h"}})}, 2147482647);  // lands at 2^32-2: under it
  EXPECT_EQ(a.overall, Code::kOk);
  EXPECT_EQ(a.statuses[0].remaining, 1u);
  for (int i = 0; i < 3; ++i) {
    a = Ask({D({{"huge", "h"}})}, 1 + i);  // at the top, then past it
    EXPECT_EQ(a.overall, Code::kOverLimit) << i;
    EXPECT_EQ(a.statuses[0].remaining, 0u) << i;
  }
  EXPECT_EQ(Ask({D({{"huge", "h"}})}, 0).overall, Code::kOverLimit);  // a look says so too
  // Below the top, a count at its limit is still not past it (upstream's
  // after > limit).
  EXPECT_EQ(Ask({D({{"plain", "at"}})}).overall, Code::kOk);
  EXPECT_EQ(Ask({D({{"plain", "at"}})}, 0).overall, Code::kOk);
}

TEST_F(UpstreamTest, ADescriptorsOwnLimitWinsListedOrNot) {
  // plain is 1 a minute in the YAML; its own limit says 3 a second.
  for (uint32_t left : {2u, 1u, 0u}) {
    RlsAnswer a = Ask({Own({{"plain", "x"}}, 3, 1)});
    EXPECT_EQ(a.overall, Code::kOk);
    EXPECT_EQ(a.statuses[0].remaining, left);
    ASSERT_TRUE(a.statuses[0].has_limit);
    EXPECT_EQ(a.statuses[0].limit_value().requests_per_unit, 3u);
    EXPECT_EQ(a.statuses[0].limit_value().unit, Unit::kSecond);
  }
  EXPECT_EQ(Ask({Own({{"plain", "x"}}, 3, 1)}).overall, Code::kOverLimit);
  // A descriptor the YAML does not list, in a configured domain.
  EXPECT_EQ(Ask({Own({{"unlisted", "u"}}, 1, 2)}).statuses[0].remaining, 0u);
  EXPECT_EQ(Ask({Own({{"unlisted", "u"}}, 1, 2)}).overall, Code::kOverLimit);
  // An unknown domain: no limit at all, as upstream.
  RlsAnswer a = Ask({Own({{"unlisted", "u"}}, 1, 2)}, 1, "nowhere");
  EXPECT_FALSE(a.statuses[0].has_limit);
  EXPECT_EQ(a.overall, Code::kOk);
  // The same entries in another domain count apart.
  // A unit that is not SECOND..WEEK is refused whole.
  RlsRequest req;
  req.domain = "up";
  req.descriptors.push_back(Own({{"plain", "x"}}, 3, 0));
  svc_->Decide(req, &a);
  EXPECT_EQ(a.status.code(), Status::Code::kInvalidArgument);
}

TEST_F(UpstreamTest, StopIncrementWhenOverCountsOnlyTheDescriptorsThatGoOver) {
  RlsSettings s;
  s.stop_increment = true;
  svc_->SetSettings(s);
  Ask({D({{"plain", "s"}})});
  // Its read of each counter is no decision: one call, one request in the
  // daily statistics (the read was counted as a query too: two).
  EXPECT_EQ(TodayOf("envoy.up.plain").requests, 1u);
  // plain s would go over: only it is counted, the api one is not.
  RlsAnswer a = Ask({D({{"plain", "s"}}), D({{"path", "/api/s"}})});
  EXPECT_EQ(a.overall, Code::kOverLimit);
  EXPECT_EQ(Ask({D({{"path", "/api/s"}})}, 0).statuses[0].remaining, 3u);
  EXPECT_EQ(Ask({D({{"plain", "s"}})}, 0).overall, Code::kOverLimit);
  // Without it, every descriptor is counted.
  svc_->SetSettings(RlsSettings{});
  Ask({D({{"plain", "s"}}), D({{"path", "/api/s"}})});
  EXPECT_EQ(Ask({D({{"path", "/api/s"}})}, 0).statuses[0].remaining, 2u);
}

TEST_F(UpstreamTest, NearLimitRatioAndValueToMetric) {
  RlsSettings s;
  s.near_limit_ratio = 0.5;
  svc_->SetSettings(s);
  RlsAnswer a = Ask({D({{"route", "/users"}, {"method", "GET"}})}, 5);
  EXPECT_FALSE(a.statuses[0].near);  // 5 is not past floor(10 x 0.5)
  EXPECT_EQ(a.statuses[0].metric_key, "route_/users.method");
  a = Ask({D({{"route", "/users"}, {"method", "GET"}})});
  EXPECT_TRUE(a.statuses[0].near);
  // Without value_to_metric, no per-key label.
  EXPECT_EQ(Ask({D({{"plain", "n"}})}).statuses[0].metric_key, "");
}

TEST_F(UpstreamTest, MetadataIsKeptAsJsonWithYamlTypes) {
  std::string scratch;
  std::vector<Entry> e{{"meta", "m"}};
  const int32_t i = rules_->Find("up", e, &scratch);
  ASSERT_GE(i, 0);
  EXPECT_EQ(rules_->limits()[static_cast<size_t>(i)].metadata_json,
            R"({"team":"payments","tier":2,"nested":{"on_call":"yes","flag":true}})");
  // Answered OK, the descriptor is among those whose metadata is returned.
  RlsAnswer a = Ask({D({{"meta", "m"}})});
  ASSERT_EQ(a.passed.size(), 1u);
}

// A plain scalar is what gopkg.in/yaml.v2 makes of it (found from outside:
// 010, 0x10, 1_000 and +5 reached Envoy as strings, where upstream's
// metadata carries 8, 16, 1000 and 5); a nested map's key is named as
// upstream names it (fmt's %v); a date stays text; NaN and the infinities,
// which JSON cannot carry, are refused by line.
TEST(EnvoyUpstreamConfig, MetadataScalarsAreTypedAsUpstreamsYamlReaderTypesThem) {
  const std::string yaml =
      "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1}\n"
      "    metadata:\n"
      "      oct: 010\n      hex: 0x10\n      us: 1_000\n      plus: +5\n      bin: 0b101\n      o: 0o17\n"
      "      eight: 08\n      half: .5\n      exp: 1e3\n      big: 18446744073709551615\n"
      "      huge: 1e400\n      neg: -0x10\n      date: 2024-01-31\n      word: yEs\n      yes: Yes\n"
      "      q: '010'\n      n: ~\n      010: k\n      u: .5_5\n      uu: .5__5\n"
      "      m: {010: a, 0x10: b, true: c, ~: d, 1.50: e, x: f, 1e6: g, 123456789.0: h, 0.10: i, 100000.0: j,\n"
      "          1_000.5: k, .inf: l, -.Inf: m, .nan: nn, 99999999999999999999: o, 1e-5: p, 0.0001: q,\n"
      "          0xE00000: r, 0123456788: s, 18446744073709551616: t}\n      ~: top\n";
  auto r = EnvoyRules::FromBundle("m.yaml\n" + std::to_string(yaml.size()) + "\n" + yaml);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string scratch;
  std::vector<Entry> e{{"a", "v"}};
  const int32_t i = r.value()->Find("d", e, &scratch);
  ASSERT_GE(i, 0);
  EXPECT_EQ(r.value()->limits()[static_cast<size_t>(i)].metadata_json,
            R"({"oct":8,"hex":16,"us":1000,"plus":5,"bin":5,"o":15,"eight":8,"half":0.5,"exp":1000,)"
            R"("big":18446744073709551615,"huge":"1e400","neg":-16,"date":"2024-01-31","word":"yEs","yes":true,)"
            R"("q":"010","n":null,"010":"k","u":0.55,"uu":".5__5",)"
            R"("m":{"8":"a","16":"b","true":"c","<nil>":"d","1.5":"e","x":"f","1e+06":"g","1.23456789e+08":"h",)"
            R"("0.1":"i","100000":"j","1000.5":"k","+Inf":"l","-Inf":"m","NaN":"nn","1e+20":"o","1e-05":"p",)"
            R"("0.0001":"q","14680064":"r","1.23456788e+08":"s","1.8446744073709552e+19":"t"},"":"top"})");
  // The refusal of metadata written as `lines` (after "metadata:"), or "".
  const auto refusal = [](const std::string& lines) {
    const std::string bad =
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1}\n    metadata:" +
        lines + "\n";
    auto r = EnvoyRules::FromBundle("m.yaml\n" + std::to_string(bad.size()) + "\n" + bad);
    return r.ok() ? std::string() : r.status().message();
  };
  for (const char* v : {".inf", "-.Inf", ".NaN", "+.INF"})
    EXPECT_NE(refusal(" {x: " + std::string(v) + "}").find("m.yaml:5: metadata value '" + std::string(v) + "'"),
              std::string::npos)
        << v;
  // Two keys of one name upstream are one key there, the later value
  // kept, as its reader assigns them in order (a merge key's included): so
  // here (both in the JSON, the answer's Struct refused it, and the whole
  // metadata went missing). A key written twice alike is refused.
  const auto metadata_of = [](const std::string& yaml) {
    auto r = EnvoyRules::FromBundle("m.yaml\n" + std::to_string(yaml.size()) + "\n" + yaml);
    if (!r.ok()) return r.status().message();
    std::string scratch;
    std::vector<Entry> e{{"a", "v"}};
    return r.value()->limits()[static_cast<size_t>(r.value()->Find("d", e, &scratch))].metadata_json;
  };
  const std::string head = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1}\n";
  EXPECT_EQ(metadata_of(head +
                        "    metadata:\n      k: {010: xx, 8: yy, yes: a, true: b, ~: c, null: d, 0.0: e, -0.0: f}\n"),
            R"({"k":{"8":"yy","true":"b","<nil>":"d","0":"f"}})");
  EXPECT_EQ(metadata_of(head + "    metadata:\n      b: &b {8: 1, z: 0}\n      m: {<<: *b, 010: 2}\n"),
            R"({"b":{"8":1,"z":0},"m":{"8":2,"z":0}})");
  // Only a float's -0 is 0's key: a string "-0", and every key of the
  // metadata's own map of strings, are their text (found by a review).
  EXPECT_EQ(metadata_of(head + "    metadata:\n      \"0\": a\n      \"-0\": b\n      k: {\"-0\": c, \"0\": d}\n"),
            R"({"0":"a","-0":"b","k":{"-0":"c","0":"d"}})");
  EXPECT_NE(refusal("\n      k: {a: 1, a: 2}").find("m.yaml:6: duplicate key 'a'"), std::string::npos)
      << refusal("\n      k: {a: 1, a: 2}");
  // Bytes that are not UTF-8, which upstream's reader refuses: JSON's
  // escape of a stray byte named it as another character.
  for (const char* bytes : {"k: {\"\xff\": x}", "k: \"\xff\"", "\"\xc3\": 1"})
    EXPECT_NE(refusal("\n      z: 1\n      " + std::string(bytes))
                  .find("m.yaml:7: metadata holds bytes that are not UTF-8"),
              std::string::npos)
        << bytes;
}

TEST(EnvoyUpstreamConfig, RefusesShareThresholdWithoutAWildcardAndMergesDomainsWhenAsked) {
  const std::string bad = "domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n";
  auto r = EnvoyRules::FromBundle("b.yaml\n" + std::to_string(bad.size()) + "\n" + bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "b.yaml:3: share_threshold needs a wildcard value (one holding '*'), not 'b'");
  const std::string one = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1}\n";
  const std::string two = "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: day, requests_per_unit: 1}\n";
  const std::string bundle =
      "1.yaml\n" + std::to_string(one.size()) + "\n" + one + "2.yaml\n" + std::to_string(two.size()) + "\n" + two;
  r = EnvoyRules::FromBundle(bundle);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "1.yaml:1: domain 'd' is configured in two files, here and in 2.yaml:1 (one file per domain; <grpc "
            "merge_domains=\"1\">, and frsctl envoy-config --merge-domains, merge the files of one domain)");
  r = EnvoyRules::FromBundle(bundle, /*merge_domains=*/true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string scratch;
  std::vector<Entry> a{{"a", "1"}}, b{{"b", "1"}};
  EXPECT_GE((*r)->Find("d", a, &scratch), 0);
  EXPECT_GE((*r)->Find("d", b, &scratch), 0);
  // A descriptor both files give is refused, merged or not.
  r = EnvoyRules::FromBundle("1.yaml\n" + std::to_string(one.size()) + "\n" + one + "3.yaml\n" +
                                 std::to_string(one.size()) + "\n" + one,
                             true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("duplicate descriptor 'a'"), std::string::npos);
}

}  // namespace
}  // namespace frs::envoy
