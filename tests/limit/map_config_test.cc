#include "limit/map_config.h"

#include <gtest/gtest.h>

#include "common/example_conf.h"

namespace frs::limit {
namespace {

std::string ErrorOf(const std::string& xml) {
  auto m = ParseMap(xml, "map.xml");
  return m.ok() ? std::string("OK") : m.status().message();
}

TEST(MapConfig, ParsesTheContractExample) {
  auto m = ParseMap(frs::testing::ExampleMap(), "map.xml");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->bizzes.size(), 4u);
  const BizConfig& login = m->bizzes[0];
  EXPECT_EQ(login.rules[0].algo, Algo::kFixed);
  EXPECT_EQ(login.state_bytes, 16u);  // one fixed rule: 16 bytes, 16 key bytes fit one slot
  const BizConfig& ad = m->bizzes[1];
  EXPECT_EQ(ad.nrules, 2u);
  EXPECT_EQ(ad.rules[1].offset, 16u);
  EXPECT_EQ(ad.state_bytes, 32u);
  EXPECT_EQ(m->bizzes[2].rules[0].burst, 20);
  EXPECT_EQ(m->bizzes[3].rules[0].borrow, 300);
  EXPECT_EQ(ad.mode, Mode::kEnforce);
  EXPECT_EQ(m->bizzes[3].mode, Mode::kEnforce);  // the default
  auto shadow =
      ParseMap(R"(<map><biz id="4" name="partner" mode="shadow"><rule interval="60" max="5"/></biz></map>)", "map.xml");
  ASSERT_TRUE(shadow.ok()) << shadow.status().ToString();
  EXPECT_EQ(shadow->bizzes[0].mode, Mode::kShadow);
}

TEST(MapConfig, ErrorsNameTheFileAndLine) {
  EXPECT_EQ(ErrorOf("<map>\n<biz id=\"1\" name=\"a\"><rule interval=\"60\" max=\"5\"/></biz>\n"
                    "<biz id=\"1\" name=\"b\"><rule interval=\"60\" max=\"5\"/></biz>\n</map>"),
            "map.xml:3: duplicate biz id 1 (first used at line 2)");
  EXPECT_EQ(ErrorOf("<map>\n<biz id=\"1\" name=\"a\"><rule interval=\"60\" max=\"5\"/></biz>\n\n"
                    "<biz id=\"2\" name=\"a\"><rule interval=\"60\" max=\"5\"/></biz>\n</map>"),
            "map.xml:4: duplicate biz name 'a' (first used at line 2)");
  EXPECT_EQ(ErrorOf(
                "<map>\n<biz id=\"1\" name=\"a\">\n  <rule algo=\"leaky\" interval=\"60\" max=\"5\"/>\n</biz></map>"),
            "map.xml:3: unknown algo 'leaky' (fixed, calendar, sliding, token_bucket or concurrency)");
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule interval=\"0\" max=\"5\"/></biz></map>"),
            "map.xml:2: rule interval '0' is out of range (1..31536000 s)");
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule interval=\"31536001\" max=\"5\"/></biz></map>"),
            "map.xml:2: rule interval '31536001' is out of range (1..31536000 s)");
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule interval=\"6\" max=\"2147483648\"/></biz></map>"),
            "map.xml:2: rule max '2147483648' is out of range (1..2147483647)");
  // Not a number at all: said so, not "out of range".
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule interval=\"6\" max=\"3.5\"/></biz></map>"),
            "map.xml:2: rule max '3.5' is not a whole number (1..2147483647)");
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule interval=\"\" max=\"3\"/></biz></map>"),
            "map.xml:2: rule interval '' is empty (1..31536000 s)");
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule algo=\"sliding\" interval=\"6\" max=\"2\" "
                    "borrow=\"1\"/></biz></map>"),
            "map.xml:2: borrow needs windows: algo 'sliding' has none (use fixed or calendar)");
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule interval=\"6\" max=\"2\" burst=\"3\"/></biz></map>"),
            "map.xml:2: burst is only for token_bucket, not algo 'fixed'");
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule interval=\"6\" max=\"2\" maximum=\"3\"/></biz></map>"),
            "map.xml:2: <rule>: unknown attribute 'maximum'");
  EXPECT_EQ(ErrorOf("<map>\n<biz id=\"1\" name=\"a\" owner=\"me\"/></map>"),
            "map.xml:2: <biz>: unknown attribute 'owner'");
  EXPECT_EQ(ErrorOf("<map>\n<biz id=\"1\" name=\"a\" mode=\"loud\"/></map>"),
            "map.xml:2: unknown mode 'loud' (enforce, shadow or off)");
  EXPECT_EQ(ErrorOf("<map>\n<biz id=\"65536\" name=\"a\"/></map>"),
            "map.xml:2: biz id '65536' is out of range (1..65535)");
  EXPECT_EQ(ErrorOf("<map>\n<biz id=\"0\" name=\"a\"/></map>"), "map.xml:2: biz id '0' is out of range (1..65535)");
  EXPECT_EQ(ErrorOf("<map>\n<biz id=\"3\"/></map>"), "map.xml:2: <biz id=\"3\">: missing attribute 'name'");
  EXPECT_EQ(ErrorOf("<map>\n<biz id=\"3\" name=\"42\"/></map>"),
            "map.xml:2: biz name '42' is invalid (1..64 of letters, digits, '_', '.', '-', not only digits)");
  EXPECT_EQ(ErrorOf("<map>\n<biz id=\"3\" name=\"a\"/></map>"), "map.xml:2: biz 'a' has no <rule>");
  std::string five = "<map>\n<biz id=\"1\" name=\"a\">\n";
  for (int i = 0; i < 5; ++i) five += "<rule interval=\"" + std::to_string(60 + i) + "\" max=\"1\"/>\n";
  five += "</biz></map>";
  EXPECT_EQ(ErrorOf(five), "map.xml:7: biz 'a' has more than 4 rules (a node holds at most 4)");
  EXPECT_EQ(ErrorOf("<map>\n<biz id=\"1\" name=\"a\">\n<rule interval=\"6\" max=\"2\">\n</biz></map>"),
            "map.xml:4: malformed XML: Start-end tags mismatch");
  EXPECT_EQ(ErrorOf("<limits/>"), "map.xml:1: the root element is <limits>, expected <map>");
  EXPECT_EQ(ErrorOf("<map>\n<bizz id=\"1\"/></map>"), "map.xml:2: unexpected element <bizz> in <map> (expected <biz>)");
}

