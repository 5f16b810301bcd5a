// tests/server/rls_request_compare.h: two RlsRequests compared field by
// field, and one shown, for the tests and the fuzz target that hold
// DecodeRateLimitRequest to what protobuf parses.
#pragma once

#include <sstream>
#include <string>

#include "envoy/rate_limit_service.h"

namespace frs::server {

inline std::string Show(const envoy::RlsRequest& r) {
  std::ostringstream o;
  o << "domain[" << r.domain.size() << "]=" << r.domain << " hits=" << r.hits;
  for (const auto& d : r.descriptors) {
    o << " {";
    for (const auto& e : d.entries) o << "(" << e.key << "," << e.value << ")";
    o << " has_hits=" << d.has_hits << " hits=" << d.hits << " neg=" << d.negative << " has_limit=" << d.has_limit
      << " rpu=" << d.limit_rpu << " unit=" << d.limit_unit << "}";
  }
  return o.str();
}

inline bool Same(const envoy::RlsRequest& a, const envoy::RlsRequest& b) {
  if (a.domain != b.domain || a.hits != b.hits || a.descriptors.size() != b.descriptors.size()) return false;
  for (size_t i = 0; i < a.descriptors.size(); ++i) {
    const auto &x = a.descriptors[i], &y = b.descriptors[i];
    if (x.entries.size() != y.entries.size() || x.has_hits != y.has_hits || x.hits != y.hits ||
        x.negative != y.negative || x.has_limit != y.has_limit || x.limit_rpu != y.limit_rpu ||
        x.limit_unit != y.limit_unit)
      return false;
    for (size_t k = 0; k < x.entries.size(); ++k)
      if (x.entries[k].key != y.entries[k].key || x.entries[k].value != y.entries[k].value) return false;
  }
  return true;
}

}  // namespace frs::server
