// The contract's front doors: GET /auth for forward-auth proxies, the IETF
// RateLimit header fields (draft 11) beside the legacy trio, and the denial
// that no wait can cure.
#include <gtest/gtest.h>

#include "frsd_harness.h"

namespace frs::e2e {
namespace {

// The RateLimit field of `r` starts with `start` (what follows is the time left).
void ExpectRateLimitStartsWith(const HttpResponse& r, const std::string& start) {
  EXPECT_EQ(r.header("ratelimit").rfind(start, 0), 0u) << r.header("ratelimit");
}

// GET `target` (into *r) is granted, with RateLimit-Policy `policy` and a
// RateLimit field that starts with `start`.
void GetWithFields(Client& c, const std::string& target, const std::string& policy, const std::string& start,
                   HttpResponse* r) {
  *r = c.Get(target);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->header("ratelimit-policy"), policy);
  ExpectRateLimitStartsWith(*r, start);
}

TEST(FrontDoorE2E, AuthIs204Or403WithNoBodyAndTheSameFields) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  Client c(srv.port());
  for (int i = 0; i < 5; ++i) {
    HttpResponse r = c.Get("/auth?biz=login&key=u1");
    ASSERT_EQ(r.status, 204) << r.body;
    EXPECT_EQ(r.body, "");
    EXPECT_EQ(r.header("content-length"), "");
    EXPECT_EQ(r.header("ratelimit-policy"), "\"login_1\";q=5;w=60");
    ExpectRateLimitStartsWith(r, "\"login_1\";r=" + std::to_string(4 - i) + ";t=");
    EXPECT_EQ(r.header("retry-after"), "");
  }
  HttpResponse r = c.Get("/auth?biz=login&key=u1");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(r.header("content-length"), "0");
  EXPECT_EQ(r.header("ratelimit-remaining"), "0");
  EXPECT_NE(r.header("retry-after"), "");
  ExpectRateLimitStartsWith(r, "\"login_1\";r=0;t=");
  // /auth counts like /acquire: the key is spent for /acquire too.
  EXPECT_EQ(c.Get("/acquire?biz=login&key=u1").status, 429);
  // Errors keep their status and XML body (a proxy shows them as 500s).
  EXPECT_EQ(c.Get("/auth?biz=nope&key=u1").status, 404);
  EXPECT_EQ(c.Get("/auth?biz=login&key=u2&route=r2").status, 204);
}

TEST(FrontDoorE2E, PolicyNamesEveryRuleAndRateLimitTheMostRestrictive) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  Client c(srv.port());
  HttpResponse r;
  // The sliding rule has nothing left: it is the one RateLimit reports.
  ASSERT_NO_FATAL_FAILURE(GetWithFields(c, "/acquire?biz=ad_user&key=viewer",
                                        "\"ad_user_1\";q=3;w=86400, \"ad_user_2\";q=1;w=3600",
                                        "\"ad_user_2\";r=0;t=", &r));
  EXPECT_NE(r.body.find("name=\"ad_user_1\""), std::string::npos) << r.body;
  r = c.Get("/query?biz=ad_user&key=viewer");
  EXPECT_EQ(r.status, 429);
  const int64_t retry = std::stoll(r.header("retry-after"));
  EXPECT_GT(retry, 3500);
  EXPECT_LE(retry, 3600);
}

TEST(FrontDoorE2E, ADenialNoWaitCuresHasNoRetryAfter) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  Client c(srv.port());
  HttpResponse r = c.Get("/acquire?biz=login&key=greedy&n=6");
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.header("retry-after"), "");
  EXPECT_NE(r.body.find("retry_after=\"-1\""), std::string::npos) << r.body;
  // n within the limit on a spent key: a wait cures it.
  for (int i = 0; i < 5; ++i) ASSERT_EQ(c.Get("/acquire?biz=login&key=spent").status, 200);
  r = c.Get("/acquire?biz=login&key=spent");
  EXPECT_EQ(r.status, 429);
  EXPECT_NE(r.header("retry-after"), "");
  // Within max + borrow a window may still grant: not "never".
  r = c.Get("/acquire?biz=partner&key=big&n=1001");
  EXPECT_EQ(r.status, 200);
  r = c.Get("/acquire?biz=partner&key=big2&n=1301");
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.header("retry-after"), "");
}

TEST(FrontDoorE2E, UnderBorrowRemainingNeverExceedsTheLimit) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  Client c(srv.port());
  for (int64_t n : {1, 700, 300, 200, 99}) {
    HttpResponse r = c.Get("/acquire?biz=partner&key=p1&n=" + std::to_string(n));
    ASSERT_EQ(r.status, 200) << n;
    const int64_t limit = std::stoll(r.header("ratelimit-limit"));
    const int64_t remaining = std::stoll(r.header("ratelimit-remaining"));
    EXPECT_LE(remaining, limit) << n;
    EXPECT_EQ(limit, 1000);
    const std::string rl = r.header("ratelimit");
    const int64_t rr = std::stoll(rl.substr(rl.find(";r=") + 3));
    EXPECT_LE(rr, 1000) << rl;
    EXPECT_EQ(r.header("ratelimit-policy"), "\"partner_1\";q=1000;w=3600");
  }
}