// What pugixml lets through and a typo would make of a limit: a biz after
// </map> (dropped), an attribute given twice (one value silently wins), text
// in a rule, and two rules a node could not tell apart (their counts traded
// at a reload that reorders them).
// pugixml reads a value up to a NUL, and a NUL byte ends its document:
// `max="5&#0;000"` was max 5, and a <biz> after `</map>` and a NUL was never
// seen (an outside run). XML allows neither.
TEST(MapConfig, ANulByteOrAReferenceToOneIsRefused) {
  const std::string rule = "<rule interval=\"60\" max=\"5&#0;000\"/>";
  EXPECT_EQ(ErrorOf("<map>\n<biz id=\"1\" name=\"a\">" + rule + "</biz></map>"),
            "map.xml:2: a character reference to NUL (&#0;), which XML does not allow: a value would be read up to "
            "it and no further");
  EXPECT_NE(ErrorOf("<map><biz id=\"1\" name=\"lo&#x00;gin\"><rule interval=\"60\" max=\"5\"/></biz></map>")
                .find("a character reference to NUL (&#x00;)"),
            std::string::npos);
  EXPECT_NE(ErrorOf("<map><biz id=\"1\" name=\"a&#" + std::string(40, '0') +
                    ";\"><rule interval=\"60\" max=\"5\"/></biz></map>")
                .find("a character reference to NUL"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(std::string("<map><biz id=\"1\" name=\"a\"><rule interval=\"60\" max=\"5\"/></biz></map>\n") +
                    '\0' + "<biz id=\"9\" name=\"b\"/>"),
            "map.xml:2: a NUL byte, which XML does not allow: the file would be read as ending here");
  // In a comment or CDATA `&#0;` is text, no reference; after the comment a
  // reference counts again.
  EXPECT_EQ(ErrorOf("<map>\n<!-- a &#0; here is text -->\n<biz id=\"1\" name=\"a\"><rule interval=\"60\" "
                    "max=\"5\"/></biz></map>"),
            "OK");
  EXPECT_NE(ErrorOf("<map>\n<!-- a comment -->\n<biz id=\"1\" name=\"a\"><rule interval=\"60\" "
                    "max=\"5&#0;\"/></biz></map>")
                .find("map.xml:3: a character reference to NUL"),
            std::string::npos);
  EXPECT_EQ(ErrorOf("<map>\n<biz id=\"1\" name=\"a\"><![CDATA[ &#0; ]]><rule interval=\"60\" max=\"5\"/></biz></map>")
                .find("NUL"),
            std::string::npos);
  // A reference to another character, or text that only looks like one, is
  // not this.
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\" comment=\"&#38;#0;\"><rule interval=\"60\" max=\"5\"/></biz></map>")
                .find("NUL"),
            std::string::npos);
}

