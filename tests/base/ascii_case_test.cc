// Text against a lower-case constant in any case of its ASCII letters
// (base/ascii_case.h): media types and URI schemes.
#include "base/ascii_case.h"

#include <gtest/gtest.h>

namespace frs {
namespace {

TEST(AsciiCase, EqualsInAnyCaseOfItsLettersOnly) {
  EXPECT_TRUE(EqualsAsciiLower("Application/GRPC+Proto", "application/grpc+proto"));
  EXPECT_TRUE(EqualsAsciiLower("", ""));
  EXPECT_FALSE(EqualsAsciiLower("application/grpc", "application/grpc+proto"));
  EXPECT_FALSE(EqualsAsciiLower("application/grpcx", "application/grpc"));
  // Only ASCII letters fold: '@' (0x40) and '[' (0x5b) are not '`' and '{'.
  EXPECT_FALSE(EqualsAsciiLower("@[", "`{"));
  EXPECT_FALSE(EqualsAsciiLower("\xc3\x89", "\xc3\xa9"));  // É is not é here
}

TEST(AsciiCase, StartsWith) {
  EXPECT_TRUE(StartsWithAsciiLower("HTTP://host/acquire", "http://"));
  EXPECT_TRUE(StartsWithAsciiLower("https://h", "https://"));
  EXPECT_FALSE(StartsWithAsciiLower("http:/", "http://"));
  EXPECT_FALSE(StartsWithAsciiLower("/acquire", "http://"));
}

}  // namespace
}  // namespace frs
