// base/xml_escape.h: text put into XML (an attribute value or element
// text), escaped once for every writer of XML: the server's answers and the
// client's requests.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace frs {

// What becomes of a byte that is not part of a character XML 1.0 allows (a
// stray or truncated UTF-8 byte, an overlong form, a surrogate,
// U+FFFE/U+FFFF, a control character).
enum class XmlBadBytes {
  kReplace,  // '?': the output stays well-formed XML whatever the text holds
  kKeep,     // as is: the reader judges them (a request's key the server checks)
};

// Appends `text` with & < > " ' written as entities.
void AppendXmlEscaped(std::string_view text, std::string* out, XmlBadBytes bad = XmlBadBytes::kReplace);

}  // namespace frs
