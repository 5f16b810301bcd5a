// frs/group_stats.h: statistics by key field, as a caller reads them.
//
// A biz that names its key's fields (map.xml <biz fields="app,user,iface">)
// may keep daily statistics per value of some of them (<stats by="app"
// distinct="user"/>): requests, allowed, denied and used units per group
// and calendar day, and an estimate of the distinct values of other fields
// (exact up to 389 values, then within 2 % at 99 % confidence).
// Engine::StatsBy reads them; docs/rules.md says what each figure counts.
//
// Over HTTP (GET /stats answers it, POST /stats takes a handoff's) a day's
// statistics are XML, written and read here:
//
//   <stats biz="api" by="app" day="2026-11-25" groups="2" field_errors="0">
//     <group value="app7" requests="1520" allowed="1500" denied="20" units="1500" distinct_user="311"/>
//   </stats>
//
// with sketches each group also carries sketch_<field>="...": what
// GroupStatsSum merges across shards (frsctl stat --cluster).
//
// Thread safety: values and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frs/status.h"

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

// A day of statistics by key field as the store directory keeps it
// (stats/<biz id>/<table>/<day>.frs, or a <day>.from-<receipt>.frs file a
// handoff brought): what a handoff carries to another shard.
struct StatsDayFile {
  std::string path;
  uint16_t biz_id = 0;
  std::string table;                         // the folder's name: "app", "app+user,ip"
  std::string by;                            // the table's by fields ("app")
  std::vector<std::string> distinct_fields;  // and its distinct ones ("user", "ip")
  uint32_t day = 0;                          // days since 1970-01-01
};

// Appends `st` as XML (above), with the sketches when the rows carry them.
void AppendGroupStats(const GroupStats& st, std::string* out);
// At least as many bytes as AppendGroupStats writes for `st` (every string
// escaped at its worst), computed without building anything: a writer
// refuses a body beyond its cap before the body exists.
size_t GroupStatsXmlBound(const GroupStats& st);
// Parses what AppendGroupStats wrote (with or without sketches).
Result<GroupStats> ParseGroupStats(std::string_view xml);

// One day's statistics of one table as several shards counted them (each
// read with GroupStatsQuery::sketches), summed into one: counts add up, each
// distinct figure is that of the group's sketches merged (a user seen on two
// shards counts once). The biz, by, day and distinct fields are the first
// part's.
class GroupStatsSum {
 public:
  GroupStatsSum();
  ~GroupStatsSum();
  GroupStatsSum(GroupStatsSum&&) noexcept;
  GroupStatsSum& operator=(GroupStatsSum&&) noexcept;

  // Adds one shard's part. A sketch that cannot be read is an error naming
  // its group, and nothing of the part is added.
  Status Add(const GroupStats& part);
  bool empty() const;
  // The sum, rows most requests first (ties: by value), the `top` first kept
  // (0: all); `groups` counts the groups of their own, as one shard does.
  GroupStats Total(uint32_t top = 0) const;

 private:
  struct Groups;
  GroupStats head_;  // the first part's names, and the summed totals
  bool have_ = false;
  std::unique_ptr<Groups> groups_;
};

// The phrase of a receiver's refusal of a day its table does not keep
// (older than its days="N"): such a day is refused at every try.
inline constexpr std::string_view kStatsDayNotKept = "is not one this table keeps";

// "2026-11-25" for a day number, and back (false for anything else).
std::string DayText(uint32_t day);
bool ParseDayText(std::string_view text, uint32_t* day);

}  // namespace frs
