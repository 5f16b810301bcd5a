// The RateLimit header fields and the quota-exceeded problem of the GET
// forms, checked against draft-ietf-httpapi-ratelimit-headers-11 (May 2026):
// the extension parameters, the quota unit, the problem body and its
// negotiation, and every example of the draft reproduced by a real engine
// and store on a fake clock (the example's policies as map.xml, its state as
// the uses recorded before the answer).
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "frs/admin_engine.h"
#include "frs/clock.h"
#include "frs/store.h"
#include "server/handler.h"
#include "server/http_parser.h"

namespace frs::server {
namespace {

// One worker's request path over `map_xml`, at a fake time.
class Server {
 public:
  explicit Server(const std::string& map_xml, int64_t now_s = 1'800'000'000, const std::string& tz = "UTC")
      : clock_(now_s * 1000) {
    const std::string map = dir_ / "map.xml";
    std::ofstream(map, std::ios::binary) << map_xml;
    StoreOptions so;
    so.dir = dir_ / "data";
    so.geometry = StoreGeometry{1, 1024, 8};
    auto store = Store::Open(so);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return;
    store_ = std::move(store.value());
    EngineOptions eo;
    eo.map_path = map;
    eo.store = store_.get();
    eo.stats_dir = so.dir;
    eo.timezone = tz;
    eo.clock = &clock_;
    auto engine = AdminEngine::Open(eo);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    if (!engine.ok()) return;
    engine_ = std::move(engine.value());
    handler_ =
        std::make_unique<Handler>(Backend(engine_.get(), store_.get(), &clock_), HandlerOptions{}, nullptr, nullptr);
  }

  bool ok() const { return handler_ != nullptr; }
  void At(int64_t now_s) { clock_.Set(now_s * 1000); }
  void Advance(int64_t s) { clock_.Advance(s * 1000); }
  void AtMs(int64_t now_ms) { clock_.Set(now_ms); }

  // The whole answer to GET `target` (with `headers`, each ending in CRLF).
  std::string Get(const std::string& target, const std::string& headers = "") {
    if (!ok()) return "";
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n";
    HttpRequestParser p(16384, 65536);
    p.Reset();
    EXPECT_EQ(p.Feed(req.data(), req.size()), HttpRequestParser::Outcome::kDone) << req;
    std::string out;
    handler_->Handle(p.head(), req.data(), true, 0, &out);
    return out;
  }
  // Records n uses of (biz, key) now, which must be allowed.
  void Use(const std::string& biz, const std::string& key, int64_t n) {
    const std::string a = Get("/acquire?biz=" + biz + "&key=" + key + "&n=" + std::to_string(n));
    EXPECT_EQ(a.rfind("HTTP/1.1 200 ", 0), 0u) << a;
  }

 private:
  testing::TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<AdminEngine> engine_;
  std::unique_ptr<Handler> handler_;
};

int Status(const std::string& answer) { return answer.size() > 12 ? std::stoi(answer.substr(9, 3)) : 0; }

// The value of header field `name` in `answer` ("" when absent).
std::string Header(const std::string& answer, const std::string& name) {
  const size_t end = answer.find("\r\n\r\n");
  size_t at = answer.find("\r\n");
  while (at != std::string::npos && at < end) {
    const size_t next = answer.find("\r\n", at + 2);
    const std::string line = answer.substr(at + 2, next - at - 2);
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon == name.size()) {
      bool same = true;
      for (size_t i = 0; i < colon; ++i)
        same = same &&
               std::tolower(static_cast<unsigned char>(line[i])) == std::tolower(static_cast<unsigned char>(name[i]));
      if (same) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
    at = next;
  }
  return "";
}

std::string Body(const std::string& answer) { return answer.substr(answer.find("\r\n\r\n") + 4); }

// A small RFC 9651 parser and serializer for what these fields use: a List
// of Items whose bare item is a String or a Token, with Integer, String,
// Token, Byte Sequence and Boolean parameters. Canon(v) is v serialized as
// RFC 9651 section 4.1 does ("" when v does not parse): the draft's examples
// are written by hand (`"a";q=1,"b";q=2`), a serializer writes `, ` between
// members, so both sides are compared in this one form.
class Sf {
 public:
  static std::string Canon(const std::string& v) {
    Sf p(v);
    std::string out;
    if (!p.List(&out)) return "";
    return out;
  }