TEST(MapConfig, WhatWouldSilentlyDropOrTradeALimitIsRefused) {
  const std::string biz = "<biz id=\"1\" name=\"a\"><rule interval=\"60\" max=\"5\"/></biz>";
  EXPECT_EQ(ErrorOf("<map>" + biz + "</map>\n<biz id=\"2\" name=\"b\"/>"),
            "map.xml:2: <biz> after </map>: a file holds one <map> and nothing after it");
  EXPECT_EQ(ErrorOf("<map>" + biz + "</map>\n\njunk"), "map.xml:3: text outside <map>");
  EXPECT_EQ(ErrorOf("<!DOCTYPE map [<!ENTITY max \"5\">]>\n<map>" + biz + "</map>")
                .rfind("map.xml:1: a <!DOCTYPE> that", 0),
            0u);
  EXPECT_EQ(ErrorOf("<!DOCTYPE map>\n<map>" + biz + "</map>"), "OK");
  EXPECT_EQ(ErrorOf("<!DOCTYPE map SYSTEM \"map.dtd\">\n<map>" + biz + "</map>")
                .rfind("map.xml:1: a <!DOCTYPE> that", 0),
            0u);
  EXPECT_EQ(ErrorOf("<map>\n<biz id=\"1\" name=\"a\">\n<rule interval=\"60\" max=\"5\" max=\"7\"/></biz></map>"),
            "map.xml:3: <rule>: attribute 'max' is given twice");
  EXPECT_EQ(ErrorOf("<map>\n<biz id=\"1\" name=\"a\" id=\"2\"><rule interval=\"60\" max=\"5\"/></biz></map>"),
            "map.xml:2: <biz>: attribute 'id' is given twice");
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule interval=\"60\" max=\"5\">6</rule></biz></map>"),
            "map.xml:2: <rule> takes no content");
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule algo=\"calendar\" interval=\"86400\" max=\"3\" "
                    "name=\"A\"/>\n<rule algo=\"calendar\" interval=\"86400\" max=\"10\" name=\"B\"/></biz></map>"),
            "map.xml:3: biz 'a': rules 'A' and 'B' are both calendar over 86400 s; a key's node tells its rules "
            "apart by algorithm and interval, so two alike could trade or lose their counts at a reload: keep the "
            "stricter one, or give one another interval");
  // Two limits of one algorithm and interval that a window tells apart: a
  // local day and a UTC day, a fast bucket and a slow one. A reload may not
  // reorder them, or give another rule their interval.
  const std::string two =
      "<map><biz id=\"1\" name=\"a\"><rule algo=\"calendar\" interval=\"86400\" max=\"3\" "
      "name=\"L\"/><rule algo=\"calendar\" interval=\"86400\" max=\"10\" zone=\"UTC\" name=\"U\"/>"
      "<rule algo=\"token_bucket\" interval=\"1\" max=\"10\" name=\"peak\"/>"
      "<rule algo=\"token_bucket\" interval=\"1\" max=\"2\" burst=\"50\" name=\"steady\"/></biz></map>";
  auto running = ParseMap(two, "map.xml");
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  EXPECT_TRUE(CheckRuleOrder(running.value(), running.value()).ok());
  std::string swapped = two;
  const std::string peak = "<rule algo=\"token_bucket\" interval=\"1\" max=\"10\" name=\"peak\"/>";
  swapped.erase(swapped.find(peak), peak.size());
  swapped.insert(swapped.find("</biz>"), peak);
  auto next = ParseMap(swapped, "map.xml");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  Status order = CheckRuleOrder(running.value(), next.value());
  EXPECT_EQ(order.message(),
            "map.xml: biz 'a': rules 'steady' and 'peak' are both token_bucket over 1 s in this map: a key's node "
            "tells such rules apart by their order, so this reload, which changes who holds that algorithm and "
            "interval or in what order, would trade or lose their counts; keep their order and intervals (a restart "
            "on such a map is not checked: docs/rules.md)");
  // Another rule given their interval: refused too; any other change is not.
  auto more = ParseMap(
      "<map><biz id=\"1\" name=\"a\"><rule algo=\"fixed\" interval=\"60\" max=\"5\" name=\"m\"/>"
      "<rule algo=\"token_bucket\" interval=\"1\" max=\"3\" name=\"t\"/></biz></map>",
      "map.xml");
  auto into = ParseMap(
      "<map><biz id=\"1\" name=\"a\"><rule algo=\"token_bucket\" interval=\"1\" max=\"9\" "
      "name=\"m\"/><rule algo=\"token_bucket\" interval=\"1\" max=\"3\" burst=\"9\" "
      "name=\"t\"/></biz></map>",
      "map.xml");
  ASSERT_TRUE(more.ok() && into.ok());
  EXPECT_FALSE(CheckRuleOrder(more.value(), into.value()).ok());
  EXPECT_TRUE(CheckRuleOrder(running.value(), ParseMap(two, "map.xml").value()).ok());

  // Unnamed rules are named by their place (a_1, a_2): swapped, their names
  // read the same, and the reload was taken, each key's counts traded
  // between the two limits (found by an outside run). A rule now where
  // another was, alike in all but name and unlike the one it replaces, is
  // a move; an edit of one in its place is not.
  const auto unnamed = [](const char* first, const char* second) {
    return ParseMap(std::string("<map><biz id=\"1\" name=\"a\">") + first + second + "</biz></map>", "map.xml");
  };
  const char* ktm = "<rule algo=\"calendar\" interval=\"600\" max=\"5\" zone=\"Asia/Kathmandu\"/>";
  const char* utc = "<rule algo=\"calendar\" interval=\"600\" max=\"7\" zone=\"UTC\"/>";
  const char* utc9 = "<rule algo=\"calendar\" interval=\"600\" max=\"9\" zone=\"UTC\"/>";
  auto before = unnamed(ktm, utc);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  Status swap = CheckRuleOrder(before.value(), unnamed(utc, ktm).value());
  EXPECT_EQ(swap.message().rfind("map.xml: biz 'a': rules 'a_1' and 'a_2' are both calendar over 600 s in this map "
                                 "and are in another order than in the map running: ",
                                 0),
            0u)
      << swap.message();
  EXPECT_TRUE(CheckRuleOrder(before.value(), unnamed(ktm, utc9).value()).ok());
  // A calendar rule's zone is its identity: swapped and edited, moved all
  // the same.
  EXPECT_FALSE(CheckRuleOrder(before.value(), unnamed(utc9, ktm).value()).ok());
  // Token buckets have none but their limits: only their set in another
  // order is a move. An edit that makes one equal to the other, or both
  // changed, is an edit (the first version of this check refused them,
  // named rules too: found in review).
  const char* b10 = "<rule algo=\"token_bucket\" interval=\"60\" max=\"10\"/>";
  const char* b20 = "<rule algo=\"token_bucket\" interval=\"60\" max=\"20\"/>";
  const char* b40 = "<rule algo=\"token_bucket\" interval=\"60\" max=\"40\"/>";
  auto buckets = unnamed(b10, b20);
  ASSERT_TRUE(buckets.ok()) << buckets.status().ToString();
  EXPECT_FALSE(CheckRuleOrder(buckets.value(), unnamed(b20, b10).value()).ok());
  EXPECT_TRUE(CheckRuleOrder(buckets.value(), unnamed(b20, b20).value()).ok());
  EXPECT_TRUE(CheckRuleOrder(buckets.value(), unnamed(b20, b40).value()).ok());
  auto named = ParseMap(
      "<map><biz id=\"1\" name=\"a\"><rule algo=\"token_bucket\" interval=\"60\" max=\"10\" name=\"fast\"/>"
      "<rule algo=\"token_bucket\" interval=\"60\" max=\"20\" burst=\"40\" name=\"slow\"/></biz></map>",
      "map.xml");
  auto doubled = ParseMap(
      "<map><biz id=\"1\" name=\"a\"><rule algo=\"token_bucket\" interval=\"60\" max=\"20\" burst=\"40\" "
      "name=\"fast\"/><rule algo=\"token_bucket\" interval=\"60\" max=\"40\" burst=\"80\" name=\"slow\"/>"
      "</biz></map>",
      "map.xml");
  ASSERT_TRUE(named.ok() && doubled.ok());
  EXPECT_TRUE(CheckRuleOrder(named.value(), doubled.value()).ok());
  // Three: a swap of two beside an edit of the third, or beside a named
  // rule, is a move all the same (the second version of this check took
  // both, and a key's strict limit lost its uses to the loose one: found in
  // review); a rule named in its place, its limit unchanged, is no move.
  const auto buckets3 = [](const std::string& rules) {
    return ParseMap("<map><biz id=\"1\" name=\"a\">" + rules + "</biz></map>", "map.xml");
  };
  const std::string peak100 = "<rule algo=\"token_bucket\" interval=\"60\" max=\"100\" name=\"peak\"/>";
  const std::string p10 = "<rule algo=\"token_bucket\" interval=\"60\" max=\"10\"/>";
  const std::string p1000 = "<rule algo=\"token_bucket\" interval=\"60\" max=\"1000\"/>";
  const std::string p5 = "<rule algo=\"token_bucket\" interval=\"60\" max=\"5\"/>";
  auto base3 = buckets3(p10 + p1000 + p5);
  ASSERT_TRUE(base3.ok()) << base3.status().ToString();
  EXPECT_FALSE(CheckRuleOrder(base3.value(), buckets3(p1000 + p10 + b40).value()).ok());
  EXPECT_FALSE(CheckRuleOrder(base3.value(), buckets3(p1000 + p10 + p10).value()).ok());
  EXPECT_TRUE(CheckRuleOrder(base3.value(), buckets3(p10 + p1000 + b40).value()).ok());
  auto with_peak = buckets3(peak100 + p10 + p1000);
  ASSERT_TRUE(with_peak.ok()) << with_peak.status().ToString();
  EXPECT_FALSE(CheckRuleOrder(with_peak.value(), buckets3(peak100 + p1000 + p10).value()).ok());
  std::string named10 = p10;
  named10.insert(named10.find("/>"), " name=\"strict\"");
  EXPECT_TRUE(CheckRuleOrder(base3.value(), buckets3(named10 + p1000 + p5).value()).ok());
  // Named with the name its place gave it, the limit of another: a move
  // all the same (the text alone read as no change of name: review).
  std::string as_a1 = p1000;
  as_a1.insert(as_a1.find("/>"), " name=\"a_1\"");
  EXPECT_FALSE(CheckRuleOrder(base3.value(), buckets3(as_a1 + p10 + p5).value()).ok());
  const auto cal3 = [](const std::string& zones) {
    std::string rules;
    for (size_t i = 0; i < zones.size(); ++i) {
      const char* z = zones[i] == 'L' ? "" : zones[i] == 'U' ? " zone=\"UTC\"" : " zone=\"Asia/Kolkata\"";
      rules +=
          std::string("<rule algo=\"calendar\" interval=\"600\" max=\"5\"") + z + (i == 0 ? " name=\"n\"" : "") + "/>";
    }
    return ParseMap("<map><biz id=\"1\" name=\"a\">" + rules + "</biz></map>", "map.xml");
  };
  EXPECT_FALSE(CheckRuleOrder(cal3("LUK").value(), cal3("LKU").value()).ok());
  EXPECT_TRUE(CheckRuleOrder(cal3("LUK").value(), cal3("LUK").value()).ok());
  // A third rule of their kind: each of the three named.
  auto three = ParseMap(
      "<map><biz id=\"1\" name=\"a\"><rule algo=\"token_bucket\" interval=\"60\" max=\"10\" name=\"a\"/>"
      "<rule algo=\"token_bucket\" interval=\"60\" max=\"60\" burst=\"3\" name=\"b\"/>"
      "<rule algo=\"token_bucket\" interval=\"60\" max=\"5\" burst=\"9\" name=\"c\"/></biz></map>",
      "map.xml");
  auto two_tb = ParseMap(
      "<map><biz id=\"1\" name=\"a\"><rule algo=\"token_bucket\" interval=\"60\" max=\"10\" name=\"a\"/>"
      "<rule algo=\"token_bucket\" interval=\"60\" max=\"60\" burst=\"3\" name=\"b\"/></biz></map>",
      "map.xml");
  ASSERT_TRUE(three.ok() && two_tb.ok()) << three.status().ToString();
  EXPECT_EQ(CheckRuleOrder(two_tb.value(), three.value())
                .message()
                .rfind("map.xml: biz 'a': rules 'a', 'b' and 'c' are all token_bucket over 60 s in this map: ", 0),
            0u)
      << CheckRuleOrder(two_tb.value(), three.value()).message();

  // Told apart: another algorithm or another interval; a declaration and
  // comments around the root are fine.
  EXPECT_EQ(ErrorOf("<?xml version=\"1.0\"?>\n<!-- rules -->\n<map><biz id=\"1\" name=\"a\">"
                    "<rule algo=\"calendar\" interval=\"86400\" max=\"3\"/>"
                    "<rule algo=\"fixed\" interval=\"86400\" max=\"10\"/>"
                    "<rule algo=\"calendar\" interval=\"3600\" max=\"1\"/></biz></map>\n<!-- end -->\n"),
            "OK");
}

