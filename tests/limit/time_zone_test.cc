#include "limit/time_zone.h"

#include <cctz/civil_time.h>
#include <cctz/time_zone.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace frs::limit {
namespace {

std::shared_ptr<const TimeZone> Zone(const char* name) {
  auto z = TimeZone::Load(name);
  EXPECT_TRUE(z.ok()) << z.status().ToString();
  return z.value();
}

TEST(TimeZone, UtcNeedsNoFile) {
  auto z = TimeZone::Load("UTC");
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z.value()->OffsetAt(1795305600), 0);
  EXPECT_EQ(z.value()->LocalDay(1795305600), 1795305600 / 86400);
}

TEST(TimeZone, ShanghaiIsEightHoursAhead) {
  auto sh = Zone("Asia/Shanghai");
  EXPECT_EQ(sh->OffsetAt(1795305600), 8 * 3600);
  // Local midnight of 2026-11-23 is 2026-11-22 16:00 UTC.
  EXPECT_EQ(sh->DayStart(1795305600 / 86400 + 1), 1795305600 + 16 * 3600);
}

TEST(TimeZone, NewYorkDstTransitions) {
  auto ny = Zone("America/New_York");
  const int64_t spring = 1772953200;  // 2026-03-08 07:00 UTC = 02:00 EST -> 03:00 EDT
  EXPECT_EQ(ny->OffsetAt(spring - 1), -5 * 3600);
  EXPECT_EQ(ny->OffsetAt(spring), -4 * 3600);
  const int64_t fall = 1793512800;  // 2026-11-01 06:00 UTC = 02:00 EDT -> 01:00 EST
  EXPECT_EQ(ny->OffsetAt(fall - 1), -4 * 3600);
  EXPECT_EQ(ny->OffsetAt(fall), -5 * 3600);
  // 02:30 on the spring day never happens: the gap's end.
  const int64_t mar8_local = (1772946000 - 5 * 3600);  // 2026-03-08 00:00 local, as local seconds
  EXPECT_EQ(ny->LocalToUtc(mar8_local + 2 * 3600 + 1800), spring);
  // 01:30 on the fall day happens twice: the first one (EDT).
  const int64_t nov1_local = 1793505600 - 4 * 3600;
  EXPECT_EQ(ny->LocalToUtc(nov1_local + 3600 + 1800), fall - 1800);
  EXPECT_EQ(ny->DayStart(ny->LocalDay(fall)), 1793505600);
  EXPECT_EQ(ny->DayStart(ny->LocalDay(fall) + 1) - ny->DayStart(ny->LocalDay(fall)), 25 * 3600);
}

TEST(TimeZone, FooterRuleCoversYearsPastTheTable) {
  auto ny = Zone("America/New_York");
  // 2100-07-01 12:00 UTC: summer time by the POSIX rule.
  EXPECT_EQ(ny->OffsetAt(4118155200), -4 * 3600);
  // 2100-01-01 12:00 UTC: winter.
  EXPECT_EQ(ny->OffsetAt(4102488000), -5 * 3600);
}

TEST(TimeZone, FooterRuleHoldsPastTheTable) {
  auto ny = Zone("America/New_York");
  // 2300-07-01 12:00 UTC: summer time still, long after the table's last year.
  EXPECT_EQ(ny->OffsetAt(10429473600), -4 * 3600);
  // 2300-01-01 12:00 UTC: winter.
  EXPECT_EQ(ny->OffsetAt(10413835200), -5 * 3600);
  // Local midnight of 2300-07-01 is 04:00 UTC.
  EXPECT_EQ(ny->DayStart(ny->LocalDay(10429473600)), 10429473600 - 8 * 3600);
}

// The table Load builds is a copy of cctz's answers: it must agree with cctz
// itself, before, inside and after it, in zones with odd rules (a 30-minute
// DST, negative DST, a DST suspended every Ramadan, a half-hour offset).
TEST(TimeZone, AgreesWithCctzFrom1900To2400) {
  using Instant = cctz::time_point<cctz::seconds>;
  const cctz::civil_second epoch(1970, 1, 1, 0, 0, 0);
  for (const char* name : {"America/New_York", "Australia/Lord_Howe", "Europe/Dublin", "Africa/Casablanca",
                           "America/Santiago", "Asia/Kolkata", "Etc/GMT+5"}) {
    SCOPED_TRACE(name);
    auto z = Zone(name);
    cctz::time_zone c;
    ASSERT_TRUE(cctz::load_time_zone(name, &c));
    int failures = 0;
    auto same_offset = [&](int64_t t) {
      const int32_t want = c.lookup(Instant(cctz::seconds(t))).offset;
      if (z->OffsetAt(t) == want) return;
      ADD_FAILURE() << "offset at " << t << ": " << z->OffsetAt(t) << ", cctz " << want;
      ++failures;
    };
    // Local wall time back to UTC: the earlier of a repeat, the end of a gap.
    auto same_instant = [&](int64_t local) {
      const auto cl = c.lookup(epoch + local);
      const int64_t want =
          (cl.kind == cctz::time_zone::civil_lookup::SKIPPED ? cl.trans : cl.pre).time_since_epoch().count();
      if (z->LocalToUtc(local) == want) return;
      ADD_FAILURE() << "local " << local << ": " << z->LocalToUtc(local) << ", cctz " << want;
      ++failures;
    };
    // Around every change: both sides, and local times across its gap or repeat.
    Instant t(cctz::seconds(-2208988800));  // 1900
    cctz::time_zone::civil_transition change;
    while (failures < 5 && c.next_transition(t, &change) && t < Instant(cctz::seconds(13569465600))) {  // 2400
      t = c.lookup(change.to).trans;
      same_offset(t.time_since_epoch().count() - 1);
      same_offset(t.time_since_epoch().count());
      const int64_t from = change.from - epoch, to = change.to - epoch;
      for (int64_t local = std::min(from, to) - 3600; local <= std::max(from, to) + 3600; local += 900) {
        same_instant(local);
      }
    }
    // And between changes.
    for (int64_t u = -2208988800; u < 13569465600 && failures < 5; u += 864001) {
      same_offset(u);
      same_instant(u + 7 * 3600);
    }
  }
}

