// server/grpc_session.h: one gRPC connection's HTTP/2, over libnghttp2.
//
// A server session per connection, fed with the bytes the worker read
// (nghttp2_session_mem_recv) and drained into the connection's output
// (nghttp2_session_mem_send): no I/O here, so the worker's epoll loop, its
// time-outs and connection limits apply as for HTTP/1.1, and the fuzz target
// drives this very code with bytes in memory.
//
// A server-streaming call (GrpcService::Streaming: grpc.health.v1.Health/
// Watch) is answered like a unary one but its stream stays open without
// trailers: whenever the session is given input (any frame: a keepalive
// PING) and when it shuts down, the service is asked again and a message
// that differs from the last one sent is sent; at shutdown the stream then
// ends (grpc-status 0). Such a stream is not "open" for HasOpenStreams()
// (the connection is idle, not busy, while it only watches).
//
// A unary call is answered as soon as its request stream ends: HEADERS
// (:status 200, content-type application/grpc), one DATA frame of the
// 5-byte length prefix and the message, and trailers (grpc-status,
// grpc-message). A call that fails before a message is answered
// "Trailers-Only" (one HEADERS frame with END_STREAM); grpc-message is
// percent-encoded (PercentEncodeGrpcMessage). Refused without a
// crash, and without asking the service: a method other than POST or a
// content-type other than application/grpc* (HTTP 415), a compressed
// message (grpc-status 12: FRS advertises no grpc-encoding), a message
// longer than `max_message_bytes` (8 RESOURCE_EXHAUSTED; its bytes are
// dropped as they come), a length prefix that does not match the body (13
// INTERNAL), headers past `max_header_bytes` (the stream is reset).
//
// Bounded per connection:
//  - memory: a stream's message is admitted when its 5-byte prefix arrives,
//    charged its declared length against `max_buffered_bytes` (all the
//    connection's streams together); one that does not fit, and any new
//    stream while the budget is spent, is reset with REFUSED_STREAM
//    (nothing of it was processed: a gRPC client may retry it). Every byte
//    the connection makes the server hold is counted in held(): nghttp2's
//    own (its streams, HPACK tables and queued frames, through an allocator
//    of the session's), each stream's record (and the closed ones kept for
//    the next streams, kSpareStreams) and the answers not yet sent.
//    A new stream while held() is past held_limit() is refused the same
//    way. A stream keeps no header value: :path becomes the service's
//    method number, :method and content-type two flags. All of it is
//    returned when the session is destroyed (the worker's gauge
//    frs_grpc_held_bytes sums held() over its connections);
//  - work: calls whose request ended are queued and at most
//    kMaxCallsPerReceive of them are answered per Receive(); the rest wait
//    for the next Receive() (HasBacklog()), which the worker makes on its
//    next loop turn, so one connection cannot starve the others;
//  - time: each stream's start is recorded; OldestUnansweredNs() is when
//    the oldest stream not yet answered began, from which the worker
//    measures the request time-out (it closes the connection with GOAWAY).
//
// The
// HTTP/2 layer itself (a bad preface, an oversized frame, a stream past
// SETTINGS_MAX_CONCURRENT_STREAMS, flow control, floods of PING and SETTINGS
// and of reset streams) is nghttp2's: it answers with RST_STREAM or GOAWAY,
// and the session then wants neither to read nor to write: the connection
// closes.
//
// Thread safety: none; owned by one connection.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "frs/key.h"
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
    std::string message;  // grpc-message (when not OK)
    std::string body;     // the response message (when OK)
  };
  virtual ~GrpcService() = default;
  // The method :path ("/package.Service/Method") names, as a number the
  // service chooses (0 and up), or -1: none it answers (the session answers
  // UNIMPLEMENTED). Asked once per stream, when its :path arrives, so that
  // a stream keeps a number, not a copy of the path: a client can name a
  // 4 KB path from the HPACK table in two bytes per stream.
  virtual int MethodOf(std::string_view path) const = 0;
  // `method` is MethodOf's answer (never -1), `message` the request message
  // without its prefix. Never throws past here (the session's callbacks run
  // inside nghttp2, which is C).
  virtual void Call(int method, std::string_view message, Reply* out) = 0;
  // A call of `method` (never -1) that the session refused before Call: its
  // message too long, not one length-prefixed message, or compressed. For
  // the service to count it as it counts the calls it refuses itself.
  virtual void Refused(int /*method*/) {}
  // A server-streaming method: Call is asked again with the same request
  // for each later message (see above).
  virtual bool Streaming(int /*method*/) const { return false; }
  // The peer of the connection whose calls follow (for the decision log's
  // "client"); null when unknown. Set before each read is handed over.
  virtual void set_peer(const IpAddress* /*peer*/) {}
};

