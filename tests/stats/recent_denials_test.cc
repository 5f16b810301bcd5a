#include "stats/recent_denials.h"

#include <gtest/gtest.h>

#include <iterator>
#include <set>
#include <string>
#include <utility>

#include "common/temp_dir.h"

namespace frs::stats {
namespace {

using frs::testing::TempDir;

constexpr int64_t kDenyT0 = 1795600000;
constexpr int64_t kDenyMin0 = kDenyT0 - kDenyT0 % 60;  // a minute's start

TEST(RecentDenials, CountsKeysWithTheirTextMostDeniedFirst) {
  TempDir dir;
  auto t = RecentDenials::Open(dir.path(), false);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (int i = 0; i < 5; ++i) t.value()->Count(1, "ip:10.0.0.7", kDenyMin0 + i);
  for (int i = 0; i < 3; ++i) t.value()->Count(2, "user|42", kDenyMin0 + 61 + i);
  t.value()->Count(1, "ip:10.0.0.8", kDenyMin0 + 70);
  auto rows = t.value()->Top(5, 0, 10, kDenyMin0 + 90);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].key, "ip:10.0.0.7");
  EXPECT_EQ(rows[0].denied, 5u);
  EXPECT_EQ(rows[0].biz, 1);
  EXPECT_EQ(rows[1].key, "user|42");
  EXPECT_EQ(rows[1].denied, 3u);
  EXPECT_EQ(rows[1].last_minute, kDenyMin0 / 60 + 1);
  EXPECT_EQ(rows[2].denied, 1u);
  // One biz, and the first N.
  rows = t.value()->Top(5, 2, 10, kDenyMin0 + 90);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].key, "user|42");
  EXPECT_EQ(t.value()->Top(5, 0, 1, kDenyMin0 + 90).size(), 1u);
}

// Short keys of neighbouring bizzes: XXH3 mixes its seed linearly into
// inputs of 1 to 8 bytes, so with the biz id as the seed "p|1" of biz 10,
// "p|2" of 11 and "p|3" of 12 hashed alike and counted in one slot, shown
// under the first; so did "user|ad1" of 20 and "usessad1" of 21.
TEST(RecentDenials, ShortKeysOfOtherBizzesKeepSlotsOfTheirOwn) {
  TempDir dir;
  auto t = RecentDenials::Open(dir.path(), false);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const std::pair<uint16_t, std::string> keys[] = {{10, "p|1"},      {11, "p|2"}, {12, "p|3"}, {20, "user|ad1"},
                                                   {21, "usessad1"}, {1, "a"},    {2, "b"},    {3, "c"}};
  for (const auto& [biz, key] : keys) t.value()->Count(biz, key, kDenyMin0);
  // Every short key of bizzes 1..64: none may share another's slot.
  for (uint16_t biz = 1; biz <= 64; ++biz)
    for (char c = 'a'; c <= 'z'; ++c) t.value()->Count(biz, std::string("k") + c, kDenyMin0);
  auto rows = t.value()->Top(5, 0, 100000, kDenyMin0 + 30);
  ASSERT_EQ(rows.size(), std::size(keys) + 64u * 26u);
  std::set<std::pair<uint16_t, std::string>> seen;
  for (const auto& r : rows) {
    EXPECT_EQ(r.denied, 1u) << r.biz << " " << r.key;
    seen.insert({r.biz, r.key});
  }
  for (const auto& k : keys) EXPECT_TRUE(seen.count(k)) << k.first << " " << k.second;
}

TEST(RecentDenials, OnlyTheLastMinutesCount) {
  TempDir dir;
  auto t = RecentDenials::Open(dir.path(), false);
  ASSERT_TRUE(t.ok());
  t.value()->Count(1, "old", kDenyMin0);
  for (int i = 0; i < 2; ++i) t.value()->Count(1, "new", kDenyMin0 + 4 * 60);
  // At minute 4: the last 2 minutes hold "new" only, the last 5 both.
  auto two = t.value()->Top(2, 0, 10, kDenyMin0 + 4 * 60 + 30);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].key, "new");
  EXPECT_EQ(t.value()->Top(5, 0, 10, kDenyMin0 + 4 * 60 + 30).size(), 2u);
  // A minute's counter restarts when the ring comes round to it again.
  t.value()->Count(1, "old", kDenyMin0 + RecentDenials::kMinutes * 60);
  auto again = t.value()->Top(1, 0, 10, kDenyMin0 + RecentDenials::kMinutes * 60);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].denied, 1u);
}

TEST(RecentDenials, StaleKeysMakeRoomAndLiveOnesAreKept) {
  TempDir dir;
  auto t = RecentDenials::Open(dir.path(), false);
  ASSERT_TRUE(t.ok());
  // Far more keys than slots, all at once: the table keeps what it has and
  // counts the rest as dropped.
  const int n = static_cast<int>(RecentDenials::kSlots) * 2;
  for (int i = 0; i < n; ++i) t.value()->Count(1, "k" + std::to_string(i), kDenyMin0);
  const auto live = t.value()->Top(RecentDenials::kMinutes, 0, RecentDenials::kSlots * 4, kDenyMin0);
  EXPECT_GT(live.size(), RecentDenials::kSlots / 2);
  EXPECT_LE(live.size(), RecentDenials::kSlots);
  EXPECT_EQ(live.size() + t.value()->dropped(), static_cast<size_t>(n));
  // Once they are stale, new keys take their slots.
  const int64_t later = kDenyMin0 + (RecentDenials::kMinutes + 1) * 60;
  for (int i = 0; i < 100; ++i) t.value()->Count(3, "fresh" + std::to_string(i), later);
  EXPECT_EQ(t.value()->Top(1, 3, 1000, later).size(), 100u);
}

TEST(RecentDenials, AnotherProcessReadsWhatWasWritten) {
  TempDir dir;
  {
    auto t = RecentDenials::Open(dir.path(), false);
    ASSERT_TRUE(t.ok());
    t.value()->Count(9, "key with spaces", kDenyMin0);
  }
  auto r = RecentDenials::Open(dir.path(), true);
  ASSERT_TRUE(r.ok());
  auto rows = r.value()->Top(5, 0, 10, kDenyMin0 + 1);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].key, "key with spaces");
  r.value()->Count(9, "ignored", kDenyMin0);  // read-only: never written
  EXPECT_EQ(r.value()->Top(5, 0, 10, kDenyMin0 + 1).size(), 1u);
  // Without a file, a reader sees an empty table.
  TempDir empty;
  auto none = RecentDenials::Open(empty.path(), true);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none.value()->Top(5, 0, 10, kDenyMin0).empty());
}

}  // namespace
}  // namespace frs::stats
