#include "server/allow_list.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstring>

namespace frs::server {

Result<AllowList> AllowList::Parse(const std::vector<std::string>& entries) {
  AllowList list;
  for (const std::string& e : entries) {
    Range r;
    std::string addr = e;
    int64_t prefix = -1;
    size_t slash = e.find('/');
    if (slash != std::string::npos) {
      addr = e.substr(0, slash);
      const char* b = e.data() + slash + 1;
      const char* end = e.data() + e.size();
      uint32_t v = 0;
      auto [p, ec] = std::from_chars(b, end, v);
      if (ec != std::errc() || p != end || b == end) return Status::InvalidArgument("allow entry \"" + e + "\" has a bad prefix length");
      prefix = v;
    }
    if (inet_pton(AF_INET, addr.c_str(), r.addr) == 1) {
      r.v6 = false;
      if (prefix > 32) return Status::InvalidArgument("allow entry \"" + e + "\": an IPv4 prefix is at most 32");
      r.prefix = prefix < 0 ? 32 : static_cast<uint32_t>(prefix);
    } else if (inet_pton(AF_INET6, addr.c_str(), r.addr) == 1) {
      r.v6 = true;
      if (prefix > 128) return Status::InvalidArgument("allow entry \"" + e + "\": an IPv6 prefix is at most 128");
      r.prefix = prefix < 0 ? 128 : static_cast<uint32_t>(prefix);
    } else {
      return Status::InvalidArgument("allow entry \"" + e + "\" is not an address or CIDR range");
    }
    list.ranges_.push_back(r);
  }
  return list;
}

bool AllowList::Match(const Range& r, bool v6, const uint8_t* addr) {
  if (r.v6 != v6) return false;
  uint32_t full = r.prefix / 8, rest = r.prefix % 8;
  if (std::memcmp(r.addr, addr, full) != 0) return false;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xFF00u >> rest);
  return (r.addr[full] & mask) == (addr[full] & mask);
}

bool AllowList::Allows(const sockaddr* peer) const {
  if (ranges_.empty()) return true;
  const uint8_t* addr = nullptr;
  bool v6 = false;
  if (peer->sa_family == AF_INET) {
    addr = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(peer)->sin_addr);
  } else if (peer->sa_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(peer);
    addr = a->sin6_addr.s6_addr;
    v6 = true;
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
      addr += 12;
      v6 = false;
    }
  } else {
    return false;
  }
  for (const Range& r : ranges_)
    if (Match(r, v6, addr)) return true;
  return false;
}

}  // namespace frs::server
