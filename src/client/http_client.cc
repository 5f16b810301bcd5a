#include "frs/http_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "frs/ring.h"
#include "os/unique_fd.h"

namespace frs {
namespace {

namespace http = boost::beast::http;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// "host:port" split, once Ring::CheckAddress (what srv.xml's <shard> lines
// pass) took it: a port of 1..65535 in digits (getaddrinfo would take
// "99999" as 34463, and "http" as 80), a host, an IPv6 one in brackets.
Status SplitServer(const std::string& server, std::string* host, std::string* port) {
  if (Status a = Ring::CheckAddress(server); !a.ok())
    return Status::InvalidArgument("\"" + server + "\" is not host:port: " + a.message());
  const size_t colon = server.rfind(':');
  *host = server.substr(0, colon);
  *port = server.substr(colon + 1);
  if (host->front() == '[') *host = host->substr(1, host->size() - 2);
  return Status::OK();
}

// The answer parsed, and the header the caller asked to keep.
HttpResponse Taken(http::response<http::string_body>& m, const std::string& keep) {
  HttpResponse r{static_cast<int>(m.result_int()), std::move(m.body()), {}};
  if (!keep.empty())
    if (auto it = m.find(keep); it != m.end()) r.kept = std::string(it->value());
  return r;
}

}  // namespace

HttpClient::HttpClient(std::string server, int timeout_ms) : server_(std::move(server)), timeout_ms_(timeout_ms) {}

HttpClient::~HttpClient() { Disconnect(); }

void HttpClient::SetDeadlineIn(int timeout_ms) {
  deadline_ms_ = NowMs() + timeout_ms;
  deadline_set_ = true;
}

void HttpClient::ClearDeadline() { deadline_set_ = false; }

HttpClient::HttpClient(HttpClient&& o) noexcept
    : server_(std::move(o.server_)),
      timeout_ms_(o.timeout_ms_),
      deadline_ms_(o.deadline_ms_),
      deadline_set_(o.deadline_set_),
      fd_(std::exchange(o.fd_, -1)),
      bearer_(std::move(o.bearer_)),
      signer_(std::move(o.signer_)),
      keep_header_(std::move(o.keep_header_)),
      unanswered_(o.unanswered_),
      stop_(std::move(o.stop_)),
      stopped_(o.stopped_),
      body_limit_(o.body_limit_) {}

HttpClient& HttpClient::operator=(HttpClient&& o) noexcept {
  if (this != &o) {
    Disconnect();
    server_ = std::move(o.server_);
    timeout_ms_ = o.timeout_ms_;
    deadline_ms_ = o.deadline_ms_;
    deadline_set_ = o.deadline_set_;
    fd_ = std::exchange(o.fd_, -1);
    bearer_ = std::move(o.bearer_);
    signer_ = std::move(o.signer_);
    keep_header_ = std::move(o.keep_header_);
    unanswered_ = o.unanswered_;
    stop_ = std::move(o.stop_);
    stopped_ = o.stopped_;
    body_limit_ = o.body_limit_;
  }
  return *this;
}

bool HttpClient::Wait(int fd, short events, int64_t deadline_ms) {
  // A stop is asked between polls of at most 100 ms: a signal the caller
  // keeps blocked (the master's) does not interrupt poll.
  constexpr int64_t kStopPollMs = 100;
  for (;;) {
    if (stop_ && stop_()) {
      stopped_ = true;
      return false;
    }
    const int64_t left = deadline_ms - NowMs();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(stop_ ? std::min(left, kStopPollMs) : left));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

// A wait that failed: its own words, unless a stop ended it.
Status HttpClient::Failed(std::string what) const {
  return Status::Unavailable(server_ + ": " + (stopped_ ? std::string("a stop was asked") : what));
}

void HttpClient::Disconnect() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status HttpClient::Connect(int64_t deadline) {
  std::string host, port;
  if (Status s = SplitServer(server_, &host, &port); !s.ok()) return s;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return Status::Unavailable(server_ + ": " + gai_strerror(rc));
  Status last = Status::Unavailable(server_ + ": no address");
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    os::UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd.valid()) continue;
    int rc = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (!Wait(fd.get(), POLLOUT, deadline)) {
        last = Failed("connect timed out");
        if (stopped_) break;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      last = Status::Unavailable(server_ + ": connect: " + std::strerror(errno));
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    Disconnect();
    fd_ = fd.release();
    ::freeaddrinfo(res);
    return Status::OK();
  }
  ::freeaddrinfo(res);
  return last;
}

std::string HttpClient::AuthLine(std::string_view method, std::string_view target, std::string_view body) const {
  if (signer_) {
    std::string v = signer_(method, target, body);
    return v.empty() ? v : "\r\nAuthorization: " + v;
  }
  return bearer_.empty() ? std::string() : "\r\nAuthorization: Bearer " + bearer_;
}

Result<HttpResponse> HttpClient::Get(std::string_view target) {
  std::string req = "GET " + std::string(target) + " HTTP/1.1\r\nHost: " + server_;
  req += AuthLine("GET", target, {});
  req += "\r\n\r\n";
  return Exchange(req);
}

Result<HttpResponse> HttpClient::Post(std::string_view target, std::string_view body, std::string_view content_type) {
  std::string req = "POST " + std::string(target) + " HTTP/1.1\r\nHost: " + server_;
  req += AuthLine("POST", target, body);
  req += "\r\nContent-Type: " + std::string(content_type) + "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n";
  req.append(body);
  return Exchange(req);
}

Result<HttpResponse> HttpClient::Exchange(std::string_view request) {
  // A kept-alive connection the server closed meanwhile fails on first use:
  // that one attempt is repeated on a fresh connection. A request is never
  // sent twice once any answer byte came back.
  // One deadline for the whole call, a repeated attempt included.
  const int64_t now = NowMs();
  int64_t deadline = now + timeout_ms_;
  if (deadline_set_) deadline = std::min(deadline, deadline_ms_);
  const int wait_ms = static_cast<int>(std::max<int64_t>(deadline - now, 0));
  unanswered_ = false;
  stopped_ = false;
  // A caller's deadline already passed: not sent (a request sent with no
  // time to read its answer may be counted, its answer never read).
  if (deadline <= now) return Failed("not sent: the caller's deadline had passed");
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = fd_ >= 0;
    if (!reused) {
      if (Status s = Connect(deadline); !s.ok()) return s;
    }
    size_t sent = 0;
    bool broken = false;
    while (sent < request.size()) {
      ssize_t n = ::send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!Wait(fd_, POLLOUT, deadline)) {
          Disconnect();
          return Failed("send timed out");
        }
      } else {
        broken = true;
        break;
      }
    }
    if (broken) {
      Disconnect();
      if (reused) continue;
      return Status::Unavailable(server_ + ": send: " + std::strerror(errno));
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(body_limit_);
    char buf[16384];
    std::string pending;
    bool got_any = false;
    for (;;) {
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!Wait(fd_, POLLIN, deadline)) {
          Disconnect();
          unanswered_ = !stopped_;
          return Failed("no answer in " + std::to_string(wait_ms) + " ms");
        }
        continue;
      }
      if (n <= 0) {
        Disconnect();
        if (!got_any && reused) break;  // closed while idle: retry once
        if (n == 0 && parser.is_header_done() && !parser.is_done()) {
          boost::system::error_code ec;
          parser.put_eof(ec);
          if (!ec && parser.is_done()) {
            HttpResponse r = Taken(parser.get(), keep_header_);
            return r;
          }
        }
        return Status::Unavailable(server_ + ": the connection closed before a whole answer");
      }
      got_any = true;
      pending.append(buf, static_cast<size_t>(n));
      // The parser stops after the header; feed it until it wants more.
      while (!pending.empty() && !parser.is_done()) {
        boost::system::error_code ec;
        size_t used = parser.put(boost::asio::buffer(pending.data(), pending.size()), ec);
        if (ec == http::error::need_more) break;
        if (ec == http::error::body_limit) {
          Disconnect();
          return Status::IOError(server_ + ": an answer of more than " + std::to_string(body_limit_) +
                                 " bytes, this call's bound");
        }
        if (ec) {
          Disconnect();
          return Status::IOError(server_ + ": malformed HTTP answer: " + ec.message());
        }
        pending.erase(0, used);
        if (used == 0) break;
      }
      if (parser.is_done()) {
        if (!parser.keep_alive()) Disconnect();
        HttpResponse r = Taken(parser.get(), keep_header_);
        return r;
      }
    }
  }
  return Status::Unavailable(server_ + ": the connection closed before an answer");
}

}  // namespace frs
