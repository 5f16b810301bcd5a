// The ring position a server without <cluster> writes into the nodes it
// creates: the route the request names, else the one its key implies. The
// handler leaves the second to the store (no CRC-32 per request); the
// positions must be what they were when the handler computed them.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>

#include "common/request_path.h"
#include "frs/ring.h"

namespace frs::server {
namespace {

using frs::testing::RequestPath;

class LoneServer : public ::testing::Test {
 protected:
  std::string Get(const std::string& target) { return std::string(path_.RoundTrip(RequestPath::Get(target))); }
  std::string Post(const std::string& target, const std::string& body) {
    return std::string(path_.RoundTrip(RequestPath::Post(target, body)));
  }

  // The node of (login, key): its route, or nullopt when there is none.
  std::optional<std::pair<bool, uint32_t>> RouteOfNode(const std::string& key) {
    auto v = path_.engine()->Inspect("login", key);
    if (!v.ok()) return std::nullopt;
    return std::make_pair(v.value().node.route_known, v.value().node.route_pos);
  }
  static std::pair<bool, uint32_t> Known(std::string_view route) { return {true, Ring::HashRoute(route)}; }

  RequestPath path_{"<map><biz id=\"1\" name=\"login\"><rule interval=\"60\" max=\"1000\"/></biz></map>"};
};

TEST_F(LoneServer, ANewNodeTakesTheRouteItsKeyImplies) {
  ASSERT_EQ(Get("/acquire?biz=login&key=u1"), "HTTP/1.1 200 OK");
  EXPECT_EQ(RouteOfNode("u1"), Known("u1"));
  ASSERT_EQ(Get("/acquire?biz=login&key={app7}u2"), "HTTP/1.1 200 OK");
  EXPECT_EQ(RouteOfNode("{app7}u2"), Known("app7"));
  ASSERT_EQ(Post("/frs",
                 "<batch><request cmd=\"update\" biz=\"login\" key=\"u3\"/>"
                 "<request cmd=\"acquire\" biz=\"login\" key=\"{t}u4\"/></batch>"),
            "HTTP/1.1 200 OK");
  EXPECT_EQ(RouteOfNode("u3"), Known("u3"));
  EXPECT_EQ(RouteOfNode("{t}u4"), Known("t"));
  // A query creates nothing.
  ASSERT_EQ(Get("/query?biz=login&key=u5"), "HTTP/1.1 200 OK");
  EXPECT_EQ(RouteOfNode("u5"), std::nullopt);
}

TEST_F(LoneServer, ANamedRouteOrAnEncodedKeyIsHashedAsSent) {
  ASSERT_EQ(Get("/acquire?biz=login&key=u1&route=r1"), "HTTP/1.1 200 OK");
  EXPECT_EQ(RouteOfNode("u1"), Known("r1"));
  ASSERT_EQ(Post("/frs?route=r2", "<request cmd=\"acquire\" biz=\"login\" key=\"u2\"/>"), "HTTP/1.1 200 OK");
  EXPECT_EQ(RouteOfNode("u2"), Known("r2"));
  // The raw query value, as a proxy hashes it (frs/ring.h).
  ASSERT_EQ(Get("/acquire?biz=login&key=a%3Ab"), "HTTP/1.1 200 OK");
  EXPECT_EQ(RouteOfNode("a:b"), Known("a%3Ab"));
}

TEST_F(LoneServer, ANodeKeepsItsRouteWhenARequestNamesNone) {
  ASSERT_EQ(Get("/acquire?biz=login&key=u1&route=r1"), "HTTP/1.1 200 OK");
  ASSERT_EQ(Get("/acquire?biz=login&key=u1"), "HTTP/1.1 200 OK");
  EXPECT_EQ(RouteOfNode("u1"), Known("r1"));
  ASSERT_EQ(Get("/acquire?biz=login&key=u1&route=r9"), "HTTP/1.1 200 OK");
  EXPECT_EQ(RouteOfNode("u1"), Known("r9"));
}

// merge with replace="1" (what frsctl handoff sends when replicas are
// switched on): the node takes the place of this store's; the members of
// one receipt all say the same replace, or the receipt changes nothing.
TEST(MergeReplace, ReplacesTheNodeAndRefusesAReceiptOfBothKinds) {
  server::HandlerOptions ho;
  ho.admin_token = "T";
  RequestPath path("<map><biz id=\"1\" name=\"login\"><rule interval=\"60\" max=\"1000\"/></biz></map>", ho);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(path.RoundTrip(RequestPath::Get("/acquire?biz=login&key=c")), "HTTP/1.1 200 OK");
  auto view = path.engine()->Inspect("login", "c");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  auto json = path.engine()->ExportNode(view.value().node);
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  std::string node;
  for (char ch : json.value()) node += ch == '"' ? std::string("&quot;") : std::string(1, ch);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(path.RoundTrip(RequestPath::Get("/acquire?biz=login&key=c")), "HTTP/1.1 200 OK");
  auto member = [&](const char* receipt, const char* replace) {
    return std::string("<request cmd=\"merge\" token=\"T\" receipt=\"") + receipt + "\" replace=\"" + replace +
           "\" node=\"" + node + "\"/>";
  };
  std::string out =
      path.RoundTripWhole(RequestPath::Post("/frs", "<batch>" + member("r1", "1") + member("r1", "0") + "</batch>"));
  EXPECT_NE(out.find("the members of one receipt all say the same replace"), std::string::npos) << out;
  EXPECT_EQ(path.engine()->Inspect("login", "c").value().count, 6);  // nothing changed
  out = path.RoundTripWhole(RequestPath::Post("/frs", "<batch>" + member("r2", "1") + "</batch>"));
  EXPECT_NE(out.find("merged=\"1\""), std::string::npos) << out;
  EXPECT_EQ(path.engine()->Inspect("login", "c").value().count, 3);  // the sent node's, not 6 + 3
  out = path.RoundTripWhole(RequestPath::Post("/frs", "<batch>" + member("r3", "0") + "</batch>"));
  EXPECT_NE(out.find("merged=\"1\""), std::string::npos) << out;
  EXPECT_EQ(path.engine()->Inspect("login", "c").value().count, 6);  // summed
}

}  // namespace
}  // namespace frs::server
