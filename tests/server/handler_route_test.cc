// The ring position a server without <cluster> writes into the nodes it
// creates: the route the request names, else the one its key implies. The
// handler leaves the second to the store (no CRC-32 per request); the
// positions must be what they were when the handler computed them.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "common/temp_dir.h"
#include "frs/engine.h"
#include "frs/ring.h"
#include "frs/store.h"
#include "server/connection.h"
#include "server/handler.h"

namespace frs::server {
namespace {

class LoneServer : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string map = dir_.path() + "/map.xml";
    std::FILE* f = std::fopen(map.c_str(), "w");
    std::fputs("<map><biz id=\"1\" name=\"login\"><rule interval=\"60\" max=\"1000\"/></biz></map>", f);
    std::fclose(f);
    StoreOptions so;
    so.dir = dir_.path() + "/data";
    so.geometry = StoreGeometry{1, 1024, 8};
    store_ = std::move(Store::Open(so).value());
    EngineOptions eo;
    eo.map_path = map;
    eo.store = store_.get();
    eo.stats_dir = so.dir;
    engine_ = std::move(AdminEngine::Open(eo).value());
    handler_ = std::make_unique<Handler>(Backend(engine_.get(), store_.get()), HandlerOptions{}, nullptr, nullptr);
    conn_ = std::make_unique<Connection>(os::UniqueFd(), ConnectionLimits{16384, 1 << 20}, handler_.get());
  }

  std::string RoundTrip(const std::string& req) {
    std::span<char> room = conn_->ReadSpace();
    EXPECT_GE(room.size(), req.size());
    std::memcpy(room.data(), req.data(), req.size());
    conn_->Produced(req.size(), 0);
    conn_->Process();
    std::string_view out = conn_->PendingOutput();
    std::string status(out.substr(0, out.find('\r')));
    conn_->Consumed(out.size());
    conn_->Process();
    return status;
  }
  std::string Get(const std::string& target) { return RoundTrip("GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n"); }
  std::string Post(const std::string& target, const std::string& body) {
    return RoundTrip("POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\n\r\n" + body);
  }

  // The node of (login, key): its route, or nullopt when there is none.
  std::optional<std::pair<bool, uint32_t>> RouteOfNode(const std::string& key) {
    auto v = engine_->Inspect("login", key);
    if (!v.ok()) return std::nullopt;
    return std::make_pair(v.value().node.route_known, v.value().node.route_pos);
  }
  static std::pair<bool, uint32_t> Known(std::string_view route) { return {true, Ring::HashRoute(route)}; }

  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<AdminEngine> engine_;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<Connection> conn_;
};

TEST_F(LoneServer, ANewNodeTakesTheRouteItsKeyImplies) {
  ASSERT_EQ(Get("/acquire?biz=login&key=u1"), "HTTP/1.1 200 OK");
  EXPECT_EQ(RouteOfNode("u1"), Known("u1"));
  ASSERT_EQ(Get("/acquire?biz=login&key={app7}u2"), "HTTP/1.1 200 OK");
  EXPECT_EQ(RouteOfNode("{app7}u2"), Known("app7"));
  ASSERT_EQ(Post("/frs", "<batch><request cmd=\"update\" biz=\"login\" key=\"u3\"/>"
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

}  // namespace
}  // namespace frs::server