TEST(TimeZone, CorruptFileIsNamedInTheError) {
  const auto dir = std::filesystem::temp_directory_path() / ("frs_tz_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "Bad");
  std::ofstream(dir / "Bad" / "Zone") << "TZif2 but nothing after the magic";
  const char* old = std::getenv("TZDIR");
  const std::string saved = old ? old : "";
  ::setenv("TZDIR", dir.c_str(), 1);
  auto z = TimeZone::Load("Bad/Zone");
  auto missing = TimeZone::Load("Bad/Missing");
  if (old) ::setenv("TZDIR", saved.c_str(), 1);
  else ::unsetenv("TZDIR");
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find((dir / "Bad" / "Zone").string()), std::string::npos) << z.status().ToString();
  EXPECT_TRUE(missing.status().IsNotFound());
  EXPECT_NE(missing.status().message().find("unknown time zone 'Bad/Missing'"), std::string::npos);
}

// A zone is read once per process: the file replaced after (a tzdata
// upgrade) changes nothing until a restart, so a worker respawned by the
// master, which inherits what the master read, counts as the others do.
TEST(TimeZone, AZoneIsReadOncePerProcess) {
  const auto dir = std::filesystem::temp_directory_path() / ("frs_tz_once_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "Test");
  std::filesystem::copy_file("/usr/share/zoneinfo/Asia/Kolkata", dir / "Test" / "Zone");
  const char* old = std::getenv("TZDIR");
  const std::string saved = old ? old : "";
  ::setenv("TZDIR", dir.c_str(), 1);
  auto first = TimeZone::Load("Test/Zone");
  std::filesystem::copy_file("/usr/share/zoneinfo/Asia/Tokyo", dir / "Test" / "Zone",
                             std::filesystem::copy_options::overwrite_existing);
  auto again = TimeZone::Load("Test/Zone");
  if (old) ::setenv("TZDIR", saved.c_str(), 1);
  else ::unsetenv("TZDIR");
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first.value(), again.value());
  EXPECT_EQ(again.value()->OffsetAt(1795305600), 5 * 3600 + 1800);
}

// tzdata's right/ zones count leap seconds: their refusal says so, not that
// the file is no TZif file.
TEST(TimeZone, AZoneWithLeapSecondsIsRefusedAsSuch) {
  std::string tzif("TZif2", 5);
  tzif.append(15, '\0');
  const unsigned char counts[24] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,   // isutcnt, isstdcnt, leapcnt 1
                                    0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 4};  // timecnt 0, typecnt 1, charcnt 4
  tzif.append(reinterpret_cast<const char*>(counts), sizeof counts);
  tzif.append("\0\0\0\0\0\0", 6);  // one type: UTC, not DST, its abbreviation at 0
  tzif.append("UTC\0", 4);
  tzif.append("\x04\xb2\x58\x00\x00\x00\x00\x01", 8);  // a leap second in 1972
  auto z = TimeZone::FromTzif("right/UTC", tzif);
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find("counts leap seconds"), std::string::npos) << z.status().ToString();
  // A "slim" file keeps its counts in the second header alone.
  std::string slim("TZif2", 5);
  slim.append(39, '\0');            // the first header: every count 0, no block
  slim.append(tzif.substr(0, 44));  // the second, with its leap second
  slim.append(tzif.substr(44));
  auto z2 = TimeZone::FromTzif("right/UTC", slim);
  ASSERT_FALSE(z2.ok());
  EXPECT_NE(z2.status().message().find("counts leap seconds"), std::string::npos) << z2.status().ToString();
  auto damaged = TimeZone::FromTzif("x", std::string("TZif2", 5) + std::string(60, '\0'));
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(damaged.status().message(), "a damaged TZif file");
}

TEST(TimeZone, RejectsUnknownAndUnsafeNames) {
  EXPECT_TRUE(TimeZone::Load("Mars/Olympus_Mons").status().IsNotFound());
  EXPECT_FALSE(TimeZone::Load("../etc/passwd").ok());
  EXPECT_FALSE(TimeZone::Load("/etc/localtime").ok());
  EXPECT_FALSE(TimeZone::FromTzif("x", "not a tzif file at all, clearly not").ok());
}

}  // namespace
}  // namespace frs::limit
