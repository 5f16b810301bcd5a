// base/decimal.h: an integer written as decimal digits, for the answers on
// the hot path (every GET /acquire writes about twenty integers, half of them
// ten-digit limits, remainders and reset times).
//
// Why not std::to_chars: GCC 12's counts the digits with a loop of
// divisions and then writes two digits per 64-bit division; together about
// 170 instructions for a ten-digit value, the largest single user-space cost
// of an answer. Here a value splits into eight-digit blocks (one 64-bit
// division by 10^8 at most twice), each block into four two-digit pairs by
// 32-bit arithmetic, every pair copied from a table: about 40 instructions
// for ten digits. The bytes are std::to_chars' exactly (decimal_test.cc
// compares them at every length and boundary).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>

namespace frs {

// The most a WriteDecimal writes: "-9223372036854775808".
inline constexpr int kMaxDecimalChars = 20;

namespace decimal_detail {

inline constexpr char kPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

inline void Pair(char* p, uint32_t v) { std::memcpy(p, kPairs + 2 * v, 2); }

// Exactly four digits of v < 10^4, leading zeros kept.
inline void Four(char* p, uint32_t v) {
  Pair(p, v / 100);
  Pair(p + 2, v % 100);
}

// Exactly eight digits of v < 10^8, leading zeros kept.
inline char* Eight(char* p, uint32_t v) {
  Four(p, v / 10000);
  Four(p + 4, v % 10000);
  return p + 8;
}

// v < 10^8 without leading zeros (one digit for 0).
inline char* Short(char* p, uint32_t v) {
  if (v < 100) {
    if (v < 10) {
      *p = static_cast<char>('0' + v);
      return p + 1;
    }
    Pair(p, v);
    return p + 2;
  }
  if (v < 10000) {
    if (v < 1000) {
      *p = static_cast<char>('0' + v / 100);
      Pair(p + 1, v % 100);
      return p + 3;
    }
    Four(p, v);
    return p + 4;
  }
  // Five to eight digits: the high part (1 to 4 digits) without zeros, then
  // the low four with them.
  p = Short(p, v / 10000);
  Four(p, v % 10000);
  return p + 4;
}

}  // namespace decimal_detail

// The digits of v at p; returns the end. At most 20 characters, no
// terminator.
inline char* WriteDecimal(char* p, uint64_t v) {
  using namespace decimal_detail;
  constexpr uint64_t k8 = 100000000;
  if (v < k8) return Short(p, static_cast<uint32_t>(v));
  if (v < k8 * k8) {
    const uint64_t high = v / k8;
    return Eight(Short(p, static_cast<uint32_t>(high)), static_cast<uint32_t>(v - high * k8));
  }
  const uint64_t high = v / (k8 * k8);  // at most 1844: four digits
  v -= high * k8 * k8;
  const uint64_t mid = v / k8;
  p = Short(p, static_cast<uint32_t>(high));
  p = Eight(p, static_cast<uint32_t>(mid));
  return Eight(p, static_cast<uint32_t>(v - mid * k8));
}

inline char* WriteDecimal(char* p, int64_t v) {
  if (v >= 0) return WriteDecimal(p, static_cast<uint64_t>(v));
  *p = '-';
  // The magnitude in unsigned arithmetic: INT64_MIN has none as int64_t.
  return WriteDecimal(p + 1, 0 - static_cast<uint64_t>(v));
}

}  // namespace frs
