// libFuzzer target, differential: the fast scanner (server/xml_scanner.h)
// against pugixml's path, on any body.
//
// The scanner promises that a body it accepts decodes to exactly what
// pugixml's path decodes, and that it hands every other body to pugixml.
// xml_scanner_test.cc checks that on hand-written and generated bodies; this
// target lets libFuzzer look for a body where the two disagree: a different
// verdict, a different error, or a different field in any member. The
// first byte picks the batch limit, so that the limit's own error is fuzzed
// too. A disagreement aborts, with both outcomes on stderr.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "server/request_decoder.h"

namespace {

struct Outcome {
  bool ok = false, batch = false, compact = false, fast = false;
  std::vector<frs::server::WireRequest> reqs;
  frs::server::ProtocolError err;
};

// The decoders read in place: each gets its own copy of the body, kept alive
// in `buf` for the views in `reqs`.
Outcome Decode(bool fast_path, const std::string& body, uint32_t max_batch, std::string* buf) {
  *buf = body;
  frs::server::XmlRequestDecoder d(fast_path);
  Outcome o;
  o.ok = d.Decode(buf->data(), buf->size(), max_batch, &o.reqs, &o.batch, &o.err);
  o.compact = d.compact();
  o.fast = d.last_was_fast();
  return o;
}

bool SameMember(const frs::server::WireRequest& x, const frs::server::WireRequest& y) {
  return x.cmd == y.cmd && x.biz == y.biz && x.key == y.key && x.token == y.token && x.has_token == y.has_token &&
         x.route == y.route && x.route_key == y.route_key && x.receipt == y.receipt && x.node == y.node && x.n == y.n &&
         x.count == y.count && x.route_known == y.route_known && x.route_pos == y.route_pos && x.replace == y.replace &&
         x.has_replace == y.has_replace && x.lease == y.lease && x.reservation == y.reservation &&
         x.reserve == y.reserve;
}

// Empty when the outcomes agree, else what differs.
std::string Difference(const Outcome& a, const Outcome& b) {
  if (b.fast) return "the pugixml-only decoder took the fast path";
  if (a.ok != b.ok)
    return a.ok ? "the scanner accepted what pugixml refuses" : "the scanner refused what pugixml accepts";
  if (!a.ok) {
    if (a.fast) return "the scanner reported an error of its own";
    if (a.err.status != b.err.status || a.err.msg != b.err.msg)
      return "different errors: " + a.err.msg + " | " + b.err.msg;
    return "";
  }
  if (a.batch != b.batch) return "batch or not";
  if (a.compact != b.compact) return "compact or not";
  if (a.reqs.size() != b.reqs.size()) return "member counts";
  for (size_t i = 0; i < a.reqs.size(); ++i)
    if (!SameMember(a.reqs[i], b.reqs[i])) return "member " + std::to_string(i + 1);
  return "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // 1..8 members, or the server's default 64.
  const uint32_t max_batch = data[0] < 128 ? (data[0] % 8) + 1 : 64;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string a_buf, b_buf;
  const Outcome a = Decode(true, body, max_batch, &a_buf);
  const Outcome b = Decode(false, body, max_batch, &b_buf);
  if (std::string why = Difference(a, b); !why.empty()) {
    std::fprintf(stderr, "xml_decode_fuzzer: the scanner and pugixml disagree: %s (fast path: %d)\n", why.c_str(),
                 a.fast ? 1 : 0);
    std::abort();
  }
  return 0;
}
