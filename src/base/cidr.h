// base/cidr.h: an address range written as CIDR ("10.0.0.0/8", "fd00::/8")
// or as one address ("192.168.1.7", "::1"): srv.xml's <allow> entries, read
// by one parser whether srv.xml is being checked or a worker builds its list.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "frs/key.h"
#include "frs/status.h"

namespace frs {

struct Cidr {
  IpAddress addr;
  uint32_t prefix = 0;  // the leading bits that must match: 0..32 (IPv4), 0..128 (IPv6)

  // Whether `ip` (4 bytes, or 16 when `v6`) lies in the range.
  bool Contains(bool v6, const uint8_t* ip) const;
};

// An address alone covers itself (/32, /128). The error says what is wrong
// with `text`, quoted.
Result<Cidr> ParseCidr(std::string_view text);

}  // namespace frs
