#include "base/json_escape.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

namespace {

// How many leading bytes of `s` go out as they are: printable ASCII other
// than '"' and '\'. Nearly every string FRS writes (member names, hex,
// biz names, most keys) is that whole: appended in one copy, without the
// room for six bytes an input byte that escaping needs, zeroed and cut back
// (a replica snapshot of 300,000 nodes spent a sixth of its reading there).
size_t PlainPrefix(std::string_view s) {
  size_t i = 0;
#if defined(__SSE2__)
  // 16 bytes a step: as signed bytes, every one from 0x80 up is below 0x20.
  const __m128i space = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7F), quote = _mm_set1_epi8('"'),
                backslash = _mm_set1_epi8('\\');
  for (; s.size() - i >= 16; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    const __m128i bad = _mm_or_si128(_mm_or_si128(_mm_cmplt_epi8(v, space), _mm_cmpeq_epi8(v, del)),
                                     _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
    if (const int hits = _mm_movemask_epi8(bad); hits != 0) return i + static_cast<size_t>(__builtin_ctz(hits));
  }
#endif
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7F || c == '"' || c == '\\') break;
    ++i;
  }
  return i;
}

}  // namespace

void AppendJsonEscaped(std::string_view s, std::string* out) {
  const size_t plain = PlainPrefix(s);
  out->append(s.data(), plain);
  if (plain == s.size()) return;
  const std::string_view rest = s.substr(plain);
  const size_t old = out->size();
  out->resize(old + kJsonEscapedBytesPerByte * rest.size());
  char* end = JsonEscapeInto(rest, out->data() + old);
  out->resize(static_cast<size_t>(end - out->data()));
}

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  AppendJsonEscaped(s, out);
  out->push_back('"');
}

}  // namespace frs