 private:
  explicit Sf(const std::string& s) : s_(s) {}
  bool List(std::string* out) {
    Ows();
    while (i_ < s_.size()) {
      if (!out->empty()) out->append(", ");
      if (!Item(out)) return false;
      Ows();
      if (i_ == s_.size()) return true;
      if (s_[i_++] != ',') return false;
      Ows();
      if (i_ == s_.size()) return false;  // a trailing comma
    }
    return !out->empty();
  }
  bool Item(std::string* out) {
    if (!Bare(out, /*param=*/false)) return false;
    while (i_ < s_.size() && s_[i_] == ';') {
      ++i_;
      while (i_ < s_.size() && s_[i_] == ' ') ++i_;
      const size_t k = i_;
      if (i_ == s_.size() || !(std::islower(static_cast<unsigned char>(s_[i_])) || s_[i_] == '*')) return false;
      while (i_ < s_.size() && (std::islower(static_cast<unsigned char>(s_[i_])) ||
                                std::isdigit(static_cast<unsigned char>(s_[i_])) || std::strchr("_-.*", s_[i_])))
        ++i_;
      out->append(";" + s_.substr(k, i_ - k));
      if (i_ < s_.size() && s_[i_] == '=') {
        ++i_;
        std::string v;
        if (!Bare(&v, /*param=*/true)) return false;
        if (v != "?1") out->append("=" + v);  // a true Boolean is written as the bare key
      }
    }
    return true;
  }
  bool Bare(std::string* out, bool param) {
    if (i_ == s_.size()) return false;
    const char c = s_[i_];
    if (c == '"') {
      std::string v = "\"";
      for (++i_; i_ < s_.size() && s_[i_] != '"'; ++i_) {
        if (s_[i_] == '\\') {
          if (++i_ == s_.size() || (s_[i_] != '"' && s_[i_] != '\\')) return false;
          v.push_back('\\');
        } else if (s_[i_] < 0x20 || s_[i_] > 0x7e) {
          return false;
        }
        v.push_back(s_[i_]);
      }
      if (i_ == s_.size()) return false;
      ++i_;
      out->append(v + "\"");
      return true;
    }
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      if (!param) return false;  // these fields' items are strings (or, in older text, tokens)
      const size_t k = i_++;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      if (i_ - k > 16) return false;
      out->append(std::to_string(std::stoll(s_.substr(k, i_ - k))));
      return true;
    }
    if (c == ':') {
      const size_t k = i_++;
      while (i_ < s_.size() && s_[i_] != ':') {
        if (!(std::isalnum(static_cast<unsigned char>(s_[i_])) || std::strchr("+/=", s_[i_]))) return false;
        ++i_;
      }
      if (i_ == s_.size()) return false;
      ++i_;
      out->append(s_.substr(k, i_ - k));
      return true;
    }
    if (c == '?') {
      if (!param || i_ + 1 >= s_.size() || (s_[i_ + 1] != '0' && s_[i_ + 1] != '1')) return false;
      out->append(s_.substr(i_, 2));
      i_ += 2;
      return true;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '*') {
      const size_t k = i_++;
      while (i_ < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[i_])) || std::strchr("!#$%&'*+-.^_`|~:/", s_[i_])))
        ++i_;
      out->append(s_.substr(k, i_ - k));
      return true;
    }
    return false;
  }
  void Ows() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  const std::string& s_;
  size_t i_ = 0;
};

// What FRS sends for field `name` of `answer`, which must be a valid
// Structured Field in its canonical form.
std::string Field(const std::string& answer, const std::string& name) {
  const std::string v = Header(answer, name);
  EXPECT_EQ(Sf::Canon(v), v) << name << ": " << v;
  return v;
}

constexpr char kApiMap[] = R"(<map><biz id="3" name="api">
  <rule algo="token_bucket" interval="1" max="10" burst="20"/></biz></map>)";

// Draft 3.1 and 4.1: "Implementation- or service-specific parameters SHOULD
// be prefixed parameters with a vendor identifier, e.g. acme-policy,
// acme-burst." The bare `burst` of the draft-10 answers stays beside it for
// one release (docs/protocol.md).
TEST(RateLimitFields, ATokenBucketsBurstIsAVendorParameterWithTheOldSpellingBesideIt) {
  Server s(kApiMap);
  ASSERT_TRUE(s.ok());
  const std::string a = s.Get("/acquire?biz=api&key=k");
  ASSERT_EQ(Status(a), 200) << a;
  EXPECT_EQ(Field(a, "RateLimit-Policy"), "\"api_1\";q=10;w=1;frs-burst=20;burst=20");
  EXPECT_EQ(Field(a, "RateLimit"), "\"api_1\";r=10;t=1");
}

// A token bucket's next token comes back at a moment between two seconds:
// its reset (the body's, whole seconds) is that moment rounded up, and t
// counted from a now rounded down read a second more than Retry-After,
// which counts from the exact moment (t=2, Retry-After: 1). On a denial t
// is the rule's own wait, as the draft reads them: Retry-After >= t.
TEST(RateLimitFields, ATokenBucketsDenialNeverSaysToWaitLongerInTThanInRetryAfter) {
  constexpr int64_t kT = 1'800'000'000;
  Server s(R"(<map><biz id="1" name="tb"><rule algo="token_bucket" interval="1" max="2" burst="4"/></biz></map>)", kT);
  ASSERT_TRUE(s.ok());
  s.AtMs(kT * 1000 + 600);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(Status(s.Get("/acquire?biz=tb&key=k")), 200);
  s.AtMs(kT * 1000 + 670);  // the next token at +1.100
  const std::string a = s.Get("/acquire?biz=tb&key=k");
  ASSERT_EQ(Status(a), 429) << a;
  EXPECT_EQ(Header(a, "Retry-After"), "1") << a;
  EXPECT_EQ(Field(a, "RateLimit"), "\"tb_1\";r=0;t=1") << a;
  EXPECT_EQ(Header(a, "RateLimit-Reset"), "1") << a;
  EXPECT_NE(a.find("reset=\"" + std::to_string(kT + 2) + "\""), std::string::npos) << a;
}

