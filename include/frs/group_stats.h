// frs/group_stats.h: statistics by key field, as a caller reads them.
//
// A biz that names its key's fields (map.xml <biz fields="app,user,iface">)
// may keep daily statistics per value of some of them (<stats by="app"
// distinct="user"/>): requests, allowed, denied and used units per group
// and calendar day, and an estimate of the distinct values of other fields
// (exact up to 389 values, then within 2 % at 99 % confidence).
// Engine::StatsBy reads them; docs/rules.md says what each figure counts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace frs {

struct GroupStatsQuery {
  std::string biz;        // name or id
  std::string by;         // "app" or "app,iface" (the fields in any order)
  int64_t day = -1;       // days since 1970-01-01 in the server's zone; -1: today
  std::string value;      // "": every group; else only this group
  uint32_t top = 0;       // 0: every group; else the N with the most requests
  bool sketches = false;  // also each distinct sketch's text (for merging elsewhere)
};

struct GroupStat {
  std::string value;  // the by fields' values joined by the biz's separator, or "~other"
  uint64_t requests = 0, allowed = 0, denied = 0, units = 0;
  std::vector<uint64_t> distinct;     // one per GroupStats::distinct_fields
  std::vector<std::string> sketches;  // with GroupStatsQuery::sketches
};

struct GroupStats {
  uint16_t biz_id = 0;
  std::string biz;  // the biz's name
  std::string by;   // as map.xml names it
  uint32_t day = 0;
  std::vector<std::string> distinct_fields;
  uint64_t field_errors = 0;    // keys of that day whose field count was wrong
  uint64_t lost = 0;            // updates not stored for want of disk space
  uint32_t groups = 0;          // groups of their own that day (before top/value)
  std::vector<GroupStat> rows;  // most requests first (ties: by value)
};

// "2026-11-25" for a day number, and back (false for anything else).
std::string DayText(uint32_t day);
bool ParseDayText(std::string_view text, uint32_t* day);

}  // namespace frs
