// store/node_check.h: a node's check byte, the redundancy that makes a
// damaged byte anywhere in a node visible.
//
// Each node's check lives in its group's head, beside its tag (format.h
// ChainHead). It covers every byte of the node that decides what the node
// counts or whose it is: identity, biz, form and span, key form, expiry,
// route, and the whole payload (a compact node's packed state; a general
// node's lengths, state and key bytes, and the zeroed rest of its slots).
// It leaves out the last access second and the heat, which a read rewrites
// without a journal and which order eviction only.
//
// The check is the XOR of the covered bytes folded into one: changing any
// one byte (or any bits within one byte) always changes it, so a node with
// one damaged byte is never taken for intact (before, a zeroed expiry byte
// restarted a key, a flipped state byte locked one out). It is position-free:
// damage to several bytes that flips the same bits in each (two bytes
// swapped, one bit in two bytes) goes unseen.
//
// Checks are journaled with the slots (format.h JournalRecord): an undo puts
// a node's check back as it was, so a node that failed its check before a
// write that was undone fails it still.
//
// Thread safety: a pure function of the bytes given. A writable store checks a
// node under its chain's lock (ExtentAt, SetTags_locked), so the bytes do not
// change while they are folded; a read-only store takes no lock, and may fold
// a node mid-change (chain_map.h), which then reads as damaged.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "store/format.h"

namespace frs::store {

inline uint8_t NodeCheck(const uint8_t* node, uint32_t span) {
  uint64_t w[3];
  std::memcpy(w, node, sizeof w);
  static_assert(offsetof(NodeHeader, heat_kind) == 11 && offsetof(NodeHeader, last_access_s) == 16);
  // Byte 11: heat in bits 0..5 (left out), the key form in 6..7 (covered).
  // Bytes 16..19: the last access (left out).
  uint64_t x = w[0] ^ (w[1] & ~(uint64_t{kMaxHeat} << 24)) ^ (w[2] & ~uint64_t{0xFFFFFFFF});
  const NodeHeader* h = reinterpret_cast<const NodeHeader*>(node);
  const uint32_t end = IsCompact(h) ? kSlotBytes : std::clamp<uint32_t>(span, 1, kMaxSpan) * kSlotBytes;
  // Two words a step into two sums (a lease's node is 9 words past its
  // header, checked at each lookup and each write); the odd last one after.
  uint64_t y = 0;
  uint32_t off = kNodeHeaderBytes;
  for (; off + 16 <= end; off += 16) {
    uint64_t v[2];
    std::memcpy(v, node + off, 16);
    x ^= v[0];
    y ^= v[1];
  }
  if (off < end) {
    uint64_t v;
    std::memcpy(&v, node + off, 8);
    x ^= v;
  }
  x ^= y;
  x ^= x >> 32;
  x ^= x >> 16;
  x ^= x >> 8;
  return static_cast<uint8_t>(x) ^ 0xA5;  // a zeroed node does not check
}

}  // namespace frs::store
