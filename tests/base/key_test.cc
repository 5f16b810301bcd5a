// Keys (frs/key.h): the wire form of the key types, and which bytes make a key.
#include "frs/key.h"

#include <gtest/gtest.h>

#include <string>

namespace frs {
namespace {

// The suite name is the one these tests had beside the store's.
TEST(Store, GenericKeysShareTheWireForm) {
  EXPECT_EQ(MakeKey(1, 42u).fp, MakeKey(1, std::string("42")).fp);
  IpAddress ip;
  ASSERT_TRUE(IpAddress::Parse("2001:0db8:0000:0000:0000:0000:0000:0001", &ip));
  EXPECT_EQ(MakeKey(1, ip).bytes, "2001:db8::1");
  ASSERT_TRUE(IpAddress::Parse("10.1.2.3", &ip));
  EXPECT_EQ(MakeKey(3, ip).bytes, "10.1.2.3");
  EXPECT_FALSE(IpAddress::Parse("10.1.2", &ip));
}

TEST(Store, KeyValidation) {
  EXPECT_EQ(ValidateKeyBytes("user:42"), "");
  EXPECT_EQ(ValidateKeyBytes("\xe4\xbd\xa0\xe5\xa5\xbd"), "");
  EXPECT_NE(ValidateKeyBytes(""), "");
  EXPECT_NE(ValidateKeyBytes(std::string(256, 'a')), "");
  EXPECT_EQ(ValidateKeyBytes(std::string(255, 'a')), "");
  EXPECT_NE(ValidateKeyBytes("a\nb"), "");
  EXPECT_NE(ValidateKeyBytes("\xc0\xaf"), "");      // overlong
  EXPECT_NE(ValidateKeyBytes("\xed\xa0\x80"), "");  // surrogate
  EXPECT_NE(ValidateKeyBytes("\xe4\xbd"), "");      // truncated
}

}  // namespace
}  // namespace frs
