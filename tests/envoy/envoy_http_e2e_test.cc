// Envoy's rate limit service on frsd's HTTP listener, end to end: POST /json
// and GET /healthcheck as envoyproxy/ratelimit answers them, the
// per-descriptor series in /metrics, and two shards of a <cluster> answering
// descriptors they do not own (421 with enforce="1", counted locally with
// enforce="0"). Real frsd processes on loopback ports of their own binding.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "common/envoy_yaml.h"
#include "e2e/frsd_harness.h"
#include "frs/ring.h"

namespace frs::e2e {
namespace {

// Day windows: a test cannot straddle a window's end but at midnight UTC.
const std::string kYaml =
    testing::EnvoyDomain("rl") +
    testing::EnvoyDescriptor("user", "", "detailed_metric: true", "{unit: day, requests_per_unit: 5}") +
    testing::EnvoyDescriptor("client", "trial", "shadow_mode: true", "{unit: day, requests_per_unit: 1}") +
    testing::EnvoyDescriptor("client", "internal", "", "{unlimited: true}");

ServerOptions WithGrpc(uint32_t workers = 2) {
  ServerOptions o;
  o.workers = workers;
  o.extra = "  <grpc listen=\"127.0.0.1:0\" config=\"envoy\"/>\n";
  return o;
}

void WriteYaml(const Frsd& f, const std::string& yaml = kYaml) {
  std::filesystem::create_directories(f.dir() + "/envoy");
  WriteFile(f.dir() + "/envoy/rl.yaml", yaml);
}

std::string Call(const std::string& descriptors, int hits = 0) {
  return "{\"domain\":\"rl\",\"descriptors\":[" + descriptors + "]" +
         (hits ? ",\"hitsAddend\":" + std::to_string(hits) : std::string()) + "}";
}

std::string User(const std::string& u) { return R"({"entries":[{"key":"user","value":")" + u + R"("}]})"; }

// The value of one series line of /metrics ("" when absent).
std::string Series(const std::string& metrics, const std::string& series) {
  const size_t p = metrics.find("\n" + series + " ");
  if (p == std::string::npos) return "";
  const size_t start = p + series.size() + 2;
  return metrics.substr(start, metrics.find('\n', start) - start);
}

std::string Hits(const std::string& descriptor, const std::string& result) {
  return "frs_envoy_descriptor_hits_total{domain=\"rl\",descriptor=\"" + descriptor + "\",result=\"" + result + "\"}";
}

TEST(EnvoyHttpE2E, JsonAnswersAsEnvoyproxyRatelimitDoes) {
  Frsd f(WithGrpc());
  WriteYaml(f);
  ASSERT_TRUE(f.Start()) << f.log();
  Client c(f.port());

  // Allowed: protojson's shape, limitRemaining counting down.
  HttpResponse r = c.Post(Call(User("ann")), "/json");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_NE(
      r.body.find(
          R"({"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":5,"unit":"DAY"},"limitRemaining":4,"durationUntilReset":")"),
      std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find("s\"}]}"), std::string::npos) << r.body;

  // hitsAddend 3 (as the .proto spells it too), then over the limit: 429.
  r = c.Post(R"({"domain":"rl","descriptors":[)" + User("ann") + R"(],"hits_addend":3})", "/json");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"limitRemaining\":1,"), std::string::npos) << r.body;
  r = c.Post(Call(User("ann"), 2), "/json");
  ASSERT_EQ(r.status, 429) << r.body;
  // Over the limit: limitRemaining 0 (left out, protojson's default), as
  // envoyproxy/ratelimit answers; its hits are counted as upstream's counter
  // counts them (4 + 2 = 6), so the next single hit is over too.
  EXPECT_NE(
      r.body.find(
          R"({"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"requestsPerUnit":5,"unit":"DAY"},"durationUntilReset":")"),
      std::string::npos)
      << r.body;
  r = c.Post(Call(User("ann")), "/json");
  EXPECT_EQ(r.status, 429) << r.body;

  // Unknown descriptor, unknown domain, unlimited: OK, no currentLimit.
  r = c.Post(Call(R"({"entries":[{"key":"nothing","value":"x"}]})"), "/json");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "{\"overallCode\":\"OK\",\"statuses\":[{\"code\":\"OK\"}]}\n");
  r = c.Post(R"({"domain":"other","descriptors":[)" + User("ann") + "]}", "/json");
  EXPECT_EQ(r.body, "{\"overallCode\":\"OK\",\"statuses\":[{\"code\":\"OK\"}]}\n");
  r = c.Post(Call(R"({"entries":[{"key":"client","value":"internal"}]})"), "/json");
  EXPECT_EQ(r.body, "{\"overallCode\":\"OK\",\"statuses\":[{\"code\":\"OK\",\"limitRemaining\":4294967295}]}\n");

  // Shadow mode: over its limit of 1, still OK.
  for (int i = 0; i < 3; ++i) {
    r = c.Post(Call(R"({"entries":[{"key":"client","value":"trial"}]})"), "/json");
    EXPECT_EQ(r.status, 200) << r.body;
  }

  // Bad requests: 400 with a message, nothing counted.
  struct Bad {
    std::string body, says;
  } const bad[] = {
      {"{\"domain\":", "not JSON"},
      {"[1,2]", "not a JSON object"},
      {R"({"domain":"rl","bogus":1})", "unknown field 'bogus'"},
      {R"({"descriptors":[]})", "domain must not be empty"},
      {R"({"domain":"rl","descriptors":[{"entries":[{"key":7}]}]})", "descriptors[0].entries[0].key is not a string"},
      {R"({"domain":"rl","hitsAddend":-1})", "hitsAddend"},
  };
  for (const Bad& b : bad) {
    r = c.Post(b.body, "/json");
    EXPECT_EQ(r.status, 400) << b.body;
    EXPECT_NE(r.body.find(b.says), std::string::npos) << b.body << " -> " << r.body;
  }
  EXPECT_EQ(c.Get("/json").status, 405);
  // A body past <limits body_bytes> (64 KiB): plain text too, as the
  // door's other errors, not the XML answer of /frs.
  {
    Client big(f.port());  // the 413 closes its connection
    HttpResponse t = big.Post(std::string(70 * 1024, ' '), "/json");
    EXPECT_EQ(t.status, 413);
    EXPECT_EQ(t.body.rfind("the request body exceeds", 0), 0u) << t.body;
  }

  // The per-descriptor series: user "ann" took 1 + 3 + 2 (over) + 1 (over)
  // hits, counted as envoyproxy/ratelimit counts them: over_limit the hits
  // past the limit (6 - 5, then the whole 1), near_limit those between
  // floor(0.8 x 5) = 4 and the limit (the 5th).
  const std::string m = c.Get("/metrics").body;
  EXPECT_EQ(Series(m, Hits("user", "total")), "7") << m;
  EXPECT_EQ(Series(m, Hits("user", "over_limit")), "2");
  EXPECT_EQ(Series(m, Hits("user", "within_limit")), "4");
  EXPECT_EQ(Series(m, Hits("user", "near_limit")), "1");
  EXPECT_EQ(Series(m, Hits("user", "shadow_mode")), "0");
  EXPECT_EQ(Series(m, Hits("client_trial", "total")), "3");
  EXPECT_EQ(Series(m, Hits("client_trial", "over_limit")), "2");
  EXPECT_EQ(Series(m, Hits("client_trial", "shadow_mode")), "2");
  EXPECT_EQ(Series(m, Hits("client_trial", "within_limit")), "1");
  // detailed_metric: the value's own series.
  EXPECT_EQ(Series(m,
                   "frs_envoy_descriptor_detailed_hits_total{domain=\"rl\",descriptor=\"user\",key=\"user_ann\","
                   "result=\"total\"}"),
            "7")
      << m;
  EXPECT_EQ(m.find("descriptor=\"client_trial\",key="), std::string::npos);
  EXPECT_EQ(Series(m, "frs_requests_total{cmd=\"json\",status=\"400\"}"), "6");
  // Every call by its answer (the 6 bad ones refused), and the one for a
  // domain no file names, which is logged too: a typo there turns every
  // limit off.
  EXPECT_EQ(Series(m, "frs_envoy_calls_total{result=\"ok\"}"), "8") << m;
  EXPECT_EQ(Series(m, "frs_envoy_calls_total{result=\"over_limit\"}"), "2");
  EXPECT_EQ(Series(m, "frs_envoy_calls_total{result=\"error\"}"), "6");
  EXPECT_EQ(Series(m, "frs_envoy_unknown_domain_total"), "1");
  EXPECT_NE(f.log().find("Envoy asked for domain \"other\", which no <grpc config> file names: answered OK with no "
                         "limit (1 since the last such line"),
            std::string::npos)
      << f.log();
}

