// The names of a store directory's files (os/store_dir.h).
#include "os/store_dir.h"

#include <gtest/gtest.h>

namespace frs::os::store_dir {
namespace {

TEST(StoreDir, StoreFileNamesRoundTripAndOthersAreNotStoreFiles) {
  EXPECT_EQ(StoreFileName(0), "frs.0.store");
  EXPECT_EQ(StoreFileName(12), "frs.12.store");
  uint32_t i = 99;
  ASSERT_TRUE(ParseStoreFileName(StoreFileName(12), &i));
  EXPECT_EQ(i, 12u);
  for (const char* name : {"frs..store", "frs.x.store", "frs.1.store.tmp", "stats.frs", "frs.1", "xfrs.1.store"})
    EXPECT_FALSE(ParseStoreFileName(name, &i)) << name;
  EXPECT_EQ(In("/d", kDailyStats), "/d/stats.frs");
}

TEST(StoreDir, DayFilesAreToldFromTheirTemporaryAndDamagedNeighbours) {
  EXPECT_EQ(DayFileName("2026-11-25"), "2026-11-25.frs");
  EXPECT_EQ(ReceivedDayFileName("2026-11-25", "00ab"), "2026-11-25.from-00ab.frs");
  EXPECT_EQ(FieldStatsDir("/d", 7, "app"), "/d/stats/7/app");
  EXPECT_EQ(KindOfDayFile("2026-11-25.frs"), DayFile::kOwn);
  EXPECT_EQ(KindOfDayFile("2026-11-25.from-00ab.frs"), DayFile::kReceived);
  const std::string tmp = TempPath("/d/stats/7/app/2026-11-25.frs");
  const std::string name = tmp.substr(tmp.rfind('/') + 1);
  EXPECT_TRUE(IsTempName(name)) << name;
  EXPECT_EQ(KindOfDayFile(name), DayFile::kNone) << name;
  EXPECT_FALSE(IsTempName("2026-11-25.frs"));
  for (const char* other : {"2026-11-25.from-.frs", "2026-11-25.frs.damaged-1-0", "20261125.frs", "2026-11-25.old"})
    EXPECT_EQ(KindOfDayFile(other), DayFile::kNone) << other;
  EXPECT_EQ(DamagedPath("/d/denials.frs", "17"), "/d/denials.frs.damaged-17");
}

TEST(StoreDir, TemporaryNamesAreUniqueWithinAProcess) { EXPECT_NE(TempPath("/d/x"), TempPath("/d/x")); }

}  // namespace
}  // namespace frs::os::store_dir
