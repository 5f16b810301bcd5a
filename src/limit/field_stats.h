// limit/field_stats.h: statistics by key field (map.xml <stats>), kept per
// biz, table (`by` plus its distinct fields) and day in GroupTable files
// under the store directory: stats/<biz id>/<table>/<YYYY-MM-DD>.frs.
//
// A decision is counted in today's file of each table of its biz: the key is
// split at the biz's separator, the `by` fields' values (joined by the
// separator) name the group, the distinct fields' values go to its sketches.
// A key with another number of fields counts in each table's field_errors
// instead. The day is the calendar day of the server's time zone, so a
// table's day starts at local midnight; the file of a day older than the
// table's `days` is deleted when a newer day's file is made.
//
// Tables outlive reloads: a reload that keeps a table (same biz id, `by` and
// distinct fields) goes on counting into the same files, whatever else it
// changes; a changed `groups` applies from the next day.
//
// Thread safety: Count and Read may run from any thread and process at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "frs/group_stats.h"
#include "frs/status.h"
#include "limit/group_table.h"
#include "limit/map_config.h"

namespace frs::limit {

// One table of one biz, across days.
class StatsTable {
 public:
  StatsTable(std::string dir, const StatsSpec& spec);
  // Today's file (opened or made at the first call of a day); null when it
  // cannot be (the error is logged once per day by the caller's counters).
  GroupTable* Day(uint32_t day);
  // A day's file to read: today's own, or opened read-only; NotFound when
  // that day has no file.
  Result<std::shared_ptr<const GroupTable>> ReadDay(uint32_t day);
  void Reshape(const StatsSpec& spec);  // a reload's days and groups
  const std::string& dir() const { return dir_; }

 private:
  struct Open {
    uint32_t day;
    std::shared_ptr<GroupTable> table;
  };
  GroupTable* OpenDay(uint32_t day);
  void DropOldDays(uint32_t today) const;
  std::string PathOf(uint32_t day) const;

  const std::string dir_;
  std::mutex mu_;
  GroupTableShape shape_;      // GUARDED_BY(mu_)
  uint32_t days_ = 31;         // GUARDED_BY(mu_)
  std::deque<std::unique_ptr<Open>> open_;  // GUARDED_BY(mu_): the last days written, oldest first
  std::atomic<const Open*> current_{nullptr};
};

class FieldStats {
 public:
  // `dir`: the store directory ("" keeps no statistics by field).
  FieldStats(std::string dir, bool read_only) : dir_(std::move(dir)), read_only_(read_only) {}

  // The table of `spec` for biz `biz` (made at first use, then the same
  // object for the engine's life); null when statistics are not kept.
  StatsTable* TableFor(uint16_t biz, const BizConfig& cfg, const StatsSpec& spec);
  // Counts one decision of `cfg`'s `key` in its tables (parallel to cfg.stats).
  static void Count(const BizConfig& cfg, std::span<StatsTable* const> tables, std::string_view key,
                    const GroupCounts& delta, uint32_t day);
  // Splits `key` into cfg.fields.size() fields; false when it has another count.
  static bool SplitKey(const BizConfig& cfg, std::string_view key, std::string_view* fields);

 private:
  const std::string dir_;
  const bool read_only_;
  std::mutex mu_;
  std::map<std::pair<uint16_t, std::string>, std::unique_ptr<StatsTable>> tables_;  // GUARDED_BY(mu_)
};

// A table's day, answered as GroupStatsQuery asks (top, value, sketches).
GroupStats ReadGroupStats(const GroupTable& table, const GroupStatsQuery& q);

}  // namespace frs::limit
