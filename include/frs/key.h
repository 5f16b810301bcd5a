// frs/key.h: the identity of a node, and the generic key types.
//
// A node is identified by (biz id, key bytes). The store keeps 64 bits of
// identity per node: the key itself when it is short (a decimal integer
// below 2^64, an IPv4 address, or at most 8 bytes; exact, and shown whole by
// the tools), else the low half of the pair's 128-bit XXH3 fingerprint. It
// places the node by hashing that identity, so a node can be moved to a
// store of another geometry without its key text (export/import). Two
// distinct long keys share a node only when their 64-bit fingerprints are
// equal: with n such keys resident in one store, the expected number of
// such pairs is n^2 / 2^65 (10^8 keys: 0.00027; 10^9 keys: 0.027, that is
// one store in 37 has one pair of keys counted together). docs/store.md
// has the table.
//
// Generic keys: any type K for which KeyTraits<K> supplies `encode` (the
// canonical bytes, which is also the wire protocol's string form) can be used
// as a key through MakeKey. The hash (the index estimate) and the equality the
// store needs both derive from those bytes. Provided: string-like types,
// unsigned integers (a uid, as decimal) and IPv4/IPv6 addresses (as their
// canonical text, RFC 5952 for IPv6), so `uid 42` and the wire key "42" are
// the same node.
//
// Thread safety: plain values.
#pragma once

#include <concepts>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace frs {

inline constexpr size_t kMaxKeyBytes = 255;

struct Fingerprint {
  uint64_t lo = 0;
  uint64_t hi = 0;
  friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
};

// The fingerprint of (biz, key bytes). Stable across versions and machines:
// it is part of the file format.
Fingerprint FingerprintOf(uint16_t biz, std::string_view key_bytes);

// What the store needs of a key: its biz, fingerprint and display bytes.
struct KeyRef {
  uint16_t biz = 0;
  Fingerprint fp;
  std::string_view bytes;  // full key bytes; may be empty for an import by fingerprint
  uint8_t key_len = 0;     // length of the full key (bytes.size() unless imported)
  // The route's ring position (frs/ring.h), written into the node. Unknown
  // (route_known false): a node that exists keeps its own; a new one takes
  // the position of the route its whole key implies (hash tag, else key).
  uint32_t route_pos = 0;
  bool route_known = false;
  // Keep the whole key text in the node (a biz with keys="keep"), at the cost
  // of more slots; otherwise a key that is not short enough to be the node's
  // identity (integers, IPv4 addresses, strings up to 8 bytes) is not kept
  // by a compact node, and tools show its fingerprint.
  bool keep_key = false;
  // The key's 64-bit identity in the store and its form, when `prepared`:
  // filled by frs::PrepareKey (frs/store.h), so that the store derives them
  // once however often it looks at the key (a batch member is prefetched,
  // then updated). Left unprepared, the store derives them from `bytes` and
  // `fp` at each look. `place` is the unkeyed hash of the biz and the
  // identity (its node's tag; a store of format 5 places the node by it).
  uint64_t ident = 0;
  uint64_t place = 0;
  uint8_t ident_form = 0;
  bool prepared = false;
  // Where a keyed store (format 6) places the node, filled by that store's
  // LocateKey (frs/store.h) for its next looks at this key (a request's
  // prefetch, then its update): `located_by` is the store's instance id
  // (never 0, never another open store's), and PrepareKey clears both.
  uint64_t location = 0;
  uint64_t located_by = 0;
};

// A key held by value (for callers that keep keys around).
struct Key {
  uint16_t biz = 0;
  Fingerprint fp;
  std::string bytes;
  KeyRef ref() const { return KeyRef{biz, fp, bytes, static_cast<uint8_t>(bytes.size())}; }
};

// IPv4 or IPv6 address, network byte order.
struct IpAddress {
  bool v6 = false;
  unsigned char addr[16] = {};
  // Parses dotted IPv4 or any textual IPv6; false on bad input.
  static bool Parse(std::string_view text, IpAddress* out);
};

template <class K>
struct KeyTraits;  // specialize: static std::string encode(const K&)

template <class K>
concept KeyType = requires(const K& k) {
  { KeyTraits<K>::encode(k) } -> std::convertible_to<std::string>;
};

template <>
struct KeyTraits<std::string_view> {
  static std::string encode(std::string_view s) { return std::string(s); }
};
template <>
struct KeyTraits<std::string> {
  static std::string encode(const std::string& s) { return s; }
};
template <std::unsigned_integral U>
struct KeyTraits<U> {
  static std::string encode(U v) { return std::to_string(v); }
};
template <>
struct KeyTraits<IpAddress> {
  static std::string encode(const IpAddress& ip);
};

// Key validation shared by the protocol, the engine and the CLI: 1..255
// bytes of valid UTF-8 without control characters, U+FFFE or U+FFFF (which
// XML cannot carry: a key the protocol could not name). Returns "" when
// valid, else the reason.
std::string ValidateKeyBytes(std::string_view bytes);
// ValidateKeyBytes(key).empty(), inline for the request path: the keys
// almost every request carries are printable ASCII, settled here without
// building an answer; *printable_ascii says whether the key is printable
// ASCII only (one pass: what the caller would otherwise look for again).
// Eight bytes at a time: a word holds a byte below 0x20 or above 0x7e
// exactly when one of these sets a byte's top bit (the first term borrows
// only out of a byte below 0x20, the second carries only out of one above
// 0x7e, and a byte with its top bit set is above 0x7e itself).
inline bool KeyIsValid(std::string_view key, bool* printable_ascii) {
  *printable_ascii = false;
  if (key.empty() || key.size() > kMaxKeyBytes) return false;
  constexpr uint64_t kOnes = 0x0101010101010101ull, kTops = 0x8080808080808080ull;
  auto plain = [](uint64_t w) { return (((w - kOnes * 0x20) & ~w) | (w + kOnes * 0x01) | w) & kTops; };
  const char* p = key.data();
  size_t left = key.size();
  uint64_t odd = 0;
  for (; left >= 8; p += 8, left -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    odd |= plain(w);
  }
  if (left > 0) {
    uint64_t w = kOnes * 'a';  // the bytes past the key: printable
    std::memcpy(&w, p, left);
    odd |= plain(w);
  }
  *printable_ascii = odd == 0;
  return odd == 0 || ValidateKeyBytes(key).empty();
}
// The same, when the caller has no use for printable_ascii.
inline bool KeyIsValid(std::string_view key) {
  bool ascii;
  return KeyIsValid(key, &ascii);
}
// A key a store may hold though no request can make it any more: valid, or
// valid but for U+FFFE and U+FFFF, which versions before 0.3 took in-process
// and in Envoy's counter keys. What a replica applies (a change from a peer
// of that version) must not be refused for them: one refused change stops
// the link for every key.
bool KeyIsStorable(std::string_view key);
// The character `s` starts with, as a key may hold it: its length in bytes
// (1..4), or 0 when it is none (s empty, a control character: C0, DEL or C1,
// U+FFFE or U+FFFF, or bytes that are not UTF-8: overlong, surrogate, past
// U+10FFFF, cut).
// `*control` (when given) tells a control character from bytes that are not
// UTF-8. The one definition of a key's characters, for checking and escaping.
size_t KeyCharLength(std::string_view s, bool* control = nullptr);

template <KeyType K>
Key MakeKey(uint16_t biz, const K& k) {
  Key out;
  out.biz = biz;
  out.bytes = KeyTraits<K>::encode(k);
  out.fp = FingerprintOf(biz, out.bytes);
  return out;
}

}  // namespace frs
