// limit/time_zone.h: an IANA time zone, read from the system's TZif files by
// cctz (libcctz-dev).
//
// GCC 12's libstdc++ has no std::chrono::locate_zone, and TZ/tzset is
// process-global. cctz parses the TZif file and the POSIX TZ rule of its
// footer. Calendar windows ask the zone three times per decision, and asking
// cctz costs three to six times the instructions of a binary search
// (docs/rules.md has the figures), so Load() copies cctz's changes of offset
// up to the end of kTableUntilYear into a sorted vector: a lookup is one
// binary search over it. Later instants ask cctz directly.
//
// Thread safety: immutable after Load(); share freely.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frs/status.h"

namespace frs::limit {

class TimeZone {
 public:
  static constexpr int kTableUntilYear = 2200;

  // "UTC" (and "") never need a file. Otherwise NAME is read from
  // $TZDIR/NAME, or /usr/share/zoneinfo/NAME.
  static Result<std::shared_ptr<const TimeZone>> Load(std::string_view name);
  static std::shared_ptr<const TimeZone> Utc();
  // Builds a zone from TZif bytes (tests, and Load).
  static Result<std::shared_ptr<const TimeZone>> FromTzif(std::string_view name, std::string_view bytes);

  ~TimeZone();
  TimeZone(const TimeZone&) = delete;
  TimeZone& operator=(const TimeZone&) = delete;

  const std::string& name() const { return name_; }

  // Seconds east of UTC in force at `utc_s`.
  int32_t OffsetAt(int64_t utc_s) const;
  int64_t ToLocal(int64_t utc_s) const { return utc_s + OffsetAt(utc_s); }
  // The UTC instant at which local wall time `local_s` occurs. A repeated
  // local time (fall back) gives the earlier instant; a skipped one (spring
  // forward) gives the instant the gap ends.
  int64_t LocalToUtc(int64_t local_s) const;
  // Days since 1970-01-01 in this zone.
  int64_t LocalDay(int64_t utc_s) const;
  // The UTC instant of local 00:00 of local day `day` (or the first instant
  // of that day when midnight is skipped).
  int64_t DayStart(int64_t day) const { return LocalToUtc(day * 86400); }
  // The latest change of offset at or before `utc_s` and the offset in force
  // just before it; false when there is none.
  bool TransitionAtOrBefore(int64_t utc_s, int64_t* at, int32_t* offset_before) const;

 private:
  struct Cctz;  // the zone as cctz holds it, for instants past the table
  TimeZone();
  struct Transition {
    int64_t at;      // UTC seconds
    int32_t offset;  // in force from `at`
  };
  std::string name_;
  int32_t initial_offset_ = 0;           // before the first transition
  std::vector<Transition> transitions_;  // sorted by `at`, each a change of offset
  int64_t table_end_ = INT64_MAX;        // transitions_ holds every change before this instant
  std::unique_ptr<const Cctz> cctz_;
};

}  // namespace frs::limit