// The fields promise what is left of the allowance without borrowing: after
// 306 uses of max 1000 borrow 300, r is 694 (it said 994, the borrow
// included), and so is RateLimit-Remaining.
TEST(FrontDoorE2E, UnderBorrowTheFieldsSayWhatIsLeftOfMax) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  Client c(srv.port());
  ASSERT_EQ(c.Get("/acquire?biz=partner&key=p&n=305").status, 200);
  HttpResponse r = c.Get("/acquire?biz=partner&key=p");
  ASSERT_EQ(r.status, 200);
  ExpectRateLimitStartsWith(r, "\"partner_1\";r=694;t=");
  EXPECT_EQ(r.header("ratelimit-remaining"), "694");
  EXPECT_EQ(r.header("ratelimit-limit"), "1000");
  EXPECT_NE(r.body.find("remaining=\"994\""), std::string::npos) << r.body;  // the XML keeps the borrow
  // Borrowing: r is 0 while the window still grants.
  r = c.Get("/acquire?biz=partner&key=p&n=900");
  ASSERT_EQ(r.status, 200);
  ExpectRateLimitStartsWith(r, "\"partner_1\";r=0;t=");
  EXPECT_EQ(r.header("ratelimit-remaining"), "0");
}

// Two rules, one of them borrowing: the fields speak for the rule with the
// least left without borrowing, though the decision's most restrictive is
// the other (it weighs the borrowing window by all it may still grant).
TEST(FrontDoorE2E, TheFieldsSpeakForTheRuleWithLeastLeftWithoutBorrowing) {
  ServerOptions o;
  o.map = R"(<map><biz id="1" name="mix">
    <rule interval="3600" max="10" borrow="10"/>
    <rule algo="sliding" interval="3600" max="18"/>
  </biz></map>)";
  Frsd srv(o);
  ASSERT_TRUE(srv.Start()) << srv.log();
  HttpResponse r = Client(srv.port()).Get("/acquire?biz=mix&key=k&n=8");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("remaining=\"10\""), std::string::npos) << r.body;  // the sliding rule's, the XML's top
  ExpectRateLimitStartsWith(r, "\"mix_1\";r=2;t=");
  EXPECT_EQ(r.header("ratelimit-limit"), "10");
  EXPECT_EQ(r.header("ratelimit-remaining"), "2");
}

// 10 per second with a burst of 20: q/w is the rate a client can keep up
// (10/s), the burst a parameter beside it; q=20 told clients 20/s, and one
// that paced at that had 21 of 80 requests denied.
TEST(FrontDoorE2E, ATokenBucketsPolicyIsItsRateWithItsBurst) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  Client c(srv.port());
  HttpResponse r;
  ASSERT_NO_FATAL_FAILURE(
      GetWithFields(c, "/acquire?biz=api&key=b", "\"api_1\";q=10;w=1;frs-burst=20;burst=20", "\"api_1\";r=10;t=", &r));
  EXPECT_EQ(r.header("ratelimit-limit"), "20");
  EXPECT_EQ(r.header("ratelimit-remaining"), "19");
}

// legacy="only" sends the older trio alone (clients that parse a RateLimit
// field as an older draft wrote it, and fail on today's, read these),
// legacy="0" the draft's two fields alone, and a reload applies any change
// of it (it was ignored, both ways).
TEST(FrontDoorE2E, TheLegacyTrioAloneAndItsReload) {
  ServerOptions o;
  o.extra = "  <ratelimit legacy=\"only\"/>\n";
  Frsd srv(o);
  ASSERT_TRUE(srv.Start()) << srv.log();
  HttpResponse r = Client(srv.port()).Get("/acquire?biz=login&key=x");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("ratelimit-policy"), "");
  EXPECT_EQ(r.header("ratelimit"), "");
  EXPECT_EQ(r.header("ratelimit-limit"), "5");
  EXPECT_EQ(r.header("ratelimit-remaining"), "4");
  EXPECT_NE(r.header("ratelimit-reset"), "");
  for (const char* to : {"0", "1", "only"}) {
    std::string cfg = ReadFile(srv.config());
    const size_t at = cfg.find("legacy=\"") + 8;
    cfg.replace(at, cfg.find('"', at) - at, to);
    WriteFile(srv.config(), cfg);
    ASSERT_TRUE(srv.ReloadAndWait()) << srv.log();
    r = Client(srv.port()).Get("/query?biz=login&key=x");
    const bool draft = std::string(to) != "only", legacy = std::string(to) != "0";
    EXPECT_EQ(r.header("ratelimit-policy") != "", draft) << to;
    EXPECT_EQ(r.header("ratelimit") != "", draft) << to;
    EXPECT_EQ(r.header("ratelimit-limit") != "", legacy) << to;
    EXPECT_EQ(r.header("ratelimit-remaining") != "", legacy) << to;
  }
  EXPECT_NE(srv.log().find("srv.xml: <ratelimit legacy> changed to 0 (the draft's fields); applied"), std::string::npos)
      << srv.log();
}

}  // namespace
}  // namespace frs::e2e
