// Tests of frsctl's human formatting and JSON helpers.
#include <gtest/gtest.h>

#include <cstdlib>

#include "format.h"
#include "json_in.h"
#include "json_out.h"

namespace frs::ctl {
namespace {

TEST(FormatTest, DurationReadsLikeSpeech) {
  EXPECT_EQ(Duration(0), "0 s");
  EXPECT_EQ(Duration(45), "45 s");
  EXPECT_EQ(Duration(90), "1 min 30 s");
  EXPECT_EQ(Duration(720), "12 min");
  EXPECT_EQ(Duration(4800), "1 h 20 min");
  EXPECT_EQ(Duration(3 * 86400 + 4 * 3600), "3 d 4 h");
  EXPECT_EQ(Duration(3599), "1 h");
  EXPECT_EQ(Duration(86399), "1 d");
}

TEST(FormatTest, RelativeSaysInOrAgo) {
  EXPECT_EQ(Relative(1000000 + 720000, 1000000), "in 12 min");
  EXPECT_EQ(Relative(1000000, 1000000 + 3 * 3600000), "3 h ago");
  EXPECT_EQ(Relative(1000000, 1000200), "now");
  // A moment to come is rounded up: a token 0.4 s away is not "now" (a
  // client asking now is denied).
  EXPECT_EQ(Relative(1000400, 1000000), "in 1 s");
  EXPECT_EQ(Relative(1000000, 1000000), "now");
  // A moment past: the whole seconds elapsed, as the clock shown beside it
  // reads (taken at :51, seen at :51.6, is not "1 s ago").
  EXPECT_EQ(Relative(51000, 51600), "now");
  EXPECT_EQ(Relative(48000, 65900), "17 s ago");
}

// A moment to come shows the second from which it holds, as the server's
// reset does: the next token at 14:03:10.087 is 14:03:11.
TEST(FormatTest, WhenShowsAMomentToComeRoundedUp) {
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  EXPECT_EQ(When(1795356190087, 1795356189670), "2026-11-22 14:03:11 UTC (in 1 s)");
  EXPECT_EQ(When(1795356190000, 1795356189670), "2026-11-22 14:03:10 UTC (in 1 s)");
  EXPECT_EQ(When(1795356190000, 1795356190400), "2026-11-22 14:03:10 UTC (now)");
}

TEST(FormatTest, LocalTimeUsesTheProcessZone) {
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  EXPECT_EQ(LocalTime(1795356190000), "2026-11-22 14:03:10 UTC");
}

// A TZ glibc cannot read is named, so that frsctl does not show UTC under a
// zone's name ("Foo/Bar" reads as UTC labelled "Foo").
TEST(FormatTest, ATimeZoneThatIsNoneIsNamed) {
  const std::string zi = "/usr/share/zoneinfo";
  EXPECT_EQ(TimeZoneProblem(nullptr, zi), "");
  EXPECT_EQ(TimeZoneProblem("", zi), "");
  EXPECT_EQ(TimeZoneProblem("UTC", "/nonexistent"), "");  // without tzdata too
  EXPECT_EQ(TimeZoneProblem("CET-1CEST,M3.5.0,M10.5.0/3", "/nonexistent"), "");
  EXPECT_EQ(TimeZoneProblem("<+03>-3", "/nonexistent"), "");
  EXPECT_EQ(TimeZoneProblem("EST5EDT", "/nonexistent"), "");
  EXPECT_EQ(TimeZoneProblem("Foo/Bar", zi),
            "TZ=\"Foo/Bar\" is no time zone here (no zone file /usr/share/zoneinfo/Foo/Bar, and no POSIX rule such as "
            "CET-1CEST): times are shown in UTC");
  EXPECT_NE(TimeZoneProblem("Europe/Pari", zi), "");
  EXPECT_EQ(TimeZoneProblem(":EST5EDT", "/nonexistent"), "");  // no such file: glibc reads the rule
  EXPECT_NE(TimeZoneProblem("Paris", zi), "");
  EXPECT_NE(TimeZoneProblem("/etc/hostname", zi), "");  // a file, not a zone's
  // A zone file, by name or by path (tools/setup.sh installs tzdata).
  EXPECT_EQ(TimeZoneProblem("Europe/Paris", zi), "");
  EXPECT_EQ(TimeZoneProblem(":Europe/Paris", zi), "");
  EXPECT_EQ(TimeZoneProblem("/usr/share/zoneinfo/Asia/Tokyo", zi), "");
}

TEST(FormatTest, GroupedAndPercent) {
  EXPECT_EQ(Grouped(1048576), "1,048,576");
  EXPECT_EQ(Grouped(999), "999");
  EXPECT_EQ(Percent(1, 8), "12.5%");
  EXPECT_EQ(Percent(0, 0), "0.0%");
}

TEST(FormatTest, TableAlignsColumns) {
  Table t({"a", "count"});
  t.AlignRight({1});
  t.Row({"long name", "7"});
  t.Row({"x", "1234"});
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = ::open_memstream(&buf, &len);
  t.Print(f);
  std::fclose(f);
  EXPECT_EQ(std::string(buf, len), "a          count\nlong name      7\nx           1234\n");
  std::free(buf);
}

TEST(JsonTest, WriterOutputParsesBack) {
  JsonOut j;
  j.BeginObject()
      .Key("s")
      .String("a\"b\\c\x01\xff")
      .Key("n")
      .Int(-3)
      .Key("a")
      .BeginArray()
      .Uint(1)
      .Bool(true)
      .Null()
      .EndArray();
  j.Key("d").Double(0.5).EndObject();
  Result<JsonValue> v = ParseJson(j.str());
  ASSERT_TRUE(v.ok()) << v.status().message() << " in " << j.str();
  EXPECT_EQ(v->Find("s")->text, "a\"b\\c\x01\xc3\xbf");  // \u00ff decodes to UTF-8
  EXPECT_EQ(v->Find("n")->number, -3);
  EXPECT_EQ(v->Find("a")->items.size(), 3u);
  EXPECT_EQ(v->Find("d")->number, 0.5);
}

TEST(JsonTest, ReaderKeepsByteRangesAndRejectsJunk) {
  std::string text = R"({"biz":4,"biz_name":"partner","x":[1,2]})";
  Result<JsonValue> v = ParseJson(text);
  ASSERT_TRUE(v.ok());
  const JsonValue* name = v->Find("biz_name");
  EXPECT_EQ(text.substr(name->begin, name->end - name->begin), "\"partner\"");
  EXPECT_FALSE(ParseJson("{\"a\":1,}").ok());
  EXPECT_FALSE(ParseJson("{\"a\":1} x").ok());
  EXPECT_FALSE(ParseJson("[01]").ok());
  // A string with escaped quotes and backslashes, and a number ended by a space.
  text = R"({"a" : "q\"\\" , "n": -1.5e3 ,"t":true})";
  v = ParseJson(text);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(text.substr(v->Find("a")->begin, v->Find("a")->end - v->Find("a")->begin), R"("q\"\\")");
  EXPECT_EQ(v->Find("n")->text, "-1.5e3");
  EXPECT_EQ(text.substr(v->Find("t")->begin, 4), "true");
  EXPECT_EQ(v->end, text.size());
}