TEST(EnvoyHttpE2E, HealthcheckIsOkWhileServingAnd500WhenTheStoreIsLost) {
  Frsd f(WithGrpc(1));
  WriteYaml(f);
  ASSERT_TRUE(f.Start()) << f.log();
  Client c(f.port());
  HttpResponse r = c.Get("/healthcheck");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "OK\n");
  EXPECT_EQ(r.header("content-type"), "text/plain; charset=utf-8");
  // A store file removed under the running server: out of rotation, as
  // /health, with upstream's status for it (its health check answers 500).
  ASSERT_TRUE(std::filesystem::remove(f.dir() + "/data/frs.1.store"));
  r = c.Get("/healthcheck");
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_EQ(c.Get("/health").status, 503);
  // Shutting down: 500 until the listener closes.
  kill(f.pid(), SIGTERM);
  r = c.Get("/healthcheck");
  EXPECT_TRUE(r.status == 500 || r.status == 0) << r.status;
}

// frsctl run as an operator runs it: exit code and both streams.
struct CtlRun {
  int rc = -1;
  std::string out;
};
CtlRun Ctl(const Frsd& f, const std::string& args) {
  CtlRun r;
  const std::string cmd = std::string("TZ=UTC '") + FRSCTL_PATH + "' -c '" + f.config() + "' " + args + " 2>&1";
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
    const int st = ::pclose(p);
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  return r;
}

