// frs/http_client.h: a small blocking HTTP/1.1 client, for the programs
// that talk to frsd's HTTP side (frsctl handoff and stat --cluster ask other
// shards; GET /stats, POST /replicate).
//
//   frs::HttpClient http("10.0.0.2:8300");
//   frs::Result<frs::HttpResponse> r = http.Get("/stats?biz=login&by=app");
//   if (r.ok() && r->status == 200) std::puts(r->body.c_str());
//
// One keep-alive TCP connection to "host:port" (IPv4, IPv6 in brackets or a
// name), opened on first use and again after the server closed it. Every
// call has one deadline for its connect, send and answer (a name's lookup
// counts against it but is not cut short by it: give addresses where a slow
// resolver must not delay a call); a time-out, a refused connection or a
// malformed answer is a Status (Unavailable / IOError), never an exception.
//
// Thread safety: one HttpClient per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "frs/status.h"

namespace frs {

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string kept;  // the value of the header KeepHeader named ("": absent, or none named)
};

class HttpClient {
 public:
  // `server` is "host:port", as in a <shard> line.
  explicit HttpClient(std::string server, int timeout_ms = 5000);
  ~HttpClient();
  HttpClient(HttpClient&& o) noexcept;
  HttpClient& operator=(HttpClient&& o) noexcept;
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  Result<HttpResponse> Get(std::string_view target);
  Result<HttpResponse> Post(std::string_view target, std::string_view body,
                            std::string_view content_type = "application/xml");
  // The next calls end by `timeout_ms` from now at most (0 or less: already
  // passed, and a call is not sent), besides the client's own time-out from
  // each call's start: a caller's deadline over several calls.
  void SetDeadlineIn(int timeout_ms);
  // Back to the client's own time-out alone.
  void ClearDeadline();
  const std::string& server() const { return server_; }
  // Whether the last call failed because the server took the request and
  // sent no whole answer within the deadline (none, or part of one, then
  // nothing): a server alive but busy or stuck, where a refused or closed
  // connection says nothing listens.
  bool Unanswered() const { return unanswered_; }
  // Sends "Authorization: Bearer TOKEN" with every request ("": none). The
  // admin token goes in a header, never in the target: a proxy's access log
  // writes every target it forwards.
  void SetBearer(std::string token) { bearer_ = std::move(token); }
  // Signs every request instead: called with its method, target and body, it
  // gives the Authorization value ("": none). Set, it is sent in place of
  // the bearer token (frsd's shards sign their /replicate requests so).
  using Signer = std::function<std::string(std::string_view method, std::string_view target, std::string_view body)>;
  void SetSigner(Signer signer) { signer_ = std::move(signer); }
  // Each answer's value of header `name` (case-insensitive) goes to
  // HttpResponse::kept.
  void KeepHeader(std::string name) { keep_header_ = std::move(name); }
  // Asked about every 100 ms while a call waits: true ends the call there
  // (Unavailable, "a stop was asked"), for a caller whose deadline is long
  // and that must still stop promptly on a signal. Unset: only the deadline.
  void SetStop(std::function<bool()> asked) { stop_ = std::move(asked); }
  // The largest answer body taken (kDefaultBodyLimit unless set): a longer
  // one fails the call (IOError, naming the bound). frsd's catch-up sizes
  // it to the store a replica snapshot fills (about 280 bytes a node: a
  // store of 250,000 nodes passed 64 MiB, and its snapshot was missed).
  static constexpr uint64_t kDefaultBodyLimit = uint64_t{64} << 20;
  void SetBodyLimit(uint64_t bytes) { body_limit_ = bytes; }

 private:
  Result<HttpResponse> Exchange(std::string_view request);
  // The request's Authorization line ("\r\nAuthorization: ..."), or "".
  std::string AuthLine(std::string_view method, std::string_view target, std::string_view body) const;
  Status Connect(int64_t deadline_ms);
  void Disconnect();
  // Until `fd` is ready for `events`; false at the deadline or a stop.
  bool Wait(int fd, short events, int64_t deadline_ms);
  Status Failed(std::string what) const;

  std::string server_;
  int timeout_ms_;
  int64_t deadline_ms_ = 0;  // SetDeadlineIn's (steady clock ms), while deadline_set_
  bool deadline_set_ = false;
  int fd_ = -1;  // the connection; -1: none yet, or closed
  std::string bearer_;
  Signer signer_;
  std::string keep_header_;
  bool unanswered_ = false;  // the last call's request went unanswered
  std::function<bool()> stop_;
  bool stopped_ = false;  // the last call was ended by stop_
  uint64_t body_limit_ = kDefaultBodyLimit;
};

}  // namespace frs
