// The ring agrees with a real nginx: for 10,000 routes and for weighted
// shards, the backend nginx's `hash $arg_route consistent;` reaches is the
// shard frs::Ring computes. The backends are server blocks of the same nginx
// that answer with their own port. With one backend dead (it closes every
// connection unanswered), nginx falls over to the route's successor as the
// ring computes it (the holder of the route's replica).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/nginx_runner.h"
#include "common/temp_dir.h"
#include "e2e/frsd_harness.h"
#include "frs/ring.h"

namespace frs {
namespace {

// Asks nginx for every route and counts the routes whose backend differs
// from the ring's owner. nginx is its own front (ports[0]) and its own
// backends (the rest, one `weights` each): each backend answers its port.
void ExpectAgreement(const std::vector<uint32_t>& weights, const std::vector<std::string>& routes, long dead = -1) {
  ASSERT_FALSE(testing::NginxBinary().empty()) << "nginx is not installed (tools/setup.sh --test installs it)";
  testing::TempDir dir;
  testing::Nginx nginx(dir.path(), "");
  const std::vector<uint16_t> ports =
      testing::StartOnCandidatePorts(nginx, weights.size() + 1, [&](const std::vector<uint16_t>& p) {
        std::string http = "  upstream ring {\n    hash $arg_route consistent;\n";
        for (size_t i = 0; i < weights.size(); ++i)
          http += "    server 127.0.0.1:" + std::to_string(p[i + 1]) +
                  (weights[i] != 1 ? " weight=" + std::to_string(weights[i]) : "") + ";\n";
        http += "    keepalive 8;\n  }\n";
        http += "  server {\n    listen 127.0.0.1:" + std::to_string(p[0]) +
                ";\n    location / {\n      proxy_pass http://ring;\n      proxy_http_version 1.1;\n"
                "      proxy_set_header Connection \"\";\n    }\n  }\n";
        // The dead backend closes every connection unanswered (444): an
        // `error` for proxy_next_upstream, as a killed shard's reset is.
        for (size_t i = 1; i < p.size(); ++i)
          http += "  server {\n    listen 127.0.0.1:" + std::to_string(p[i]) + ";\n    location / { return " +
                  (static_cast<long>(i) - 1 == dead ? std::string("444; }\n  }\n")
                                                    : "200 \"" + std::to_string(p[i]) + "\"; }\n  }\n");
        return http;
      });
  ASSERT_FALSE(ports.empty()) << nginx.log();
  const uint16_t front = ports[0];
  std::vector<RingShard> shards;
  std::vector<uint16_t> backends(ports.begin() + 1, ports.end());
  for (size_t i = 0; i < weights.size(); ++i)
    shards.push_back({"127.0.0.1:" + std::to_string(backends[i]), weights[i]});

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
    if (static_cast<long>(owner) == dead) {
      const long successor = ring->SuccessorOfHash(Ring::HashRoute(route));
      ASSERT_GE(successor, 0);
      owner = static_cast<size_t>(successor);
    }
    ++per_shard[owner];
    if (r.body != std::to_string(backends[owner]) && ++mismatches <= 5)
      ADD_FAILURE() << "route " << route << ": nginx reached " << r.body << ", the ring says "
                    << ring->shards()[owner].name;
  }
  EXPECT_EQ(mismatches, 0) << "of " << routes.size() << " routes";
  for (size_t i = 0; i < backends.size(); ++i)
    if (static_cast<long>(i) != dead) {
      EXPECT_GT(per_shard[i], 0) << "shard " << i << " owns nothing";
    }
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

TEST(NginxRingTest, OwnersAgreeForTenThousandRoutes) { ExpectAgreement({1, 1, 1}, Routes(10000)); }

TEST(NginxRingTest, WeightsAgree) { ExpectAgreement({1, 2, 3, 1}, Routes(10000)); }

TEST(NginxRingTest, SuccessorsAgreeWhenAnOwnerIsDead) { ExpectAgreement({1, 2, 1, 1}, Routes(4000), 1); }

}  // namespace
}  // namespace frs
