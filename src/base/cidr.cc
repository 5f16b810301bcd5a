#include "base/cidr.h"

#include <charconv>
#include <cstring>
#include <string>

namespace frs {

Result<Cidr> ParseCidr(std::string_view text) {
  const std::string quoted = "\"" + std::string(text) + "\"";
  const size_t slash = text.find('/');
  int64_t prefix = -1;
  if (slash != std::string_view::npos) {
    // Digits only: no sign, no spaces.
    const std::string_view bits = text.substr(slash + 1);
    uint32_t v = 0;
    auto [p, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), v);
    if (ec != std::errc() || p != bits.data() + bits.size() || bits.empty())
      return Status::InvalidArgument(quoted + " has a bad prefix length");
    prefix = v;
  }
  Cidr c;
  if (!IpAddress::Parse(text.substr(0, slash), &c.addr))
    return Status::InvalidArgument(quoted + " is not an address or CIDR range");
  const uint32_t bits = c.addr.v6 ? 128 : 32;
  if (prefix > int64_t{bits})
    return Status::InvalidArgument(quoted +
                                   (c.addr.v6 ? ": an IPv6 prefix is at most 128" : ": an IPv4 prefix is at most 32"));
  c.prefix = prefix < 0 ? bits : static_cast<uint32_t>(prefix);
  return c;
}

bool Cidr::Contains(bool v6, const uint8_t* ip) const {
  if (addr.v6 != v6) return false;
  const uint32_t full = prefix / 8, rest = prefix % 8;
  if (std::memcmp(addr.addr, ip, full) != 0) return false;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xFF00u >> rest);
  return (addr.addr[full] & mask) == (ip[full] & mask);
}

}  // namespace frs
