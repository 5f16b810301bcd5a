// The ring agrees with a real nginx: for 10,000 routes and for weighted
// shards, the backend nginx's `hash $arg_route consistent;` reaches is the
// shard frs::Ring computes. The backends are server blocks of the same nginx
// that answer with their own port.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/nginx_runner.h"
#include "common/temp_dir.h"
#include "e2e/frsd_harness.h"
#include "frs/ring.h"

namespace frs {
namespace {

struct Backend {
  uint16_t port;
  uint32_t weight;
};

// Asks nginx for every route and counts the routes whose backend differs
// from the ring's owner.
void ExpectAgreement(const std::vector<Backend>& backends, const std::vector<std::string>& routes) {
  if (testing::NginxBinary().empty()) GTEST_SKIP() << "nginx is not installed (tools/setup.sh installs it)";
  testing::TempDir dir;
  const uint16_t front = e2e::FreePort();
  std::vector<RingShard> shards;
  std::string http = "  upstream ring {\n    hash $arg_route consistent;\n";
  for (const Backend& b : backends) {
    std::string name = "127.0.0.1:" + std::to_string(b.port);
    shards.push_back({name, b.weight});
    http += "    server " + name + (b.weight != 1 ? " weight=" + std::to_string(b.weight) : "") + ";\n";
  }
  http += "    keepalive 8;\n  }\n";
  http += "  server {\n    listen 127.0.0.1:" + std::to_string(front) +
          ";\n    location / {\n      proxy_pass http://ring;\n      proxy_http_version 1.1;\n"
          "      proxy_set_header Connection \"\";\n    }\n  }\n";
  for (const Backend& b : backends)
    http += "  server {\n    listen 127.0.0.1:" + std::to_string(b.port) + ";\n    location / { return 200 \"" +
            std::to_string(b.port) + "\"; }\n  }\n";
  testing::Nginx nginx(dir.path(), http);
  ASSERT_TRUE(nginx.Start(front)) << nginx.log();

  auto ring = Ring::Make(shards);
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  e2e::Client c(front);
  ASSERT_TRUE(c.connected());
  int mismatches = 0;
  std::vector<int> per_shard(backends.size(), 0);
  for (const std::string& route : routes) {
    e2e::HttpResponse r = c.Get("/?route=" + route);
    if (!r.ok()) {  // nginx closes a keep-alive connection after 1000 requests
      ASSERT_TRUE(c.Connect(front));
      r = c.Get("/?route=" + route);
    }
    ASSERT_EQ(r.status, 200) << route << "\n" << nginx.log();
    size_t owner = ring->OwnerIndex(route);
    ++per_shard[owner];
    if (r.body != std::to_string(backends[owner].port) && ++mismatches <= 5)
      ADD_FAILURE() << "route " << route << ": nginx reached " << r.body << ", the ring says "
                    << ring->shards()[owner].name;
  }
  EXPECT_EQ(mismatches, 0) << "of " << routes.size() << " routes";
  for (size_t i = 0; i < backends.size(); ++i) EXPECT_GT(per_shard[i], 0) << "shard " << i << " owns nothing";
}

std::vector<std::string> Routes(int n) {
  std::vector<std::string> r;
  for (int i = 0; i < n; ++i) {
    switch (i % 4) {
      case 0: r.push_back("user:" + std::to_string(i)); break;
      case 1: r.push_back("10." + std::to_string(i % 251) + "." + std::to_string(i / 251) + ".7"); break;
      case 2: r.push_back("app" + std::to_string(i % 97) + "-u" + std::to_string(i)); break;
      default: r.push_back(std::string(1 + i % 40, static_cast<char>('a' + i % 26)) + std::to_string(i)); break;
    }
  }
  return r;
}

TEST(NginxRingTest, OwnersAgreeForTenThousandRoutes) {
  ExpectAgreement({{e2e::FreePort(), 1}, {e2e::FreePort(), 1}, {e2e::FreePort(), 1}}, Routes(10000));
}

TEST(NginxRingTest, WeightsAgree) {
  ExpectAgreement({{e2e::FreePort(), 1}, {e2e::FreePort(), 2}, {e2e::FreePort(), 3}, {e2e::FreePort(), 1}},
                  Routes(10000));
}

}  // namespace
}  // namespace frs
