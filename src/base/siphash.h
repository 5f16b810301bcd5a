// base/siphash.h: SipHash-2-4 (Aumasson and Bernstein), a keyed PRF over
// short inputs: lease and reservation ids are its MACs (limit/lease_id.h),
// and a keyed store places its nodes by it (store/identity.h), so that no
// client can work out which keys share a chain with another.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace frs {

namespace siphash_detail {

inline uint64_t Rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct State {
  uint64_t v0, v1, v2, v3;
  State(uint64_t k0, uint64_t k1)
      : v0(k0 ^ 0x736f6d6570736575ull),
        v1(k1 ^ 0x646f72616e646f6dull),
        v2(k0 ^ 0x6c7967656e657261ull),
        v3(k1 ^ 0x7465646279746573ull) {}
  void Round() {
    v0 += v1;
    v1 = Rotl(v1, 13);
    v1 ^= v0;
    v0 = Rotl(v0, 32);
    v2 += v3;
    v3 = Rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = Rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = Rotl(v1, 17);
    v1 ^= v2;
    v2 = Rotl(v2, 32);
  }
  void Absorb(uint64_t m) {
    v3 ^= m;
    Round();
    Round();
    v0 ^= m;
  }
  uint64_t Finish() {
    v2 ^= 0xff;
    for (int i = 0; i < 4; ++i) Round();
    return v0 ^ v1 ^ v2 ^ v3;
  }
};

}  // namespace siphash_detail

// SipHash-2-4 of `len` bytes under the key (k0, k1), each key half the
// little-endian value of its 8 bytes.
uint64_t SipHash24(uint64_t k0, uint64_t k1, const uint8_t* data, size_t len);

// The same of the 16 bytes that are m0 then m1, each little-endian: two
// words without a pass over bytes (SipHash24 of those bytes gives the same).
inline uint64_t SipHash24Words(uint64_t k0, uint64_t k1, uint64_t m0, uint64_t m1) {
  siphash_detail::State s(k0, k1);
  s.Absorb(m0);
  s.Absorb(m1);
  s.Absorb(uint64_t{16} << 56);
  return s.Finish();
}

}  // namespace frs
