// stats/daily_stats.h: per-biz counters of the last days, in a small mmap file.
//
// `stats.frs` in the store directory: a 64-byte header (magic, version, the
// layout's sizes and a checksum over them: a file of another layout is
// refused, never reinterpreted), then an open-addressed table of kSlots
// slots keyed by biz id. A slot holds kDays day entries (a ring indexed by
// day % kDays) of four counters: requests, allowed, denied, new keys.
//
// Every counter word carries its day in its top 16 bits and its value in the
// low 48, and is updated by a compare-and-swap that restarts it at the new
// day: no lock, no reset step a dying process could leave half done, and a
// counter never mixes two days. Any number of processes may update one file.
//
// Thread safety: all methods are safe from any thread and process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "frs/biz_stats.h"
#include "frs/status.h"
#include "os/zero_pages.h"

namespace frs::os {
class MappedFile;
}

namespace frs::stats {

class DailyStats {
 public:
  // 1024 bizzes with statistics (more are counted in overflow()): 270 KB, a
  // small part of a store (issue 13: overheads that scale).
  static constexpr uint32_t kSlots = 1024;
  static constexpr uint32_t kDays = 8;
  static constexpr int32_t kNoSlot = -1;
  enum Field : uint32_t { kRequests = 0, kAllowed, kDenied, kNewKeys, kFields };

  // Opens (creating when missing) `dir`/stats.frs; an empty dir keeps the
  // counters in memory only.
  // `read_only`: map an existing file read-only (or keep empty statistics in
  // memory when there is none) and never write: for frsctl on a store it
  // may not write.
  // `check_body`: also check the counters for what no run writes (a header
  // check is always made). The checks of frsd's start and of verify make
  // it; an engine's open does not: workers open one at every respawn, and
  // damage done to a running store's file (a bad disk, a stray write) then
  // stopped the respawned worker, and with it the server, where the
  // counters only need not be trusted (the next start refuses the file).
  static Result<std::unique_ptr<DailyStats>> Open(const std::string& dir, bool read_only = false,
                                                  bool check_body = true);
  ~DailyStats();

  // The slot of `biz`, claimed on first use; kNoSlot when the table is full
  // (then the biz is counted in overflow()).
  int32_t SlotFor(uint16_t biz);
  // Adds to the counters of `day` (days since 1970-01-01, local).
  void Add(int32_t slot, uint32_t day, const uint64_t (&delta)[kFields]);
  // The days of `biz` newer than today - kDays, newest first.
  std::vector<BizStatsDay> Days(uint16_t biz, uint32_t today) const;
  uint64_t overflow() const;
  const std::string& path() const { return path_; }

  // The file layout (defined, with static_asserts, in daily_stats.cc).
  struct Header;
  struct Slot;

 private:
  DailyStats() = default;
  Header* header() const;
  Slot* slot(uint32_t i) const;
  int32_t FindSlot(uint16_t biz) const;

  std::unique_ptr<os::MappedFile> file_;
  os::ZeroPages memory_;
  uint8_t* base_ = nullptr;
  std::string path_;
  bool read_only_ = false;
};

// The deltas of a run of decisions of one biz and day, added to the shared
// counters once when the run ends (at another biz or day, or at Flush):
// a batch's members mostly share both, and each Add is a compare-and-swap
// per counter on a line every worker writes. A tally dies with its batch,
// before the batch's answer is sent.
class StatsTally {
 public:
  explicit StatsTally(DailyStats* stats) : stats_(stats) {}
  StatsTally(const StatsTally&) = delete;
  StatsTally& operator=(const StatsTally&) = delete;
  ~StatsTally() { Flush(); }

  void Add(int32_t slot, uint32_t day, const uint64_t (&delta)[DailyStats::kFields]) {
    if (pending_ && (slot != slot_ || day != day_)) Flush();
    slot_ = slot;
    day_ = day;
    pending_ = true;
    for (uint32_t f = 0; f < DailyStats::kFields; ++f) sum_[f] += delta[f];
  }
  void Flush() {
    if (!pending_) return;
    stats_->Add(slot_, day_, sum_);
    for (uint64_t& v : sum_) v = 0;
    pending_ = false;
  }

 private:
  DailyStats* const stats_;
  bool pending_ = false;
  int32_t slot_ = 0;
  uint32_t day_ = 0;
  uint64_t sum_[DailyStats::kFields] = {};
};

}  // namespace frs::stats
