// stats/field_stats.h: statistics by key field (map.xml <stats>), kept per
// biz, table (`by` plus its distinct fields) and day in GroupTable files
// under the store directory: stats/<biz id>/<table>/<YYYY-MM-DD>.frs.
//
// A decision is counted in today's file of each table of its biz: the key is
// split at the biz's separator, the `by` fields' values (joined by the
// separator) name the group, the distinct fields' values go to its sketches.
// A key with another number of fields counts in each table's field_errors
// instead. The day is the calendar day of the server's time zone, so a
// table's day starts at local midnight; the file of a day older than the
// table's `days` is deleted when the next day's file is made, and only then:
// a clock that steps ahead (a day that does not follow the newest file kept)
// deletes nothing, so one decision under a wrong clock never empties a table.
//
// A day file found damaged (an offset outside its pool, its pages gone under
// a truncation, a header or length that does not hold) is moved aside to
// `<day>.frs.damaged-<pid>-<n>`, what is readable of it is carried into a
// fresh file, the damage is said (the reporter) and counted in `lost`, and
// the day goes on counting.
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
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "frs/group_stats.h"
#include "frs/status.h"
#include "stats/group_table.h"
#include "stats/stats_spec.h"

namespace frs::stats {

// Day files of one table a process keeps open (today and the two before: a
// request decided just before midnight may still be counted just after it),
// each one descriptor and one mapping.
inline constexpr uint32_t kOpenDaysPerTable = 3;

// The words of a merge's refusal of a day its table does not keep (older
// than `days`, or after today): frsctl handoff skips such a day file, as the
// receiver would not keep it, instead of failing on it at every run.
inline constexpr std::string_view kDayNotKept = kStatsDayNotKept;  // frs/group_stats.h

// Where a table says what went wrong with its files (one sentence each).
using StatsReporter = std::function<void(const std::string& what)>;

// Day files a table no longer uses (replaced, dropped, closed), kept alive a
// minute: a request on the fast path may still hold one for a moment. Any
// table's next day, recovery or close frees those old enough, so a table no
// longer counted in does not keep its descriptors.
class RetiredDays {
 public:
  void Add(std::shared_ptr<const void> open) FRS_EXCLUDES(mu_);
  void FreeOld() FRS_EXCLUDES(mu_);

 private:
  Mutex mu_;
  std::vector<std::pair<int64_t, std::shared_ptr<const void>>> retired_ FRS_GUARDED_BY(mu_);
};

// One table of one biz, across days.
class StatsTable {
 public:
  // `retired`: where its replaced day files wait (null: its own). `root`:
  // the store directory `dir` is under; no day file is made, written or
  // deleted while a link leads from it to `dir` (os::store_dir::LinkBelow).
  StatsTable(std::string dir, const StatsSpec& spec, StatsReporter report = nullptr, RetiredDays* retired = nullptr,
             std::string root = {});
  ~StatsTable();
  // Today's file (opened or made at the first call of a day); null when it
  // cannot be (the error is logged once per day by the caller's counters).
  GroupTable* Day(uint32_t day);
  // `damaged` (a file of `day` this process holds) found damaged: moved
  // aside, its readable groups carried over, and the day's file opened
  // anew. Returns the day's file to use now (null when none can be).
  GroupTable* Recover(uint32_t day, GroupTable* damaged) FRS_EXCLUDES(mu_);
  // Recovers `day`'s own file when this process holds it and it is damaged;
  // true when it did.
  bool RecoverIfDamaged(uint32_t day) FRS_EXCLUDES(mu_);
  // Today's file when it is open here already (the fast path), else null.
  GroupTable* Current(uint32_t day) const {
    const Open* c = current_.load(std::memory_order_acquire);
    return c != nullptr && c->day == day ? c->table.get() : nullptr;
  }
  // A day's files to read: its own (today's as mapped here, another day's
  // opened read-only) and those received from leaving shards (WriteReceived);
  // none when the day has no file or is older than `days`. A file found
  // damaged is left out and counted in `*damaged` (a reader never moves or
  // makes a file: the next count of the day sets it aside).
  Result<std::vector<std::shared_ptr<const GroupTable>>> ReadDay(uint32_t day, uint64_t* damaged);
  // Statistics counted elsewhere (a leaving shard's handoff), kept in a file
  // of their own beside the day's, `<day>.from-<receipt hash>.frs`: made
  // whole under a temporary name and linked into place, so a receipt taken
  // once is never taken again (kill -9 at any point: taken whole or not at
  // all) and the day's own file is never touched. `*duplicate`: the receipt
  // had been taken already (nothing done).
  Status WriteReceived(uint32_t day, std::string_view receipt, const std::vector<GroupRow>& rows, uint64_t field_errors,
                       bool* duplicate);
  void Reshape(const StatsSpec& spec);  // a reload's days and groups
  void CloseDays() FRS_EXCLUDES(mu_);   // retires every open day file
  // Updates of this process that found no day file (it could not be made).
  uint64_t unstored() const { return unstored_.load(std::memory_order_relaxed); }
  const std::string& dir() const { return dir_; }

