// frs/calendar.h: calendar windows in a time zone, as a calendar rule of
// map.xml counts them (docs/rules.md, "Calendar windows"): the boundaries
// are the instants at which local wall time is a multiple of the interval
// (3600: hours, 86400: local midnights; weeks start on Monday). A local
// time that happens twice is a boundary at its first occurrence, one that
// never happens at the end of the gap.
//
// Usage:
//   auto zone = frs::CalendarZone::Load("Europe/Paris");
//   if (!zone.ok()) ...;
//   int64_t start, end;
//   zone.value().WindowOf(86400, time(nullptr), &start, &end);  // today, Paris time
//
// Thread safety: immutable after Load(); copies share the zone; share freely.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "frs/status.h"

namespace frs {

namespace limit {
class TimeZone;
}

class CalendarZone {
 public:
  // An IANA name ("UTC" needs no file), read from $TZDIR or
  // /usr/share/zoneinfo; an unknown name is InvalidArgument naming it.
  static Result<CalendarZone> Load(std::string_view name);

  // The window [*start, *end) of `interval` seconds that holds the unix
  // second `t`, both ends in unix seconds.
  void WindowOf(uint32_t interval, int64_t t, int64_t* start, int64_t* end) const;

  // The local day of the unix second `t`, as days since 1970-01-01 (the day
  // numbers of frs/group_stats.h).
  int64_t DayOf(int64_t t) const;

 private:
  explicit CalendarZone(std::shared_ptr<const limit::TimeZone> zone) : zone_(std::move(zone)) {}
  std::shared_ptr<const limit::TimeZone> zone_;
};

}  // namespace frs
