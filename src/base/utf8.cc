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

}  // namespace frs