 private:
  struct Open {
    uint32_t day;
    std::shared_ptr<GroupTable> table;
  };
  GroupTable* OpenDay(uint32_t day, bool say) FRS_EXCLUDES(mu_);
  // Deletes the files of days older than `days` before `today`, when
  // `today` follows the newest day kept (a clock stepping by one day).
  void DropOldDays(uint32_t today) FRS_REQUIRES(mu_);
  void Retire(std::unique_ptr<Open> o) FRS_REQUIRES(mu_);
  void Report(const std::string& what) const;
  std::string PathOf(uint32_t day) const;
  // The link that leads below root_ to dir_ ("" none: see the constructor).
  std::string LinkOnTheWay() const;

  const std::string dir_;
  const std::string root_;
  Mutex mu_;
  GroupTableShape shape_ FRS_GUARDED_BY(mu_);
  uint32_t days_ FRS_GUARDED_BY(mu_) = 31;
  std::deque<std::unique_ptr<Open>> open_ FRS_GUARDED_BY(mu_);  // the days written here, oldest first
  uint32_t pruned_today_ FRS_GUARDED_BY(mu_) = 0;               // the day of the last deletion of old days here
  const StatsReporter report_;
  RetiredDays own_retired_;
  RetiredDays* const retired_;
  std::atomic<const Open*> current_{nullptr};
  std::atomic<uint32_t> failed_day_{UINT32_MAX};  // a day whose file could not be made
  std::atomic<int64_t> retry_at_{0};              // steady-clock ticks
  std::atomic<uint64_t> unstored_{0};             // updates that found no file (this process)
  // unstored_ when the day last failed to open (written by the request that
  // failed it; read by the one that sees it open again: a figure for a log
  // line, approximate under races).
  std::atomic<uint64_t> unstored_at_failure_{0};
};

class FieldStats {
 public:
  // `dir`: the store directory ("" keeps no statistics by field).
  FieldStats(std::string dir, bool read_only, StatsReporter report = nullptr)
      : dir_(std::move(dir)), read_only_(read_only), report_(std::move(report)) {}

  // The table of `spec` for biz `biz` (made at first use, then the same
  // object for the engine's life); null when statistics are not kept.
  StatsTable* TableFor(uint16_t biz, const KeyShape& cfg, const StatsSpec& spec);
  bool read_only() const { return read_only_; }
  // Closes the day files of every table but `kept` (a reload dropped them;
  // a request still on the old map reopens what it needs).
  void CloseAllBut(const std::vector<const StatsTable*>& kept);
  // Counts one decision of a biz shaped `cfg` for `key` in its tables (parallel
  // to cfg.stats).
  static void Count(const KeyShape& cfg, std::span<StatsTable* const> tables, std::string_view key,
                    const GroupCounts& delta, uint32_t day);
  // Starts loading what Count will touch that is likely not in the cache
  // (the registers of distinct sketches); changes nothing.
  static void Prefetch(const KeyShape& cfg, std::span<StatsTable* const> tables, std::string_view key, uint32_t day);
  // Splits `key` into cfg.fields.size() fields; false when it has another count.
  static bool SplitKey(const KeyShape& cfg, std::string_view key, std::string_view* fields);
  // Updates of this process, over every table, that found no day file.
  uint64_t Unstored() const FRS_EXCLUDES(mu_);

 private:
  const std::string dir_;
  const bool read_only_;
  const StatsReporter report_;
  RetiredDays retired_;
  mutable Mutex mu_;
  std::map<std::pair<uint16_t, std::string>, std::unique_ptr<StatsTable>> tables_ FRS_GUARDED_BY(mu_);
};

// A day of a table (its own file and any received ones, summed per group with
// sketches merged), answered as GroupStatsQuery asks: counts are read first,
// and the sketches only of the groups `top` or `value` keep.
GroupStats ReadGroupStats(std::span<const std::shared_ptr<const GroupTable>> tables, const GroupStatsQuery& q);

}  // namespace frs::stats
