// Calendar dates of day numbers (frs/group_stats.h), by cctz's civil days.
#include <cctz/civil_time.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "frs/group_stats.h"

namespace frs {
namespace {
const cctz::civil_day kEpoch(1970, 1, 1);
}  // namespace

std::string DayText(uint32_t day) {
  const cctz::civil_day d = kEpoch + day;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04lld-%02d-%02d", static_cast<long long>(d.year()), d.month(), d.day());
  return buf;
}

bool ParseDayText(std::string_view text, uint32_t* day) {
  if (text.size() != 10 || text[4] != '-' || text[7] != '-') return false;
  auto num = [&](size_t at, size_t n, int* out) {
    *out = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      *out = *out * 10 + (text[i] - '0');
    }
    return true;
  };
  int y, m, d;
  if (!num(0, 4, &y) || !num(5, 2, &m) || !num(8, 2, &d) || y < 1970) return false;
  // cctz normalizes a date that does not exist (2025-02-29 is 2025-03-01):
  // the text names a day only when its fields come back unchanged.
  const cctz::civil_day c(y, m, d);
  if (c.year() != y || c.month() != m || c.day() != d) return false;
  *day = static_cast<uint32_t>(c - kEpoch);
  return true;
}

}  // namespace frs
