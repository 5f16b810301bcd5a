// GET /stats answers key-field values (user ids, say) and their distinct
// sketches: who may read it, and how large an answer may grow.
#include <gtest/gtest.h>

#include <string>

#include "common/request_path.h"
#include "common/stats_map.h"

namespace frs::server {
namespace {

using frs::testing::RequestPath;

std::string StatsMap() { return "<map>\n" + frs::testing::StatsApiBiz(1000000) + "</map>\n"; }

HandlerOptions WithToken(std::string token) {
  HandlerOptions o;
  o.admin_token = std::move(token);
  return o;
}

std::string Get(RequestPath& p, const std::string& target) {
  return std::string(p.RoundTrip(RequestPath::Get(target)));
}

// Without an admin token (srv.xml's default) only the server's own host
// reads /stats: the network gets 403, as admin commands do.
TEST(StatsAccess, WithoutATokenOnlyLoopbackPeersRead) {
  RequestPath p(StatsMap());
  for (const char* far : {"10.0.0.7", "192.168.1.9", "2001:db8::1", "::ffff:10.0.0.7"}) {
    p.SetPeer(far);
    EXPECT_EQ(Get(p, "/stats?biz=api&by=app"), "HTTP/1.1 403 Forbidden") << far;
  }
  for (const char* near : {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"}) {
    p.SetPeer(near);
    EXPECT_EQ(Get(p, "/stats?biz=api&by=app"), "HTTP/1.1 200 OK") << near;
  }
}

// With a token, the token decides, from anywhere (frsctl stat --cluster).
TEST(StatsAccess, WithATokenTheTokenDecidesFromAnyPeer) {
  RequestPath p(StatsMap(), WithToken("s3cret"));
  for (const char* peer : {"10.0.0.7", "127.0.0.1"}) {
    p.SetPeer(peer);
    EXPECT_EQ(Get(p, "/stats?biz=api&by=app"), "HTTP/1.1 403 Forbidden") << peer;
    EXPECT_EQ(Get(p, "/stats?biz=api&by=app&token=wrong"), "HTTP/1.1 403 Forbidden") << peer;
    EXPECT_EQ(Get(p, "/stats?biz=api&by=app&token=s3cret"), "HTTP/1.1 200 OK") << peer;
    // A parameter twice is refused whatever the order, not decided by it.
    EXPECT_EQ(Get(p, "/stats?biz=api&by=app&token=wrong&token=s3cret"), "HTTP/1.1 400 Bad Request") << peer;
    EXPECT_EQ(Get(p, "/stats?biz=api&by=app&token=s3cret&token=wrong"), "HTTP/1.1 400 Bad Request") << peer;
    EXPECT_EQ(Get(p, "/stats?biz=api&by=app&top=1&top=0&token=s3cret"), "HTTP/1.1 400 Bad Request") << peer;
  }
}

// An answer has a size cap: beyond it a clear 413 asks for fewer groups
// (top=N, value=V) rather than building a body of any size.
TEST(StatsAccess, AnAnswerBeyondItsCapIsRefused) {
  HandlerOptions o;
  o.max_stats_bytes = 4096;
  RequestPath p(StatsMap(), o);
  p.SetPeer("127.0.0.1");
  for (int i = 0; i < 200; ++i)
    ASSERT_EQ(Get(p, "/acquire?biz=api&key=app" + std::to_string(i) + "%7Cu%7Cif"), "HTTP/1.1 200 OK");
  EXPECT_EQ(Get(p, "/stats?biz=api&by=app"), "HTTP/1.1 413 Content Too Large");
  EXPECT_EQ(Get(p, "/stats?biz=api&by=app&top=5"), "HTTP/1.1 200 OK");
  EXPECT_EQ(Get(p, "/stats?biz=api&by=app&value=app7"), "HTTP/1.1 200 OK");
  EXPECT_EQ(Get(p, "/stats?biz=api&by=app&top=1000001"), "HTTP/1.1 400 Bad Request");
  // sketches is 0 or 1 (yes and 2 read as 0, where every other parameter
  // is checked).
  EXPECT_EQ(Get(p, "/stats?biz=api&by=app&top=5&sketches=0"), "HTTP/1.1 200 OK");
  EXPECT_EQ(Get(p, "/stats?biz=api&by=app&top=5&sketches=yes"), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(Get(p, "/stats?biz=api&by=app&top=5&sketches=2"), "HTTP/1.1 400 Bad Request");
}

}  // namespace
}  // namespace frs::server
