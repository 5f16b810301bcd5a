// WriteDecimal against std::to_chars: the same bytes at every length, at
// each power of ten and its neighbours, at the extremes and at random.
#include "base/decimal.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>

namespace frs {
namespace {

template <typename T>
std::string Expected(T v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

template <typename T>
std::string Written(T v) {
  char buf[kMaxDecimalChars + 4];
  std::memset(buf, 'x', sizeof buf);
  char* end = WriteDecimal(buf, v);
  EXPECT_LE(end - buf, kMaxDecimalChars) << v;
  EXPECT_EQ(end[0], 'x') << "wrote past its end for " << v;
  return std::string(buf, end);
}

TEST(Decimal, EveryValueBelowOneHundredThousand) {
  for (uint64_t v = 0; v < 100000; ++v) ASSERT_EQ(Written(v), Expected(v));
}

TEST(Decimal, EachPowerOfTenAndItsNeighbours) {
  uint64_t p = 1;
  for (int digits = 1; digits <= 19; ++digits, p *= 10) {
    for (uint64_t v : {p - 1, p, p + 1, p * 2 - 1, p * 9 + (p - 1)}) {
      ASSERT_EQ(Written(v), Expected(v)) << digits << " digits";
      const auto s = static_cast<int64_t>(v);
      ASSERT_EQ(Written(s), Expected(s));
      ASSERT_EQ(Written(-s), Expected(-s));
    }
  }
  // The eight-digit blocks' seams: a zero block in the middle or the end.
  for (uint64_t v : {100000000ULL, 100000001ULL, 1000000000000000ULL, 10000000000000000ULL, 10000000000000001ULL,
                     10000000100000000ULL, 12345678000000009ULL, 18446744073709551615ULL, 10000000000000000000ULL}) {
    ASSERT_EQ(Written(v), Expected(v));
  }
}

TEST(Decimal, TheExtremes) {
  EXPECT_EQ(Written(std::numeric_limits<uint64_t>::max()), "18446744073709551615");
  EXPECT_EQ(Written(std::numeric_limits<int64_t>::max()), "9223372036854775807");
  EXPECT_EQ(Written(std::numeric_limits<int64_t>::min()), "-9223372036854775808");
  EXPECT_EQ(Written(int64_t{0}), "0");
  EXPECT_EQ(Written(int64_t{-1}), "-1");
}

TEST(Decimal, RandomValuesOfEveryWidth) {
  std::mt19937_64 rng(20261206);
  for (int i = 0; i < 200000; ++i) {
    const uint64_t v = rng() >> (rng() % 64);  // every bit length equally often
    ASSERT_EQ(Written(v), Expected(v));
    const auto s = static_cast<int64_t>(v);
    ASSERT_EQ(Written(s), Expected(s));
  }
}

}  // namespace
}  // namespace frs
