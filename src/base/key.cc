#include "frs/key.h"

#include <arpa/inet.h>

#include "base/utf8.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace frs {

Fingerprint FingerprintOf(uint16_t biz, std::string_view key_bytes) {
  // The biz is the seed, so the same bytes under two bizs are two identities.
  XXH128_hash_t h = XXH3_128bits_withSeed(key_bytes.data(), key_bytes.size(), 0x9E3779B97F4A7C15ull ^ biz);
  return Fingerprint{h.low64, h.high64};
}

bool IpAddress::Parse(std::string_view text, IpAddress* out) {
  if (text.empty() || text.size() > 45) return false;
  char buf[64];
  text.copy(buf, text.size());
  buf[text.size()] = '\0';
  IpAddress ip;
  if (inet_pton(AF_INET, buf, ip.addr) == 1) {
    ip.v6 = false;
  } else if (inet_pton(AF_INET6, buf, ip.addr) == 1) {
    ip.v6 = true;
  } else {
    return false;
  }
  *out = ip;
  return true;
}

std::string KeyTraits<IpAddress>::encode(const IpAddress& ip) {
  char buf[INET6_ADDRSTRLEN];
  // inet_ntop writes RFC 5952 canonical form for IPv6.
  inet_ntop(ip.v6 ? AF_INET6 : AF_INET, ip.addr, buf, sizeof buf);
  return buf;
}

size_t KeyCharLength(std::string_view s, bool* control) {
  bool is_control = false;
  if (control == nullptr) control = &is_control;
  *control = false;
  if (s.empty()) return 0;
  char32_t cp = 0;
  const size_t len = Utf8Decode(s, 0, &cp);
  if (len == 0) return 0;
  // C0, DEL and C1.
  *control = cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
  // U+FFFE and U+FFFF: UTF-8, but no XML character, so a key holding one
  // could be made in-process and never named over the protocol (its lease
  // never released but by expiry).
  return *control || cp == 0xFFFE || cp == 0xFFFF ? 0 : len;
}

namespace {

// Whether `s` starts with U+FFFE or U+FFFF (EF BF BE, EF BF BF).
bool StartsWithNoncharacter(std::string_view s) {
  return s.size() >= 3 && s[0] == '\xEF' && s[1] == '\xBF' && (s[2] == '\xBE' || s[2] == '\xBF');
}

}  // namespace

bool KeyIsStorable(std::string_view s) {
  if (s.empty() || s.size() > kMaxKeyBytes) return false;
  for (size_t i = 0; i < s.size();) {
    if (StartsWithNoncharacter(s.substr(i))) {
      i += 3;
      continue;
    }
    const size_t len = KeyCharLength(s.substr(i));
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string ValidateKeyBytes(std::string_view s) {
  if (s.empty()) return "key is empty";
  if (s.size() > kMaxKeyBytes) return "key is " + std::to_string(s.size()) + " bytes, at most 255 are allowed";
  for (size_t i = 0; i < s.size();) {
    bool control = false;
    const size_t len = KeyCharLength(s.substr(i), &control);
    if (len == 0) {
      if (control) return "key contains a control character at byte " + std::to_string(i);
      if (StartsWithNoncharacter(s.substr(i)))
        return "key holds U+FFFE or U+FFFF at byte " + std::to_string(i) + ", which are not XML characters";
      return "key is not valid UTF-8 at byte " + std::to_string(i);
    }
    i += len;
  }
  return "";
}

}  // namespace frs
