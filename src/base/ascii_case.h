// base/ascii_case.h: text compared with a lower-case constant, its ASCII
// letters in either case: the words of HTTP that are not case sensitive
// (media types, URI schemes). One place for what three parsers wrote each.
//
// Thread safety: pure functions.
#pragma once

#include <string_view>

namespace frs {

inline char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Whether `text` is `lower` (lower case) in any case of its ASCII letters.
inline bool EqualsAsciiLower(std::string_view text, std::string_view lower) {
  if (text.size() != lower.size()) return false;
  for (size_t i = 0; i < lower.size(); ++i)
    if (AsciiLower(text[i]) != lower[i]) return false;
  return true;
}

// Whether `text` starts with `lower` in any case of its ASCII letters.
inline bool StartsWithAsciiLower(std::string_view text, std::string_view lower) {
  return text.size() >= lower.size() && EqualsAsciiLower(text.substr(0, lower.size()), lower);
}

}  // namespace frs