// A denial's fields speak for the rule the answer says decided it, not for
// another denying rule with less left: a calendar 5 s max 3 and a sliding
// 3 s max 2 both refuse n=4 for good; the body names the first, so do they.
TEST(RateLimitFields, ADenialSpeaksForTheRuleThatDecidedIt) {
  Server s(R"(<map><biz id="1" name="short"><rule algo="calendar" interval="5" max="3" name="c5"/>)"
           R"(<rule algo="sliding" interval="3" max="2" name="s3"/></biz></map>)");
  ASSERT_TRUE(s.ok());
  const std::string a = s.Get("/acquire?biz=short&key=k&n=4");
  ASSERT_EQ(Status(a), 429) << a;
  EXPECT_NE(a.find("limit=\"3\" remaining=\"3\""), std::string::npos) << a;
  EXPECT_EQ(Field(a, "RateLimit").rfind("\"c5\";r=3;", 0), 0u) << a;
  // Allowed, the fields speak for the rule with least left: s3.
  const std::string b = s.Get("/acquire?biz=short&key=j");
  ASSERT_EQ(Status(b), 200) << b;
  EXPECT_EQ(Field(b, "RateLimit").rfind("\"s3\";r=1;", 0), 0u) << b;
}

// Draft 3.1.2: `qu` names the quota unit, "requests" by default, and only
// the registry's units; a biz that counts something else (points, tokens)
// says so in a vendor parameter, `frs-qu`.
TEST(RateLimitFields, TheQuotaUnitOfABizThatCountsSomethingElse) {
  Server s(R"(<map>
    <biz id="1" name="upload" unit="content-bytes"><rule interval="60" max="1000000"/></biz>
    <biz id="2" name="reward" unit="points"><rule algo="calendar" interval="86400" max="100"/></biz>
    <biz id="3" name="pages" unit="requests"><rule interval="60" max="5"/></biz>
    <biz id="4" name="streams" unit="concurrent-requests"><rule interval="60" max="3"/></biz>
  </map>)");
  ASSERT_TRUE(s.ok());
  std::string a = s.Get("/acquire?biz=upload&key=k&n=4096");
  EXPECT_EQ(Field(a, "RateLimit-Policy"), "\"upload_1\";q=1000000;qu=\"content-bytes\";w=60");
  EXPECT_EQ(Field(a, "RateLimit"), "\"upload_1\";r=995904;t=60");
  a = s.Get("/acquire?biz=reward&key=k&n=30");
  EXPECT_EQ(Field(a, "RateLimit-Policy"), "\"reward_1\";q=100;frs-qu=\"points\";w=86400");
  a = s.Get("/acquire?biz=pages&key=k");
  EXPECT_EQ(Field(a, "RateLimit-Policy"), "\"pages_1\";q=5;w=60");  // the default unit goes unsaid
  a = s.Get("/acquire?biz=streams&key=k");
  EXPECT_EQ(Field(a, "RateLimit-Policy"), "\"streams_1\";q=3;qu=\"concurrent-requests\";w=60");
}

constexpr char kTwoRules[] = R"(<map><biz id="1" name="ad">
  <rule name="daily" algo="calendar" interval="86400" max="3"/>
  <rule name="bandwidth" interval="60" max="2"/></biz></map>)";

constexpr char kProblemAccept[] = "Accept: application/problem+json\r\n";

