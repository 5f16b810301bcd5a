// The ring's own properties; agreement with a real nginx is nginx_ring_test.
#include "frs/ring.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace frs {
namespace {

Ring MakeRing(std::vector<RingShard> s) {
  auto r = Ring::Make(std::move(s));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

TEST(RingTest, HashIsStandardCrc32) {
  // The check value of CRC-32/ISO-HDLC, the CRC nginx's ngx_crc32_long computes.
  EXPECT_EQ(Ring::HashRoute("123456789"), 0xCBF43926u);
  EXPECT_EQ(Ring::HashRoute(""), 0u);
}

TEST(RingTest, RouteIsParamThenHashTagThenKey) {
  EXPECT_EQ(Ring::RouteOf("user:42", ""), "user:42");
  EXPECT_EQ(Ring::RouteOf("user:42", "app7"), "app7");
  EXPECT_EQ(Ring::RouteOf("{app7}|u42|if3", ""), "app7");
  EXPECT_EQ(Ring::RouteOf("10.1.2.3|{app7}", ""), "app7");
  EXPECT_EQ(Ring::RouteOf("a{b}{c}", ""), "b");        // the first tag only
  EXPECT_EQ(Ring::RouteOf("a{}b{c}", ""), "a{}b{c}");  // an empty tag means the whole key
  EXPECT_EQ(Ring::RouteOf("a{bc", ""), "a{bc");        // no closing brace
  EXPECT_EQ(Ring::RouteOf("a}b{c}", ""), "c");
}

TEST(RingTest, RefusesBadShardLists) {
  EXPECT_FALSE(Ring::Make({}).ok());
  EXPECT_FALSE(Ring::Make({{"a:1", 1}, {"a:1", 1}}).ok());
  EXPECT_FALSE(Ring::Make({{"", 1}}).ok());
  auto zero = Ring::Make({{"a:1", 0}});
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("a:1"), std::string::npos);
}

// The digest's one text form, compared by every reader: 8 lowercase hex
// digits, leading zeros kept (a digest below 2^28 among the first rings).
TEST(RingTest, DigestTextIsEightLowerCaseHexDigits) {
  bool small_seen = false;
  for (int port = 1; port < 200; ++port) {
    Ring r = MakeRing({{"h:" + std::to_string(port), 1}, {"g:1", 2}});
    const std::string text = r.DigestText();
    ASSERT_EQ(text.size(), 8u) << text;
    EXPECT_EQ(text.find_first_not_of("0123456789abcdef"), std::string::npos) << text;
    EXPECT_EQ(std::stoul(text, nullptr, 16), r.Digest()) << text;
    if (r.Digest() < 0x10000000u) {
      small_seen = true;
      EXPECT_EQ(text[0], '0') << text;
    }
  }
  EXPECT_TRUE(small_seen) << "no ring of the 199 has a digest below 2^28: the leading zero is untested";
}

// The list a store directory notes beside its digest (cluster.list): read
// back, it is the same ring, the same digest; what is not a list is refused,
// naming the line.
TEST(RingTest, ListTextReadsBackAsTheSameRing) {
  Ring r = MakeRing({{"10.0.0.1:8301", 1}, {"[::1]:8302", 3}, {"shard-c.example:8303", 1000}});
  EXPECT_EQ(r.ListText(), "1 10.0.0.1:8301\n3 [::1]:8302\n1000 shard-c.example:8303\n");
  auto back = Ring::ParseList(r.ListText());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->shards(), r.shards());
  EXPECT_EQ(back->Digest(), r.Digest());
  for (std::string_view bad :
       {"", "1 a:1", "x a:1\n", "1a:1\n", "1 \n", "1 a:1\n-2 b:1\n", "0 a:1\n", "1 a:1\n1 a:1\n", "1 a:1\n\n"}) {
    auto r2 = Ring::ParseList(bad);
    EXPECT_FALSE(r2.ok()) << "'" << bad << "'";
  }
  auto second = Ring::ParseList("1 a:1\nx b:1\n");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("line 2"), std::string::npos) << second.status().message();
}

TEST(RingTest, OneShardOwnsEverything) {
  Ring r = MakeRing({{"10.0.0.1:8301", 1}});
  EXPECT_EQ(r.points(), 160u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(r.OwnerIndex("k" + std::to_string(i)), 0u);
}

TEST(RingTest, WeightsShareRoutesInProportion) {
  Ring r = MakeRing({{"10.0.0.1:8301", 1}, {"10.0.0.2:8301", 1}, {"10.0.0.3:8301", 2}});
  std::map<size_t, int> n;
  const int kRoutes = 40000;
  for (int i = 0; i < kRoutes; ++i) ++n[r.OwnerIndex("user:" + std::to_string(i))];
  // 160 points per unit of weight: within a few percent of 1/4, 1/4, 1/2.
  EXPECT_NEAR(n[0], kRoutes / 4, kRoutes / 20);
  EXPECT_NEAR(n[1], kRoutes / 4, kRoutes / 20);
  EXPECT_NEAR(n[2], kRoutes / 2, kRoutes / 20);
}

TEST(RingTest, AddingAShardMovesRoutesOnlyToIt) {
  Ring three = MakeRing({{"10.0.0.1:8301", 1}, {"10.0.0.2:8301", 1}, {"10.0.0.3:8301", 1}});
  Ring four = MakeRing({{"10.0.0.1:8301", 1}, {"10.0.0.2:8301", 1}, {"10.0.0.3:8301", 1}, {"10.0.0.4:8301", 1}});
  int moved = 0;
  const int kRoutes = 20000;
  for (int i = 0; i < kRoutes; ++i) {
    std::string route = "ip:" + std::to_string(i);
    const std::string& before = three.Owner(route);
    const std::string& after = four.Owner(route);
    if (before != after) {
      ++moved;
      EXPECT_EQ(after, "10.0.0.4:8301") << route;
    }
  }
  EXPECT_NEAR(moved, kRoutes / 4, kRoutes / 16);
}

TEST(RingTest, OwnerDependsOnlyOnTheRoutesPosition) {
  Ring r = MakeRing({{"a:1", 1}, {"b:2", 3}, {"unix:/run/frs.sock", 1}});
  for (int i = 0; i < 1000; ++i) {
    std::string route = std::to_string(i * 7919);
    EXPECT_EQ(r.OwnerIndex(route), r.OwnerOfHash(Ring::HashRoute(route)));
  }
  EXPECT_EQ(r.Find("b:2"), 1);
  EXPECT_EQ(r.Find("c:3"), -1);
}

}  // namespace
}  // namespace frs
