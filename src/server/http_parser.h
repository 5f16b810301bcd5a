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
  bool body_started_ = false;
  bool chunked_ = false;
  bool missing_length_ = false;
  int error_status_ = 0;
  std::string_view error_message_;  // static text
};

}  // namespace frs::server
