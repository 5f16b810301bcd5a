#include "server/h2_frame.h"

namespace frs::server::h2 {

void AppendHpackInt(std::string* out, uint8_t high, int prefix_bits, uint64_t v) {
  const uint64_t max = (uint64_t{1} << prefix_bits) - 1;
  if (v < max) {
    out->push_back(static_cast<char>(high | v));
    return;
  }
  out->push_back(static_cast<char>(high | max));
  for (v -= max; v >= 128; v >>= 7) out->push_back(static_cast<char>(0x80 | (v & 0x7f)));
  out->push_back(static_cast<char>(v));
}

void AppendLiteral(std::string* out, uint8_t name_index, std::string_view name, std::string_view value) {
  // 0000xxxx: without indexing, xxxx the name's index (4-bit prefix).
  AppendHpackInt(out, 0x00, 4, name_index);
  if (name_index == 0) {
    AppendHpackInt(out, 0x00, 7, name.size());  // H = 0: not Huffman-coded
    out->append(name);
  }
  AppendHpackInt(out, 0x00, 7, value.size());
  out->append(value);
}

}  // namespace frs::server::h2
