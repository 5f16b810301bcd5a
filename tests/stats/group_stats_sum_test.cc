// frs/group_stats.h GroupStatsSum: one day's statistics of one table from
// several shards as one (frsctl stat --by --cluster).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "frs/group_stats.h"

namespace frs {
namespace {

// A group as one shard answers it, with the exact sketch of `codes`
// (sorted: the text form lists them in order).
GroupStat Group(std::string value, uint64_t requests, const std::vector<uint32_t>& codes) {
  GroupStat g;
  g.value = std::move(value);
  g.requests = requests;
  g.allowed = requests - 1;
  g.denied = 1;
  g.units = requests * 2;
  g.distinct = {codes.size()};
  std::string sketch = "e:";
  char hex[9];
  for (uint32_t c : codes) {
    std::snprintf(hex, sizeof hex, "%08x", c);
    sketch += hex;
  }
  g.sketches = {sketch};
  return g;
}

GroupStats Part(std::vector<GroupStat> rows, uint64_t field_errors) {
  GroupStats st;
  st.biz = "api";
  st.by = "app";
  st.day = 20417;
  st.distinct_fields = {"user"};
  st.field_errors = field_errors;
  st.rows = std::move(rows);
  return st;
}

TEST(GroupStatsSum, CountsAddAndAUserOnTwoShardsCountsOnce) {
  GroupStatsSum sum;
  EXPECT_TRUE(sum.empty());
  ASSERT_TRUE(sum.Add(Part({Group("app1", 10, {1, 2}), Group("app2", 5, {3}), Group("~other", 1, {9})}, 2)).ok());
  ASSERT_TRUE(sum.Add(Part({Group("app1", 4, {2, 4}), Group("app3", 20, {5})}, 1)).ok());
  EXPECT_FALSE(sum.empty());

  const GroupStats all = sum.Total();
  EXPECT_EQ(all.biz, "api");
  EXPECT_EQ(all.by, "app");
  EXPECT_EQ(all.day, 20417u);
  EXPECT_EQ(all.field_errors, 3u);
  EXPECT_EQ(all.groups, 3u) << "~other is no group of its own";
  ASSERT_EQ(all.rows.size(), 4u);
  EXPECT_EQ(all.rows[0].value, "app3");  // most requests first
  EXPECT_EQ(all.rows[1].value, "app1");
  EXPECT_EQ(all.rows[1].requests, 14u);
  EXPECT_EQ(all.rows[1].allowed, 12u);
  EXPECT_EQ(all.rows[1].denied, 2u);
  EXPECT_EQ(all.rows[1].units, 28u);
  EXPECT_EQ(all.rows[1].distinct, std::vector<uint64_t>{3}) << "users 1, 2, 4: user 2 was on both shards";
  EXPECT_EQ(all.rows[2].value, "app2");
  EXPECT_EQ(all.rows[3].value, "~other");

  const GroupStats top = sum.Total(2);
  ASSERT_EQ(top.rows.size(), 2u);
  EXPECT_EQ(top.rows[0].value, "app3");
  EXPECT_EQ(top.rows[1].value, "app1");
  EXPECT_EQ(top.groups, 3u) << "groups counts them all, not only the top";
}

TEST(GroupStatsSum, APartWithAnUnreadableSketchAddsNothing) {
  GroupStatsSum sum;
  ASSERT_TRUE(sum.Add(Part({Group("app1", 10, {1})}, 0)).ok());
  GroupStat bad = Group("app7", 3, {2});
  bad.sketches = {"x:not a sketch"};
  const Status st = sum.Add(Part({Group("app1", 5, {2}), bad}, 4));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("app7"), std::string::npos) << st.ToString();
  const GroupStats all = sum.Total();
  ASSERT_EQ(all.rows.size(), 1u);
  EXPECT_EQ(all.rows[0].requests, 10u);
  EXPECT_EQ(all.rows[0].distinct, std::vector<uint64_t>{1});
  EXPECT_EQ(all.field_errors, 0u);
}

}  // namespace
}  // namespace frs
