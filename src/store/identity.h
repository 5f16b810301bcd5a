// store/identity.h: a node's 64-bit identity, and where it is placed.
//
// The identity is the key itself when the key is short enough to fit 64 bits
// exactly, which makes it exact (no fingerprint collision is possible) and
// lets `dump` and `top` show the key of a compact node, which has no room for
// key text. Otherwise it is the low half of the key's XXH3-128 fingerprint.
// The forms, tried in this order (the first that applies is the one used, so
// every key has exactly one identity):
//
//   kShort    1..8 bytes without a NUL, zero-padded little-endian
//   kDecimal  canonical decimal text ("0", or no leading zero) below 2^64:
//             the number (uids, and every integer the key traits encode)
//   kIpv4     canonical dotted IPv4 text ("10.1.2.3"): the address in the low
//             32 bits (IpAddress's key traits encode this form)
//   kHashed   anything else: fingerprint.lo
//
// Two nodes are the same node when biz, form and id are equal. Placement
// (file, key-nodes and tag) derives from all three (the tag from PlaceHash,
// file and key-nodes from LocationHash under the store's key), so moving a
// node to another geometry needs only its header.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/siphash.h"
#include "frs/key.h"

namespace frs::store {

enum class KeyForm : uint8_t { kHashed = 0, kShort = 1, kDecimal = 2, kIpv4 = 3 };

struct Identity {
  uint64_t id = 0;
  KeyForm form = KeyForm::kHashed;
  friend bool operator==(const Identity&, const Identity&) = default;
};

// The identity of a key whose whole text is `bytes`.
Identity IdentityOfText(std::string_view bytes, const Fingerprint& fp);
// The same when the key fits 64 bits (not kHashed); false when it needs its
// fingerprint.
bool ShortIdentityOfText(std::string_view bytes, Identity* out);
// The identity of a KeyRef: from its text when whole, else (an import by
// fingerprint, whose text was cut) the fingerprint's.
inline Identity IdentityOf(const KeyRef& key) {
  if (key.prepared) return Identity{key.ident, static_cast<KeyForm>(key.ident_form)};
  if (!key.bytes.empty() && key.bytes.size() == key.key_len) return IdentityOfText(key.bytes, key.fp);
  return Identity{key.fp.lo, KeyForm::kHashed};
}
// The key text of an identity that holds it (not kHashed); empty otherwise.
std::string TextOf(const Identity& ident);

// The unkeyed mix: a node's tag derives from it (format.h TagOf), and in a
// store without a placement key its place too.
inline uint64_t PlaceHash(uint16_t biz, const Identity& ident) {
  // splitmix64's finalizer over the identity, the biz and the form: the
  // short forms are not uniform, and a key of two bizzes must not share
  // chains.
  uint64_t z =
      ident.id ^ (uint64_t{biz} << 48 | uint64_t{static_cast<uint8_t>(ident.form)} << 40) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A store's placement key (format.h FileHeader::place_key). PlaceHash is a
// public function of the key: anyone can compute which keys share a
// key-node, and ~130 of them evict a chosen key's counts however large the
// store. A keyed store places by SipHash-1-3 (base/siphash.h) of (identity, biz, form) under
// a secret of its own instead. (0, 0): a store of format 5, placed by
// PlaceHash.
struct PlaceKey {
  uint64_t k0 = 0, k1 = 0;
  bool keyed() const { return (k0 | k1) != 0; }
  friend bool operator==(const PlaceKey&, const PlaceKey&) = default;
};

// What a node's file and key-nodes derive from (placement.h Locate);
// `unkeyed` is PlaceHash(biz, ident), which an unkeyed store places by.
inline uint64_t LocationHash(const PlaceKey& key, uint16_t biz, const Identity& ident, uint64_t unkeyed) {
  if (!key.keyed()) return unkeyed;
  return SipHash13Words(key.k0, key.k1, ident.id, uint64_t{biz} | uint64_t{static_cast<uint8_t>(ident.form)} << 16);
}
inline uint64_t LocationHash(const PlaceKey& key, uint16_t biz, const Identity& ident) {
  return LocationHash(key, biz, ident, key.keyed() ? 0 : PlaceHash(biz, ident));
}

}  // namespace frs::store