// Draft 5.1: a denial the client asked to get as application/problem+json
// is the quota-exceeded problem naming the policies that denied it.
TEST(RateLimitFields, ADenialAskedForAsAProblemIsQuotaExceededWithTheViolatedPolicies) {
  Server s(kTwoRules);
  ASSERT_TRUE(s.ok());
  s.Use("ad", "k", 2);
  std::string a = s.Get("/acquire?biz=ad&key=k", kProblemAccept);
  ASSERT_EQ(Status(a), 429) << a;
  EXPECT_EQ(Header(a, "Content-Type"), "application/problem+json");
  EXPECT_EQ(Body(a),
            "{\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\","
            "\"title\":\"Request cannot be satisfied as assigned quota has been exceeded\","
            "\"status\":429,\"violated-policies\":[\"bandwidth\"]}\n");
  EXPECT_EQ(Header(a, "Content-Length"), std::to_string(Body(a).size()));
  EXPECT_EQ(Field(a, "RateLimit"), "\"bandwidth\";r=0;t=60");
  EXPECT_EQ(Header(a, "Retry-After"), "60");
  // n=2 more: both rules deny, both are named, in RateLimit-Policy's order.
  a = s.Get("/query?biz=ad&key=k&n=2", kProblemAccept);
  ASSERT_EQ(Status(a), 429) << a;
  EXPECT_NE(Body(a).find("\"violated-policies\":[\"daily\",\"bandwidth\"]}"), std::string::npos) << a;
  // Without the wish the denial stays the XML decision, with the same fields.
  a = s.Get("/acquire?biz=ad&key=k");
  ASSERT_EQ(Status(a), 429) << a;
  EXPECT_EQ(Header(a, "Content-Type"), "application/xml");
  EXPECT_EQ(Body(a).rfind("<response code=\"0\" allowed=\"0\"", 0), 0u) << a;
  // /auth has no body (nginx's auth_request wants none); the names are in
  // a header field, for the front door's own 429 (only there: /acquire and
  // /query have them in their body).
  a = s.Get("/auth?biz=ad&key=k", kProblemAccept);
  ASSERT_EQ(Status(a), 403) << a;
  EXPECT_EQ(Body(a), "");
  EXPECT_EQ(Field(a, "FRS-Violated-Policies"), "\"bandwidth\"");
  a = s.Get("/auth?biz=ad&key=k&n=2");
  EXPECT_EQ(Field(a, "FRS-Violated-Policies"), "\"daily\", \"bandwidth\"");
  EXPECT_EQ(Header(s.Get("/acquire?biz=ad&key=k"), "FRS-Violated-Policies"), "");
  // An allowed answer is the decision, whatever the client prefers.
  a = s.Get("/acquire?biz=ad&key=other", kProblemAccept);
  ASSERT_EQ(Status(a), 200) << a;
  EXPECT_EQ(Header(a, "Content-Type"), "application/xml");
  EXPECT_EQ(Header(a, "FRS-Violated-Policies"), "");
}

// A key holding every reservation its biz allows is denied a reserve
// though no rule is exhausted: the problem names no policy and says why, and
// Retry-After is the table's wait (the first reservation's end), shorter
// than the RateLimit field's t.
TEST(RateLimitFields, AFullReservationTableIsAProblemThatSaysSoAndWaitsForTheFirstToEnd) {
  Server s(R"(<map><biz id="1" name="tok" reservations="2"><rule interval="3600" max="1000"/></biz></map>)");
  ASSERT_TRUE(s.ok());
  for (int i = 0; i < 2; ++i) {
    const std::string a = s.Get("/acquire?biz=tok&key=k&n=1&reserve=" + std::to_string(30 + i));
    ASSERT_EQ(Status(a), 200) << a;
  }
  const std::string a = s.Get("/acquire?biz=tok&key=k&n=1&reserve=60", kProblemAccept);
  ASSERT_EQ(Status(a), 429) << a;
  EXPECT_EQ(Header(a, "Content-Type"), "application/problem+json");
  EXPECT_NE(Body(a).find("\"violated-policies\":[],\"detail\":\"the key holds every reservation its biz allows"),
            std::string::npos)
      << a;
  EXPECT_EQ(Header(a, "Retry-After"), "31");  // the first taken, for 30 s, ends 31 s on
  EXPECT_EQ(Field(a, "RateLimit"), "\"tok_1\";r=998;t=3600");
  // A denial by a rule keeps the problem without the detail.
  EXPECT_EQ(Body(s.Get("/acquire?biz=tok&key=k&n=999", kProblemAccept)).find("detail"), std::string::npos);
  // An id this key never issued: 409 with its reason phrase (not "Error").
  EXPECT_EQ(s.Get("/settle?biz=tok&key=k&reservation=000000010000000000000000&n=1")
                .rfind("HTTP/1.1 409 Conflict\r\n", 0),
            0u);
}

// Content negotiation (RFC 9110 12.5.1): the problem when the client names
// application/problem+json with a weight above 0 and does not prefer XML.
TEST(RateLimitFields, TheProblemIsSentOnlyWhenTheClientPrefersIt) {
  Server s(kTwoRules);
  ASSERT_TRUE(s.ok());
  s.Use("ad", "k", 2);
  const struct {
    const char* accept;
    bool problem;
  } cases[] = {
      {"application/problem+json", true},
      {"Application/Problem+JSON", true},
      {"application/json, application/problem+json;q=0.9", true},
      {"application/problem+json, */*;q=0.1", true},
      {"application/problem+json, */*", true},  // a wildcard is no wish for XML
      {"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", false},
      {"application/problem+json;q=0", false},
      {"application/problem+json;q=0.5, application/xml", false},
      {"application/xml, application/problem+json", false},  // a tie goes to XML named as such
      {"application/problem+json;q=0.8, application/*;q=0.5", true},
      {"application/problem+json;q=2", false},  // not a weight: the range says nothing
      {"*/*", false},
      {"application/json", false},
  };
  for (const auto& c : cases) {
    const std::string a = s.Get("/acquire?biz=ad&key=k", std::string("Accept: ") + c.accept + "\r\n");
    ASSERT_EQ(Status(a), 429) << a;
    EXPECT_EQ(Header(a, "Content-Type"), c.problem ? "application/problem+json" : "application/xml") << c.accept;
  }
  // Two Accept fields are one list (RFC 9110 5.3).
  const std::string a =
      s.Get("/acquire?biz=ad&key=k", "Accept: application/xml;q=0.5\r\nAccept: application/problem+json\r\n");
  EXPECT_EQ(Header(a, "Content-Type"), "application/problem+json");
}

