#include "base/xml_escape.h"

#include <cstdint>

namespace frs {

namespace {

// The length of the well-formed UTF-8 sequence at the start of `s` that
// encodes a character XML 1.0 allows, or 0 (a stray or truncated byte, an
// overlong form, a surrogate, U+FFFE/U+FFFF, a control character).
size_t XmlCharLength(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return c >= 0x20 || c == '\t' || c == '\n' || c == '\r' ? 1 : 0;
  size_t n;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
  else return 0;
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (b(i) & 0x3f);
  }
  const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff) return 0;
  return n;
}

}  // namespace

void AppendXmlEscaped(std::string_view text, std::string* out, XmlBadBytes bad) {
  // Whatever the text holds (a route or key echoed back may be any bytes),
  // an answer stays well-formed XML: markup characters are escaped, and a
  // byte that is not part of a character XML allows becomes '?' (kReplace).
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    switch (c) {
      case '&': out->append("&amp;"); break;
      case '<': out->append("&lt;"); break;
      case '>': out->append("&gt;"); break;
      case '"': out->append("&quot;"); break;
      case '\'': out->append("&apos;"); break;
      default: {
        const size_t n = bad == XmlBadBytes::kKeep ? 1 : XmlCharLength(text.substr(i));
        if (n == 0) {
          out->push_back('?');
          ++i;
        } else {
          out->append(text.data() + i, n);
          i += n;
        }
        continue;
      }
    }
    ++i;
  }
}

}  // namespace frs
