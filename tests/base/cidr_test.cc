// Address ranges (base/cidr.h): srv.xml's <allow> entries.
#include "base/cidr.h"

#include <gtest/gtest.h>

namespace frs {
namespace {

TEST(Cidr, ParsesRangesAndSingleAddresses) {
  auto v4 = ParseCidr("10.0.0.0/8");
  ASSERT_TRUE(v4.ok()) << v4.status().ToString();
  EXPECT_FALSE(v4->addr.v6);
  EXPECT_EQ(v4->prefix, 8u);
  auto one = ParseCidr("::1");
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(one->addr.v6);
  EXPECT_EQ(one->prefix, 128u);
  const uint8_t in[4] = {10, 200, 0, 1}, out[4] = {11, 0, 0, 1};
  EXPECT_TRUE(v4->Contains(false, in));
  EXPECT_FALSE(v4->Contains(false, out));
  EXPECT_FALSE(v4->Contains(true, one->addr.addr));
  // The prefix is digits only, and no longer than the address.
  for (const char* bad :
       {"10.0.0.0/33", "fd00::/129", "10.0.0.0/", "10.0.0.0/-0", "10.0.0.0/+8", "10.0.0.0/ 8", "nonsense", "", "/8"})
    EXPECT_FALSE(ParseCidr(bad).ok()) << bad;
}

}  // namespace
}  // namespace frs
