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
  // UTF-8, but no XML character: a key the protocol could not name.
  EXPECT_EQ(ValidateKeyBytes("w\xef\xbf\xbe"), "key holds U+FFFE or U+FFFF at byte 1, which are not XML characters");
  EXPECT_NE(ValidateKeyBytes("\xef\xbf\xbf"), "");
  EXPECT_FALSE(KeyIsValid("w\xef\xbf\xbe"));
  EXPECT_TRUE(KeyIsValid("w\xef\xbf\xbd"));  // U+FFFD
  // What an earlier version stored and its replicas still send.
  EXPECT_TRUE(KeyIsStorable("w\xef\xbf\xbe\xef\xbf\xbf"));
  EXPECT_TRUE(KeyIsStorable("user:42"));
  for (const char* bad : {"", "a\nb", "\xc0\xaf", "\xef\xbf"}) EXPECT_FALSE(KeyIsStorable(bad)) << bad;
  EXPECT_FALSE(KeyIsStorable(std::string(256, 'a')));
}

}  // namespace
}  // namespace frs

// KeyIsValid reads eight bytes at a time: every byte value at every place of
// keys around the word boundaries must be judged as ValidateKeyBytes judges it.
TEST(Key, TheQuickCheckAgreesWithTheFullOneForEveryByteEverywhere) {
  size_t invalid = 0;
  for (size_t len : {1, 7, 8, 9, 15, 16, 17, 24, 255}) {
    for (size_t pos = 0; pos < len; ++pos) {
      for (int b = 0; b < 256; ++b) {
        std::string k(len, 'k');
        k[pos] = static_cast<char>(b);
        const bool full = frs::ValidateKeyBytes(k).empty();
        ASSERT_EQ(frs::KeyIsValid(k), full) << "length " << len << ", byte " << b << " at " << pos;
        invalid += !full;
      }
    }
  }
  EXPECT_GT(invalid, 0u);  // the loop met refused bytes, not only accepted ones
  EXPECT_TRUE(frs::KeyIsValid("user:42|é"));
  EXPECT_FALSE(frs::KeyIsValid(""));
  EXPECT_FALSE(frs::KeyIsValid(std::string(256, 'a')));
  EXPECT_TRUE(frs::KeyIsValid(std::string(255, 'a')));
}
