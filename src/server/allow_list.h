// server/allow_list.h: the optional <allow> list of CIDR ranges.
//
// An empty list allows every peer. A connection from a peer outside the list
// is closed right after accept, before any byte is read. IPv4 peers reaching
// an IPv6 socket (::ffff:a.b.c.d) are matched against the IPv4 ranges.
//
// Thread safety: immutable after Parse.
#pragma once

#include <sys/socket.h>

#include <string>
#include <vector>

#include "base/cidr.h"
#include "frs/status.h"

namespace frs::server {

class AllowList {
 public:
  // Entries are "10.0.0.0/8", "192.168.1.7", "::1", "fd00::/8".
  static Result<AllowList> Parse(const std::vector<std::string>& entries);

  bool empty() const { return ranges_.empty(); }
  bool Allows(const sockaddr* peer) const;

 private:
  std::vector<Cidr> ranges_;
};

}  // namespace frs::server
