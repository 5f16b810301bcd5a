// base/siphash.h: SipHash (Aumasson and Bernstein), a keyed PRF over short
// inputs. Lease and reservation ids are MACs by SipHash-2-4, the design's
// conservative rounds (limit/lease_id.h). A keyed store places its nodes by
// SipHash-1-3 (store/identity.h), the rounds CPython and Rust hash their
// tables with against the same threat, hash flooding: no client can work
// out which keys share a chain with another, and a lookup pays 6 rounds
// where 2-4 takes 10.
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
  template <int C = 2>
  void Absorb(uint64_t m) {
    v3 ^= m;
    for (int i = 0; i < C; ++i) Round();
    v0 ^= m;
  }
  template <int D = 4>
  uint64_t Finish() {
    v2 ^= 0xff;
    for (int i = 0; i < D; ++i) Round();
    return v0 ^ v1 ^ v2 ^ v3;
  }
};

}  // namespace siphash_detail

// SipHash-2-4 of `len` bytes under the key (k0, k1), each key half the
// little-endian value of its 8 bytes.
uint64_t SipHash24(uint64_t k0, uint64_t k1, const uint8_t* data, size_t len);

// SipHash-1-3 of `len` bytes (a check of the word form below).
uint64_t SipHash13(uint64_t k0, uint64_t k1, const uint8_t* data, size_t len);

// SipHash-1-3 of the 16 bytes that are m0 then m1, each little-endian: two
// words without a pass over bytes (SipHash13 of those bytes gives the same).
inline uint64_t SipHash13Words(uint64_t k0, uint64_t k1, uint64_t m0, uint64_t m1) {
  siphash_detail::State s(k0, k1);
  s.Absorb<1>(m0);
  s.Absorb<1>(m1);
  s.Absorb<1>(uint64_t{16} << 56);
  return s.Finish<3>();
}

}  // namespace frs