// ---------------------------------------------------------------------------
// The draft's examples. Each case is one example of
// draft-ietf-httpapi-ratelimit-headers-11, by section, with the field values
// as the draft prints them, and the state in which FRS sends them: the
// example's policies as map.xml rules (a policy's name is its rule's name,
// q its max, w its interval) and the uses recorded before the answer. Where
// FRS sends something else for that state, `frs` holds what it sends and
// `why` says why. Two examples have no counterpart: 5.2's
// temporary-reduced-capacity and 5.3's abnormal-usage-detected problems,
// types FRS never sends (it lowers no quota under load, and its 503 is a
// full worker's, before any request is read; it judges no pattern). 5.1's
// and B.1.4's problem bodies are TheProblemExamplesOfDraft11, below.

constexpr int64_t kT0 = 1'800'000'000;  // a multiple of 1000 and of 60: 2027-01-15T08:00:00Z

struct Example {
  const char* section;
  std::string map;
  int64_t start_s;
  // Records the state (on s, at start_s) and returns the answer to examine.
  std::function<std::string(Server&)> run;
  int status;
  std::string policy;                           // the draft's RateLimit-Policy ("": the example has none)
  std::string limit;                            // the draft's RateLimit ("": none)
  std::string frs_policy = "", frs_limit = "";  // what FRS sends instead, when it differs
  const char* why = "";
  std::string retry_after = "";  // the draft's Retry-After (as FRS writes it), when it has one
  std::string date = "";         // the draft's Date, when the example depends on it
};

std::string Rule(const char* name, const char* attrs) {
  return std::string("<rule name=\"") + name + "\" " + attrs + "/>";
}
std::string Biz(const std::string& rules, const char* extra = "") {
  return std::string("<map><biz id=\"1\" name=\"b\"") + extra + ">" + rules + "</biz></map>";
}
std::string Acquire(Server& s, int64_t n = 1) { return s.Get("/acquire?biz=b&key=k&n=" + std::to_string(n)); }
std::string Query(Server& s, int64_t n = 1) { return s.Get("/query?biz=b&key=k&n=" + std::to_string(n)); }

