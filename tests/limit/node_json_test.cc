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

// Strings are escaped by base/json_escape.h: bytes that are not well-formed
// UTF-8 go as \u00XX each, so what is written always parses. The lax check
// this writer had let an overlong form and a surrogate through raw.
TEST(NodeJson, StringsAreWellFormedUtf8WhateverTheBytes) {
  JsonWriter w;
  w.BeginArray().String("\xc0\xaf").String("\xed\xa0\x80").String("\xf5\x80\x80\x80").String("\xc3\xa9").EndArray();
  EXPECT_EQ(w.str(), "[\"\\u00c0\\u00af\",\"\\u00ed\\u00a0\\u0080\",\"\\u00f5\\u0080\\u0080\\u0080\",\"\xc3\xa9\"]");
  auto back = ParseJson(w.str());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->array[3].s, "\xc3\xa9");
}

TEST(NodeJson, HexRoundTripsEveryByte) {
  std::string out;
  ASSERT_TRUE(HexDecode(HexEncode(std::string_view("\x00\xff k", 4)), &out));
  EXPECT_EQ(out, std::string("\x00\xff k", 4));
}

}  // namespace
}  // namespace frs::limit