// zone= takes any IANA name on a calendar rule: one map holds days in
// several zones, a zone read once however many rules name it; a day in
// Kolkata and one in New York are two limits of one biz.
TEST(MapConfig, ACalendarRuleNamesItsOwnZone) {
  auto m = ParseMap(
      "<map><biz id=\"1\" name=\"ad\">"
      "<rule algo=\"calendar\" interval=\"86400\" max=\"3\" zone=\"Asia/Kolkata\" name=\"in\"/>"
      "<rule algo=\"calendar\" interval=\"86400\" max=\"3\" zone=\"America/New_York\" name=\"ny\"/>"
      "<rule algo=\"calendar\" interval=\"3600\" max=\"1\" zone=\"Asia/Kolkata\" name=\"hour\"/>"
      "</biz></map>",
      "map.xml");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const BizConfig& biz = m.value().bizzes[0];
  ASSERT_TRUE(biz.rules[0].zone && biz.rules[1].zone);
  EXPECT_EQ(biz.rules[0].zone->name(), "Asia/Kolkata");
  EXPECT_EQ(biz.rules[1].zone->name(), "America/New_York");
  EXPECT_EQ(biz.rules[2].zone, biz.rules[0].zone);
  EXPECT_FALSE(biz.rules[0].utc);
  const std::string unknown = ErrorOf(
      "<map><biz id=\"1\" name=\"a\">\n<rule algo=\"calendar\" interval=\"86400\" max=\"3\" "
      "zone=\"Mars/Olympus\"/></biz></map>");
  EXPECT_EQ(unknown.rfind("map.xml:2: rule zone: unknown time zone 'Mars/Olympus' (no ", 0), 0u) << unknown;
  EXPECT_NE(unknown.find("(an IANA name such as America/New_York, or UTC, or epoch)"), std::string::npos) << unknown;
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule algo=\"calendar\" interval=\"86400\" max=\"3\" "
                    "zone=\"../../etc/passwd\"/></biz></map>"),
            "map.xml:2: rule zone: time zone '../../etc/passwd' is not an IANA name (an IANA name such as "
            "America/New_York, or UTC, or epoch)");
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule algo=\"fixed\" interval=\"86400\" max=\"3\" "
                    "zone=\"Asia/Kolkata\"/></biz></map>"),
            "map.xml:2: zone is only for calendar, not algo 'fixed'");
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule algo=\"calendar\" interval=\"86400\" max=\"3\" "
                    "zone=\"\"/></biz></map>"),
            "map.xml:2: rule zone is empty (an IANA name such as America/New_York, or UTC, or epoch)");
  // Two days in one zone are one limit, as two local days are.
  EXPECT_NE(ErrorOf("<map><biz id=\"1\" name=\"a\"><rule algo=\"calendar\" interval=\"86400\" max=\"3\" "
                    "zone=\"Asia/Kolkata\" name=\"A\"/><rule algo=\"calendar\" interval=\"86400\" max=\"4\" "
                    "zone=\"Asia/Kolkata\" name=\"B\"/></biz></map>")
                .find("are both calendar over 86400 s"),
            std::string::npos);
}

