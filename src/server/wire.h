// server/wire.h: the words of the XML protocol that the decoder, the
// encoder and the handler share: one request as it came off the wire, a
// decoding error, and what a command is (admin, routed, its wire name).
//
// A WireRequest's strings are views into the buffers it was decoded from
// (see request_decoder.h); it is a plain value.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "frs/engine.h"

namespace frs::server {

struct WireRequest {
  Cmd cmd = Cmd::kQuery;
  std::string_view biz, key, token;
  // The route as sent (GET: the raw, still %-encoded query values, as a
  // proxy hashes them; see frs/ring.h): `route` is the route parameter,
  // `route_key` the key as its hash tag is looked for in. Empty route_key:
  // the decoded key.
  std::string_view route, route_key;
  std::string_view receipt, node;  // cmd="merge"
  bool replace = false;            // cmd="merge": the node replaces this store's (ReplaceNodes)
  bool has_replace = false;
  std::string_view lease;        // cmd="release", "renew"
  std::string_view reservation;  // cmd="settle"
  int64_t reserve = 0;           // cmd="acquire": hold n for this many seconds
  uint32_t route_pos = 0;        // filled by the handler
  bool route_known = false;
  SerialHalf serial_half = SerialHalf::kAll;  // filled by the handler: which holder of the route this shard is
  int64_t n = 1;
  int64_t count = 0;
  bool has_token = false;

  Request ToEngine() const {
    Request r;
    r.cmd = cmd;
    r.biz = biz;
    r.key = key;
    r.n = n;
    r.count = count;
    r.lease = lease;
    r.reservation = reservation;
    r.reserve = reserve;
    r.route_pos = route_pos;
    r.route_known = route_known;
    r.serial_half = serial_half;
    return r;
  }
};

struct ProtocolError {
  int status = 0;   // HTTP status (400, 404, ...)
  std::string msg;  // one sentence
};

// Commands that need the admin token.
inline bool IsAdmin(Cmd cmd) {
  return cmd == Cmd::kSet || cmd == Cmd::kDelete || cmd == Cmd::kReset || cmd == Cmd::kMerge;
}
// Commands about one key, which its route's owner answers (not reset, stats, merge).
inline bool IsRouted(Cmd cmd) { return cmd != Cmd::kReset && cmd != Cmd::kStats && cmd != Cmd::kMerge; }
// The one place an engine or store Status becomes an HTTP status.
int HttpStatusFor(const Status& s);

}  // namespace frs::server
