// libFuzzer target, differential: ShouldRateLimit's message decoded from its
// bytes directly (DecodeRateLimitRequest, the worker's path) against
// protobuf's parser, the oracle. Whatever the bytes, a message the direct
// decoder takes must be one protobuf parses, to the same request; one it
// declines goes to protobuf in the server, so declining is always allowed.
// A disagreement aborts, showing both.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "server/rls_request.h"
#include "server/rls_request_compare.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace frs::server;
  static frs::envoy::RlsRequest direct;  // kept, as the worker keeps its own
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (!DecodeRateLimitRequest(bytes, &direct)) return 0;
  ::envoy::service::ratelimit::v3::RateLimitRequest parsed;
  if (!parsed.ParseFromArray(data, static_cast<int>(size))) {
    std::fprintf(stderr, "decoded directly what protobuf refuses: %s\n", Show(direct).c_str());
    std::abort();
  }
  frs::envoy::RlsRequest want;
  RlsRequestFromProto(parsed, &want);
  if (!Same(direct, want)) {
    std::fprintf(stderr, "direct   %s\nprotobuf %s\n", Show(direct).c_str(), Show(want).c_str());
    std::abort();
  }
  return 0;
}
