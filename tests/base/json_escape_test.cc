// base/json_escape: the one JSON string escaper (the decision log, export,
// frsctl, Envoy's metadata).
#include "base/json_escape.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace frs