TEST(JsonTest, LeadingMembersStopOnceReadAndNeedNoValidTail) {
  Result<JsonValue> v = ParseLeadingMembers(R"({"biz":4,"biz_name":"p","rules":[oops)", {"biz", "biz_name"});
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->Find("biz_name")->text, "p");
  EXPECT_EQ(v->Find("rules"), nullptr);
  EXPECT_FALSE(ParseLeadingMembers(R"({"biz":4,"rules":[oops)", {"biz", "biz_name"}).ok());
}

// A line that names the shard says its address once ("shard A: A: connect:
// ..." before).
// top's and dump's key column: what a table would lose or blur is written
// as an escape (a space at either end, control bytes, a backslash itself),
// so every shown key reads back as exactly one key.
TEST(FormatTest, AShownKeyKeepsItsEndsAndReadsBackAsOneKey) {
  EXPECT_EQ(ShownKey("plain key", false, true, 0), "plain key");
  EXPECT_EQ(ShownKey(" sp ", false, true, 0), "\\x20sp\\x20");
  EXPECT_EQ(ShownKey(" ", false, true, 0), "\\x20");
  EXPECT_EQ(ShownKey("a\tb\\", false, true, 0), "a\\x09b\\\\");
  EXPECT_EQ(ShownKey("\\x20", false, true, 0), "\\\\x20");  // the text \x20 is not a space
  EXPECT_EQ(ShownKey(" cut ", true, true, 0), "\\x20cut ...");
  EXPECT_EQ(ShownKey("x", false, false, 0xab), "fp:00000000000000ab (key not kept)");
}

TEST(FormatTest, WithoutShardNameDropsTheClientsOwnPrefixOnly) {
  EXPECT_EQ(WithoutShardName("127.0.0.1:1: connect: Connection refused", "127.0.0.1:1"), "connect: Connection refused");
  EXPECT_EQ(WithoutShardName("127.0.0.1:12: connect: x", "127.0.0.1:1"), "127.0.0.1:12: connect: x");
  EXPECT_EQ(WithoutShardName("timed out", "127.0.0.1:1"), "timed out");
  EXPECT_EQ(WithoutShardName("127.0.0.1:1: ", "127.0.0.1:1"), "127.0.0.1:1: ");
}

}  // namespace
}  // namespace frs::ctl
