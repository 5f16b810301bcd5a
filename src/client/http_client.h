// client/http_client.h: a small blocking HTTP/1.1 client for frsd's own
// tools (frsctl handoff and stat --cluster talk to other shards).
//
// One keep-alive TCP connection to "host:port" (IPv4, IPv6 in brackets or
// a name), opened on first use and again after the server closed it. Every
// call has a deadline; a time-out, a refused connection or a malformed
// answer is a Status (Unavailable / IOError), never an exception. Responses
// are parsed by Boost.Beast's parser, so no HTTP parsing is written here.
//
// Thread safety: one HttpClient per thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "frs/status.h"
#include "os/unique_fd.h"

namespace frs::client {

struct HttpResponse {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  // `server` is "host:port", as in a <shard> line.
  explicit HttpClient(std::string server, int timeout_ms = 5000);

  Result<HttpResponse> Get(std::string_view target);
  Result<HttpResponse> Post(std::string_view target, std::string_view body,
                            std::string_view content_type = "application/xml");
  const std::string& server() const { return server_; }

 private:
  Result<HttpResponse> Exchange(std::string_view request);
  Status Connect();

  std::string server_;
  int timeout_ms_;
  os::UniqueFd fd_;
};

}  // namespace frs::client
