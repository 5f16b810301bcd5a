// server/http_parser.h: an incremental, zero-copy HTTP/1.x request parser.
//
// A thin adaptor around Boost.Beast's basic_parser (the parsing itself is
// Beast's; nothing here tokenizes HTTP). The caller keeps the bytes of the
// current request contiguous in its own buffer and feeds the not-yet-consumed
// tail with Feed(); everything the parser reports (target, body) is an
// offset into that buffer, so the buffer may grow (move) between calls.
//
// One parser object parses any number of requests in sequence: Reset() before
// each one rebuilds the Beast parser in place (no heap allocation).
//
// Thread safety: none; one parser per connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace frs::server {

enum class HttpMethod : uint8_t { kGet, kHead, kPost, kOther };

// What the Accept fields of a request say of the two bodies a denial of a
// GET form can have (RFC 9110 12.5.1): the q (in thousandths) of the most
// specific media range matching each, and how specific that range was (0: no
// range matches, 1: */*, 2: application/*, 3: the type itself). The fields
// of one request fold together, in any order.
struct AcceptPrefs {
  uint16_t problem_q = 0, xml_q = 0;
  uint8_t problem_spec = 0, xml_spec = 0;
  void Fold(std::string_view field);
  // The client named application/problem+json with q > 0 and did not prefer
  // application/xml (at a tie, XML only when named as such: a `*/*` beside
  // the problem type is no wish for XML).
  bool PrefersProblemJson() const {
    return problem_spec == 3 && problem_q > 0 && (problem_q > xml_q || (problem_q == xml_q && xml_spec != 3));
  }
};

// What the request line and header said. Offsets are relative to the start
// of the request (the `base` passed to Feed).
struct HttpHead {
  HttpMethod method = HttpMethod::kOther;
  int version = 11;  // 10 or 11
  size_t target_off = 0, target_len = 0;
  bool keep_alive = true;        // after Connection: and the version rules
  bool expect_continue = false;  // Expect: 100-continue
  bool has_content_length = false;
  uint64_t content_length = 0;
  size_t body_off = 0, body_len = 0;  // valid once the request is complete
  // The Authorization header's value (admin paths take a Bearer token).
  size_t auth_off = 0, auth_len = 0;
  // The Host header's value (a signed /replicate names the shard it is for).
  size_t host_off = 0, host_len = 0;
  AcceptPrefs accept;  // the Accept fields, folded (a denial's body type)
  // FRS-Replica-Alone: a /replicate batch that carries changes its sender
  // answered alone (Replicator::SendBatch).
  bool replica_alone = false;
};

class HttpRequestParser {
 public:
  enum class Outcome : uint8_t {
    kNeedMore,  // feed more bytes (header or body incomplete)
    kDone,      // a complete request: head() is final
    kError,     // error_status()/error_message() say why; the connection must close
  };

  HttpRequestParser(uint32_t max_header_bytes, uint32_t max_body_bytes);
  ~HttpRequestParser();
  HttpRequestParser(const HttpRequestParser&) = delete;
  HttpRequestParser& operator=(const HttpRequestParser&) = delete;

  // Starts a new request.
  void Reset();

  // `base` points at the first byte of the current request; bytes
  // [base + consumed(), base + available) are new. Returns the outcome;
  // consumed() advances by what the parser took.
  Outcome Feed(const char* base, size_t available);

  size_t consumed() const { return consumed_; }
  bool header_done() const { return header_done_; }
  const HttpHead& head() const { return head_; }
  int error_status() const { return error_status_; }
  std::string_view error_message() const { return error_message_; }

 private:
  class Adaptor;
  friend class Adaptor;
  std::unique_ptr<Adaptor> adaptor_;
  uint32_t max_header_bytes_, max_body_bytes_;
  HttpHead head_;
  size_t consumed_ = 0;
  const char* base_ = nullptr;  // valid only during Feed
  bool header_done_ = false;
  size_t header_end_ = 0;  // past the last header byte seen (from base_), for the exact header limit
  size_t available_ = 0;   // bytes at base_ in this Feed
  // Whether [p, p + n) lies in the request's bytes (not in a parser's own).
  bool InRequest(const char* p, size_t n) const {
    const auto at = reinterpret_cast<uintptr_t>(p), from = reinterpret_cast<uintptr_t>(base_);
    return base_ != nullptr && at >= from && at - from <= available_ && n <= available_ - (at - from);
  }
  bool body_started_ = false;
  bool chunked_ = false;
  bool missing_length_ = false;
  bool transfer_encoding_ = false;  // the request named a Transfer-Encoding
  bool fragment_ = false;           // the target holds a '#'
  uint8_t once_fields_ = 0;         // seen so far: 1 Authorization, 2 Host
  std::string_view repeated_;       // a field that came twice: the 400's text (static)

  // `before`, `limit` in decimal, `after`, in limit_text_: a 413's or 431's
  // message names the limit in force (it named the default).
  std::string_view LimitText(std::string_view before, uint32_t limit, std::string_view after);

  int error_status_ = 0;
  std::string_view error_message_;  // static text, or limit_text_
  char limit_text_[112];            // a 413's or 431's message (the parser is neither copied nor moved)
};

}  // namespace frs::server