std::vector<Example> Examples() {
  std::vector<Example> x;
  // Section 3: two policies.
  x.push_back({"3",
               Biz(Rule("burst", "interval=\"60\" max=\"100\"") + Rule("daily", "interval=\"86400\" max=\"1000\"")),
               kT0, [](Server& s) { return Acquire(s); }, 200, "\"burst\";q=100;w=60,\"daily\";q=1000;w=86400", ""});
  // Section 3.2, first example.
  x.push_back({"3.2 (1)", Biz(Rule("default", "interval=\"10\" max=\"100\"")), kT0,
               [](Server& s) { return Acquire(s); }, 200, "\"default\";q=100;w=10", ""});
  // Section 3.2, multiple policies.
  x.push_back({"3.2 (2)",
               Biz(Rule("permin", "interval=\"60\" max=\"50\"") + Rule("perhr", "interval=\"3600\" max=\"1000\"")), kT0,
               [](Server& s) { return Acquire(s); }, 200, "\"permin\";q=50;w=60,\"perhr\";q=1000;w=3600", ""});
  // Section 3.2, a partition key.
  x.push_back({"3.2 (3)", Biz(Rule("peruser", "interval=\"60\" max=\"100\"")), kT0,
               [](Server& s) { return Acquire(s); }, 200, "\"peruser\";q=100;w=60;pk=:cHsdsRa894==:", "",
               "\"peruser\";q=100;w=60", "",
               "FRS sends no partition key: the key is the client's own (its address, its user id), which the draft's "
               "6.1 asks servers not to echo; the policy is the same"});
  // Section 3.2, a partition key and a quota unit.
  x.push_back({"3.2 (4)", Biz(Rule("peruser", "interval=\"10\" max=\"65535\""), " unit=\"content-bytes\""), kT0,
               [](Server& s) { return Acquire(s); }, 200,
               "\"peruser\";q=65535;qu=\"content-bytes\";w=10;pk=:sdfjLJUOUH==:", "",
               "\"peruser\";q=65535;qu=\"content-bytes\";w=10", "", "no partition key, as in 3.2 (3)"});
  // Section 4 and 4.2, first example: 50 units left, 30 s to go.
  x.push_back({"4 / 4.2 (1)", Biz(Rule("default", "interval=\"60\" max=\"100\"")), kT0,
               [](Server& s) {
    s.Use("b", "k", 50);
    s.Advance(30);
    return Query(s);
               },
               200, "", "\"default\";r=50;t=30"});
  // Section 4.2, no time window and a partition key.
  x.push_back({"4.2 (2)", Biz(Rule("default", "interval=\"60\" max=\"1000\"")), kT0,
               [](Server& s) {
    s.Use("b", "k", 1);
    return Query(s);
               },
               200, "", "\"default\";r=999;pk=:dHJpYWwxMjEzMjM=:", "", "\"default\";r=999;t=60",
               "every FRS rule has a window, so t is always sent; no partition key, as in 3.2 (3)"});
  // Section 4.2, 300 MB in the next 60 s: a calendar minute in content bytes, at its start.
  x.push_back({"4.2 (3)",
               Biz(Rule("default", "algo=\"calendar\" interval=\"60\" max=\"300000000\""), " unit=\"content-bytes\""),
               kT0, [](Server& s) { return Query(s); }, 200, "", "\"default\";r=300000000;t=60;pk=:QXBwLTk5OQ==:", "",
               "\"default\";r=300000000;t=60", "no partition key, as in 3.2 (3)"});
  // Section 6: a spent quota, 10 s before its window ends (FRS answers no
  // 3xx; the field is the example's).
  x.push_back({"6", Biz(Rule("problemPolicy", "interval=\"60\" max=\"5\"")), kT0,
               [](Server& s) {
    s.Use("b", "k", 5);
    s.Advance(50);
    return Query(s);
               },
               429, "", "\"problemPolicy\";r=0;t=10", "", "", "", "10"});
  // Section 7: one left, 7 s to go.
  x.push_back({"7", Biz(Rule("default", "interval=\"60\" max=\"5\"")), kT0,
               [](Server& s) {
    s.Use("b", "k", 4);
    s.Advance(53);
    return Query(s);
               },
               200, "", "\"default\";r=1;t=7"});
  // Section 8.5: a daily quota that resets at 18:00:00 (UTC; local midnight
  // in Asia/Dhaka, UTC+6), asked at 18:00:00.
  x.push_back({"8.5 (1)", Biz(Rule("daily", "algo=\"calendar\" interval=\"86400\" max=\"1\"")), 784922400,
               [](Server& s) { return Query(s); }, 200, "", "\"daily\";r=1;t=86400", "", "", "", "",
               "Tue, 15 Nov 1994 18:00:00 GMT"});
  // Section 8.5: an unconsumed 10000 per 1000 s, 10 s before the window
  // ends (calendar windows of 1000 s are multiples of 1000 unix seconds).
  x.push_back({"8.5 (2)", Biz(Rule("somepolicy", "algo=\"calendar\" interval=\"1000\" max=\"10000\"")), kT0 + 990,
               [](Server& s) { return Query(s); }, 200, "\"somepolicy\";q=10000;w=1000",
               "\"somepolicy\";r=10000;t=10"});
  // B.1.1: served with nothing left, twice (a borrowing window grants
  // beyond max; the fields promise max alone). FRS sends its policy too.
  x.push_back({"B.1.1 (1)", Biz(Rule("default", "interval=\"60\" max=\"5\" borrow=\"5\"")), kT0,
               [](Server& s) {
    s.Use("b", "k", 5);
    s.Advance(10);
    return Acquire(s);
               },
               200, "", "\"default\";r=0;t=50"});
  x.push_back({"B.1.1 (2)", Biz(Rule("default", "interval=\"60\" max=\"5\" borrow=\"5\"")), kT0,
               [](Server& s) {
    s.Use("b", "k", 6);
    s.Advance(12);
    return Acquire(s);
               },
               200, "", "\"default\";r=0;t=48"});
  // B.1.2 and B.3.1: 5000 a day and 1000 an hour; 4900 used in the first
  // 14 hours; the daily quota is the closer one.
  for (const char* sec : {"B.1.2", "B.3.1"}) {
    const bool b12 = sec[2] == '1';
    const char* day = b12 ? "dayLimit" : "day";
    x.push_back({sec,
                 Biz(Rule(b12 ? "hourLimit" : "hour", "algo=\"calendar\" interval=\"3600\" max=\"1000\"") +
                     Rule(day, "algo=\"calendar\" interval=\"86400\" max=\"5000\"")),
                 1'799'971'200,  // 2027-01-15T00:00:00Z
                 [](Server& s) {
      for (int h = 0; h < 5; ++h) {
        s.Use("b", "k", 980);
        s.Advance(3600);
      }
      s.Advance(9 * 3600);
      return Query(s);
                 },
                 200, b12 ? "" : "\"hour\";q=1000;w=3600, \"day\";q=5000;w=86400",
                 std::string("\"") + day + "\";r=100;t=36000"});
  }
  // B.1.3: 100 a minute; 40 used after 2 s. The second answer's r=20 is a
  // server lowering its quota under load, which FRS does not do: it says
  // what is left.
  x.push_back({"B.1.3 (1)", Biz(Rule("basic", "interval=\"60\" max=\"100\"")), kT0,
               [](Server& s) {
    s.Use("b", "k", 39);
    s.Advance(2);
    return Acquire(s);
               },
               200, "\"basic\";q=100;w=60", "\"basic\";r=60;t=58"});
  x.push_back({"B.1.3 (2)", Biz(Rule("basic", "interval=\"60\" max=\"100\"")), kT0,
               [](Server& s) {
    s.Use("b", "k", 39);
    s.Advance(2);
    s.Use("b", "k", 1);
    s.Advance(2);
    return Acquire(s);
               },
               200, "\"basic\";q=100;w=60", "\"basic\";r=20;t=56", "", "\"basic\";r=59;t=56",
               "FRS does not lower a quota under load: 41 of 100 used leave 59"});
  // B.1.4: a spent quota, 5 s before its window ends, at the example's
  // Date; its Retry-After (an HTTP-date, 09:27:05) is the same moment as
  // FRS's 5 s. The problem body is checked in the next test.
  x.push_back({"B.1.4", Biz(Rule("default", "interval=\"60\" max=\"5\"")), 1564997220 - 55,
               [](Server& s) {
    s.Use("b", "k", 5);
    s.Advance(55);
    return Acquire(s);
               },
               429, "", "\"default\";r=0;t=5", "", "", "", "5", "Mon, 05 Aug 2019 09:27:00 GMT"});
  // B.2.1: 99 left for the next 50 s of a 100-a-minute window.
  x.push_back({"B.2.1", Biz(Rule("fixedwindow", "interval=\"60\" max=\"100\"")), kT0,
               [](Server& s) {
    s.Use("b", "k", 1);
    s.Advance(10);
    return Query(s);
               },
               200, "\"fixedwindow\";q=100;w=60", "\"fixedwindow\";r=99;t=50"});
  // B.2.2: 9 left for the next 50 s (the draft's server lowers r to slow
  // the client; FRS says 9 when 91 were used).
  x.push_back({"B.2.2", Biz(Rule("dynamic", "interval=\"60\" max=\"100\"")), kT0,
               [](Server& s) {
    s.Use("b", "k", 91);
    s.Advance(10);
    return Query(s);
               },
               200, "\"dynamic\";q=100;w=60", "\"dynamic\";r=9;t=50"});
  // B.2.3: a policy of 15 per 20 s, spent: 429, nothing left for 20 s.
  x.push_back({"B.2.3", Biz(Rule("dynamic", "interval=\"20\" max=\"15\"")), kT0,
               [](Server& s) {
    s.Use("b", "k", 15);
    return Acquire(s);
               },
               429, "\"dynamic\";q=15;w=20", "\"dynamic\";r=0;t=20", "", "", "", "20"});
  // B.3: a 429 with Retry-After: 20 while r=15 and t=40. FRS denies only
  // what its rules deny: with 15 left, a request of n=16 is denied until
  // the window ends, so its Retry-After is t (40), never earlier (draft 11,
  // section 6: Retry-After SHOULD NOT be earlier than the effective
  // window's end, which this example of the same draft is).
  x.push_back({"B.3", Biz(Rule("dynamic", "interval=\"60\" max=\"100\"")), kT0,
               [](Server& s) {
    s.Use("b", "k", 85);
    s.Advance(20);
    return Acquire(s, 16);
               },
               429, "\"dynamic\";q=100;w=60", "\"dynamic\";r=15;t=40", "", "", "", "40"});
  // FAQ 8, the simplest form (`RateLimit:"default";r=50;t=60`, no space
  // after the colon: the same field).
  x.push_back({"FAQ 8 (1)", Biz(Rule("default", "interval=\"60\" max=\"100\"")), kT0,
               [](Server& s) { return Acquire(s, 50); }, 200, "", "\"default\";r=50;t=60"});
  // FAQ 8, policies with an unprefixed `burst` (against the draft's own
  // 3.1), a sliding window's r=50 and t=44. FRS has a burst on token
  // buckets only, prefixed (the bare spelling beside it for one release),
  // and no burst of 0 (a bucket holds at least one token).
  x.push_back({"FAQ 8 (2)",
               Biz(Rule("sliding", "algo=\"token_bucket\" interval=\"60\" max=\"100\" burst=\"1000\"") +
                   Rule("fixed", "interval=\"3600\" max=\"5000\"")),
               kT0, [](Server& s) { return Acquire(s, 950); }, 200,
               "\"sliding\";q=100;w=60;burst=1000,\"fixed\";q=5000;w=3600;burst=0", "\"sliding\";r=50;t=44",
               "\"sliding\";q=100;w=60;frs-burst=1000;burst=1000, \"fixed\";q=5000;w=3600", "\"sliding\";r=50;t=1",
               "a bucket's next token is back in 0.6 s (t=1), where the draft's sliding window waits 44 s"});
  // "RateLimit header fields currently used on the web": a sliding window
  // of 12 a second at half and at full throughput. The draft repeats q in
  // RateLimit there, a parameter its section 4.1 does not define; FRS
  // sends q in RateLimit-Policy only.
  for (int used : {6, 11}) {
    x.push_back({used == 6 ? "currently used on the web (1)" : "currently used on the web (2)",
                 Biz(Rule("sliding", "algo=\"sliding\" interval=\"1\" max=\"12\"")), kT0,
                 [used](Server& s) {
      s.Use("b", "k", used);
      return Query(s);
                 },
                 200, "\"sliding\";q=12;w=1", std::string("\"sliding\";q=12;r=") + (used == 6 ? "6" : "1") + ";t=1", "",
                 std::string("\"sliding\";r=") + (used == 6 ? "6" : "1") + ";t=1",
                 "no q in RateLimit: the draft defines r, t and pk there"});
  }
  return x;
}

