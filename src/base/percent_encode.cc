#include "frs/percent_encode.h"

#include "frs/key.h"

namespace frs {

namespace {

void Escape(unsigned char c, std::string* out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out->push_back('%');
  out->push_back(kHex[c >> 4]);
  out->push_back(kHex[c & 15]);
}

}  // namespace

void AppendPercentEncoded(std::string_view s, const PercentTable& table, std::string* out) {
  for (size_t i = 0; i < s.size();) {
    // A run of ASCII bytes that pass goes in one append: byte by byte, an
    // Envoy descriptor's counter key cost 1,000 instructions a call.
    size_t run = i;
    while (run < s.size() && static_cast<unsigned char>(s[run]) < 0x80 &&
           table.KeepsAscii(static_cast<unsigned char>(s[run])))
      ++run;
    if (run > i) {
      out->append(s.data() + i, run - i);
      i = run;
      continue;
    }
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (table.KeepsAscii(c)) out->push_back(static_cast<char>(c));
      else Escape(c, out);
      ++i;
      continue;
    }
    switch (table.high()) {
      case PercentHigh::kKeep: out->push_back(static_cast<char>(c)); break;
      case PercentHigh::kEscape: Escape(c, out); break;
      case PercentHigh::kKeyChars: {
        if (const size_t n = KeyCharLength(s.substr(i)); n != 0) {
          out->append(s.substr(i, n));
          i += n;
          continue;
        }
        Escape(c, out);
        break;
      }
    }
    ++i;
  }
}

std::string PercentEncoded(std::string_view s, const PercentTable& table) {
  std::string out;
  out.reserve(s.size());
  AppendPercentEncoded(s, table, &out);
  return out;
}

}  // namespace frs
