// The descriptors a worker may need (server/fd_limit.h): one sum, used by
// frsd's start, `frsd -t` and a reload, holding every file a worker keeps.
#include "server/fd_limit.h"

#include <gtest/gtest.h>

#include <string>

#include "limit/map_config.h"
#include "stats/field_stats.h"

namespace frs::server {
namespace {

// `bizzes` bizzes of four key fields, each with `tables` <stats> tables.
limit::MapConfig StatsMap(int bizzes, int tables) {
  static const char* const kBy[] = {"a", "b", "c", "d", "a,b", "a,c", "a,d", "b,c"};
  std::string xml = "<map>\n";
  for (int b = 1; b <= bizzes; ++b) {
    xml += "<biz id=\"" + std::to_string(b) + "\" name=\"b" + std::to_string(b) +
           "\" fields=\"a,b,c,d\" separator=\":\"><rule interval=\"60\" max=\"5\"/>";
    for (int t = 0; t < tables; ++t) xml += std::string("<stats by=\"") + kBy[t] + "\"/>";
    xml += "</biz>\n";
  }
  xml += "</map>\n";
  auto m = limit::ParseMap(xml, "map.xml");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? m.value() : limit::MapConfig{};
}

SrvConfig Config(uint32_t connections) {
  SrvConfig cfg;
  cfg.max_connections = connections;
  cfg.geometry.files = 2;
  return cfg;
}

TEST(FdLimit, TheNeedHoldsEveryStatisticsDayFile) {
  const SrvConfig cfg = Config(900);
  const limit::MapConfig none = StatsMap(140, 0);
  const limit::MapConfig many = StatsMap(140, 8);
  EXPECT_EQ(limit::StatsDescriptors(none), 0u);
  EXPECT_EQ(limit::StatsDescriptors(many), 140u * 8 * stats::kOpenDaysPerTable);
  EXPECT_EQ(DescriptorsNeeded(cfg, many), DescriptorsNeeded(cfg, none) + 140u * 8 * stats::kOpenDaysPerTable);
  // 900 connections fit in 1,100 descriptors without statistics...
  EXPECT_EQ(FdLimitProblem(cfg, none, FdLimit{1100, 1100}, /*raised=*/true), "");
  // ...and not with 3,360 day files: said, with what to change.
  const std::string said = FdLimitProblem(cfg, many, FdLimit{1100, 1100}, /*raised=*/true);
  EXPECT_NE(said.find("statistics day files of map.xml's <stats> (3360)"), std::string::npos) << said;
  EXPECT_NE(said.find("each worker may need " + std::to_string(DescriptorsNeeded(cfg, many))), std::string::npos)
      << said;
  EXPECT_NE(said.find("keep fewer <stats> tables"), std::string::npos) << said;  // no connection count fits
  // Where some connections still fit, the most that do.
  const std::string some = FdLimitProblem(cfg, many, FdLimit{4000, 4000}, /*raised=*/true);
  EXPECT_NE(some.find("to at most "), std::string::npos) << some;
  const std::string at_most = some.substr(some.find("to at most ") + 11);
  const uint32_t most = static_cast<uint32_t>(std::stoul(at_most));
  EXPECT_EQ(FdLimitProblem(Config(most), many, FdLimit{4000, 4000}, true), "");
}

}  // namespace
}  // namespace frs::server
