// stats/statistics.h: everything an engine counts of its decisions, as one
// object: the daily totals per biz (stats.frs, stats/daily_stats.h), the keys
// denied in the last minutes (denials.frs, stats/recent_denials.h) and the
// statistics by key field (stats/<biz id>/<table>/<day>.frs,
// stats/field_stats.h), all in the store directory.
//
// The engine attaches each biz of a map it installs (its daily slot and its
// tables by field, BizCounters), counts each decided request once its locks
// are released (Count), and answers the operator's reads and a handoff's
// merges through it. Which file frsd refuses or moves aside at start, and
// which frsctl verify reports, is limit/side_files.h.
//
// Thread safety: every method may run from any thread and process at once,
// but Attach and KeepOnly, which the engine calls under its map's mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frs/biz_stats.h"
#include "frs/group_stats.h"
#include "frs/status.h"
#include "stats/daily_stats.h"
#include "stats/field_stats.h"
#include "stats/recent_denials.h"
#include "stats/stats_spec.h"

namespace frs::stats {

// A biz's place in the statistics, made when a map is installed.
struct BizCounters {
  int32_t slot = DailyStats::kNoSlot;  // its daily totals
  std::vector<StatsTable*> tables;     // parallel to its <stats>; empty when none is kept
};

// One decided request, as it is counted.
struct Counted {
  bool allowed = false;  // shadow mode's would-deny counts as denied
  bool created = false;  // its node was made by it
  bool denial = false;   // a denial (not an error): its key goes to the recent denials
  uint64_t units = 0;    // the uses it recorded (statistics by field)
};

class Statistics {
 public:
  // `dir`: the store directory ("": in memory only, nothing by field).
  // `read_only`: reads the files there are and never writes (frsctl on a
  // store it may not write). A damaged stats.frs is an error; a denials.frs
  // that cannot be opened leaves the recent denials out (a view for
  // operators: the engine still serves). `report`: where a table by field
  // says what went wrong with its files.
  static Result<std::unique_ptr<Statistics>> Open(const std::string& dir, bool read_only, StatsReporter report);

  // The counters of biz `id` shaped `keys` (its daily slot claimed, its
  // tables by field made or found).
  BizCounters Attach(uint16_t id, const KeyShape& keys);
  // Closes the day files of every table but those of `kept` (a reload
  // dropped the others; a request still on the old map reopens what it needs).
  void KeepOnly(std::span<const BizCounters* const> kept);

  // Starts loading what Count will touch that is likely not in the cache
  // (the registers of distinct sketches); changes nothing.
  static void Prefetch(const BizCounters& b, const KeyShape& keys, std::string_view key, uint32_t day);
  // Counts one decided request of biz `id` on `day` (local days since
  // 1970-01-01) at `now_s`. With a tally (a batch), the daily totals are
  // added when it flushes.
  void Count(const BizCounters& b, uint16_t id, const KeyShape& keys, std::string_view key, const Counted& c,
             uint32_t day, int64_t now_s, StatsTally* tally = nullptr);

  // Updates of this process that statistics by field could not store (a day
  // file that could not be made): frs_stats_unstored_total.
  uint64_t FieldUnstored() const { return fields_ ? fields_->Unstored() : 0; }

  // The days of biz `id` newer than today - DailyStats::kDays, newest first.
  std::vector<BizStatsDay> Days(uint16_t id, uint32_t today) const { return daily_->Days(id, today); }
  // The daily totals, for a batch's tally.
  DailyStats* daily() const { return daily_.get(); }

  // The table of `name`'s <stats> whose by fields are q.by, read as q asks
  // (biz, biz_id left to the caller). A day file found damaged is left out
  // and counted in `lost`; damage met while reading sets it aside and reads
  // again.
  Result<GroupStats> ReadBy(const BizCounters& b, std::string_view name, const KeyShape& keys, const GroupStatsQuery& q,
                            uint32_t today) const;
  // Merges `in` (a day of another shard's table, under `receipt`) into the
  // table of `name` whose by fields are in.by; a receipt already taken is
  // taken once. `now_ms` names a merge that came without a receipt.
  Status MergeBy(const BizCounters& b, std::string_view name, const KeyShape& keys, const GroupStats& in,
                 std::string_view receipt, uint32_t today, int64_t now_ms) const;

 private:
  Statistics(std::unique_ptr<DailyStats> daily, std::unique_ptr<RecentDenials> denials,
             std::unique_ptr<FieldStats> fields)
      : daily_(std::move(daily)), denials_(std::move(denials)), fields_(std::move(fields)) {}

  const std::unique_ptr<DailyStats> daily_;
  const std::unique_ptr<RecentDenials> denials_;  // null: the table could not be opened
  const std::unique_ptr<FieldStats> fields_;
};

}  // namespace frs::stats
