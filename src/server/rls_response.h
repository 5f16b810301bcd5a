// server/rls_response.h: ShouldRateLimit's RateLimitResponse from an
// RlsAnswer, two ways that give the same bytes:
//  - FillRateLimitResponse: the protobuf message (overall_code and one
//    DescriptorStatus per descriptor), to which GrpcMethods adds the
//    optional response headers and dynamic metadata;
//  - EncodeRateLimitResponse: the wire bytes of that message written
//    directly, as protobuf serializes it (fields in number order, proto3
//    defaults left out, a sub-message present whenever it is set), for the
//    common answer without headers or metadata: no message objects to
//    clear, allocate and walk (about 1,000 instructions of a lone call,
//    docs/performance.md). tests/server/rls_response_test.cc holds the two
//    byte for byte equal.
//
// Thread safety: pure functions over the caller's answer and message.
#pragma once

#include <string>

#include "envoy/rate_limit_service.h"

namespace envoy::service::ratelimit::v3 {
class RateLimitResponse;
}

namespace frs::server {

// `r` cleared, then overall_code and the statuses of `a`.
void FillRateLimitResponse(const envoy::RlsAnswer& a, ::envoy::service::ratelimit::v3::RateLimitResponse* r);

// `out` = the serialization of what FillRateLimitResponse makes of `a`.
void EncodeRateLimitResponse(const envoy::RlsAnswer& a, std::string* out);

}  // namespace frs::server