TEST(RateLimitFields, EveryExampleOfDraft11) {
  for (const Example& e : Examples()) {
    SCOPED_TRACE(std::string("draft-ietf-httpapi-ratelimit-headers-11 section ") + e.section);
    Server s(e.map, e.start_s, std::string(e.section) == "8.5 (1)" ? "Asia/Dhaka" : "UTC");
    ASSERT_TRUE(s.ok());
    const std::string a = e.run(s);
    EXPECT_EQ(Status(a), e.status) << a;
    // What the draft prints must itself be a valid field: the comparison is
    // between canonical forms.
    if (!e.policy.empty()) {
      ASSERT_NE(Sf::Canon(e.policy), "") << e.policy;
      const std::string want = e.frs_policy.empty() ? Sf::Canon(e.policy) : e.frs_policy;
      EXPECT_EQ(Field(a, "RateLimit-Policy"), want) << e.why;
    }
    if (!e.limit.empty()) {
      ASSERT_NE(Sf::Canon(e.limit), "") << e.limit;
      const std::string want = e.frs_limit.empty() ? Sf::Canon(e.limit) : e.frs_limit;
      EXPECT_EQ(Field(a, "RateLimit"), want) << e.why;
    }
    EXPECT_EQ(Header(a, "Retry-After"), e.retry_after);
    if (!e.date.empty()) {
      EXPECT_EQ(Header(a, "Date"), e.date);
    }
  }
}