// An Envoy descriptor's counts are named by frsctl as frsd counts them: the
// biz is envoy.DOMAIN.PATH (and its id from envoy.ids), found in
// <grpc config>'s files, not only in map.xml.
TEST(EnvoyHttpE2E, FrsctlNamesAnEnvoyDescriptorsBizByNameAndId) {
  Frsd f(WithGrpc(1));
  WriteYaml(f);
  ASSERT_TRUE(f.Start()) << f.log();
  Client c(f.port());
  for (int i = 0; i < 5; ++i) ASSERT_EQ(c.Post(Call(User("zed")), "/json").status, 200);
  ASSERT_EQ(c.Post(Call(User("zed")), "/json").status, 429);

  // The denied key, with its text, from the table of recent denials.
  CtlRun r = Ctl(f, "top --denied envoy.rl.user");
  ASSERT_EQ(r.rc, 0) << r.out;
  ASSERT_NE(r.out.find("zed"), std::string::npos) << r.out;
  // Its counter key, as the store holds it: the one line dump prints.
  r = Ctl(f, "--json dump --biz envoy.rl.user");
  ASSERT_EQ(r.rc, 0) << r.out;
  const size_t k = r.out.find("\"key\":\"");
  ASSERT_NE(k, std::string::npos) << r.out;
  const std::string key = r.out.substr(k + 7, r.out.find('"', k + 7) - k - 7);
  ASSERT_NE(key.find("zed"), std::string::npos) << r.out;

  r = Ctl(f, "explain envoy.rl.user '" + key + "'");
  EXPECT_EQ(r.rc, 1) << r.out;  // denied now
  // Every hit counted, the denied one too, as upstream counts them.
  EXPECT_NE(r.out.find("count 6 of 5"), std::string::npos) << r.out;
  r = Ctl(f, "get envoy.rl.user '" + key + "'");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("envoy.rl.user"), std::string::npos) << r.out;

  // By id, as envoy.ids names it.
  const std::string ids = ReadFile(f.dir() + "/data/envoy.ids");
  const size_t at = ids.find("envoy.rl.user ");
  ASSERT_NE(at, std::string::npos) << ids;
  // "NAME ID PATH": the id is the second word.
  const std::string id = ids.substr(at + 14, ids.find_first_of(" \n", at + 14) - at - 14);
  r = Ctl(f, "explain " + id + " '" + key + "'");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("envoy.rl.user"), std::string::npos) << r.out;
  r = Ctl(f, "top " + id);
  EXPECT_EQ(r.rc, 0) << r.out;

  // A call's own limit (Envoy's limit override) counts in a biz whose rule
  // never denies: its denials reach the statistics all the same.
  const std::string own = R"({"entries":[{"key":"user","value":"ovr"}],"limit":{"requestsPerUnit":1,"unit":"MINUTE"}})";
  for (int i = 0; i < 3; ++i) ASSERT_EQ(c.Post(Call(own), "/json").status, i < 1 ? 200 : 429);
  r = Ctl(f, "top --denied envoy._override.minute");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("ovr"), std::string::npos) << r.out;
  const std::string m = c.Get("/metrics").body;
  // Its id is the one envoy.ids gave it: the series' line by its name.
  auto today = [&m](const std::string& what) {
    const std::string head = "\nfrs_biz_today_" + what + "{biz=\"envoy._override.minute\",";
    const size_t p = m.find(head);
    if (p == std::string::npos) return std::string("<none>");
    const size_t eol = m.find('\n', p + 1);
    return m.substr(m.rfind(' ', eol) + 1, eol - m.rfind(' ', eol) - 1);
  };
  EXPECT_EQ(today("denied"), "2") << m;
  EXPECT_EQ(today("allowed"), "1") << m;
  // Its one rule counts each decision as the biz does.
  auto rule = [&m](const std::string& result) {
    const std::string head = "\nfrs_rule_decisions_total{biz=\"envoy._override.minute\",";
    for (size_t p = m.find(head); p != std::string::npos; p = m.find(head, p + 1)) {
      const size_t eol = m.find('\n', p + 1);
      const std::string line = m.substr(p + 1, eol - p - 1);
      if (line.find("result=\"" + result + "\"}") != std::string::npos) return line.substr(line.rfind(' ') + 1);
    }
    return std::string("<none>");
  };
  EXPECT_EQ(rule("denied"), "2") << m;
  EXPECT_EQ(rule("allowed"), "1") << m;
}

