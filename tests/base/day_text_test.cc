// Day numbers as dates (base/day_text.cc, declared in frs/group_stats.h):
// the names of the daily statistics' files.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>

#include "frs/group_stats.h"

namespace frs {
namespace {

TEST(DayText, NamesKnownDays) {
  const std::pair<uint32_t, const char*> days[] = {
      {0, "1970-01-01"},     {31, "1970-02-01"},    {365, "1971-01-01"},
      {10956, "1999-12-31"}, {11016, "2000-02-29"},                         // divisible by 400: a leap year
      {20417, "2025-11-25"}, {47540, "2100-02-28"}, {47541, "2100-03-01"},  // divisible by 100 only: no 29th
  };
  for (const auto& [day, text] : days) EXPECT_EQ(DayText(day), text) << day;
}

TEST(DayText, EveryDayRoundTrips) {
  // 1970 to 2243: every month length, and the century years 2000, 2100 and 2200.
  for (uint32_t day = 0; day < 100000; ++day) {
    const std::string text = DayText(day);
    uint32_t back = ~0u;
    ASSERT_TRUE(ParseDayText(text, &back)) << text;
    ASSERT_EQ(back, day) << text;
  }
}

TEST(DayText, ParseRefusesWhatIsNotADate) {
  uint32_t day = 7;
  for (const char* bad :
       {"", "2025-11-2", "2025-11-250", "2025/11/25", "2025-13-01", "2025-00-10", "2025-11-00", "2025-11-31",
        "2025-02-29", "2100-02-29", "1969-12-31", "20a5-11-25", "2025-1x-25", " 025-11-25", "+025-11-25"}) {
    EXPECT_FALSE(ParseDayText(bad, &day)) << bad;
  }
  EXPECT_EQ(day, 7u) << "a refused text leaves the day alone";
  ASSERT_TRUE(ParseDayText("2024-02-29", &day));
  EXPECT_EQ(DayText(day), "2024-02-29");
}

}  // namespace
}  // namespace frs
