#include "frs/key.h"

#include <arpa/inet.h>

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
  const unsigned char c = static_cast<unsigned char>(s[0]);
  if (c < 0x80) {
    *control = c < 0x20 || c == 0x7f;
    return *control ? 0 : 1;
  }
  size_t len = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  } else return 0;
  if (len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const unsigned char cc = static_cast<unsigned char>(s[k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  // Overlong forms, surrogates and out-of-range code points are invalid.
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  if (cp >= 0x80 && cp <= 0x9F) {
    *control = true;
    return 0;
  }
  return len;
}

std::string ValidateKeyBytes(std::string_view s) {
  if (s.empty()) return "key is empty";
  if (s.size() > kMaxKeyBytes) return "key is " + std::to_string(s.size()) + " bytes, at most 255 are allowed";
  for (size_t i = 0; i < s.size();) {
    bool control = false;
    const size_t len = KeyCharLength(s.substr(i), &control);
    if (len == 0)
      return control ? "key contains a control character at byte " + std::to_string(i)
                     : "key is not valid UTF-8 at byte " + std::to_string(i);
    i += len;
  }
  return "";
}

}  // namespace frs
