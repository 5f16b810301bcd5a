// The placement's pure decisions (store/placement.h): where a key's groups
// and own chains are (Locate), which group takes a new node (LessLoaded)
// and which free run in it (FreeRunIn). No store: maps and hashes only.
#include "store/placement.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace frs::store {
namespace {

// A chain map from a picture: '.' a free slot, a letter a node's slots
// (consecutive equal letters are one node).
ChainMap MapOf(const std::string& picture) {
  ChainMap m;
  m.n = static_cast<uint32_t>(picture.size());
  uint8_t start = 0;
  for (uint32_t i = 0; i < m.n; ++i) {
    if (picture[i] == '.') {
      m.MarkFree(i);
      continue;
    }
    if (i == 0 || picture[i - 1] != picture[i]) start = static_cast<uint8_t>(i);
    m.start[i] = start;
  }
  return m;
}

TEST(FreeRunIn, AOneSlotNodeTakesTheFreeSlotNearestAfterItsOwnChain) {
  const ChainMap m = MapOf(
      "a.b.cc.."
      "dddd.e.."
      "ffffffff"
      "........");
  EXPECT_EQ(FreeRunIn(m, 1, 0), 1);
  EXPECT_EQ(FreeRunIn(m, 1, 8), 12);   // its own chain (8..15) has room
  EXPECT_EQ(FreeRunIn(m, 1, 16), 24);  // chain 16..23 is full: the next free slot
  EXPECT_EQ(FreeRunIn(m, 1, 13), 14);
  EXPECT_EQ(FreeRunIn(MapOf("..aaaaaa"), 1, 5), 0) << "wraps round to the group's start";
  EXPECT_EQ(FreeRunIn(MapOf("aaaaaaaa"), 1, 0), -1);
}

TEST(FreeRunIn, ALongerNodeTakesTheShortestRunThatHoldsIt) {
  // Runs: 1 (slot 1), 2 (4..5), 3 (9..11), 8 (16..23).
  const ChainMap m = MapOf(
      "a.bb..cc"
      "c...dddd"
      "........");
  EXPECT_EQ(FreeRunIn(m, 2, 0), 4);
  EXPECT_EQ(FreeRunIn(m, 3, 0), 9);
  EXPECT_EQ(FreeRunIn(m, 4, 0), 16);
  EXPECT_EQ(FreeRunIn(m, 9, 0), -1);
  // Among runs of one length, the first at or after the key's own chain.
  const ChainMap two = MapOf(
      "..aa..bb"
      "..cc..dd");
  EXPECT_EQ(FreeRunIn(two, 2, 0), 0);
  EXPECT_EQ(FreeRunIn(two, 2, 9), 12);
  EXPECT_EQ(FreeRunIn(two, 2, 13), 0) << "none after it: the first";
}

TEST(FreeRunIn, AWholeFreeGroupOf64Slots) {
  ChainMap m;
  m.n = 64;
  for (uint32_t i = 0; i < 64; ++i) m.MarkFree(i);
  EXPECT_EQ(FreeRunIn(m, 16, 40), 0);
  EXPECT_EQ(FreeRunIn(m, 1, 63), 63);
  m.start[0] = 0;
  m.free &= ~uint64_t{1};
  EXPECT_EQ(FreeRunIn(m, 16, 0), 1);
}

TEST(LessLoaded, AWhileItIsSpaciousThenTheEmptierGroup) {
  const bool both[2] = {true, true};
  uint32_t free_slots[2] = {kSpacious, 60};
  EXPECT_EQ(LessLoaded(both, free_slots, 2), 0) << "A has room to spare";
  free_slots[0] = kSpacious - 1;
  EXPECT_EQ(LessLoaded(both, free_slots, 2), 1) << "A filling up: the emptier";
  free_slots[1] = kSpacious - 5;
  EXPECT_EQ(LessLoaded(both, free_slots, 2), 0) << "a tie goes to A";
  const bool only_b[2] = {false, true};
  EXPECT_EQ(LessLoaded(only_b, free_slots, 2), 1);
  const bool none[2] = {false, false};
  EXPECT_EQ(LessLoaded(none, free_slots, 2), -1);
  EXPECT_EQ(LessLoaded(only_b, free_slots, 1), -1) << "one group: B is A";
}

TEST(Locate, TwoGroupsAndTheKeysOwnChainInEach) {
  const StoreGeometry g{2, 65536, 8};
  const uint32_t group = KeynodeGroup(g);
  ASSERT_EQ(group, 8u);
  std::mt19937_64 rng(11);
  std::set<uint32_t> homes;
  for (int i = 0; i < 10000; ++i) {
    const uint64_t h = rng();
    const Location l = Locate(h, g, group);
    ASSERT_LT(l.file, g.files);
    ASSERT_LT(l.a, g.keynodes / group);
    ASSERT_LT(l.b, g.keynodes / group);
    ASSERT_NE(l.a, l.b);
    ASSERT_EQ(l.home_a % g.chain, 0u);
    ASSERT_LT(l.home_a, group * g.chain);
    ASSERT_LT(l.home_b, group * g.chain);
    homes.insert(l.home_a);
    const Location again = Locate(h, g, group);
    ASSERT_TRUE(again.a == l.a && again.b == l.b && again.home_a == l.home_a) << "a pure function";
  }
  EXPECT_EQ(homes.size(), group) << "every chain of a group is some key's own";
  // One group in all: A and B are the same.
  const StoreGeometry tiny{1, 8, 8};
  const Location l = Locate(rng(), tiny, KeynodeGroup(tiny));
  EXPECT_EQ(l.a, 0u);
  EXPECT_EQ(l.b, 0u);
}

TEST(KeynodeGroup, TheLargestDivisorWithin64Slots) {
  EXPECT_EQ(KeynodeGroup({2, 65536, 8}), 8u);
  EXPECT_EQ(KeynodeGroup({2, 32768, 16}), 4u);
  EXPECT_EQ(KeynodeGroup({2, 8192, 64}), 1u);
  EXPECT_EQ(KeynodeGroup({2, 1000, 5}), 10u);  // 12 does not divide 1,000
  EXPECT_EQ(KeynodeGroup({1, 4099, 1}), 1u);   // a prime: one by one
  EXPECT_EQ(KeynodeGroup({1, 3, 8}), 3u);
  EXPECT_EQ(GroupSlots({2, 65536, 8}), 64u);
}

}  // namespace
}  // namespace frs::store
