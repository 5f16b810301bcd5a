// stats/group_table.h: one day of one <stats by="..."> of a biz, in its own
// mmap file: the groups (values of the `by` fields) with their counters and
// distinct-value sketches.
//
// File `stats/<biz id>/<by>[+<distinct>]/<YYYY-MM-DD>.frs` in the store
// directory. Layout (all little-endian, offsets in 64-byte units):
//
//   header   256 bytes: magic, version, geometry (index slots, group bound,
//            distinct fields, reserved bytes), a checksum over them; then the
//            shared words: groups claimed, allocation point, file bytes,
//            field errors, lost updates, and the `~other` record.
//   index    index_slots x uint32: record offsets, open addressing on the
//            value's hash (0: empty), at most half full.
//   pool     records (GroupRecord + value bytes, rounded to 64) and sketch
//            blocks, allocated by one atomic add on the allocation point.
//
// The file is mapped at its largest size (header + index + the bound on its
// pool) and grows on disk in 1 MB steps as the pool does (posix_fallocate),
// so a table of a few groups takes a few pages and one of 100,000 groups has
// room for all of them. Nothing is ever freed: a day's file is deleted whole
// once it is older than `days`.
//
// Every update is one atomic step: counters are atomic adds, a record is
// written in full before a compare-and-swap publishes its offset in the
// index, a sketch grows as stats/distinct_sketch.h says. A process killed at
// any instruction leaves a valid file (at worst a record or block allocated
// and never published: space, not counts), and any number of processes may
// update one file at once.
//
// Thread safety: all methods are safe from any thread and process.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frs/status.h"
#include "os/unique_fd.h"
#include "stats/distinct_sketch.h"

namespace frs::stats {

inline constexpr uint32_t kMaxDistinctFields = 2;
inline constexpr std::string_view kOtherGroup = "~other";

// What a group counted on its day.
struct GroupCounts {
  uint64_t requests = 0, allowed = 0, denied = 0, units = 0;
};

// One group read out of a table.
struct GroupRow {
  std::string value;
  GroupCounts counts;
  std::vector<sketch::Sketch> distinct;  // one per distinct field
};

struct GroupTableShape {
  // At most this many values get a group of their own (a few more when
  // writers race at the bound); the rest count in "~other".
  uint32_t groups = 100000;
  uint32_t distinct = 0;  // distinct fields (0..kMaxDistinctFields)
};

class GroupTable {
 public:
  enum class Mode { kWrite, kRead };
  // Opens `path`, creating it (and its directory) in kWrite mode when
  // missing. A file written in another shape (a changed <stats groups>) is
  // used in the shape it has: the new one applies from the next day. A file
  // whose header is damaged, or shorter than its header says (truncated), is
  // refused (kRead) or, in kWrite mode, moved aside (MoveAside) and started
  // anew: never reinterpreted; `*set_aside` then says so in a sentence. A
  // mapping the SIGBUS guard cannot watch is refused, never made: a
  // truncation under it would kill the process. A kRead table keeps no
  // descriptor once mapped.
  static Result<std::unique_ptr<GroupTable>> Open(const std::string& path, const GroupTableShape& shape, Mode mode,
                                                  std::string* set_aside = nullptr);
  ~GroupTable();

  // The file's bytes can no longer be trusted: an offset pointed outside the
  // pool, its pages vanished under the mapping (a truncation: the SIGBUS
  // guard replaced them with zeros), or another process moved it aside.
  // Add and Merge then store nothing: the caller moves it aside (MoveAside)
  // and opens the day anew.
  bool damaged() const;
  // Moves this (damaged) file to `path`.damaged-<pid>-<n>, unless another
  // process has already replaced the file at `path`, and marks it so that
  // every process mapping it sees damaged(). True when this call moved it
  // (`*aside`: where to); the mover salvages what is readable.
  Result<bool> MoveAside(std::string* aside);
  void AddLost(uint64_t n);

  // Counts one decision for `value` (at most kMaxKeyBytes bytes);
  // `distinct_codes` holds shape.distinct codes (sketch::CodeOf). Returns
  // false when the update could not be stored (the disk is full: the update
  // is counted in lost()).
  bool Add(std::string_view value, const GroupCounts& delta, const uint32_t* distinct_codes);
  // Starts loading the registers an Add of (value, codes) would update, when
  // the group exists and its sketches are dense; changes nothing.
  void Prefetch(std::string_view value, const uint32_t* distinct_codes) const;
  // Folds a row counted elsewhere (a handoff) into the group of row.value.
  bool Merge(const GroupRow& row);
  // Gives the disk back beyond what is allocated (to the next 4 KB): for a
  // table written once and only read after (a handoff's received file),
  // which would otherwise keep its 1 MB growth step for a few groups. Only
  // while no other process writes it; it may still grow after.
  Status Trim();
  void AddFieldError() { AddFieldErrors(1); }
  void AddFieldErrors(uint64_t n);

  // Every group, in no order (`~other` last when it counted anything);
  // without `sketches`, the counts only (cheap: no 16 KB copy per group).
  std::vector<GroupRow> Rows(bool sketches = true) const;
  // One group; false when the table has none of that value.
  bool Row(std::string_view value, GroupRow* out) const;

  uint64_t field_errors() const;
  uint64_t lost() const;    // updates not stored (no space), and damaged files set aside
  uint32_t groups() const;  // values with their own group
  const GroupTableShape& shape() const { return shape_; }
  const std::string& path() const { return path_; }

  struct Header;
  struct Record;

 private:
  class Blocks;
  GroupTable() = default;
  // A new day's file at `path`, of the geometry `want`, holding the ~other
  // record: made whole under a temporary name, then linked into place.
  static Status MakeDayFile(const std::string& path, const Header& want, const GroupTableShape& shape);
  Header* header() const { return reinterpret_cast<Header*>(base_); }
  // Null (and the table marked broken) for an offset outside the pool.
  Record* RecordAt(uint32_t offset) const;
  uint8_t* BlockAt(uint32_t offset, uint32_t bytes) const;
  bool InPool(uint64_t offset, uint64_t bytes) const;
  uint32_t* index() const;
  // The record of `value`, created when missing; null when it cannot be.
  Record* FindOrAdd(std::string_view value, uint64_t hash);
  const Record* Find(std::string_view value, uint64_t hash) const;
  uint32_t Allocate(uint32_t bytes);
  GroupRow RowOf(const Record& r, bool sketches) const;
  bool AddTo(Record* r, const GroupCounts& delta, const uint32_t* codes);

  std::string path_;
  GroupTableShape shape_;
  os::UniqueFd fd_;
  uint8_t* base_ = nullptr;
  uint64_t mapped_ = 0;
  uint32_t index_slots_ = 0;
  uint64_t pool_start_ = 0;
  uint32_t other_ = 0;
  bool read_only_ = false;
  int guard_ = -1;
  mutable std::atomic<bool> broken_{false};
  std::unique_ptr<Blocks> blocks_;
};

// Checks a statistics day file whole without mapping it for writing: its
// header (magic, version, checksum, geometry), its length against the
// header, and every offset of its index, records and sketches against the
// pool. OK, or Corruption naming the file and the first thing wrong (NotFound
// when there is no file). Shared by the runtime and `frsctl verify`.
Status CheckDayFile(const std::string& path);

}  // namespace frs::stats
