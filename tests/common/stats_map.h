// tests/common/stats_map.h: the biz of the tests of statistics by key field.
#pragma once

#include <string>

namespace frs::testing {

// "api" (id 7): keys app|user|iface, one rule of `max` uses an hour, counted
// by app, by app and iface, and the distinct users of each app.
inline std::string StatsApiBiz(int max) {
  return "  <biz id=\"7\" name=\"api\" fields=\"app,user,iface\" separator=\"|\">\n"
         "    <rule interval=\"3600\" max=\"" +
         std::to_string(max) +
         "\"/>\n"
         "    <stats by=\"app\"/>\n"
         "    <stats by=\"app,iface\"/>\n"
         "    <stats by=\"app\" distinct=\"user\"/>\n"
         "  </biz>\n";
}

}  // namespace frs::testing