// A bucket whose refill of burst outlasts what its state can hold ahead of
// now (2^40 ms) was clipped there and never ran dry: 15,000 of 15,000
// acquires granted. Such rules are refused; the longest one that fits is not.
TEST(MapConfig, ATokenBucketItsStateCannotHoldIsRefused) {
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n"
                    "<rule algo=\"token_bucket\" interval=\"2592000\" max=\"10\" burst=\"5000\"/></biz></map>"),
            "map.xml:2: token_bucket: refilling burst=5000 at max=10 per interval=2592000 s takes 41 years, more than "
            "the 34 a bucket can hold: lower burst or interval, or raise max");
  EXPECT_NE(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule algo=\"token_bucket\" interval=\"31536000\" max=\"1\" "
                    "burst=\"2147483647\"/></biz></map>")
                .find("map.xml:2: token_bucket: refilling burst=2147483647"),
            std::string::npos);
  // 2^40 ms exactly (interval 1 s, max 1000, burst 2^40 / 1000 rounded down) fits.
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule algo=\"token_bucket\" interval=\"1\" max=\"1\" "
                    "burst=\"1099511627\"/></biz></map>"),
            "OK");
  EXPECT_EQ(ErrorOf("<map><biz id=\"1\" name=\"a\">\n<rule algo=\"token_bucket\" interval=\"2592000\" max=\"10\" "
                    "burst=\"4000\"/></biz></map>"),
            "OK");
}

