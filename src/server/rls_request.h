// server/rls_request.h: ShouldRateLimit's RateLimitRequest into an
// RlsRequest, two ways that give the same request:
//  - RlsRequestFromProto: from the message protobuf parsed;
//  - DecodeRateLimitRequest: from the wire bytes directly, for a message
//    in the shape clients write (each field with its own wire type, no
//    field unknown to rls.proto, a descriptor's `limit` and `hits_addend`
//    once each): no message to clear and parse into, and none of
//    protobuf's parser in the worker's path (its code, and indirect calls
//    a lone call mispredicted twice, made the gRPC path the longest in
//    the worker: docs/performance.md). Anything else it declines, and the
//    caller parses with protobuf, so that every message means what
//    protobuf makes of it (unknown fields skipped, sub-messages merged, a
//    malformed message refused). tests/server/rls_request_test.cc holds
//    the two equal, on messages protobuf wrote and on damaged ones.
// The request's views point into the bytes decoded (or into the message).
//
// Thread safety: pure functions over the caller's message and `out`.
#pragma once

#include <string_view>

#include "envoy/rate_limit_service.h"

namespace envoy::service::ratelimit::v3 {
class RateLimitRequest;
}

namespace frs::server {

// `out` from `in` (its descriptors' entry vectors kept for their capacity).
void RlsRequestFromProto(const ::envoy::service::ratelimit::v3::RateLimitRequest& in, envoy::RlsRequest* out);

// `out` from `message`; false when the message is not in the shape above
// (`out` is then unspecified: parse it with protobuf).
bool DecodeRateLimitRequest(std::string_view message, envoy::RlsRequest* out);

}  // namespace frs::server
