#include "server/http_parser.h"

#include <algorithm>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <charconv>
#include <cstring>
#include <optional>
#include <utility>

#include "base/ascii_case.h"

namespace frs::server {

namespace http = boost::beast::http;
using boost::beast::string_view;

// The Beast parser, with callbacks that record offsets into the caller's
// buffer. Beast's basic_parser parses one message only, so the owner keeps it
// in an optional and re-emplaces it for every request.
class HttpRequestParser::Adaptor {
 public:
  class Impl final : public http::basic_parser<true> {
   public:
    explicit Impl(HttpRequestParser* owner) : owner_(owner) {}

   private:
    void on_request_impl(http::verb method, string_view, string_view target, int version,
                         boost::beast::error_code& ec) override {
      // A fragment is the client's own (RFC 9112 3.2: no '#' in a request
      // target); taken into a key it would count "k#x" apart from "k".
      if (std::memchr(target.data(), '#', target.size()) != nullptr) {
        owner_->fragment_ = true;
        ec = http::error::bad_target;
        return;
      }
      HttpHead& h = owner_->head_;
      switch (method) {
        case http::verb::get: h.method = HttpMethod::kGet; break;
        case http::verb::head: h.method = HttpMethod::kHead; break;
        case http::verb::post: h.method = HttpMethod::kPost; break;
        default: h.method = HttpMethod::kOther; break;
      }
      h.version = version;
      h.target_off = static_cast<size_t>(target.data() - owner_->base_);
      h.target_len = target.size();
      owner_->header_end_ = h.target_off + h.target_len + 11;  // " HTTP/1.1\r\n"
    }
    void on_response_impl(int, string_view, int, boost::beast::error_code& ec) override {
      ec = http::error::bad_method;  // never called for a request parser
    }
    void on_field_impl(http::field name, string_view name_text, string_view value,
                       boost::beast::error_code& ec) override {
      // A folded value (obs-fold) is handed over from Beast's own buffer,
      // not the request's: no offset into the request is taken from it.
      const bool in_request = owner_->InRequest(value.data(), value.size());
      owner_->header_end_ =
          std::max(owner_->header_end_, static_cast<size_t>(name_text.data() + name_text.size() - owner_->base_) +
                                            value.size() + 4);  // ": ", CRLF
      if (name == http::field::transfer_encoding) owner_->transfer_encoding_ = true;
      // A second Authorization or Host is refused rather than one of them
      // picked: a proxy in front that checks the first while this server
      // reads the last is how credentials and a signed request's shard get
      // past it (RFC 9112 3.2 asks a 400 of a repeated Host).
      if (name == http::field::authorization || name == http::field::host) {
        const uint8_t bit = name == http::field::authorization ? 1 : 2;
        if ((owner_->once_fields_ & bit) != 0) {
          owner_->repeated_ = bit == 1 ? "the request has more than one Authorization field: send one"
                                       : "the request has more than one Host field: send one";
          ec = http::error::bad_field;
          return;
        }
        owner_->once_fields_ |= bit;
      }
      if (name == http::field::authorization && in_request) {
        owner_->head_.auth_off = static_cast<size_t>(value.data() - owner_->base_);
        owner_->head_.auth_len = value.size();
      }
      if (name == http::field::host && in_request) {
        owner_->head_.host_off = static_cast<size_t>(value.data() - owner_->base_);
        owner_->head_.host_len = value.size();
      }
      if (name == http::field::accept) owner_->head_.accept.Fold(std::string_view(value.data(), value.size()));
      if (name == http::field::unknown && name_text.size() == 17 &&
          boost::beast::iequals(name_text, string_view("FRS-Replica-Alone", 17)))
        owner_->head_.replica_alone = value == "1";  // the sender writes 1 or nothing; 0 says no
      if (name == http::field::expect && value.size() == 12 &&
          boost::beast::iequals(value, string_view("100-continue", 12)))
        owner_->head_.expect_continue = true;
    }
    void on_header_impl(boost::beast::error_code& ec) override {
      // Beast counts its limit its own way (a header that came whole got up
      // to 4 KB past it): the configured bytes, up to the blank line.
      if (owner_->header_end_ + 2 > owner_->max_header_bytes_) {
        ec = http::error::header_limit;
        return;
      }
      HttpHead& h = owner_->head_;
      h.keep_alive = keep_alive();
      owner_->header_done_ = true;
      if (chunked()) {
        // The protocol asks for Content-Length (411): a length known up
        // front lets the 413 limit apply before any body byte is read.
        owner_->chunked_ = true;
        ec = http::error::bad_transfer_encoding;
        return;
      }
      // Any other coding (identity, gzip, ...): RFC 9112 6.3 makes the
      // body's length unknowable, whatever Content-Length says, and asks for
      // a 400 and a close; taking the Content-Length instead is how a proxy
      // and this server could disagree on where a request ends.
      if (owner_->transfer_encoding_) {
        ec = http::error::bad_transfer_encoding;
        return;
      }
      auto len = content_length();
      if (len) {
        h.has_content_length = true;
        h.content_length = *len;
      } else if (h.method == HttpMethod::kPost) {
        owner_->missing_length_ = true;
        ec = http::error::bad_content_length;
      }
    }
    void on_body_init_impl(const boost::optional<std::uint64_t>&, boost::beast::error_code&) override {}
    std::size_t on_body_impl(string_view body, boost::beast::error_code&) override {
      HttpHead& h = owner_->head_;
      if (!owner_->body_started_) {
        owner_->body_started_ = true;
        h.body_off = static_cast<size_t>(body.data() - owner_->base_);
      }
      // The caller keeps the request contiguous, so every piece follows
      // the previous one.
      h.body_len += body.size();
      return body.size();
    }
    void on_chunk_header_impl(std::uint64_t, string_view, boost::beast::error_code& ec) override {
      ec = http::error::bad_transfer_encoding;
    }
    std::size_t on_chunk_body_impl(std::uint64_t, string_view, boost::beast::error_code& ec) override {
      ec = http::error::bad_transfer_encoding;
      return 0;
    }
    void on_finish_impl(boost::beast::error_code&) override {}

