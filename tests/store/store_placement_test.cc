// frs/store_placement.h: the public face of placement places keys where
// the store's own code does (store/placement.h), short keys (their own
// identity) and long ones (their fingerprint's) alike.
#include "frs/store_placement.h"

#include <gtest/gtest.h>

#include <string>

#include "store/identity.h"
#include "store/placement.h"

namespace frs {
namespace {

TEST(StorePlacement, PlacesKeysWhereTheStoreDoes) {
  const StoreGeometry g{3, 4096, 8};
  const uint32_t groups = g.keynodes / KeynodeGroup(g);
  for (uint16_t biz : {uint16_t{1}, uint16_t{7}}) {
    for (int i = 0; i < 2000; ++i) {
      // Short keys (up to 8 bytes: their own identity) and long ones.
      const std::string key = i % 2 ? "u" + std::to_string(i) : "a-longer-key:" + std::to_string(i);
      const KeyPlacement p = PlacementOf(g, biz, key);
      const store::Location l =
          store::Locate(store::PlaceHash(biz, store::IdentityOfText(key, FingerprintOf(biz, key))), g, KeynodeGroup(g));
      ASSERT_EQ(p.file, l.file) << key;
      ASSERT_EQ(p.a, l.a) << key;
      ASSERT_EQ(p.b, l.b) << key;
      ASSERT_LT(p.file, g.files);
      ASSERT_LT(p.a, groups);
      ASSERT_LT(p.b, groups);
      ASSERT_NE(p.a, p.b);
    }
  }
}

// A keyed store's placement: the store's own code (LocationHash under the
// key), and not the unkeyed one (which a client can compute).
TEST(StorePlacement, AKeyedStorePlacesByItsKeyNotByTheUnkeyedHash) {
  const StoreGeometry g{2, 4096, 8};
  const store::PlaceKey k{0x0123456789abcdefull, 0xfedcba9876543210ull};
  int same_as_unkeyed = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string key = i % 2 ? "u" + std::to_string(i) : "a-longer-key:" + std::to_string(i);
    const KeyPlacement p = PlacementOf(g, 3, key, k.k0, k.k1);
    const store::Location l =
        store::Locate(store::LocationHash(k, 3, store::IdentityOfText(key, FingerprintOf(3, key))), g, KeynodeGroup(g));
    ASSERT_EQ(p.file, l.file) << key;
    ASSERT_EQ(p.a, l.a) << key;
    ASSERT_EQ(p.b, l.b) << key;
    const KeyPlacement u = PlacementOf(g, 3, key);
    same_as_unkeyed += u.file == p.file && u.a == p.a;
  }
  EXPECT_LT(same_as_unkeyed, 10);  // 1 in 2 x 512 by chance
}

// Where stores already written place a node: format 6 by its key, format 5
// by the unkeyed mix. A change of either hash (its rounds, its packing of
// biz and form) would leave the nodes of every such store unfound.
TEST(StorePlacement, TheHashesStoresWereWrittenWithAreKept) {
  const store::Identity id{42, store::KeyForm::kDecimal};
  EXPECT_EQ(store::LocationHash(store::PlaceKey{0x0123456789abcdefull, 0xfedcba9876543210ull}, 7, id),
            0xcc2a4bda6e5a57a8ull);
  EXPECT_EQ(store::LocationHash(store::PlaceKey{}, 7, id), 0x019a045154615098ull);
  EXPECT_EQ(store::PlaceHash(7, id), 0x019a045154615098ull);
}

TEST(StorePlacement, TheSameKeyOfAnotherBizIsPlacedApart) {
  const StoreGeometry g{2, 65536, 8};
  int same = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::string key = "user:" + std::to_string(i);
    const KeyPlacement p1 = PlacementOf(g, 1, key), p2 = PlacementOf(g, 2, key);
    same += p1.file == p2.file && p1.a == p2.a;
  }
  EXPECT_LT(same, 10);  // 1 in 16,384 by chance
}

TEST(StorePlacement, ASingleGroupIsBothChoices) {
  const StoreGeometry g{1, 8, 8};  // 8 key-nodes of 8 slots: one group of 64
  ASSERT_EQ(KeynodeGroup(g), 8u);
  const KeyPlacement p = PlacementOf(g, 1, "k");
  EXPECT_EQ(p.a, 0u);
  EXPECT_EQ(p.b, 0u);
}

TEST(StorePlacement, ChoiceTakesAWhileItHasRoomToSpareElseTheFreerGroup) {
  bool fits[2] = {true, true};
  uint32_t free_slots[2] = {20, 40};
  EXPECT_EQ(PlacementChoice(fits, free_slots, 2), 0);  // A has room to spare
  free_slots[0] = 3;
  EXPECT_EQ(PlacementChoice(fits, free_slots, 2), 1);  // A nearly full: the freer one
  EXPECT_EQ(PlacementChoice(fits, free_slots, 1), 0);  // a single choice: A
  fits[0] = false;
  EXPECT_EQ(PlacementChoice(fits, free_slots, 1), -1);
  fits[1] = false;
  EXPECT_EQ(PlacementChoice(fits, free_slots, 2), -1);
}

}  // namespace
}  // namespace frs
