// base/utf8: the one UTF-8 decoder. Each class of ill-formed input of
// Unicode's table 3-7 is refused where it starts.
#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace frs {
namespace {

// The length Utf8Decode gives for the first character of `s`, and its code
// point in *cp.
size_t First(std::string_view s, char32_t* cp = nullptr) { return Utf8Decode(s, 0, cp); }

TEST(Utf8, DecodesOneToFourBytes) {
  char32_t cp = 0;
  EXPECT_EQ(First("A", &cp), 1u);
  EXPECT_EQ(cp, U'A');
  EXPECT_EQ(First(std::string_view("\0", 1), &cp), 1u);
  EXPECT_EQ(cp, 0u);
  EXPECT_EQ(First("\xc2\x80", &cp), 2u);  // the lowest two-byte form
  EXPECT_EQ(cp, 0x80u);
  EXPECT_EQ(First("\xc3\xa9", &cp), 2u);
  EXPECT_EQ(cp, 0xe9u);
  EXPECT_EQ(First("\xe0\xa0\x80", &cp), 3u);  // U+0800, the lowest three-byte form
  EXPECT_EQ(cp, 0x800u);
  EXPECT_EQ(First("\xed\x9f\xbf", &cp), 3u);  // U+D7FF, just below the surrogates
  EXPECT_EQ(cp, 0xd7ffu);
  EXPECT_EQ(First("\xee\x80\x80", &cp), 3u);  // U+E000, just above them
  EXPECT_EQ(cp, 0xe000u);
  EXPECT_EQ(First("\xef\xbf\xbf", &cp), 3u);
  EXPECT_EQ(cp, 0xffffu);
  EXPECT_EQ(First("\xf0\x90\x80\x80", &cp), 4u);  // U+10000
  EXPECT_EQ(cp, 0x10000u);
  EXPECT_EQ(First("\xf0\x9f\x98\x80", &cp), 4u);
  EXPECT_EQ(cp, 0x1f600u);
  EXPECT_EQ(First("\xf4\x8f\xbf\xbf", &cp), 4u);  // U+10FFFF, the last
  EXPECT_EQ(cp, 0x10ffffu);
}

TEST(Utf8, RefusesOverlongForms) {
  EXPECT_EQ(First("\xc0\xaf"), 0u);          // '/' in two bytes
  EXPECT_EQ(First("\xc1\xbf"), 0u);          // U+007F in two bytes
  EXPECT_EQ(First("\xe0\x80\xaf"), 0u);      // '/' in three
  EXPECT_EQ(First("\xe0\x9f\xbf"), 0u);      // U+07FF in three
  EXPECT_EQ(First("\xf0\x80\x80\xaf"), 0u);  // '/' in four
  EXPECT_EQ(First("\xf0\x8f\xbf\xbf"), 0u);  // U+FFFF in four
}

TEST(Utf8, RefusesSurrogates) {
  EXPECT_EQ(First("\xed\xa0\x80"), 0u);  // U+D800
  EXPECT_EQ(First("\xed\xbf\xbf"), 0u);  // U+DFFF
  // A pair written as CESU-8 is two surrogates, not a character.
  EXPECT_EQ(First("\xed\xa0\xbd\xed\xb8\x80"), 0u);
}

TEST(Utf8, RefusesCodePointsAboveTheLast) {
  EXPECT_EQ(First("\xf4\x90\x80\x80"), 0u);  // U+110000
  EXPECT_EQ(First("\xf5\x80\x80\x80"), 0u);
  EXPECT_EQ(First("\xf7\xbf\xbf\xbf"), 0u);
  EXPECT_EQ(First("\xf8\x88\x80\x80\x80"), 0u);  // the old five-byte form
  EXPECT_EQ(First("\xff"), 0u);
}

TEST(Utf8, RefusesTruncatedAndStraySequences) {
  EXPECT_EQ(First("\xc3"), 0u);
  EXPECT_EQ(First("\xe4\xb8"), 0u);
  EXPECT_EQ(First("\xf0\x9f\x98"), 0u);
  EXPECT_EQ(First("\xe4x\xad"), 0u);  // a continuation byte missing in the middle
  EXPECT_EQ(First("\x80"), 0u);       // a continuation byte alone
  EXPECT_EQ(First("\xbf\xbf"), 0u);
  // Cut by the end of the view, not by a NUL: the bytes past it are not read.
  const std::string whole = "\xe4\xb8\xad";
  EXPECT_EQ(Utf8Decode(std::string_view(whole).substr(0, 2), 0), 0u);
  EXPECT_EQ(Utf8Decode(whole, 0), 3u);
}

TEST(Utf8, DecodesAtAnOffset) {
  char32_t cp = 0;
  EXPECT_EQ(Utf8Decode("ab\xc3\xa9", 2, &cp), 2u);
  EXPECT_EQ(cp, 0xe9u);
  EXPECT_EQ(Utf8Decode("ab\xc3\xa9", 3), 0u);  // inside the sequence
}

TEST(Utf8, RepairedReplacesEachRefusedByteAndKeepsTheRest) {
  EXPECT_EQ(Utf8Repaired("ab\xc3\xbc"), "ab\xc3\xbc");
  EXPECT_EQ(Utf8Repaired("ab\xff"
                         "cd"),
            "ab\xef\xbf\xbd"
            "cd");
  EXPECT_EQ(Utf8Repaired("\xc3"), "\xef\xbf\xbd");                                  // cut at the end
  EXPECT_EQ(Utf8Repaired("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // a surrogate: 3 bytes
  EXPECT_EQ(Utf8Repaired(""), "");
  EXPECT_EQ(Utf8ValidPrefix(Utf8Repaired("\x80\xc0\xaf\xf5x\xe2\x82\xac")).size(),
            Utf8Repaired("\x80\xc0\xaf\xf5x\xe2\x82\xac").size());
}

TEST(Utf8, ValidPrefixStopsAtTheFirstRefusedByte) {
  EXPECT_EQ(Utf8ValidPrefix("ab\xc3\xbc"), "ab\xc3\xbc");
  EXPECT_EQ(Utf8ValidPrefix("ab\xc3"), "ab");  // a character cut at the end
  EXPECT_EQ(Utf8ValidPrefix("ab\xe2\x82"), "ab");
  EXPECT_EQ(Utf8ValidPrefix("ab\xc0\xaf"
                            "cd"),
            "ab");  // overlong
  EXPECT_EQ(Utf8ValidPrefix("ab\xed\xa0\x80"
                            "cd"),
            "ab");                                         // surrogate
  EXPECT_EQ(Utf8ValidPrefix("ab\xf4\x90\x80\x80"), "ab");  // above U+10FFFF
  EXPECT_EQ(Utf8ValidPrefix(""), "");
}

}  // namespace
}  // namespace frs
