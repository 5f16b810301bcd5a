#include "limit/node_json.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace frs::limit {
namespace {

TEST(NodeJson, WritesAndReadsBack) {
  JsonWriter w;
  w.BeginObject().Key("a").Int(-5).Key("s").String("q\"\\\n\x01ü").Key("l").BeginArray();
  w.BeginObject().Key("x").Bool(true).EndObject().Int(7).EndArray().EndObject();
  EXPECT_EQ(w.str(), R"({"a":-5,"s":"q\"\\\u000a\u0001ü","l":[{"x":true},7]})");
  auto v = ParseJson(w.str());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->Find("a")->i, -5);
  EXPECT_EQ(v->Find("s")->s, "q\"\\\n\x01ü");
  EXPECT_EQ(v->Find("l")->array.size(), 2u);
  EXPECT_TRUE(v->Find("l")->array[0].Find("x")->b);
}

TEST(NodeJson, IsStrict) {
  EXPECT_FALSE(ParseJson("{\"a\":1,}").ok());
  EXPECT_FALSE(ParseJson("{\"a\":1} x").ok());
  EXPECT_FALSE(ParseJson("{\"a\":1.5}").ok());
  EXPECT_FALSE(ParseJson("{\"a\":1,\"a\":2}").ok());
  EXPECT_FALSE(ParseJson("[[[[[[[[[[1]]]]]]]]]]").ok());
  EXPECT_FALSE(ParseJson("\"\\ud800\"").ok());
  EXPECT_EQ(ParseJson("9223372036854775807")->i, INT64_MAX);
  EXPECT_EQ(ParseJson("-9223372036854775808")->i, INT64_MIN);
  EXPECT_FALSE(ParseJson("9223372036854775808").ok());
  EXPECT_FALSE(ParseJson("-9223372036854775809").ok());
  EXPECT_FALSE(ParseJson("1e3").ok());
  EXPECT_FALSE(ParseJson("[1]]").ok());
  EXPECT_FALSE(ParseJson("").ok());
  // Errors name the byte and what is wrong.
  EXPECT_EQ(ParseJson("{\"a\":1,\"a\":2}").status().message(), "JSON at byte 9: duplicate member 'a'");
  EXPECT_EQ(ParseJson("\"\\ud83d\\ude00\"")->s, "\xf0\x9f\x98\x80");
}

TEST(NodeJson, Utf8PrefixDropsACutCharacter) {
  EXPECT_EQ(Utf8Prefix("ab\xc3\xbc"), "ab\xc3\xbc");
  EXPECT_EQ(Utf8Prefix("ab\xc3"), "ab");
  EXPECT_EQ(Utf8Prefix("ab\xe2\x82"), "ab");
  std::string out;
  ASSERT_TRUE(HexDecode(HexEncode(std::string_view("\x00\xff k", 4)), &out));
  EXPECT_EQ(out, std::string("\x00\xff k", 4));
}

}  // namespace
}  // namespace frs::limit
