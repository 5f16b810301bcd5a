// frs/calendar.h over the engine's own zone table and window arithmetic,
// so that what a caller is told is what a calendar rule counts.
#include "frs/calendar.h"

#include "limit/calendar_window.h"
#include "limit/time_zone.h"

namespace frs {

Result<CalendarZone> CalendarZone::Load(std::string_view name) {
  auto zone = limit::TimeZone::Load(name);
  if (!zone.ok()) return zone.status();
  return CalendarZone(std::move(zone).value());
}

void CalendarZone::WindowOf(uint32_t interval, int64_t t, int64_t* start, int64_t* end) const {
  limit::CalendarWindow::WindowOf(*zone_, interval, t, start, end);
}

int64_t CalendarZone::DayOf(int64_t t) const { return zone_->LocalDay(t); }

}  // namespace frs
