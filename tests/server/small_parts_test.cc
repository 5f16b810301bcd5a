// admin_auth, allow_list, deadline_list: the small pieces.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include "frs/service.h"
#include "server/admin_auth.h"
#include "server/allow_list.h"
#include "server/deadline_list.h"
#include "server/envoy_map.h"

namespace frs::server {
namespace {

TEST(AdminAuth, RefusedWhenNoTokenConfigured) {
  EXPECT_EQ(CheckAdminToken("", ""), AdminAuth::kDisabled);
  EXPECT_EQ(CheckAdminToken("", "x"), AdminAuth::kDisabled);
}

TEST(AdminAuth, ComparesWholeTokens) {
  EXPECT_EQ(CheckAdminToken("s3cret", "s3cret"), AdminAuth::kOk);
  EXPECT_EQ(CheckAdminToken("s3cret", "s3cre"), AdminAuth::kRefused);
  EXPECT_EQ(CheckAdminToken("s3cret", "s3cret!"), AdminAuth::kRefused);
  EXPECT_EQ(CheckAdminToken("s3cret", "S3cret"), AdminAuth::kRefused);
  EXPECT_EQ(CheckAdminToken("s3cret", ""), AdminAuth::kRefused);
}

// RFC 9110 11.1: the scheme's case does not matter; the token's does.
TEST(AdminAuth, TheBearerSchemeInAnyCase) {
  EXPECT_EQ(BearerToken("Bearer s3cret"), "s3cret");
  EXPECT_EQ(BearerToken("bearer s3cret"), "s3cret");
  EXPECT_EQ(BearerToken("BEARER S3cret"), "S3cret");
  EXPECT_EQ(BearerToken("bEaReR s3cret"), "s3cret");
  EXPECT_EQ(BearerToken("Bearer   s3cret"), "s3cret");  // 1*SP between scheme and token (RFC 9110 11.4)
  for (const char* no :
       {"", "Bearer", "Bearer ", "Bearer   ", "Basic czNjcmV0", "Bearers3cret", "Bearer\ts3cret", "Token s3cret"})
    EXPECT_EQ(BearerToken(no), "") << no;
}

// The address `a` of `family` (AF_INET or AF_INET6), as accept() gives it.
sockaddr_storage Addr(int family, const char* a) {
  sockaddr_storage ss{};
  ss.ss_family = static_cast<sa_family_t>(family);
  void* bytes = family == AF_INET ? static_cast<void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr)
                                  : static_cast<void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr);
  inet_pton(family, a, bytes);
  return ss;
}
sockaddr_storage V4(const char* a) { return Addr(AF_INET, a); }
sockaddr_storage V6(const char* a) { return Addr(AF_INET6, a); }

TEST(AllowList, EmptyAllowsEveryone) {
  auto l = AllowList::Parse({});
  ASSERT_TRUE(l.ok());
  auto a = V4("8.8.8.8");
  EXPECT_TRUE(l->Allows(reinterpret_cast<sockaddr*>(&a)));
}

TEST(AllowList, MatchesRanges) {
  auto l = AllowList::Parse({"10.0.0.0/8", "192.168.1.7", "fd00::/8"});
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  for (const char* ok : {"10.1.2.3", "192.168.1.7"}) {
    auto a = V4(ok);
    EXPECT_TRUE(l->Allows(reinterpret_cast<sockaddr*>(&a))) << ok;
  }
  for (const char* no : {"11.0.0.1", "192.168.1.8"}) {
    auto a = V4(no);
    EXPECT_FALSE(l->Allows(reinterpret_cast<sockaddr*>(&a))) << no;
  }
  auto m = V6("::ffff:10.9.9.9");
  EXPECT_TRUE(l->Allows(reinterpret_cast<sockaddr*>(&m)));
  auto u = V6("fd12::1");
  EXPECT_TRUE(l->Allows(reinterpret_cast<sockaddr*>(&u)));
  auto v = V6("2001:db8::1");
  EXPECT_FALSE(l->Allows(reinterpret_cast<sockaddr*>(&v)));
}

TEST(AllowList, RejectsBadEntries) {
  EXPECT_FALSE(AllowList::Parse({"10.0.0.0/33"}).ok());
  EXPECT_FALSE(AllowList::Parse({"nonsense"}).ok());
  EXPECT_FALSE(AllowList::Parse({"10.0.0.0/"}).ok());
}

struct Node : DeadlineNode {};

TEST(DeadlineList, ExpiresInOrderAndMovesBetweenLists) {
  DeadlineList a(100), b(1000);
  Node n1, n2;
  a.Append(&n1, 0);
  a.Append(&n2, 10);
  EXPECT_EQ(a.Expired(50), nullptr);
  EXPECT_EQ(a.Expired(100), &n1);
  a.Append(&n1, 100);  // touched: goes to the back
  EXPECT_EQ(a.Expired(150), &n2);
  b.Append(&n2, 150);  // moved to the other list
  EXPECT_EQ(a.Expired(150), nullptr);
  EXPECT_EQ(a.NextDueIn(150), 50);
  EXPECT_EQ(b.Expired(1150), &n2);
  b.Remove(&n2);
  EXPECT_EQ(b.NextDueIn(0), -1);
}

}  // namespace
}  // namespace frs::server

namespace frs::server {
namespace {

// Replicas compare RulesDigest: the rules, not the comments. Two shards
// whose <grpc config> lies at different paths compose the same bizzes with
// comments naming different files; a rule that differs still shows.
TEST(RulesDigest, CommentsAsideTheRules) {
  const std::string a =
      "<map>\n  <biz id=\"1\" name=\"login\"><rule algo=\"fixed\" interval=\"60\" max=\"5\"/></biz>\n"
      "  <biz id=\"49559\" name=\"envoy.edge.ip\">  <!-- /etc/a/rl/c.yaml:6: domain edge -->\n"
      "    <rule algo=\"calendar\" interval=\"60\" max=\"100\"/></biz>\n</map>\n";
  std::string b = a;
  b.replace(b.find("/etc/a/"), 7, "/srv/b/");
  EXPECT_NE(MapDigest(a), MapDigest(b));
  EXPECT_EQ(RulesDigest(a), RulesDigest(b));
  EXPECT_EQ(RulesDigest(a), RulesDigest("<!-- a note -->" + a));
  // Layout aside: a comment on its own line, blanks between and inside tags.
  std::string d = a;
  d.insert(d.find("  <biz id=\"49559\""), "  <!-- reviewed 2026-12 -->\n");
  d.replace(d.find("<rule algo=\"fixed\""), 18, "<rule\n      algo = \"fixed\"");
  d.replace(d.find("max=\"5\"/>"), 9, "max=\"5\" />");
  d += "\n\n";
  EXPECT_EQ(RulesDigest(a), RulesDigest(d)) << d;
  // A value's blanks do count.
  std::string e = a;
  e.replace(e.find("name=\"login\""), 12, "name=\"log in\"");
  EXPECT_NE(RulesDigest(a), RulesDigest(e));
  std::string c = a;
  c.replace(c.find("max=\"100\""), 9, "max=\"101\"");
  EXPECT_NE(RulesDigest(a), RulesDigest(c));
  EXPECT_EQ(RulesDigest("<map></map>"), MapDigest("<map></map>"));  // nothing to leave out
}

}  // namespace
}  // namespace frs::server
