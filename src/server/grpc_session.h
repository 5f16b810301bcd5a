// server/grpc_session.h: one gRPC connection's HTTP/2, over libnghttp2.
//
// A server session per connection, fed with the bytes the worker read
// (nghttp2_session_mem_recv) and drained into the connection's output
// (nghttp2_session_mem_send): no I/O here, so the worker's epoll loop, its
// time-outs and connection limits apply as for HTTP/1.1, and the fuzz target
// drives this very code with bytes in memory.
//
// A unary call is answered as soon as its request stream ends: HEADERS
// (:status 200, content-type application/grpc), one DATA frame of the
// 5-byte length prefix and the message, and trailers (grpc-status,
// grpc-message). A call that fails before a message is answered
// "Trailers-Only" (one HEADERS frame with END_STREAM). Refused without a
// crash, and without asking the service: a method other than POST or a
// content-type other than application/grpc* (HTTP 415), a compressed
// message (grpc-status 12: FRS advertises no grpc-encoding), a message
// longer than `max_message_bytes` (8 RESOURCE_EXHAUSTED; its bytes are
// dropped as they come), a length prefix that does not match the body (13
// INTERNAL), headers past `max_header_bytes` (the stream is reset). The
// HTTP/2 layer itself (a bad preface, an oversized frame, a stream past
// SETTINGS_MAX_CONCURRENT_STREAMS, flow control, floods of PING and SETTINGS
// and of reset streams) is nghttp2's: it answers with RST_STREAM or GOAWAY,
// and the session then wants neither to read nor to write: the connection
// closes.
//
// Thread safety: none; owned by one connection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "frs/status.h"

struct nghttp2_session;

namespace frs::server {

// gRPC status codes used here (grpc/doc/statuscodes.md).
enum class GrpcCode : uint8_t {
  kOk = 0,
  kInvalidArgument = 3,
  kNotFound = 5,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
};

// What answers a unary call.
class GrpcService {
 public:
  struct Reply {
    GrpcCode code = GrpcCode::kOk;
    std::string message;   // grpc-message (when not OK)
    std::string body;      // the response message (when OK)
  };
  virtual ~GrpcService() = default;
  // `path` is :path ("/package.Service/Method"), `message` the request
  // message without its prefix. Never throws past here (the session's
  // callbacks run inside nghttp2, which is C).
  virtual void Call(std::string_view path, std::string_view message, Reply* out) = 0;
};

struct GrpcLimits {
  uint32_t max_streams = 100;             // SETTINGS_MAX_CONCURRENT_STREAMS
  uint32_t max_header_bytes = 16 * 1024;  // per stream, names and values
  uint32_t max_message_bytes = 64 * 1024;
};

class GrpcSession {
 public:
  static Result<std::unique_ptr<GrpcSession>> Create(GrpcService* service, const GrpcLimits& limits);
  ~GrpcSession();
  GrpcSession(const GrpcSession&) = delete;
  GrpcSession& operator=(const GrpcSession&) = delete;

  // Feeds received bytes; false when the connection is beyond saving (a
  // protocol error nghttp2 could not answer): close it.
  bool Receive(std::string_view in);
  // Appends what is ready to send to *out.
  void Drain(std::string* out);
  // Neither wants to read nor to write: the session is over (GOAWAY sent
  // and received, or a fatal error).
  bool Finished() const;
  // A stream has begun and not been answered: the request time-out applies.
  bool HasOpenStreams() const { return !streams_.empty(); }
  // Unary calls answered so far.
  uint64_t answered() const { return answered_; }
  // Graceful stop: GOAWAY with the last stream id seen; streams already
  // open are still answered.
  void Shutdown();
  // Time-out, or the peer went away: GOAWAY now, with `error` (HTTP/2 code).
  void Terminate(uint32_t error);

 private:
  struct Stream {
    std::string path;
    bool post = false;
    bool grpc_type = false;
    uint32_t header_bytes = 0;
    std::string body;                  // prefix + message as received
    bool too_long = false;
    std::string response;              // prefix + message to send
    size_t sent = 0;
    GrpcCode code = GrpcCode::kOk;
    std::string grpc_message;
  };
  GrpcSession(GrpcService* service, const GrpcLimits& limits) : service_(service), limits_(limits) {}
  void Answer(int32_t id, Stream& s);

  friend struct GrpcCallbacks;
  nghttp2_session* session_ = nullptr;
  GrpcService* service_;
  GrpcLimits limits_;
  std::unordered_map<int32_t, Stream> streams_;
  uint64_t answered_ = 0;
  bool failed_ = false;
};

}  // namespace frs::server