// The decision log has Envoy's decisions as it has HTTP's (with the
// descriptor's domain and path), and a biz's declared fields as members.
TEST(EnvoyHttpE2E, JsonDecisionsAndDeclaredFieldsAreInTheDecisionLog) {
  ServerOptions o = WithGrpc(1);
  o.extra += "  <decisions file=\"decisions.log\" record=\"all\"/>\n";
  o.map =
      "<map>\n  <biz id=\"9\" name=\"ad\" fields=\"user,ad\" separator=\"|\">\n"
      "    <rule interval=\"3600\" max=\"5\"/>\n  </biz>\n</map>\n";
  Frsd f(o);
  WriteYaml(f);
  ASSERT_TRUE(f.Start()) << f.log();
  Client c(f.port());
  ASSERT_EQ(c.Post(Call(User("amy")), "/json").status, 200);
  ASSERT_EQ(c.Get("/acquire?biz=ad&key=u1%7Cad7").status, 200);
  // Past the limit: the count the engine keeps (7 of 5), not limit - remaining.
  ASSERT_EQ(c.Post(Call(User("bob"), 7), "/json").status, 429);
  // Envoy's own limit: its limit, the key the engine counts (led by the
  // domain) and the domain.
  const std::string own = R"({"entries":[{"key":"foo","value":"ovdl"}],"limit":{"requestsPerUnit":2,"unit":"HOUR"}})";
  for (int i = 0; i < 3; ++i) ASSERT_EQ(c.Post(Call(own), "/json").status, i < 2 ? 200 : 429);
  ASSERT_EQ(f.Stop(), 0);  // a stop writes out what the worker holds
  const std::string log = ReadFile(f.dir() + "/decisions.log");
  EXPECT_NE(log.find("\"biz\":\"envoy.rl.user\",\"key\":\"user_amy\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"allowed\":true,\"n\":1,\"count\":1,\"limit\":5,\"remaining\":4,"), std::string::npos) << log;
  EXPECT_NE(log.find("\"client\":\"127.0.0.1\",\"domain\":\"rl\",\"descriptor\":\"user\"}"), std::string::npos) << log;
  EXPECT_NE(log.find("\"key\":\"u1|ad7\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"client\":\"127.0.0.1\",\"user\":\"u1\",\"ad\":\"ad7\"}"), std::string::npos) << log;
  EXPECT_NE(log.find("\"key\":\"user_bob\",\"rule\":"), std::string::npos) << log;
  EXPECT_NE(log.find("\"allowed\":false,\"n\":7,\"count\":7,\"limit\":5,\"remaining\":0,"), std::string::npos) << log;
  EXPECT_NE(log.find("\"biz\":\"envoy._override.hour\",\"key\":\"rl|foo_ovdl\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"allowed\":false,\"n\":1,\"count\":3,\"limit\":2,\"remaining\":0,"), std::string::npos) << log;
  EXPECT_NE(log.find("\"domain\":\"rl\",\"descriptor\":\"override_hour\"}"), std::string::npos) << log;
}

TEST(EnvoyHttpE2E, JsonWithoutGrpcConfigIs404) {
  Frsd f;
  ASSERT_TRUE(f.Start()) << f.log();
  Client c(f.port());
  HttpResponse r = c.Post(Call(User("ann")), "/json");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("<grpc config>"), std::string::npos) << r.body;
}

