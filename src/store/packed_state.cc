#include "store/packed_state.h"

#include <bit>
#include <cstring>

namespace frs::store {
namespace {

using namespace packed;

// The block format of limit/rule_state.h, restated (the codec depends on the
// bytes, not on the engine).
constexpr uint32_t kAlgoFixed = 0, kAlgoCalendar = 1, kAlgoTokenBucket = 3;
constexpr uint32_t kTagIntervalMask = (1u << kIntervalBits) - 1;
constexpr uint32_t kOneUnitLength = 1u << 27;  // tag length field: 1 x 16 bytes

constexpr uint32_t MakeTag(uint32_t algo, uint32_t interval) {
  return (interval & kTagIntervalMask) | algo << 25 | kOneUnitLength;
}

// The block is little-endian (rule_state.h), as is every machine this
// builds for: one load or store, which byte-wise code did not become.
static_assert(std::endian::native == std::endian::little);
uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void Store32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

constexpr uint64_t Mask(int bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }
constexpr uint64_t Field(uint64_t word, int shift, int bits) { return (word >> shift) & Mask(bits); }
// A `bits`-wide two's-complement field as a signed value.
constexpr int64_t Signed(uint64_t field, int bits) {
  return static_cast<int64_t>(field) - ((field >> (bits - 1)) & 1 ? int64_t{1} << bits : 0);
}
constexpr bool FitsSigned(int64_t v, int bits) {
  return v >= -(int64_t{1} << (bits - 1)) && v < (int64_t{1} << (bits - 1));
}

void StoreWindow(uint32_t algo, uint32_t interval, uint32_t start_s, uint32_t count, uint8_t* b) {
  Store32(b, MakeTag(algo, interval));
  Store32(b + 4, start_s);
  Store32(b + 8, count);
  Store32(b + 12, 0);  // debt: a packed window owes nothing
}

// A candidate word for `b` (not yet checked); false when no code can say it.
bool Encode(const uint8_t* b, uint32_t expire_s, uint64_t* word) {
  const uint32_t tag = Load32(b), f1 = Load32(b + 4), f2 = Load32(b + 8), f3 = Load32(b + 12);
  if ((tag | f1 | f2 | f3) == 0) {
    *word = 0;
    return true;
  }
  if ((tag >> 27) != 1) return false;  // not one 16-byte block
  const uint32_t algo = (tag >> 25) & 3, interval = tag & kTagIntervalMask;
  if (algo == kAlgoTokenBucket) {
    const uint64_t tat_ms = uint64_t{f1} | uint64_t{f2 & 0xffff} << 32;
    const uint64_t check = f2 >> 16, frac = f3;
    const uint64_t top_ms = uint64_t{expire_s} * 1000;
    // check == 0: max is a nonzero multiple of 65536, whose fractions need
    // not fit 16 bits; such a bucket is never packed, whatever its fraction.
    if (interval >= (1u << kBucketIntervalBits) || check == 0 || frac > 0xffff || tat_ms > top_ms) return false;
    const uint64_t delta = top_ms - tat_ms;
    if (delta >= (uint64_t{1} << kBucketDeltaBits)) return false;
    *word = uint64_t{3} | uint64_t{interval} << 2 | check << 22 | frac << 38 | delta << 54;
    return true;
  }
  if (algo != kAlgoFixed && algo != kAlgoCalendar) return false;  // sliding
  if (f3 != 0) return false;                                      // a debt
  if (f1 > expire_s) return false;
  const int64_t len = int64_t{expire_s} - f1, i = interval;
  const uint64_t a = algo, count = f2;
  if (i > 0 && len % i == 0 && len / i <= 3) {
    *word = a << 2 | uint64_t{interval} << 3 | static_cast<uint64_t>(len / i) << 28 | count << kCountShift;
    return true;
  }
  const int64_t s = len - i;
  if (i < (1 << kShortIntervalBits) && FitsSigned(s, 16)) {
    *word = uint64_t{1} | a << 2 | uint64_t{interval} << 3 | (static_cast<uint64_t>(s) & Mask(16)) << 16 |
            count << kCountShift;
    return true;
  }
  if (algo != kAlgoCalendar) return false;
  const uint64_t head = uint64_t{2} | uint64_t{interval} << 3;
  const int64_t m = s / kShiftUnit;  // s != 0 here (else code 0 took it)
  if (s % kShiftUnit == 0 && m >= -kMaxShiftUnits && m <= kMaxShiftUnits) {
    *word =
        head | static_cast<uint64_t>(m < 0 ? m + kMaxShiftUnits : m + kMaxShiftUnits - 1) << 28 | count << kCountShift;
    return true;
  }
  if (FitsSigned(s, 14) && count < (uint64_t{1} << kSmallCountBits)) {
    *word = head | uint64_t{1} << 2 | (static_cast<uint64_t>(s) & Mask(14)) << 28 | count << kSmallCountShift;
    return true;
  }
  return false;
}

}  // namespace

void UnpackState(uint64_t word, uint32_t expire_s, std::span<uint8_t, 16> state) {
  uint8_t* b = state.data();
  const uint32_t count32 = static_cast<uint32_t>(word >> kCountShift);
  switch (static_cast<PackedCode>(word & 3)) {
    case PackedCode::kWindow: {
      const uint32_t interval = static_cast<uint32_t>(Field(word, 3, kIntervalBits));
      if (interval == 0) {
        std::memset(b, 0, 16);
        return;
      }
      const uint32_t k = static_cast<uint32_t>(Field(word, 28, 2));
      StoreWindow(static_cast<uint32_t>(Field(word, 2, 1)), interval, expire_s - k * interval, count32, b);
      return;
    }
    case PackedCode::kShortWindow: {
      const uint32_t interval = static_cast<uint32_t>(Field(word, 3, kShortIntervalBits));
      const uint32_t s = static_cast<uint32_t>(Signed(Field(word, 16, 16), 16));
      StoreWindow(static_cast<uint32_t>(Field(word, 2, 1)), interval, expire_s - (interval + s), count32, b);
      return;
    }
    case PackedCode::kShiftedCalendar: {
      const uint32_t interval = static_cast<uint32_t>(Field(word, 3, kIntervalBits));
      uint32_t s, count;
      if (Field(word, 2, 1) == 0) {
        const int64_t f = static_cast<int64_t>(Field(word, 28, 4));
        s = static_cast<uint32_t>((f < kMaxShiftUnits ? f - kMaxShiftUnits : f - kMaxShiftUnits + 1) * kShiftUnit);
        count = count32;
      } else {
        s = static_cast<uint32_t>(Signed(Field(word, 28, 14), 14));
        count = static_cast<uint32_t>(word >> kSmallCountShift);
      }
      StoreWindow(kAlgoCalendar, interval, expire_s - (interval + s), count, b);
      return;
    }
    case PackedCode::kTokenBucket: {
      const uint32_t interval = static_cast<uint32_t>(Field(word, 2, kBucketIntervalBits));
      const uint32_t check = static_cast<uint32_t>(Field(word, 22, 16));
      const uint32_t frac = static_cast<uint32_t>(Field(word, 38, 16));
      const uint64_t delta = Field(word, 54, kBucketDeltaBits);
      const uint64_t tat_ms = (uint64_t{expire_s} * 1000 - delta) & Mask(48);
      Store32(b, MakeTag(kAlgoTokenBucket, interval));
      Store32(b + 4, static_cast<uint32_t>(tat_ms));
      Store32(b + 8, static_cast<uint32_t>(tat_ms >> 32) | check << 16);
      Store32(b + 12, frac);
      return;
    }
  }
}

bool PackState(std::span<const uint8_t, 16> state, uint32_t expire_s, uint64_t* word) {
  uint64_t w;
  if (!Encode(state.data(), expire_s, &w)) return false;
  uint8_t back[16];
  UnpackState(w, expire_s, back);
  if (std::memcmp(back, state.data(), sizeof back) != 0) return false;
  *word = w;
  return true;
}

}  // namespace frs::store
