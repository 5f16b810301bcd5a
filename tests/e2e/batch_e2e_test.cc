// Large batches (<limits batch> up to 1024) and the compact batch answer an
// ad server filters candidates with.
#include <gtest/gtest.h>

#include "frsd_harness.h"

namespace frs::e2e {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

std::string Batch(const std::string& attrs, const std::string& cmd, int members, const std::string& biz = "login") {
  std::string b = "<batch" + attrs + ">";
  for (int i = 0; i < members; ++i)
    b += "<request cmd=\"" + cmd + "\" biz=\"" + biz + "\" key=\"cand" + std::to_string(i) + "\"/>";
  return b + "</batch>";
}

TEST(BatchE2E, ACompactAnswerHasOneShortElementPerMember) {
  ServerOptions o;
  o.extra = "  <limits batch=\"1024\" body_bytes=\"262144\"/>\n";
  Frsd srv(o);
  ASSERT_TRUE(srv.Start()) << srv.log();
  Client c(srv.port());
  // Spend some candidates first: 5 uses of the first 10.
  for (int u = 0; u < 5; ++u) ASSERT_EQ(c.Post(Batch("", "update", 10)).status, 200);
  HttpResponse r = c.Post(Batch(" answer=\"compact\"", "query", 256));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body.rfind("<batch allowed=\"0\" answer=\"compact\">", 0), 0u) << r.body.substr(0, 80);
  EXPECT_EQ(Count(r.body, "<m "), 256u);
  EXPECT_EQ(Count(r.body, "<m a=\"0\" r=\"0\""), 10u);
  EXPECT_EQ(Count(r.body, "<m a=\"1\" r=\"5\""), 246u);  // a query counts nothing
  EXPECT_EQ(Count(r.body, "<rule"), 0u);
  EXPECT_LT(r.body.size(), 256u * 48);
  // The full answer stays the default.
  HttpResponse full = c.Post(Batch("", "query", 256));
  EXPECT_EQ(Count(full.body, "<response "), 256u);
  // A bad answer form, and a member error, in the compact form.
  EXPECT_EQ(c.Post(Batch(" answer=\"tiny\"", "query", 2)).status, 400);
  EXPECT_EQ(c.Post(Batch(" answer=\"compact\" x=\"1\"", "query", 2)).status, 400);
  // Beyond the configured limit: 400 naming it.
  HttpResponse over = c.Post(Batch("", "query", 1025));
  EXPECT_EQ(over.status, 400);
  EXPECT_NE(over.body.find("batch member 1025: a batch holds at most 1024 members (&lt;limits batch&gt; in srv.xml)"),
            std::string::npos)
      << over.body;
  // Acquires are judged in one store transaction: at most 64 of them per
  // batch; more refuse the whole batch before anything runs (its update
  // member ran, and its acquires were each answered 400).
  std::string acquires = Batch(" answer=\"compact\"", "acquire", 65);
  acquires.insert(acquires.rfind("</batch>"), R"(<request cmd="update" biz="login" key="ran"/>)");
  HttpResponse acq = c.Post(acquires);
  EXPECT_EQ(acq.status, 400) << acq.body.substr(0, 300);
  EXPECT_NE(acq.body.find("batch member 65: a batch holds at most 64 acquires"), std::string::npos)
      << acq.body.substr(0, 300);
  HttpResponse ran = c.Post(R"(<request cmd="query" biz="login" key="ran"/>)");
  EXPECT_NE(ran.body.find(" count=\"0\""), std::string::npos) << ran.body;
  EXPECT_EQ(c.Post(Batch(" answer=\"compact\"", "acquire", 64)).status, 200);
}

// A merge answer is allowed="1" only when every member was merged (it said
// 1 when every member had failed).
TEST(BatchE2E, AMergeAnswerIsAllowedOnlyWhenEveryMemberMerged) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  Client c(srv.port());
  HttpResponse bad = c.Post(
      "<batch><request cmd=\"merge\" token=\"s3cret\" receipt=\"r1\" node=\"{}\"/>"
      "<request cmd=\"merge\" token=\"s3cret\" receipt=\"r2\" node=\"[1]\"/></batch>");
  ASSERT_EQ(bad.status, 200);
  EXPECT_EQ(bad.body.rfind("<batch allowed=\"0\">", 0), 0u) << bad.body;
  EXPECT_EQ(bad.body.find("code=\"0\""), std::string::npos) << bad.body;
  // A node as frsctl export prints it: merged, then found merged (its
  // receipt already here), both allowed; with a failing member, not.
  std::string node = R"({"biz":1,"biz_name":"login","key":"m2","key_hex":"6d32","key_len":2,)"
                     R"("fp_lo":"f73ac6303857467e","fp_hi":"532d8393dcd19cef","expire_s":1795631867,)"
                     R"("last_access_s":1795631807,"route_pos":1499289237,"rules":[{"algo":"fixed","interval":60,)"
                     R"("state":"3c000008bf2a076b0200000000000000"}]})";
  for (size_t p = node.find('"'); p != std::string::npos; p = node.find('"', p + 6)) node.replace(p, 1, "&quot;");
  const std::string good = "<request cmd=\"merge\" token=\"s3cret\" receipt=\"r3\" node=\"" + node + "\"/>";
  HttpResponse merged = c.Post("<batch>" + good + "</batch>");
  ASSERT_EQ(merged.status, 200);
  EXPECT_EQ(merged.body, "<batch allowed=\"1\">\n  <response code=\"0\" merged=\"1\"/>\n</batch>\n");
  HttpResponse twice = c.Post("<batch>" + good + "</batch>");
  EXPECT_EQ(twice.body, "<batch allowed=\"1\">\n  <response code=\"0\" merged=\"0\"/>\n</batch>\n");
  HttpResponse mixed =
      c.Post("<batch>" + good + "<request cmd=\"merge\" token=\"s3cret\" receipt=\"r4\" node=\"{}\"/></batch>");
  ASSERT_EQ(mixed.status, 200);
  EXPECT_EQ(mixed.body.rfind("<batch allowed=\"0\">\n  <response code=\"0\" merged=\"0\"/>", 0), 0u) << mixed.body;
}

}  // namespace
}  // namespace frs::e2e