// Two shards; `enforce` as <cluster enforce>.
class TwoShards {
 public:
  explicit TwoShards(bool enforce) {
    for (auto& f : shards_) {
      f = std::make_unique<Frsd>(WithGrpc(1));
      WriteYaml(*f);
      if (!f->Start()) {
        ADD_FAILURE() << f->log();
        return;
      }
      ports_.push_back(f->port());
    }
    std::vector<RingShard> ring;
    for (uint16_t p : ports_) ring.push_back({Name(p), 1});
    ring_ = std::make_unique<Ring>(Ring::Make(ring).value());
    for (size_t i = 0; i < 2; ++i) {
      Frsd& f = *shards_[i];
      f.WriteConfig(ports_[i]);
      std::string cfg = ReadFile(f.config());
      std::string cluster = "  <cluster self=\"" + Name(ports_[i]) + "\" enforce=\"" + (enforce ? "1" : "0") + "\">\n";
      for (uint16_t p : ports_) cluster += "    <shard>" + Name(p) + "</shard>\n";
      cfg.insert(cfg.rfind("</frs>"), cluster + "  </cluster>\n");
      WriteFile(f.config(), cfg);
      if (!f.ReloadAndWait()) ADD_FAILURE() << f.log();
    }
  }
  static std::string Name(uint16_t p) { return "127.0.0.1:" + std::to_string(p); }
  bool ok() const { return ports_.size() == 2 && ring_; }
  uint16_t port(size_t i) const { return ports_[i]; }
  // A user whose counter key ("user_NAME") shard `i` owns, on the ring.
  std::string UserOwnedBy(size_t i) const {
    for (int n = 0;; ++n) {
      const std::string u = "u" + std::to_string(n);
      if (ring_->OwnerIndex(Ring::RouteOf("user_" + u, {})) == i) return u;
    }
  }

 private:
  std::unique_ptr<Frsd> shards_[2];
  std::vector<uint16_t> ports_;
  std::unique_ptr<Ring> ring_;
};

TEST(EnvoyHttpE2E, InAClusterWithEnforceADescriptorAnotherShardOwnsIs421NamingIt) {
  TwoShards s(/*enforce=*/true);
  ASSERT_TRUE(s.ok());
  Client a(s.port(0));
  const std::string mine = s.UserOwnedBy(0), theirs = s.UserOwnedBy(1);
  HttpResponse r = a.Post(Call(User(mine)), "/json");
  EXPECT_EQ(r.status, 200) << r.body;
  r = a.Post(Call(User(theirs)), "/json");
  EXPECT_EQ(r.status, 421) << r.body;
  EXPECT_NE(r.body.find("belongs to shard " + TwoShards::Name(s.port(1))), std::string::npos) << r.body;
  // Refused whole: its own descriptor beside it was not counted either.
  r = a.Post(Call(User(mine) + "," + User(theirs)), "/json");
  EXPECT_EQ(r.status, 421) << r.body;
  r = a.Post(Call(User(mine)), "/json");
  EXPECT_NE(r.body.find("\"limitRemaining\":3,"), std::string::npos) << r.body;
  // A descriptor no limit matches is answered by any shard.
  EXPECT_EQ(a.Post(Call(R"({"entries":[{"key":"nothing","value":"x"}]})"), "/json").status, 200);
  // The owner answers it.
  Client b(s.port(1));
  EXPECT_EQ(b.Post(Call(User(theirs)), "/json").status, 200);
  const std::string m = a.Get("/metrics").body;
  EXPECT_EQ(Series(m, "frs_misrouted_total"), "2") << m;
  EXPECT_EQ(Series(m, Hits("user", "total")), "2") << m;
}

TEST(EnvoyHttpE2E, InAClusterWithoutEnforceADescriptorAnotherShardOwnsIsCountedLocally) {
  TwoShards s(/*enforce=*/false);
  ASSERT_TRUE(s.ok());
  Client a(s.port(0)), b(s.port(1));
  const std::string theirs = s.UserOwnedBy(1);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.Post(Call(User(theirs)), "/json").status, 200);
  EXPECT_EQ(a.Post(Call(User(theirs)), "/json").status, 429);
  // Fail-open: the owner's count is its own, untouched by shard 0's.
  HttpResponse r = b.Post(Call(User(theirs)), "/json");
  EXPECT_NE(r.body.find("\"limitRemaining\":4,"), std::string::npos) << r.body;
  EXPECT_EQ(Series(a.Get("/metrics").body, "frs_misrouted_total"), "6");
}

}  // namespace
}  // namespace frs::e2e
