// base/percent_encode: the one %-encoder and what each kind of table lets
// through.
#include "frs/percent_encode.h"

#include <gtest/gtest.h>

#include <string>

namespace frs {
namespace {

TEST(PercentEncode, QueryValueKeepsOnlyUnreservedCharacters) {
  EXPECT_EQ(PercentEncoded("AZaz09-._~", kPercentQueryValue), "AZaz09-._~");
  EXPECT_EQ(PercentEncoded("a b&c=d/e?f#g+h%i,j", kPercentQueryValue), "a%20b%26c%3Dd%2Fe%3Ff%23g%2Bh%25i%2Cj");
  EXPECT_EQ(PercentEncoded("caf\xc3\xa9", kPercentQueryValue), "caf%C3%A9");  // upper-case hex
  EXPECT_EQ(PercentEncoded(std::string("\x00\x7f\xff", 3), kPercentQueryValue), "%00%7F%FF");
  EXPECT_EQ(PercentEncoded("", kPercentQueryValue), "");
}

TEST(PercentEncode, RangeTablePassesItsRangeButTheExceptions) {
  constexpr PercentTable kPrintable(0x20, 0x7e, "%", PercentHigh::kEscape);
  EXPECT_EQ(PercentEncoded("50% of a\nb~", kPrintable), "50%25 of a%0Ab~");
  EXPECT_EQ(PercentEncoded("\x7f\x80", kPrintable), "%7F%80");
}

TEST(PercentEncode, HighBytesKeptAsTheyAre) {
  constexpr PercentTable kKeep(0x21, 0x7e, "%#", PercentHigh::kKeep);
  // Well-formed or not: every byte from 0x80 up passes.
  EXPECT_EQ(PercentEncoded("a b#\xc3\xa9\xff", kKeep), "a%20b%23\xc3\xa9\xff");
}

TEST(PercentEncode, KeyCharsKeepsWhatAKeyMayHoldOnly) {
  constexpr PercentTable kText(0x20, 0x7e, "%|", PercentHigh::kKeyChars);
  EXPECT_EQ(PercentEncoded("\xc3\xa9|\xe4\xb8\xad", kText), "\xc3\xa9%7C\xe4\xb8\xad");
  // A C1 control (U+0085), an overlong form, a surrogate, past U+10FFFF,
  // a cut sequence: each byte as %XX, so the result is text a key may hold.
  EXPECT_EQ(PercentEncoded("\xc2\x85", kText), "%C2%85");
  EXPECT_EQ(PercentEncoded("\xc0\xaf", kText), "%C0%AF");
  EXPECT_EQ(PercentEncoded("\xed\xa0\x80", kText), "%ED%A0%80");
  EXPECT_EQ(PercentEncoded("\xf4\x90\x80\x80", kText), "%F4%90%80%80");
  EXPECT_EQ(PercentEncoded("a\xe4\xb8", kText), "a%E4%B8");
  EXPECT_EQ(PercentEncoded("\xc2\xa0", kText), "\xc2\xa0");  // U+00A0, the first after C1
}

TEST(PercentEncode, AppendsToWhatIsThere) {
  std::string out = "?route=";
  AppendPercentEncoded("a/b", kPercentQueryValue, &out);
  EXPECT_EQ(out, "?route=a%2Fb");
}

}  // namespace
}  // namespace frs