struct GrpcLimits {
  uint32_t max_streams = 100;             // SETTINGS_MAX_CONCURRENT_STREAMS
  uint32_t max_header_bytes = 16 * 1024;  // per stream, names and values
  uint32_t max_message_bytes = 64 * 1024;
  // Request bodies buffered by one connection, all streams together; 0:
  // kBufferedMessages x (max_message_bytes + 5).
  uint32_t max_buffered_bytes = 0;
};

// grpc-message's value as the gRPC spec (PROTOCOL-HTTP2.md) requires it on
// the wire: bytes outside 0x20..0x7E, and '%', as %XX (upper-case hex).
std::string PercentEncodeGrpcMessage(std::string_view text);

class GrpcSession {
 public:
  // Maximal messages one connection may buffer at once (the default of
  // GrpcLimits::max_buffered_bytes): 256 KiB with the default 64 KiB
  // messages, against 6.5 MB for 100 streams each holding one.
  static constexpr uint32_t kBufferedMessages = 4;
  // Calls answered per Receive(): with at most 64 descriptors per call
  // (src/envoy), one read decides at most 1,024 descriptors per round.
  static constexpr size_t kMaxCallsPerReceive = 16;

  static Result<std::unique_ptr<GrpcSession>> Create(GrpcService* service, const GrpcLimits& limits);
  ~GrpcSession();
  GrpcSession(const GrpcSession&) = delete;
  GrpcSession& operator=(const GrpcSession&) = delete;

  // Feeds bytes received at `now_ns` (`in` may be empty: only the
  // backlog is worked on), then answers up to kMaxCallsPerReceive calls
  // whose requests ended. False when the session has failed (nghttp2
  // refused the input, now or before: a GOAWAY may be queued, Drain() it;
  // Finished() is true once it is out): nothing more is read.
  bool Receive(std::string_view in, int64_t now_ns);
  // The connection's peer, for the calls the next Receive() answers.
  void set_peer(const IpAddress* peer) { service_->set_peer(peer); }
  // Appends what is ready to send to *out.
  void Drain(std::string* out);
  // Neither wants to read nor to write: the session is over (GOAWAY sent
  // and received, or a fatal error).
  bool Finished() const;
  // A stream has begun and not been closed (answered and sent, or reset),
  // server-streaming ones aside.
  bool HasOpenStreams() const { return streams_.size() > watches_; }
  // Server-streaming calls (Health/Watch) open on this connection.
  bool HasWatches() const { return watches_ > 0; }
  // Queues a message on each of them whose answer changed (the worker asks
  // after a reload, so that a watch hears of it at once, not with the
  // connection's next frame).
  void PollWatches();
  // Calls whose request ended wait to be answered by the next Receive().
  bool HasBacklog() const { return !ready_.empty(); }
  // When the oldest stream not yet answered began (its HEADERS arrived);
  // -1: none.
  int64_t OldestUnansweredNs() const;
  // Unary calls answered so far (progress for the request time-out: bytes
  // sent are not, since nghttp2 answers PINGs and sends WINDOW_UPDATEs by
  // itself).
  uint64_t answered() const { return answered_; }
  // Streams reset with REFUSED_STREAM for the buffer budget.
  uint64_t refused() const { return refused_; }
  // Request body bytes charged now (declared lengths of admitted messages).
  size_t buffered() const { return buffered_; }
  // Every byte this connection makes the server hold now: nghttp2's
  // allocations, the streams' records, bodies and unsent answers.
  size_t held() const {
    return nghttp2_bytes_ + (streams_.size() + spare_.size()) * kStreamBytes + buffered_ + responses_;
  }
  // Past this, new streams are refused: the body budget, one record per
  // allowed stream, and what nghttp2 itself needs for a full session.
  size_t held_limit() const { return held_limit_; }
  // What one stream costs beside nghttp2's own and its body: its record,
  // its entry in the map, and the small string capacity a record keeps for
  // its next stream (kKeptCapacity for the body and for the answer).
  static constexpr size_t kStreamBytes = 384;
  // A closed stream's record, its map node and the capacity of its body and
  // answer strings (when at most kKeptCapacity) are kept for the next
  // stream, up to kSpareStreams of them (counted in held()): a lone call
  // per connection then allocates none of them.
  static constexpr size_t kSpareStreams = 2;
  static constexpr size_t kKeptCapacity = 64;
  // Graceful stop: GOAWAY with the last stream id seen; streams already
  // open are still answered.
  void Shutdown();
  // Time-out, or the peer went away: GOAWAY now, with `error` (HTTP/2 code).
  void Terminate(uint32_t error);

