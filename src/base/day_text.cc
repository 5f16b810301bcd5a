// Calendar dates of day numbers (frs/group_stats.h).
#include <cstdio>
#include <string>
#include <string_view>

#include "frs/group_stats.h"

namespace frs {

// Days since 1970-01-01 to a civil date and back (proleptic Gregorian):
// shifting the year to start in March puts the leap day last, so each
// 400-year era has the same shape.
std::string DayText(uint32_t day) {
  int64_t z = static_cast<int64_t>(day) + 719468;
  const int64_t era = z / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const int64_t m = mp < 10 ? mp + 3 : mp - 9;
  const int64_t y = yoe + era * 400 + (m <= 2);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d", static_cast<int>(y), static_cast<int>(m), static_cast<int>(d));
  return buf;
}

bool ParseDayText(std::string_view text, uint32_t* day) {
  if (text.size() != 10 || text[4] != '-' || text[7] != '-') return false;
  auto num = [&](size_t at, size_t n, int64_t* out) {
    *out = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      *out = *out * 10 + (text[i] - '0');
    }
    return true;
  };
  int64_t y, m, d;
  if (!num(0, 4, &y) || !num(5, 2, &m) || !num(8, 2, &d) || y < 1970 || m < 1 || m > 12 || d < 1) return false;
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (d > kDays[m - 1] + (m == 2 && leap)) return false;
  const int64_t yy = y - (m <= 2);
  const int64_t era = yy / 400;
  const int64_t yoe = yy - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  *day = static_cast<uint32_t>(era * 146097 + doe - 719468);
  return true;
}

}  // namespace frs
