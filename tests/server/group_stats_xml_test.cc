#include "server/group_stats_xml.h"

#include <gtest/gtest.h>

namespace frs::server {
namespace {

// What GET /stats writes, POST /stats and frsctl read back unchanged: a
// value with bytes XML cannot carry (a tab, a control byte, a byte that is
// not UTF-8) travels as hex too, so two groups never fold into one.
TEST(GroupStatsXml, EveryValueSurvivesTheRoundTrip) {
  GroupStats st;
  st.biz = "api";
  st.by = "app";
  st.day = 20417;
  st.groups = 4;
  st.field_errors = 3;
  st.distinct_fields = {"user"};
  const std::vector<std::string> values =
      {"app7", std::string("a\tb"), std::string("a b"), std::string("x\x01y"), std::string("\xff\xfe"), "q\"<&>'",
       "",     "caf\xc3\xa9"};
  for (size_t i = 0; i < values.size(); ++i) {
    GroupStat g;
    g.value = values[i];
    g.requests = 10 + i;
    g.allowed = 7 + i;
    g.denied = 3;
    g.units = 5;
    g.distinct = {i};
    g.sketches = {"e:0000000" + std::to_string(i + 1)};
    st.rows.push_back(g);
  }
  std::string xml;
  AppendGroupStats(st, &xml);
  // GET /stats sizes an answer with the bound before building it.
  st.lost = UINT64_MAX;
  std::string worst;
  AppendGroupStats(st, &worst);
  EXPECT_GE(GroupStatsXmlBound(st), worst.size());
  st.lost = 0;
  auto back = ParseGroupStats(xml);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << xml;
  EXPECT_EQ(back->biz, "api");
  EXPECT_EQ(back->day, 20417u);
  EXPECT_EQ(back->field_errors, 3u);
  ASSERT_EQ(back->distinct_fields, st.distinct_fields);
  ASSERT_EQ(back->rows.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(back->rows[i].value, values[i]) << i;
    EXPECT_EQ(back->rows[i].requests, 10 + i);
    EXPECT_EQ(back->rows[i].allowed, 7 + i);
    EXPECT_EQ(back->rows[i].sketches.at(0), st.rows[i].sketches[0]);
  }
}

TEST(GroupStatsXml, RefusesWhatIsNotStatistics) {
  EXPECT_FALSE(ParseGroupStats("not xml").ok());
  EXPECT_FALSE(ParseGroupStats("<response/>").ok());
  EXPECT_FALSE(ParseGroupStats("<stats biz=\"a\" by=\"b\" day=\"2026-02-30\"/>").ok());
  EXPECT_FALSE(ParseGroupStats("<stats biz=\"a\" by=\"b\" day=\"2026-02-03\"><group requests=\"1\"/></stats>").ok());
  EXPECT_FALSE(
      ParseGroupStats("<stats biz=\"a\" by=\"b\" day=\"2026-02-03\"><group value=\"v\" requests=\"x\" allowed=\"1\" "
                      "denied=\"0\" units=\"0\"/></stats>")
          .ok());
  EXPECT_FALSE(
      ParseGroupStats("<stats biz=\"a\" by=\"b\" day=\"2026-02-03\"><group value=\"v\" value_hex=\"7\" requests=\"1\" "
                      "allowed=\"1\" denied=\"0\" units=\"0\"/></stats>")
          .ok());
}

}  // namespace
}  // namespace frs::server