 private:
  struct Stream {
    int method = -1;  // GrpcService::MethodOf(:path)
    bool post = false;
    bool grpc_type = false;
    bool other_codec = false;  // application/grpc+json and the like: INTERNAL
    bool too_long = false;     // declared past max_message_bytes: dropped
    bool bad_length = false;   // more bytes than the prefix declared: dropped
    bool refused = false;      // reset for the budget: never answered
    bool ended = false;        // queued in ready_ or answered
    bool answered = false;
    uint32_t header_bytes = 0;
    int64_t start_ns = 0;
    size_t charged = 0;    // against buffered_ (prefix + declared length)
    std::string body;      // prefix + message as received
    std::string response;  // prefix + message to send
    size_t sent = 0;
    // A server-streaming call: its request and the last message sent (to
    // send only a change); `closing`: its last message, then trailers.
    bool watch = false;
    bool closing = false;
    std::string request, last;
    // Back to a fresh stream's state, keeping the body's and the answer's
    // capacity when small (kKeptCapacity).
    void Recycle();
  };
  using Streams = std::unordered_map<int32_t, Stream>;
  GrpcSession(GrpcService* service, const GrpcLimits& limits);
  void Answer(int32_t id, Stream& s);
  // A record for a new stream (from spare_ when there is one).
  void Begin(int32_t id);
  // Forgets a closed stream (its record to spare_ when there is room).
  void Forget(Streams::iterator it);
  void Release(Stream& s);
  void Refuse(int32_t id, Stream& s);
  void QueueMessage(int32_t id, Stream& s, const std::string& body);
  int OnData(int32_t id, const char* data, size_t len);
  // nghttp2's allocator: every block counted in nghttp2_bytes_.
  static void* Malloc(size_t size, void* user);
  static void Free(void* ptr, void* user);
  static void* Calloc(size_t n, size_t size, void* user);
  static void* Realloc(void* ptr, size_t size, void* user);

  friend struct GrpcCallbacks;
  nghttp2_session* session_ = nullptr;
  GrpcService* service_;
  GrpcLimits limits_;
  size_t budget_;
  int64_t now_ns_ = 0;  // of the bytes being fed
  Streams streams_;
  std::vector<Streams::node_type> spare_;  // recycled records (kSpareStreams)
  // The answer's message is serialized into this string's capacity (at
  // most kKeptCapacity kept between calls, like a member's).
  std::string reply_body_;
  mutable std::deque<int32_t> order_;  // streams by start (pruned as read)
  std::deque<int32_t> ready_;          // ended, to be answered
  size_t buffered_ = 0;
  size_t responses_ = 0;      // answers' bytes not yet sent (and server-streaming calls' requests)
  size_t watches_ = 0;        // server-streaming streams open
  size_t nghttp2_bytes_ = 0;  // held by nghttp2 for this session
  size_t held_limit_;
  uint64_t answered_ = 0;
  uint64_t refused_ = 0;
  bool failed_ = false;
};

}  // namespace frs::server
