#include "base/json_escape.h"

#include <cstring>

#include "base/utf8.h"

namespace frs {

char* JsonEscapeInto(std::string_view s, char* p) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      *p++ = static_cast<char>(c);
      ++i;
      continue;
    }
    if (c == '"' || c == '\\') {
      *p++ = '\\';
      *p++ = static_cast<char>(c);
      ++i;
      continue;
    }
    if (c >= 0x80) {
      if (const size_t len = Utf8Decode(s, i); len != 0) {
        std::memcpy(p, s.data() + i, len);
        p += len;
        i += len;
        continue;
      }
    }
    // A control character, or a byte outside any well-formed sequence.
    std::memcpy(p, "\\u00", 4);
    p[4] = kHex[c >> 4];
    p[5] = kHex[c & 15];
    p += 6;
    ++i;
  }
  return p;
}

void AppendJsonEscaped(std::string_view s, std::string* out) {
  const size_t old = out->size();
  out->resize(old + kJsonEscapedBytesPerByte * s.size());
  char* end = JsonEscapeInto(s, out->data() + old);
  out->resize(static_cast<size_t>(end - out->data()));
}

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  AppendJsonEscaped(s, out);
  out->push_back('"');
}

}  // namespace frs
