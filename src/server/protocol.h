// server/protocol.h: the XML protocol: request bodies and query strings in,
// response XML out.
//
// Decoding reads the common body shapes with a strict scanner of its own
// (xml_scanner.h) and everything else in place with pugixml (the strings the
// decoded requests point at live in the body buffer and in the decoder's
// document, valid until the next Decode). Every error is a ProtocolError
// with the contract's status and one sentence naming what is wrong; nothing
// is executed for a request that does not decode.
//
// Encoding appends to a caller's reused std::string, in the contract's exact
// attribute order (code allowed count limit remaining reset retry_after,
// then shadow/found/... extras), numbers with std::to_chars.
//
// Thread safety: a decoder per worker (it reuses its document); the encoders
// are pure functions.
#pragma once

#include <pugixml.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frs/engine.h"
#include "frs/ring.h"
#include "frs/store.h"

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
  uint32_t route_pos = 0;          // filled by the handler
  bool route_known = false;
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
    r.route_pos = route_pos;
    r.route_known = route_known;
    return r;
  }
};

struct ProtocolError {
  int status = 0;     // HTTP status (400, 404, ...)
  std::string msg;    // one sentence
};

bool IsAdmin(Cmd cmd);
// The one place an engine or store Status becomes an HTTP status.
int HttpStatusFor(const Status& s);
// Commands about one key, which its route's owner answers (not reset, stats, merge).
bool IsRouted(Cmd cmd);
const char* WireCmdName(Cmd cmd);

class XmlRequestDecoder {
 public:
  // `fast_path` false: every body goes through pugixml (for the tests that
  // compare the two paths).
  explicit XmlRequestDecoder(bool fast_path = true) : fast_path_(fast_path) {}

  // Decodes `<request .../>` or `<batch>` of 1..max_batch requests from
  // body[0, len) (modified in place). Returns false with `err` set.
  bool Decode(char* body, size_t len, uint32_t max_batch, std::vector<WireRequest>* out, bool* is_batch,
              ProtocolError* err);
  // The last decoded batch asked for <batch answer="compact">.
  bool compact() const { return compact_; }
  // The last Decode took the fast scanner's path (xml_scanner.h).
  bool last_was_fast() const { return last_was_fast_; }

 private:
  pugi::xml_document doc_;
  bool fast_path_;
  bool compact_ = false;
  bool last_was_fast_ = false;
};

// GET /acquire?biz=B&key=K[&n=N][&route=R] (cmd is acquire or query). `out`
// points into `query` where a value holds nothing to decode, else into the
// two buffers (reused) it is percent-decoded into. '+' decodes to a space,
// as in HTML forms: send %2B for a literal plus.
bool DecodeQuery(std::string_view query, Cmd cmd, std::string* biz_buf, std::string* key_buf, WireRequest* out,
                 ProtocolError* err);

// POST /frs?route=R: the only query parameter it takes (kept as sent).
bool DecodePostQuery(std::string_view query, std::string_view* route, ProtocolError* err);

// `in` with %XX and '+' decoded: `in` itself when it holds neither, else
// decoded into `buf`. False for a bad escape.
bool PercentDecode(std::string_view in, std::string* buf, std::string_view* out);
void AppendXmlEscaped(std::string_view text, std::string* out);
void AppendError(int code, std::string_view msg, std::string* out);
// 421: `route` belongs to shard `owner` of the cluster.
void AppendMisrouted(std::string_view route, std::string_view owner, std::string* out);
// One <response> for a successful (code 0) decision of `cmd`.
void AppendDecision(Cmd cmd, const Decision& d, std::string* out);
// The same into `buf` (at least kMaxDecisionBytes); returns its length.
inline constexpr size_t kMaxDecisionBytes = 4096;
size_t WriteDecision(Cmd cmd, const Decision& d, char* buf);
void AppendBatch(bool allowed, std::span<const WireRequest> reqs, std::span<const Decision> decisions,
                 std::string* out);
// <batch answer="compact">: one <m a="0|1" r="REMAINING" t="RESET"/> per
// member (w="RETRY_AFTER" when denied; code= and msg= for a member error).
void AppendBatchCompact(bool allowed, std::span<const Decision> decisions, std::string* out);
// The cluster this server is a shard of, for `stats` (null: none).
struct ClusterView {
  std::shared_ptr<const Ring> ring;
  std::string self;        // this shard's name on the ring
  long self_index = -1;    // in ring->shards(); -1: owns nothing (being removed)
  bool enforce = true;
};
void AppendStats(const StoreStats& st, const std::vector<BizStats>& bizzes, const ClusterView* cluster,
                 std::string* out);

}  // namespace frs::server
