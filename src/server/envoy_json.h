// server/envoy_json.h: envoyproxy/ratelimit's POST /json: a RateLimitRequest
// and its RateLimitResponse in protobuf's JSON mapping, for clients that
// cannot speak gRPC (a Lua script, curl):
//
//   {"domain":"rl","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.7"}]}],"hitsAddend":1}
//
//   {"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT",
//    "currentLimit":{"requestsPerUnit":10,"unit":"SECOND"},"durationUntilReset":"1s"}]}
//
// As protojson reads and writes them: field names in lowerCamelCase or as the
// .proto spells them (hits_addend), 64-bit integers as numbers or decimal
// strings, a field of an unknown name or given twice (under either name)
// refused; enums by name, a field at its default value left out
// (limitRemaining 0, a status with no limit has no currentLimit), a Duration
// as "Ns". A descriptor's `limit` (the override Envoy may send) is read and,
// as on gRPC, applied.
//
// nlohmann::json throws; this codec is the boundary: nothing thrown leaves it.
//
// Thread safety: one per worker (it keeps the parsed document the request's
// views point into).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "envoy/rate_limit_service.h"
#include "frs/status.h"

namespace frs::server {

class EnvoyJson {
 public:
  EnvoyJson();
  ~EnvoyJson();
  // Parses `body` into `req` (cleared first); its strings point into this
  // codec, valid until the next Decode. InvalidArgument with a message that
  // says what is wrong and where.
  Status Decode(std::string_view body, envoy::RlsRequest* req);
  // The answer in envoyproxy/ratelimit's JSON shape.
  // False (and nothing appended) when it could not be written: a 500.
  static bool Encode(const envoy::RlsAnswer& a, std::string* out);

 private:
  struct Doc;  // the parsed document (nlohmann::json, kept out of this header)
  std::unique_ptr<Doc> doc_;
};

}  // namespace frs::server
