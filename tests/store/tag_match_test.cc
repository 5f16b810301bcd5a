// The word-at-a-time tag scan against the byte loop it replaced, for every
// chain length a head can hold and tags chosen to trip borrow-based tricks.
#include "store/tag_match.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "store/format.h"

namespace frs::store {
namespace {

std::vector<uint32_t> ByteLoop(const uint8_t* tags, uint32_t chain, uint8_t tag) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < chain; ++i)
    if (tags[i] == tag) out.push_back(i);
  return out;
}

TEST(StoreTagMatch, FindsExactlyTheSlotsTheByteLoopFinds) {
  std::mt19937 rng(7);
  // Tags near the one sought (x ^ tag of 0x00, 0x01, 0x80, 0xff) are where
  // a zero-byte test with borrows would report false matches.
  const uint8_t palette[] = {0, 1, 2, 0x7f, 0x80, 0x81, 0xfe, 0xff};
  for (uint32_t chain = 1; chain <= 64; ++chain) {
    const uint32_t head = HeadBytes(chain);
    alignas(64) uint8_t buf[256];
    ASSERT_LE(head, sizeof buf);
    for (int round = 0; round < 200; ++round) {
      const uint8_t tag = palette[rng() % std::size(palette)] | 1;  // a tag is never 0
      for (uint32_t i = 0; i < head; ++i) buf[i] = palette[rng() % std::size(palette)];
      // The bytes past the chain (the head's padding) hold the tag too:
      // they must never be reported.
      for (uint32_t i = kHeadLockBytes + chain; i < head; ++i) buf[i] = tag;
      const uint8_t* tags = buf + kHeadLockBytes;
      std::vector<uint32_t> got;
      ForEachTagged(tags, chain, tag, [&](uint32_t i) {
        got.push_back(i);
        return false;
      });
      const std::vector<uint32_t> want = ByteLoop(tags, chain, tag);
      ASSERT_EQ(got, want) << "chain " << chain << " tag " << int{tag};
      EXPECT_EQ(AnyTagged(tags, chain, tag), !want.empty());
      // From a key's own chain in its group: the same slots, that chain's
      // tag word first.
      const uint32_t home = rng() % chain;
      std::vector<uint32_t> from;
      ForEachTaggedFrom(tags, chain, home, tag, [&](uint32_t i) {
        from.push_back(i);
        return false;
      });
      std::vector<uint32_t> sorted = from;
      std::sort(sorted.begin(), sorted.end());
      ASSERT_EQ(sorted, want) << "chain " << chain << " home " << home;
      if (!from.empty() && !want.empty()) {
        const auto first_home = std::find_if(want.begin(), want.end(), [&](uint32_t i) { return i / 8 == home / 8; });
        if (first_home != want.end()) {
          EXPECT_EQ(from.front(), *first_home) << "its own tag word is scanned first";
        }
      }
    }
  }
}

TEST(StoreTagMatch, StopsAtTheFirstSlotTheCallerAccepts) {
  alignas(8) uint8_t buf[32] = {};
  uint8_t* tags = buf + kHeadLockBytes;
  tags[2] = tags[9] = tags[11] = 0x42;
  std::vector<uint32_t> seen;
  EXPECT_TRUE(ForEachTagged(tags, 12, 0x42, [&](uint32_t i) {
    seen.push_back(i);
    return i == 9;
  }));
  EXPECT_EQ(seen, (std::vector<uint32_t>{2, 9}));
  EXPECT_FALSE(ForEachTagged(tags, 12, 0x43, [](uint32_t) { return true; }));
}

}  // namespace
}  // namespace frs::store
