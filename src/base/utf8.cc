#include "base/utf8.h"

namespace frs {

std::string_view Utf8ValidPrefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = Utf8Decode(s, i);
    if (n == 0) break;
    i += n;
  }
  return s.substr(0, i);
}

std::string Utf8Repaired(std::string_view s) {
  if (Utf8ValidPrefix(s).size() == s.size()) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8Decode(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace frs
