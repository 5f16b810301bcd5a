#include "store/identity.h"

#include <endian.h>

#include <cstring>

#include "frs/store.h"

namespace frs::store {
namespace {

bool ParseDecimal(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0')) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool ParseIpv4(std::string_view s, uint64_t* out) {
  if (s.size() < 7 || s.size() > 15) return false;
  uint32_t addr = 0;
  size_t i = 0;
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (i >= s.size() || s[i] != '.') return false;
      ++i;
    }
    const size_t start = i;
    uint32_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - start < 3)
      v = v * 10 + static_cast<uint32_t>(s[i++] - '0');
    const size_t len = i - start;
    if (len == 0 || v > 255 || (len > 1 && s[start] == '0')) return false;
    addr = addr << 8 | v;
  }
  if (i != s.size()) return false;
  *out = addr;
  return true;
}

}  // namespace

bool ShortIdentityOfText(std::string_view bytes, Identity* out) {
  if (!bytes.empty() && bytes.size() <= 8) {
    // Byte i at bits 8i (little-endian), and no NUL among them: a NUL would
    // make two keys of different lengths one identity. The NUL test is one
    // word test (bytes past the key are set to 0xFF first), not a memchr
    // call: this runs for every key of every request.
    const size_t n = bytes.size();
    uint64_t v = 0;
    std::memcpy(&v, bytes.data(), n);
    v = le64toh(v);
    const uint64_t past = n == 8 ? 0 : ~uint64_t{0} << (8 * n);
    constexpr uint64_t k01 = 0x0101010101010101, k80 = 0x8080808080808080;
    const uint64_t w = v | past;
    if (((w - k01) & ~w & k80) == 0) {
      *out = {v, KeyForm::kShort};
      return true;
    }
  }
  if (ParseDecimal(bytes, &out->id)) {
    out->form = KeyForm::kDecimal;
    return true;
  }
  if (ParseIpv4(bytes, &out->id)) {
    out->form = KeyForm::kIpv4;
    return true;
  }
  return false;
}

Identity IdentityOfText(std::string_view bytes, const Fingerprint& fp) {
  Identity r;
  if (ShortIdentityOfText(bytes, &r)) return r;
  return {fp.lo, KeyForm::kHashed};
}

}  // namespace frs::store

namespace frs {

void PrepareKey(KeyRef* key) {
  store::Identity ident;
  if (key->bytes.empty() || key->bytes.size() != key->key_len) {
    ident = {key->fp.lo, store::KeyForm::kHashed};  // an import by fingerprint
  } else if (!store::ShortIdentityOfText(key->bytes, &ident)) {
    key->fp = FingerprintOf(key->biz, key->bytes);
    ident = {key->fp.lo, store::KeyForm::kHashed};
  }
  key->ident = ident.id;
  key->ident_form = static_cast<uint8_t>(ident.form);
  key->place = store::PlaceHash(key->biz, ident);
  key->prepared = true;
  key->located_by = 0;  // the identity may be another than when it was located
}

}  // namespace frs

namespace frs::store {

std::string TextOf(const Identity& ident) {
  switch (ident.form) {
    case KeyForm::kShort: {
      std::string s;
      for (int i = 0; i < 8; ++i) {
        const char c = static_cast<char>(ident.id >> (8 * i));
        if (c == 0) break;
        s.push_back(c);
      }
      return s;
    }
    case KeyForm::kDecimal: return std::to_string(ident.id);
    case KeyForm::kIpv4:
      return std::to_string(ident.id >> 24 & 255) + "." + std::to_string(ident.id >> 16 & 255) + "." +
             std::to_string(ident.id >> 8 & 255) + "." + std::to_string(ident.id & 255);
    case KeyForm::kHashed: break;
  }
  return {};
}

}  // namespace frs::store