    HttpRequestParser* owner_;
  };

  std::optional<Impl> parser;
};

HttpRequestParser::HttpRequestParser(uint32_t max_header_bytes, uint32_t max_body_bytes)
    : adaptor_(std::make_unique<Adaptor>()), max_header_bytes_(max_header_bytes), max_body_bytes_(max_body_bytes) {
  Reset();
}

HttpRequestParser::~HttpRequestParser() = default;

namespace {

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9110 12.4.2's qvalue in thousandths; -1 when it is not one.
int ParseQ(std::string_view v) {
  if (v.empty() || (v[0] != '0' && v[0] != '1')) return -1;
  int q = v[0] == '1' ? 1000 : 0;
  if (v.size() == 1) return q;
  if (v[1] != '.' || v.size() > 5) return -1;
  int scale = 100;
  for (char c : v.substr(2)) {
    if (c < '0' || c > '9' || (q == 1000 && c != '0')) return -1;
    q += (c - '0') * scale;
    scale /= 10;
  }
  return q;
}

}  // namespace

void AcceptPrefs::Fold(std::string_view field) {
  while (!field.empty()) {
    const size_t comma = field.find(',');
    std::string_view range = field.substr(0, comma);
    field = comma == std::string_view::npos ? std::string_view() : field.substr(comma + 1);
    const size_t semi = range.find(';');
    const std::string_view type = TrimOws(range.substr(0, semi));
    int q = 1000;
    for (std::string_view params = semi == std::string_view::npos ? std::string_view() : range.substr(semi + 1);
         !params.empty();) {
      const size_t next = params.find(';');
      const std::string_view p = TrimOws(params.substr(0, next));
      params = next == std::string_view::npos ? std::string_view() : params.substr(next + 1);
      if (p.size() >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') q = ParseQ(p.substr(2));
    }
    if (q < 0) continue;  // a malformed weight: the range says nothing
    auto is = [&](std::string_view t) { return EqualsAsciiLower(type, t); };
    uint8_t problem = is("application/problem+json") ? 3 : 0;
    uint8_t xml = is("application/xml") ? 3 : is("application/*") ? 2 : is("*/*") ? 1 : 0;
    const uint16_t q16 = static_cast<uint16_t>(q);
    if (problem > problem_spec || (problem != 0 && problem == problem_spec && q16 > problem_q)) {
      problem_spec = problem;
      problem_q = q16;
    }
    if (xml > xml_spec || (xml != 0 && xml == xml_spec && q16 > xml_q)) {
      xml_spec = xml;
      xml_q = q16;
    }
  }
}

std::string_view HttpRequestParser::LimitText(std::string_view before, uint32_t limit, std::string_view after) {
  char* p = limit_text_;
  char* const end = limit_text_ + sizeof limit_text_;
  p += before.copy(p, std::min<size_t>(before.size(), static_cast<size_t>(end - p)));
  p = std::to_chars(p, end, limit).ptr;
  p += after.copy(p, std::min<size_t>(after.size(), static_cast<size_t>(end - p)));
  return std::string_view(limit_text_, static_cast<size_t>(p - limit_text_));
}

void HttpRequestParser::Reset() {
  head_ = HttpHead{};
  consumed_ = 0;
  base_ = nullptr;
  header_done_ = body_started_ = chunked_ = missing_length_ = transfer_encoding_ = fragment_ = false;
  once_fields_ = 0;
  repeated_ = {};
  header_end_ = 0;
  error_status_ = 0;
  error_message_ = {};
  auto& p = adaptor_->parser.emplace(this);
  p.header_limit(max_header_bytes_);
  p.body_limit(static_cast<std::uint64_t>(max_body_bytes_));
  p.eager(true);
}

namespace {

// Whether the header block in `seen` has a field `name` (lower case, ':'
// included), at a line's start, in any case.
bool HasField(std::string_view seen, std::string_view name) {
  const size_t end = seen.find("\r\n\r\n");
  if (end != std::string_view::npos) seen = seen.substr(0, end + 2);
  for (size_t at = seen.find('\n'); at != std::string_view::npos; at = seen.find('\n', at + 1)) {
    const std::string_view line = seen.substr(at + 1, name.size());
    if (line.size() == name.size() &&
        boost::beast::iequals(string_view(line.data(), line.size()), string_view(name.data(), name.size())))
      return true;
  }
  return false;
}

// The sentence of a 400 that none of the parser's flags explains: what the
// error code and the bytes seen say is wrong. Static text.
std::string_view DescribeError(const boost::beast::error_code& ec, bool fragment, std::string_view seen) {
  std::string_view message;
  const std::string_view line = seen.substr(0, seen.find('\n'));
  if (fragment) {
    message = "the request target has a '#' in it: a fragment is not sent, and one in a key is written %23";
  } else if (ec == http::error::bad_version) {
    // What the version token holds tells the likelier fault: a bare LF or
    // a space in the target reads to the parser as a bad version.
    if (line.size() < seen.size() && !line.ends_with('\r') && line.find(" HTTP/1.") != std::string_view::npos)
      message = "the request line ends with a bare LF: HTTP/1.1 lines end with CRLF";
    else if (std::count(line.begin(), line.end(), ' ') > 2)
      message = "the request target has a space in it: percent-encode it (%20)";
    else message = "the request line has an unsupported HTTP version";
  } else if ((ec == http::error::bad_content_length || ec == http::error::bad_transfer_encoding) &&
             HasField(seen, "content-length:") && HasField(seen, "transfer-encoding:")) {
    // RFC 9112 6.1: the two together are how request smuggling starts.
    message = "a request with both Content-Length and Transfer-Encoding is refused: send Content-Length alone";
  } else {
    // One sentence per fault Beast names; anything else is said plainly.
    static constexpr std::pair<http::error, std::string_view> kSaid[] = {
        {http::error::bad_content_length,
         "the Content-Length header is not one decimal number of bytes (or two Content-Length headers differ)"},
        {http::error::bad_transfer_encoding,
         "a request with Transfer-Encoding is not accepted: send the body with Content-Length alone"},
        {http::error::bad_field,
         "a header line is not NAME: VALUE (a name holds a space, or a character a token may not)"},
        {http::error::bad_value, "a header value holds a control character"},
        {http::error::bad_line_ending, "a line ends with a bare CR or LF: HTTP/1.1 lines end with CRLF"},
        {http::error::bad_method, "the request method is not a token (GET, HEAD or POST)"},
        {http::error::bad_target, "the request target holds a character a URI may not: percent-encode it"},
        {http::error::bad_obs_fold, "a folded header line (obs-fold) is malformed"},
    };
    message = "the request is not valid HTTP/1.1";
    for (const auto& [error, said] : kSaid)
      if (ec == error) message = said;
    // "GET /health" then the line's end: the target ran into the CR, which
    // the parser names as a bad target; the line lacks its version.
    if (ec == http::error::bad_target && std::count(line.begin(), line.end(), ' ') == 1 &&
        line.find(" /") != std::string_view::npos)
      message = "the request line has no HTTP version: it is METHOD TARGET HTTP/1.1";
  }
  return message;
}

}  // namespace

HttpRequestParser::Outcome HttpRequestParser::Feed(const char* base, size_t available) {
  if (error_status_ != 0) return Outcome::kError;
  auto& p = *adaptor_->parser;
  base_ = base;
  available_ = available;
  while (!p.is_done() && consumed_ < available) {
    boost::beast::error_code ec;
    size_t n = p.put(boost::asio::const_buffer(base + consumed_, available - consumed_), ec);
    consumed_ += n;
    // A header still incomplete past the limit is over it, however it came.
    if (ec == http::error::need_more && !header_done_ && available > max_header_bytes_) ec = http::error::header_limit;
    else if (ec == http::error::need_more) break;
    if (ec) {
      if (missing_length_) {
        error_status_ = 411;
        error_message_ = "a POST request needs a Content-Length header";
      } else if (chunked_) {
        error_status_ = 411;
        error_message_ = "chunked request bodies are not accepted: send a Content-Length header";
      } else if (transfer_encoding_ && ec != http::error::bad_content_length) {
        error_status_ = 400;
        error_message_ = "a request with Transfer-Encoding is not accepted: send the body with Content-Length alone";
      } else if (!repeated_.empty()) {
        error_status_ = 400;
        error_message_ = repeated_;
      } else if (ec == http::error::header_limit) {
        error_status_ = 431;
        error_message_ = LimitText("the request line and headers exceed ", max_header_bytes_,
                                   " bytes (srv.xml's <limits header_bytes>)");
      } else if (ec == http::error::body_limit) {
        error_status_ = 413;
        error_message_ =
            LimitText("the request body exceeds ", max_body_bytes_, " bytes (srv.xml's <limits body_bytes>)");
      } else {
        error_status_ = 400;
        error_message_ = DescribeError(ec, fragment_, std::string_view(base, available));
      }
      base_ = nullptr;
      return Outcome::kError;
    }
    if (n == 0) break;
  }
  base_ = nullptr;
  return p.is_done() ? Outcome::kDone : Outcome::kNeedMore;
}

}  // namespace frs::server