// unit="...": the quota unit of the RateLimit fields; "requests" is the
// default and stored as none; anything a field could not carry unescaped is
// refused, naming it.
TEST(MapConfig, AQuotaUnitIsATokenOfLowerCaseLettersDigitsAndDashes) {
  auto m = ParseMap(R"(<map><biz id="1" name="a" unit="content-bytes"><rule interval="6" max="2"/></biz>
    <biz id="2" name="b" unit="requests"><rule interval="6" max="2"/></biz>
    <biz id="3" name="c" unit="points"><rule interval="6" max="2"/></biz></map>)",
                    "map.xml");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m.value().bizzes[0].unit, "content-bytes");
  EXPECT_EQ(m.value().bizzes[1].unit, "");
  EXPECT_EQ(m.value().bizzes[2].unit, "points");
  for (const char* bad : {"", "Points", "2x", "a b", "a\"b", "abcdefghijklmnopqrstuvwxyz0123456"}) {
    std::string unit = bad;
    if (unit == "a\"b") unit = "a&quot;b";
    EXPECT_EQ(ErrorOf("<map>\n<biz id=\"1\" name=\"a\" unit=\"" + unit +
                      "\"><rule interval=\"6\" max=\"2\"/></biz></map>"),
              "map.xml:2: unit '" + std::string(bad) +
                  "' is invalid (1..32 of a-z, 0-9 and '-', starting with a letter, e.g. 'content-bytes' or 'points')");
  }
}

