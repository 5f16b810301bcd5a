// server/decision_line.h: one decision as one line of JSON, the decision
// log's format (docs/configuration.md, <decisions>):
//
//   {"ts":1795625073261,"biz":"login","key":"user:42","rule":"login_1","allowed":false,"n":1,
//    "count":5,"limit":5,"remaining":0,"retry_after":41,"route":"user:42","client":"10.0.0.7"}
//
// (one line; a shadow-mode decision that enforce mode would have denied is
// written with "allowed":false and a last field "shadow":true).
//
// Why a writer of its own rather than a JSON library: the line is written
// on the request path, for every recorded decision, into a fixed buffer
// with no allocation; the fields are fixed and their bounds known.
//
// Strings are escaped by base/json_escape.h, so that every line is valid
// JSON in valid UTF-8 whatever bytes a request carried: `"` and `\` get a
// backslash, control characters become \u00XX, well-formed UTF-8 is copied
// as it is, and every byte outside a well-formed sequence becomes \u00XX of
// that byte (a reader gets U+00XX: the original byte is still recoverable).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "frs/key.h"

namespace frs::server {

struct DecisionRecord {
  int64_t ts_ms = 0;     // unix milliseconds of the decision
  std::string_view biz;  // the biz's name
  std::string_view key;
  std::string_view rule;  // the most restrictive rule's name
  bool allowed = true;
  bool shadow = false;  // written as "shadow":true (only with allowed=false)
  // Written as "reservations_full":true (only with allowed=false): denied,
  // or shadow-denied, because the key holds all the reservations its biz
  // allows, no rule past its limit.
  bool reservations_full = false;
  int64_t n = 1, count = 0, limit = 0, remaining = 0, retry_after = 0;
  std::string_view route;             // what the request was routed by (see docs/configuration.md)
  const IpAddress* client = nullptr;  // the connection's peer; null: "client":""
  // The biz's declared fields (map.xml `fields`, split at `separator`): a
  // key with exactly that many parts is also written field by field after
  // "client" ("app":"app7","user":"u42"), so no reader splits keys itself.
  // A name equal to one of the line's own members is written "field_NAME".
  std::span<const std::string> fields = {};
  char separator = ':';
  // An Envoy decision (gRPC ShouldRateLimit or POST /json): its domain and
  // descriptor path, written as "domain" and "descriptor" when not empty.
  std::string_view domain = {}, descriptor = {};
};

// Every decision makes a line: a string longer than its field's cap is cut
// (at a character boundary) to its first cap bytes followed by the marker
// kDecisionTruncated, and the line ends with "truncated":true. The caps are
// well above what the engine accepts (a key is at most 255 bytes, a biz name
// 64, a rule name 32), so in practice only a GET's route, which is as long
// as the request line allows, is ever cut. Dropping the line instead let a
// client keep its decisions out of the log with a long route.
inline constexpr size_t kDecisionBizCap = 256, kDecisionKeyCap = 1024, kDecisionRuleCap = 256, kDecisionRouteCap = 1024;
inline constexpr std::string_view kDecisionTruncated = "...";
// The longest line: field names and punctuation (< 200 bytes), six integers,
// the client (< 46) and every string at its cap, six bytes a byte escaped.
// The key's fields add at most 16 names (32 bytes, or 38 with "field_")
// and the key's bytes again; an Envoy decision its domain and descriptor,
// each at the biz's cap.
inline constexpr size_t kMaxDecisionFields = 16;
inline constexpr size_t kMaxDecisionLineBytes = 32768;
static_assert(400 + 6 * (kDecisionBizCap + kDecisionKeyCap + kDecisionRuleCap + kDecisionRouteCap + 4 * 3) +
                  kMaxDecisionFields * (38 + 8) + 6 * kDecisionKeyCap + 20 + 6 * 2 * (kDecisionBizCap + 3) <=
              kMaxDecisionLineBytes);

// Writes the line, its '\n' included, into `out`; returns its length, or 0
// when `out` is shorter than kMaxDecisionLineBytes and the line does not fit.
size_t FormatDecisionLine(const DecisionRecord& r, std::span<char> out);

// The peer's address as text into `buf` (INET6_ADDRSTRLEN bytes); an IPv4
// address mapped into IPv6 (a dual-stack socket) is written as IPv4; "" for
// none. The decision log's "client", and the worker's lines about a peer.
std::string_view ClientText(const IpAddress* ip, char* buf, size_t cap);

}  // namespace frs::server