// 5.1 and B.1.4: the problem bodies. 5.1's two violated policies, and
// B.1.4's single one with its status member (B.1.4's "Too Many Requests"
// is a title of the example's own; FRS writes 5.1's).
TEST(RateLimitFields, TheProblemExamplesOfDraft11) {
  {
    SCOPED_TRACE("section 5.1");
    Server s(Biz(Rule("daily", "algo=\"calendar\" interval=\"86400\" max=\"1000\"") +
                     Rule("bandwidth", "interval=\"1\" max=\"65536\""),
                 " unit=\"content-bytes\""));
    ASSERT_TRUE(s.ok());
    s.Use("b", "k", 900);
    const std::string a = s.Get("/acquire?biz=b&key=k&n=65537", kProblemAccept);
    ASSERT_EQ(Status(a), 429) << a;
    EXPECT_EQ(Header(a, "Content-Type"), "application/problem+json");
    const std::string body = Body(a);
    EXPECT_NE(body.find("\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\""),
              std::string::npos);
    EXPECT_NE(body.find("\"title\":\"Request cannot be satisfied as assigned quota has been exceeded\""),
              std::string::npos);
    EXPECT_NE(body.find("\"violated-policies\":[\"daily\",\"bandwidth\"]"), std::string::npos) << body;
  }
  {
    SCOPED_TRACE("section B.1.4");
    Server s(Biz(Rule("default", "interval=\"60\" max=\"5\"")), 1564997220 - 55);
    ASSERT_TRUE(s.ok());
    s.Use("b", "k", 5);
    s.Advance(55);
    const std::string a = s.Get("/acquire?biz=b&key=k", kProblemAccept);
    ASSERT_EQ(Status(a), 429) << a;
    EXPECT_EQ(Header(a, "Content-Type"), "application/problem+json");
    EXPECT_EQ(Header(a, "Date"), "Mon, 05 Aug 2019 09:27:00 GMT");
    EXPECT_EQ(Header(a, "Retry-After"), "5");
    EXPECT_EQ(Field(a, "RateLimit"), "\"default\";r=0;t=5");
    const std::string body = Body(a);
    EXPECT_NE(body.find("\"status\":429"), std::string::npos) << body;
    EXPECT_NE(body.find("\"violated-policies\":[\"default\"]"), std::string::npos) << body;
  }
}

}  // namespace
}  // namespace frs::server
