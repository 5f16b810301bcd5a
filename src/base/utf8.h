// base/utf8.h: UTF-8 read one character at a time. The one decoder for
// every module that judges, cuts or escapes text (keys, XML answers, JSON
// strings, the decision log, %-escaped keys), so that they agree on what
// is a character.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace frs {

// The well-formed UTF-8 sequence that starts at s[i] (Unicode 15, table
// 3-7): its length, 1 to 4, with its code point in *cp when cp is given.
// 0 when s[i] starts none: a continuation byte, C0/C1 or F5..FF, an
// overlong form, a surrogate (U+D800..U+DFFF), a code point above U+10FFFF,
// or a sequence cut short by the end of s. Requires i < s.size().
// Inline: the decision log calls it for every byte above 0x7F it writes.
inline size_t Utf8Decode(std::string_view s, size_t i, char32_t* cp = nullptr) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = at(i);
  if (c < 0x80) {
    if (cp != nullptr) *cp = c;
    return 1;
  }
  // The first continuation byte's range is what rules out the overlong
  // forms (E0, F0), the surrogates (ED) and what lies past U+10FFFF (F4).
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  char32_t v;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    v = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;
    else if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    v = c & 0x07;
    if (c == 0xF0) lo = 0x90;
    else if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() - i < n || at(i + 1) < lo || at(i + 1) > hi) return 0;
  v = v << 6 | (at(i + 1) & 0x3F);
  for (size_t k = 2; k < n; ++k) {
    if ((at(i + k) & 0xC0) != 0x80) return 0;
    v = v << 6 | (at(i + k) & 0x3F);
  }
  if (cp != nullptr) *cp = v;
  return n;
}

// The longest prefix of `s` made of whole well-formed sequences: `s` cut
// before the first byte Utf8Decode refuses.
std::string_view Utf8ValidPrefix(std::string_view s);

// `s` with each byte that starts no well-formed sequence replaced by U+FFFD
// (EF BF BD): text for a place that must be UTF-8 (a protobuf string field,
// which Envoy's parser refuses whole otherwise) from bytes that may not be.
std::string Utf8Repaired(std::string_view s);

}  // namespace frs