TEST(MapConfig, FourLargestRulesFitANode) {
  std::string xml = "<map><biz id=\"1\" name=\"a\">";
  for (int i = 0; i < 4; ++i)
    xml += "<rule algo=\"sliding\" interval=\"" + std::to_string(60 + i) + "\" max=\"1000\"/>";
  xml += "</biz></map>";
  auto m = ParseMap(xml, "map.xml");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->bizzes[0].state_bytes, 4 * 112u);
}

TEST(MapConfig, MissingFileNamesIt) {
  auto m = LoadMapFile("/nonexistent/map.xml");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "/nonexistent/map.xml: no such file");
}

// A reload's map change in the master's log: which bizzes it adds, removes
// or changes (each worker's line said only "reloaded"); a removed biz that
// keeps leases or reservations is warned of.
TEST(MapConfig, AReloadSaysWhichBizzesItAddsRemovesAndChanges) {
  auto running = ParseMap(R"(<map>
  <biz id="1" name="login"><rule interval="60" max="5"/></biz>
  <biz id="2" name="ad_user"><rule algo="calendar" interval="86400" max="3"/></biz>
  <biz id="3" name="inflight"><rule algo="concurrency" max="4" lease="60"/></biz>
  <biz id="4" name="same"><rule interval="60" max="5" name="s"/></biz>
</map>)",
                          "map.xml");
  auto next = ParseMap(R"(<map>
  <biz id="1" name="login"><rule interval="120" max="3"/></biz>
  <biz id="4" name="same"><rule interval="60" max="5" name="s"/></biz>
  <biz id="5" name="newbiz"><rule interval="60" max="9"/></biz>
</map>)",
                       "map.xml");
  ASSERT_TRUE(running.ok() && next.ok());
  EXPECT_EQ(MapChangeWords(*running, *next).bizzes,
            "biz(es) 1 added (newbiz), 2 removed (ad_user, inflight), 1 changed (login)");
  EXPECT_EQ(MapChangeWords(*running, *next).envoy, "");
  EXPECT_EQ(MapChangeWords(*running, *running).bizzes, "");
  const std::vector<std::string> ends = HeldAReloadEnds(*running, *next);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_NE(ends[0].find("2 biz(es) removed (ad_user, inflight): the leases and reservations their keys hold are no "
                         "longer released, renewed or settled (404)"),
            std::string::npos)
      << ends[0];
}

