#include "base/xml_escape.h"

#include "base/utf8.h"

namespace frs {

namespace {

// The length of the well-formed UTF-8 sequence at the start of `s` that
// encodes a character XML 1.0 allows, or 0 (a stray or truncated byte, an
// overlong form, a surrogate, U+FFFE/U+FFFF, a control character).
size_t XmlCharLength(std::string_view s) {
  char32_t cp = 0;
  const size_t n = Utf8Decode(s, 0, &cp);
  if (n == 0) return 0;
  if (cp < 0x20) return cp == '\t' || cp == '\n' || cp == '\r' ? 1 : 0;
  return cp == 0xfffe || cp == 0xffff ? 0 : n;
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
