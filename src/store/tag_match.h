// store/tag_match.h: which slots of a key-node carry a tag, eight tags at a
// time.
//
// Every lookup scans the tags of one or two key-nodes (format.h, ChainHead),
// and a batch member's prefetch scans both once more. Compared byte by byte
// that was ~6 instructions a slot, ~100 per lookup at chain 8 (callgrind);
// a 64-bit word compares eight at once. A head is a power of two of at least
// 16 bytes with its tags after the 8-byte lock word, so the tags start
// 8-aligned and the last word read (up to the head's end) is still the
// head's; the bytes past `chain` are masked off.
//
// Without the chain's lock the tags are a hint: the word is read atomically
// (relaxed), as byte readers read them, and a match is confirmed under the
// lock.
//
// Thread safety: pure functions; any thread or process may call them, with the
// chain's lock (an exact answer) or without it (a hint, above).
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>

namespace frs::store {

// Bit 8*i+7 set for each byte i of `word` equal to `tag` (exact: no false
// positives from borrows).
inline uint64_t TagBytesEqual(uint64_t word, uint8_t tag) {
  constexpr uint64_t kLow7 = 0x7f7f7f7f7f7f7f7full;
  const uint64_t x = word ^ (0x0101010101010101ull * tag);
  return ~(((x & kLow7) + kLow7) | x | kLow7);
}

// The tags of slots [8*w, 8*w + 8) that equal `tag`, as bit 8*i+7 for slot
// 8*w + i, limited to slots below `chain`.
inline uint64_t TagWordMatches(const uint8_t* tags, uint32_t w, uint32_t chain, uint8_t tag) {
  static_assert(std::endian::native == std::endian::little, "slot i is byte i of the word");
  const uint64_t word =
      std::atomic_ref<const uint64_t>(reinterpret_cast<const uint64_t*>(tags)[w]).load(std::memory_order_relaxed);
  uint64_t m = TagBytesEqual(word, tag);
  const uint32_t left = chain - 8 * w;
  if (left < 8) m &= (uint64_t{1} << (8 * left)) - 1;
  return m;
}

// Calls fn(slot) for each slot below `chain` whose tag is `tag`, in slot
// order, until fn returns true; true when one did.
template <class Fn>
inline bool ForEachTagged(const uint8_t* tags, uint32_t chain, uint8_t tag, Fn&& fn) {
  for (uint32_t w = 0; 8 * w < chain; ++w) {
    for (uint64_t m = TagWordMatches(tags, w, chain, tag); m != 0; m &= m - 1) {
      if (fn(8 * w + static_cast<uint32_t>(std::countr_zero(m)) / 8)) return true;
    }
  }
  return false;
}

// The same, starting with the tag word of slot `home` and wrapping round:
// a lookup scans its key's own chain in the group first (placement.h), and
// stops there when the node is found.
template <class Fn>
inline bool ForEachTaggedFrom(const uint8_t* tags, uint32_t chain, uint32_t home, uint8_t tag, Fn&& fn) {
  const uint32_t words = (chain + 7) / 8, first = home / 8 < words ? home / 8 : 0;
  for (uint32_t n = 0, w = first; n < words; ++n, w = w + 1 == words ? 0 : w + 1) {
    for (uint64_t m = TagWordMatches(tags, w, chain, tag); m != 0; m &= m - 1) {
      if (fn(8 * w + static_cast<uint32_t>(std::countr_zero(m)) / 8)) return true;
    }
  }
  return false;
}

// Whether any slot below `chain` carries `tag`.
inline bool AnyTagged(const uint8_t* tags, uint32_t chain, uint8_t tag) {
  for (uint32_t w = 0; 8 * w < chain; ++w)
    if (TagWordMatches(tags, w, chain, tag) != 0) return true;
  return false;
}

// The first slot below `chain` that carries `tag`, or -1.
inline int FirstTagged(const uint8_t* tags, uint32_t chain, uint8_t tag) {
  for (uint32_t w = 0; 8 * w < chain; ++w)
    if (const uint64_t m = TagWordMatches(tags, w, chain, tag); m != 0)
      return static_cast<int>(8 * w + static_cast<uint32_t>(std::countr_zero(m)) / 8);
  return -1;
}

}  // namespace frs::store