// A change of a biz's unit, key fields or statistics is a change (a reload
// that changed only those said nothing); Envoy's descriptors (envoy.*) are
// said apart from map.xml's bizzes, and a plain one removed is no warning
// of leases and reservations held (Envoy takes none: every descriptor a
// directory change removed was named so).
TEST(MapConfig, AReloadSaysUnitFieldsAndStatsChangesAndEnvoysDescriptorsApart) {
  const char* base = R"(<map>
  <biz id="1" name="api" fields="app,user"%s><rule interval="60" max="5"/>%s</biz>
  <biz id="60000" name="envoy.rl.user"><rule interval="60" max="5"/></biz>
  <biz id="60001" name="envoy.rl.path"><rule interval="60" max="7"/></biz>
</map>)";
  auto make = [&](const char* attrs, const char* stats) {
    char text[1024];
    std::snprintf(text, sizeof text, base, attrs, stats);
    return ParseMap(text, "map.xml");
  };
  auto running = make("", "");
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  for (const auto& [attrs, stats] : {std::pair<const char*, const char*>{" unit=\"content-bytes\"", ""},
                                     {" separator=\"|\"", ""},
                                     {"", "<stats by=\"app\"/>"}}) {
    auto next = make(attrs, stats);
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    EXPECT_EQ(MapChangeWords(*running, *next).bizzes, "biz(es) 1 changed (api)") << attrs << stats;
  }
  auto fewer = ParseMap(R"(<map>
  <biz id="1" name="api" fields="app,user"><rule interval="60" max="5"/></biz>
  <biz id="60000" name="envoy.rl.user"><rule interval="60" max="9"/></biz>
  <biz id="60002" name="envoy.rl.new"><rule interval="60" max="1"/></biz>
</map>)",
                        "map.xml");
  ASSERT_TRUE(fewer.ok()) << fewer.status().ToString();
  const MapChange c = MapChangeWords(*running, *fewer, /*with_envoy=*/true);
  EXPECT_EQ(c.bizzes, "");
  EXPECT_EQ(c.envoy, "descriptor(s) 1 added (envoy.rl.new), 1 removed (envoy.rl.path), 1 changed (envoy.rl.user)");
  EXPECT_TRUE(HeldAReloadEnds(*running, *fewer, /*with_envoy=*/true).empty());
  // The bizzes Envoy's limit override counts under are no descriptor: a
  // domain's first file brings them, and they are not said among its
  // descriptors (found from outside: 23 said of 16).
  auto overrides = ParseMap(R"(<map>
  <biz id="1" name="api" fields="app,user"><rule interval="60" max="5"/></biz>
  <biz id="60000" name="envoy.rl.user"><rule interval="60" max="9"/></biz>
  <biz id="60002" name="envoy.rl.new"><rule interval="60" max="1"/></biz>
  <biz id="60003" name="envoy._override.second"><rule interval="1" max="1"/></biz>
</map>)",
                            "map.xml");
  ASSERT_TRUE(overrides.ok()) << overrides.status().ToString();
  EXPECT_EQ(MapChangeWords(*running, *overrides, /*with_envoy=*/true).envoy, c.envoy);
  EXPECT_EQ(MapChangeWords(*overrides, *fewer, /*with_envoy=*/true).envoy, "");
  // Nor among the bizzes a change removes (found from outside: <grpc>
  // taken out said 12 bizzes removed, its 5 descriptors' and the 7
  // override's).
  for (const std::string& w : HeldAReloadEnds(*overrides, *fewer))
    EXPECT_EQ(w.find("envoy._override"), std::string::npos) << w;
  // Without <grpc>, map.xml may name a biz envoy.*: one of its bizzes,
  // said and warned of as such (found in review).
  EXPECT_EQ(MapChangeWords(*running, *fewer).envoy, "");
  EXPECT_EQ(MapChangeWords(*running, *fewer).bizzes.rfind("biz(es) 1 added (envoy.rl.new)", 0), 0u);
  EXPECT_EQ(HeldAReloadEnds(*running, *fewer).size(), 1u);
  // A <stats> table of other fields starts anew in a directory of its own:
  // the old one's files are said to stay (a reload said only "changed").
  auto stats_running = make("", "<stats by=\"app\" distinct=\"user\"/>");
  auto stats_next = make("", "<stats by=\"user\" distinct=\"app\"/>");
  ASSERT_TRUE(stats_running.ok() && stats_next.ok()) << stats_next.status().ToString();
  const std::vector<std::string> left = StatsTablesLeft(*stats_running, *stats_next);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].rfind("map.xml: biz 'api': the statistics table app+user is no longer kept", 0), 0u) << left[0];
  EXPECT_NE(left[0].find("stay in stats/1/app+user/"), std::string::npos) << left[0];
  EXPECT_TRUE(StatsTablesLeft(*stats_running, *stats_running).empty());
}

}  // namespace
}  // namespace frs::limit
