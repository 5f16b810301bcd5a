// server/request_decoder.h: requests in: POST bodies of XML and the query
// strings of GET and POST.
//
// Bodies are read in their common shapes with a strict scanner of its own
// (xml_scanner.h) and everything else in place with pugixml (the strings the
// decoded requests point at live in the body buffer and in the decoder's
// document, valid until the next Decode). Every error is a ProtocolError
// with the contract's status and one sentence naming what is wrong; nothing
// is executed for a request that does not decode.
//
// Thread safety: a decoder per worker (it reuses its document); the query
// decoders are pure functions.
#pragma once

#include <pugixml.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/wire.h"

namespace frs::server {

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
  // After a failed Decode of one <request>: its cmd, when it named one (the
  // metrics count the failure under it, not under "none").
  std::optional<Cmd> failed_cmd() const { return failed_cmd_; }

 private:
  pugi::xml_document doc_;
  bool fast_path_;
  bool compact_ = false;
  bool last_was_fast_ = false;
  std::optional<Cmd> failed_cmd_;
};

// GET /acquire?biz=B&key=K[&n=N][&route=R] (cmd is acquire or query), and
// /release or /renew?biz=B&key=K&lease=ID[&route=R], /settle with
// reservation=ID and n, reserve=S on /acquire. `out` points into `query`
// where a value holds nothing to decode, else into the buffers (reused) it
// is percent-decoded into (`id_buf`: the lease's or the reservation's id).
// '+' decodes to a space, as in HTML forms: send %2B for a literal plus.
// Only route is kept as sent.
bool DecodeQuery(std::string_view query, Cmd cmd, std::string* biz_buf, std::string* key_buf, std::string* id_buf,
                 WireRequest* out, ProtocolError* err);

// POST /frs?route=R: the only query parameter it takes (kept as sent).
bool DecodePostQuery(std::string_view query, std::string_view* route, ProtocolError* err);

// The one walk over a query string's pairs (the GET forms, POST /frs?route,
// /replicate, /stats): the next name=value pair of *query, which moves on
// past it (empty pairs skipped; a pair without '=' has an empty value);
// false at its end. Nothing is decoded: PercentDecode each value as needed.
bool NextQueryParam(std::string_view* query, std::string_view* name, std::string_view* value);

// `in` with %XX and '+' decoded: `in` itself when it holds neither, else
// decoded into `buf`. False for a bad escape.
bool PercentDecode(std::string_view in, std::string* buf, std::string_view* out);

}  // namespace frs::server
