// frs/percent_encode.h: bytes written as %XX (RFC 3986, 2.1), the one
// encoder for every %-escaped text FRS writes: query values, gRPC's
// grpc-message, the replication stream's keys, frsctl's spool, keys built
// from Envoy's descriptors. What differs between them is only which bytes
// pass as themselves: a PercentTable, one per use, defined beside its user
// unless several share it.
//
// Thread safety: pure functions; tables are constants.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace frs {

// What becomes of the bytes from 0x80 up.
enum class PercentHigh : uint8_t {
  kEscape,    // every one as %XX (the text's UTF-8 bytes, one escape each)
  kKeep,      // every one as itself, well-formed or not
  kKeyChars,  // a character a key may hold (frs::KeyCharLength: well-formed
              // UTF-8, no C1 control) as itself; any other byte as %XX
};

// Which bytes pass as themselves; every other byte becomes %XX.
class PercentTable {
 public:
  // The ASCII bytes from `first` to `last` pass, but those in `except`.
  constexpr PercentTable(char first, char last, std::string_view except, PercentHigh high) : high_(high) {
    for (int c = first; c <= last; ++c) Set(static_cast<unsigned char>(c));
    for (char c : except) Clear(static_cast<unsigned char>(c));
  }

  // RFC 3986's unreserved characters: A-Z a-z 0-9 - . _ ~.
  static constexpr PercentTable Unreserved() {
    PercentTable t('0', '9', "", PercentHigh::kEscape);
    for (char c = 'A'; c <= 'Z'; ++c) t.Set(static_cast<unsigned char>(c));
    for (char c = 'a'; c <= 'z'; ++c) t.Set(static_cast<unsigned char>(c));
    for (char c : std::string_view("-._~")) t.Set(static_cast<unsigned char>(c));
    return t;
  }

  // True when the ASCII byte `c` (below 0x80) passes.
  constexpr bool KeepsAscii(unsigned char c) const { return (ascii_[c >> 6] >> (c & 63) & 1) != 0; }
  constexpr PercentHigh high() const { return high_; }

 private:
  constexpr void Set(unsigned char c) { ascii_[c >> 6] |= uint64_t{1} << (c & 63); }
  constexpr void Clear(unsigned char c) { ascii_[c >> 6] &= ~(uint64_t{1} << (c & 63)); }

  uint64_t ascii_[2] = {0, 0};
  PercentHigh high_;
};

// A query parameter's value (frsd decodes %XX and '+' in any value): only
// the unreserved characters pass, so that a route, a key or a token reads
// the same to frsd, to a proxy and in a log.
inline constexpr PercentTable kPercentQueryValue = PercentTable::Unreserved();

// Appends `s` with every byte `table` does not pass as %XX (upper-case hex).
void AppendPercentEncoded(std::string_view s, const PercentTable& table, std::string* out);
std::string PercentEncoded(std::string_view s, const PercentTable& table);

}  // namespace frs
