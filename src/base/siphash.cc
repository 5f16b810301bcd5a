#include "base/siphash.h"

#include <bit>
#include <cstring>

namespace frs {
namespace {

// A message word: one 8-byte load on a little-endian machine (SipHash reads
// its input little-endian), where a byte at a time cost a third of a hash.
inline uint64_t Word64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

template <int C, int D>
uint64_t SipHash(uint64_t k0, uint64_t k1, const uint8_t* data, size_t len) {
  siphash_detail::State s(k0, k1);
  const size_t whole = len / 8 * 8;
  for (size_t i = 0; i < whole; i += 8) s.Absorb<C>(Word64(data + i));
  uint64_t last = static_cast<uint64_t>(len & 0xff) << 56;
  for (size_t i = whole; i < len; ++i) last |= static_cast<uint64_t>(data[i]) << (8 * (i - whole));
  s.Absorb<C>(last);
  return s.Finish<D>();
}

}  // namespace

uint64_t SipHash24(uint64_t k0, uint64_t k1, const uint8_t* data, size_t len) {
  return SipHash<2, 4>(k0, k1, data, len);
}

uint64_t SipHash13(uint64_t k0, uint64_t k1, const uint8_t* data, size_t len) {
  return SipHash<1, 3>(k0, k1, data, len);
}

}  // namespace frs
