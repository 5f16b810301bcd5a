// base/json_escape: the one JSON string escaper (the decision log, export,
// frsctl, Envoy's metadata).
#include "base/json_escape.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace frs {
namespace {

std::string JsonEscaped(std::string_view s) {
  std::string out;
  AppendJsonEscaped(s, &out);
  return out;
}

TEST(JsonEscape, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonEscaped("a\"b\\c"), "a\\\"b\\\\c");
  EXPECT_EQ(JsonEscaped(std::string("\x00\x01\n\t\x1f\x7f", 6)), "\\u0000\\u0001\\u000a\\u0009\\u001f\\u007f");
  EXPECT_EQ(JsonEscaped("plain:key-1_{tag}/x"), "plain:key-1_{tag}/x");
  EXPECT_EQ(JsonEscaped(""), "");
}

TEST(JsonEscape, KeepsWellFormedUtf8AndEscapesEveryOtherHighByte) {
  // é (2 bytes), 中 (3), 😀 (4), U+10FFFF (the last): copied as they are.
  EXPECT_EQ(JsonEscaped("\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"), "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80");
  EXPECT_EQ(JsonEscaped("\xf4\x8f\xbf\xbf"), "\xf4\x8f\xbf\xbf");
  // A lone continuation byte, a truncated sequence, an overlong '/', a
  // surrogate, a code point above U+10FFFF, 0xFF: each byte as \u00XX.
  EXPECT_EQ(JsonEscaped("\x80"), "\\u0080");
  EXPECT_EQ(JsonEscaped("\xe4\xb8"), "\\u00e4\\u00b8");
  EXPECT_EQ(JsonEscaped("\xc0\xaf"), "\\u00c0\\u00af");
  EXPECT_EQ(JsonEscaped("\xe0\x80\xaf"), "\\u00e0\\u0080\\u00af");
  EXPECT_EQ(JsonEscaped("\xed\xa0\x80"), "\\u00ed\\u00a0\\u0080");
  EXPECT_EQ(JsonEscaped("\xf4\x90\x80\x80"), "\\u00f4\\u0090\\u0080\\u0080");
  EXPECT_EQ(JsonEscaped("a\xffz\xc3\xa9"), "a\\u00ffz\xc3\xa9");
}

TEST(JsonEscape, StringIsQuotedAndAppended) {
  std::string out = "x=";
  AppendJsonString("say \"hi\"\n", &out);
  EXPECT_EQ(out, "x=\"say \\\"hi\\\"\\u000a\"");
}

TEST(JsonEscape, IntoWritesAtMostSixBytesAByte) {
  const std::string worst(100, '\x01');
  std::string buf(kJsonEscapedBytesPerByte * worst.size(), '#');
  char* end = JsonEscapeInto(worst, buf.data());
  EXPECT_EQ(end, buf.data() + buf.size());
  EXPECT_EQ(buf.substr(0, 12), "\\u0001\\u0001");
}

// AppendJsonEscaped copies a plain prefix 16 bytes a step, then escapes the
// rest byte by byte (JsonEscapeInto): the two must agree wherever the first
// byte to escape falls, in a step, on its edge or in the tail.
TEST(JsonEscape, PlainPrefixAgreesWithTheByteEscaperAtEveryPosition) {
  const std::string specials[] = {"\"",   "\\",   std::string(1, '\0'), "\x1f",    "\x7f",
                                  "\x80", "\xff", "\xc3\xa9",           "\xe4\xb8"};
  for (const size_t len : std::initializer_list<size_t>{0, 1, 15, 16, 17, 31, 32, 33, 47}) {
    for (size_t at = 0; at <= len; ++at) {
      for (const std::string& special : specials) {
        std::string s(len, 'a');
        for (size_t i = 0; i < len; ++i) s[i] = static_cast<char>(' ' + (i * 7) % 94);  // printable, no DEL
        for (char& c : s)
          if (c == '"' || c == '\\') c = 'q';
        s.insert(at, special);
        std::string expected(kJsonEscapedBytesPerByte * s.size(), '\0');
        expected.resize(static_cast<size_t>(JsonEscapeInto(s, expected.data()) - expected.data()));
        EXPECT_EQ(JsonEscaped(s), expected) << "length " << len << ", special at " << at;
      }
    }
  }
  // A byte of 0x80 or more is below 0x20 as a signed byte: the step stops
  // there, and a well-formed character after 16 plain bytes is kept.
  EXPECT_EQ(JsonEscaped(std::string(16, 'x') + "\xc3\xa9"), std::string(16, 'x') + "\xc3\xa9");
  EXPECT_EQ(JsonEscaped(std::string(16, 'x') + "\x80"), std::string(16, 'x') + "\\u0080");
}

}  // namespace
}  // namespace frs
