#include "server/allow_list.h"

#include <netinet/in.h>

namespace frs::server {

Result<AllowList> AllowList::Parse(const std::vector<std::string>& entries) {
  AllowList list;
  for (const std::string& e : entries) {
    auto range = ParseCidr(e);
    if (!range.ok()) return Status::InvalidArgument("allow entry " + range.status().message());
    list.ranges_.push_back(range.value());
  }
  return list;
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
  for (const Cidr& r : ranges_)
    if (r.Contains(v6, addr)) return true;
  return false;
}

}  // namespace frs::server
