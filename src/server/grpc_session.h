// server/grpc_session.h: one gRPC connection's HTTP/2.
//
// Fed with the bytes the worker read (Receive) and drained into the
// connection's output (Drain): no I/O here, so the worker's epoll loop, its
// time-outs and connection limits apply as for HTTP/1.1, and the fuzz target
// drives this very code with bytes in memory.
//
// The frame layer is our own (RFC 9113, server side: frames, stream states,
// flow control, SETTINGS, PING, GOAWAY; server/h2_frame.h); the request
// headers' HPACK is libnghttp2's inflater. A gRPC server needs a small part
// of HTTP/2 (no push, no priorities, answers of three frames whose headers
// are the same bytes every time), and a general session (nghttp2's) cost a
// call that arrives alone on its connection twice a GET's instructions: its
// stream objects, outbound queues and HPACK encoder per call
// (docs/performance.md).
//
// A server-streaming call (GrpcService::Streaming: grpc.health.v1.Health/
// Watch) is answered like a unary one but its stream stays open without
// trailers: whenever the worker says the service's answer may have
// changed (PollWatches(), after a reload) and when the session shuts down,
// the service is asked again and a message that differs from the last one
// sent is sent; at shutdown the stream then ends (grpc-status 0). Not at
// each frame received: a client's PINGs would each cost a call per watch.
// Such a stream is not "open" for HasOpenStreams() (the connection is
// idle, not busy, while it only watches).
//
// A unary call is answered as soon as its request stream ends: HEADERS
// (:status 200, content-type application/grpc), one DATA frame of the
// 5-byte length prefix and the message, and trailers (grpc-status,
// grpc-message). A call that fails before a message is answered
// "Trailers-Only" (one HEADERS frame with END_STREAM); grpc-message is
// percent-encoded (PercentEncodeGrpcMessage). Refused without a
// crash, and without asking the service: a method other than POST or a
// content-type other than application/grpc* (HTTP 405 for the
// method, 415 for the content type), a compressed
// message (grpc-status 12: FRS advertises no grpc-encoding), a message
// longer than `max_message_bytes` (8 RESOURCE_EXHAUSTED, answered at its
// prefix, then the stream reset NO_ERROR; its bytes are dropped as they
// come), a length prefix that does not match the body (13 INTERNAL),
// headers past `max_header_bytes` (the stream is reset ENHANCE_YOUR_CALM).
//
// Bounded per connection:
//  - memory: a stream's message is admitted when its 5-byte prefix arrives,
//    charged its declared length against `max_buffered_bytes` (all the
//    connection's streams together); one that does not fit, and any new
//    stream while the budget is spent, is reset with REFUSED_STREAM
//    (nothing of it was processed: a gRPC client may retry it). Every byte
//    the connection makes the server hold is counted in held(): the HPACK
//    table (through an allocator of the session's), a frame cut between two
//    reads, each stream's record (and the closed ones kept for the next
//    streams, kSpareStreams) and the answers not yet sent. A new stream
//    while held() is past held_limit() is refused the same way, as is one
//    past SETTINGS_MAX_CONCURRENT_STREAMS. A stream keeps no header value:
//    :path becomes the service's method number, :method and content-type
//    two flags. All of it is returned when the session is destroyed (the
//    worker's gauge frs_grpc_held_bytes sums held() over its connections);
//  - work: calls whose request ended are queued and at most
//    kMaxCallsPerReceive of them are answered per Receive(); the rest wait
//    for the next Receive() (HasBacklog()), which the worker makes on its
//    next loop turn, so one connection cannot starve the others;
//  - time: each stream's start is recorded; OldestUnansweredNs() is when
//    the oldest stream not yet answered began, from which the worker
//    measures the request time-out (it closes the connection with GOAWAY);
//  - the protocol's floods: a frame past 16,384 bytes, more than
//    kMaxContinuations CONTINUATIONs to a header block (CVE-2024-28182),
//    more than kMaxSettings entries in one SETTINGS, and RST_STREAMs of
//    streams not yet answered past a burst of kResetBurst then
//    kResetsPerSecond (rapid reset, CVE-2023-44487) end the connection
//    with GOAWAY. The answers to PING and SETTINGS are no larger than what
//    asked for them, and the worker stops reading a connection whose
//    output waits unsent, so a client that does not read cannot make them
//    grow.
// Any breach of the protocol is answered as RFC 9113 says: a stream error
// resets that stream, a connection error sends GOAWAY with its code, after
// which nothing more is read and Finished() is true once it is drained.
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

struct nghttp2_hd_inflater;

namespace frs::server {

struct HpackAllocator;  // grpc_session.cc

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
  // 4 KB path from the HPACK table in two bytes per stream. A function of
  // the path alone: the session may reuse an answer for the same path.
  virtual int MethodOf(std::string_view path) const = 0;
  // `method` is MethodOf's answer (never -1), `message` the request message
  // without its prefix. May throw: the session answers INTERNAL (nothing
  // unwinds into the worker loop).
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

// The request bodies every gRPC connection of one worker buffers at once
// (<grpc buffered_bytes>): a stream whose message would take `used` past
// `limit` is refused as one past its connection's own budget is, so that
// many connections cannot each fill theirs (10,000 connections of 4 x 64
// KiB held 2.6 GB). Owned by the worker, which outlives its sessions.
struct GrpcBudget {
  size_t used = 0;
  size_t limit = SIZE_MAX;
};

struct GrpcLimits {
  uint32_t max_streams = 100;             // SETTINGS_MAX_CONCURRENT_STREAMS
  uint32_t max_header_bytes = 16 * 1024;  // per stream, names and values
  uint32_t max_message_bytes = 64 * 1024;
  // Request bodies buffered by one connection, all streams together; 0:
  // kBufferedMessages x (max_message_bytes + 5).
  uint32_t max_buffered_bytes = 0;
  GrpcBudget* worker = nullptr;  // shared by the worker's sessions; null: none
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
  // The floods' bounds (above): those frsd set on nghttp2's session
  // before this one replaced it, kept as they were.
  static constexpr uint32_t kMaxContinuations = 8;
  static constexpr uint32_t kMaxSettings = 32;
  static constexpr uint32_t kResetBurst = 1000;
  static constexpr uint32_t kResetsPerSecond = 33;

  static Result<std::unique_ptr<GrpcSession>> Create(GrpcService* service, const GrpcLimits& limits);
  ~GrpcSession();
  GrpcSession(const GrpcSession&) = delete;
  GrpcSession& operator=(const GrpcSession&) = delete;

  // Feeds bytes received at `now_ns` (`in` may be empty: only the
  // backlog is worked on), then answers up to kMaxCallsPerReceive calls
  // whose requests ended. False when the session has failed (a connection
  // error, now or before: its GOAWAY is queued, Drain() it; Finished() is
  // true once it is out): nothing more is read.
  bool Receive(std::string_view in, int64_t now_ns);
  // The connection's peer, for the calls the next Receive() answers.
  void set_peer(const IpAddress* peer) { service_->set_peer(peer); }
  // Appends what is ready to send to *out.
  void Drain(std::string* out);
  // A connection error ended the session (its GOAWAY queued or sent).
  bool Failed() const { return failed_; }
  // Neither wants to read nor to write: the session is over (GOAWAY sent
  // or received and no stream left, or a connection error), and all of it
  // drained.
  bool Finished() const;
  // A stream has begun and not been closed (answered and sent, or reset),
  // server-streaming ones aside.
  bool HasOpenStreams() const { return streams_.size() > watches_; }
  // The client's side of the connection ended (it read EOF): streams whose
  // requests had not ended never will, and are forgotten, their bytes back
  // to the budgets; the calls that did end are still answered.
  void PeerEnded();
  // Server-streaming calls (Health/Watch) open on this connection.
  bool HasWatches() const { return watches_ > 0; }
  // Queues a message on each of them whose answer changed (the worker asks
  // after each reload, which is when a health status can change).
  void PollWatches();
  // Calls whose request ended wait to be answered by the next Receive()
  // (never after a connection error: nothing more is answered).
  bool HasBacklog() const { return !failed_ && !ready_.empty(); }
  // A frame (or a header block) begun and not finished: the connection is
  // in the middle of something, as an HTTP/1.1 one with half a request (a
  // client trickling a frame that never ends is closed by the request
  // time-out, not kept by the idle one it renews).
  bool MidFrame() const { return !partial_.empty() || block_stream_ != 0; }
  // When the oldest stream not yet answered began (its HEADERS arrived);
  // -1: none.
  int64_t OldestUnansweredNs() const;
  // Unary calls answered so far (progress for the request time-out: bytes
  // sent are not, since PINGs and SETTINGS are answered, and WINDOW_UPDATEs
  // sent, whatever the calls).
  uint64_t answered() const { return answered_; }
  // Streams reset with REFUSED_STREAM for the buffer budget.
  uint64_t refused() const { return refused_; }
  // Request body bytes charged now (declared lengths of admitted messages).
  size_t buffered() const { return buffered_; }
  // Every byte this connection makes the server hold now: the HPACK
  // table's, a frame cut between reads, the frames not yet drained, the
  // streams' records, bodies and unsent answers.
  size_t held() const {
    return hpack_bytes_ + repeated_.bytes.capacity() + partial_.capacity() + out_.capacity() +
           (order_.size() + ready_.size() + blocked_.size()) * sizeof(int32_t) +
           (streams_.size() + spare_.size()) * kStreamBytes + buffered_ + responses_;
  }
  // Past this, new streams are refused: the body budget, one record per
  // allowed stream, and what the session itself holds at most.
  size_t held_limit() const { return held_limit_; }
  // What one stream costs beside its body: its record, its entry in the
  // map, and the small string capacity a record keeps for its next stream
  // (kKeptCapacity for the body and for the answer).
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
  // What a stream's request headers made of it (and all it keeps of them).
  struct Heads {
    int method = -1;  // GrpcService::MethodOf(:path)
    bool post = false;
    bool grpc_type = false;
    bool other_codec = false;  // application/grpc+json and the like: INTERNAL
    uint32_t header_bytes = 0;
  };
  struct Stream {
    Heads heads;
    bool too_long = false;    // declared past max_message_bytes: dropped
    bool bad_length = false;  // more bytes than the prefix declared: dropped
    bool refused = false;     // to be reset for the budget: never answered
    bool ended = false;       // queued in ready_ or answered
    bool answered = false;
    bool remote_closed = false;  // the client's END_STREAM came
    bool local_closed = false;   // ours is queued
    bool blocked = false;        // in blocked_: DATA waits for the peer's window
    int64_t start_ns = 0;
    int64_t send_window = 0;   // DATA bytes we may still send
    int64_t recv_window = 0;   // DATA bytes the client may still send
    int64_t recv_unacked = 0;  // received since our last WINDOW_UPDATE
    size_t charged = 0;        // against buffered_ (prefix + declared length)
    std::string body;          // prefix + message as received
    std::string response;      // prefix + message to send
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

  // The frame layer. Each On* is false on a connection error (Fail: the
  // GOAWAY is queued).
  bool Feed(std::string_view in);
  bool OnFrame(const uint8_t* header, const uint8_t* payload);
  bool OnDataFrame(uint8_t flags, uint32_t id, const uint8_t* p, uint32_t n);
  bool OnHeadersFrame(uint8_t flags, uint32_t id, const uint8_t* p, uint32_t n);
  // `leaves_table`: LeavesTableAsIs of this fragment (a whole block's),
  // computed once by the caller, which also uses it.
  bool OnHeaderBlock(const uint8_t* p, size_t n, bool end_headers, bool leaves_table);
  bool OnSettings(uint8_t flags, const uint8_t* p, uint32_t n);
  bool OnWindowUpdate(uint32_t id, uint32_t increment);
  bool OnRstStream(uint32_t id);
  void OnHeader(std::string_view name, std::string_view value);
  bool Fail(uint32_t error);
  void ResetStream(uint32_t id, uint32_t error);
  // The request's END_STREAM came: queued to be answered.
  void EndOfRequest(int32_t id, Stream& s);
  // A header block (split into CONTINUATIONs past the peer's frame size).
  void WriteHeaders(uint32_t id, std::string_view block, bool end_stream);
  // As much of s.response as the windows allow; once all of it is out, the
  // trailers (unless it is a watch's message).
  void SendData(int32_t id, Stream& s);
  void FlushBlocked();
  // Closes a stream both sides have ended (or reset it after a complete
  // answer to a request still arriving).
  void Settle(Streams::iterator it);
  void Close(Streams::iterator it);

  void Answer(Streams::iterator it);
  // A record for a new stream (from spare_ when there is one).
  void Begin(int32_t id);
  // Forgets a closed stream (its record to spare_ when there is room).
  void Forget(Streams::iterator it);
  // Keeps order_ to about the open streams (OldestUnansweredNs).
  void PruneOrder();
  void Release(Stream& s);
  // Its request's bytes only, back to both budgets (its answer stays).
  void ReleaseRequest(Stream& s);
  // Whether the worker's budget has no room for `charge` more bytes (0: for
  // a new stream, whether it is spent). A lone message always fits: a
  // budget below one message refuses nothing when nothing is buffered.
  bool WorkerBudgetSpent(size_t charge) const {
    const GrpcBudget* w = limits_.worker;
    return w != nullptr && w->used > 0 && (charge == 0 ? w->used >= w->limit : w->used + charge > w->limit);
  }
  void Refuse(Stream& s);
  void QueueMessage(int32_t id, Stream& s, const std::string& body);
  void OnData(Stream& s, int32_t id, const char* data, size_t len);
  // The HPACK inflater's allocator: every block counted in hpack_bytes_.
  static void* Malloc(size_t size, void* user);
  static void Free(void* ptr, void* user);
  static void* Calloc(size_t n, size_t size, void* user);
  static void* Realloc(void* ptr, size_t size, void* user);

  // The inflater keeps a pointer to its allocator: it lives as long.
  std::unique_ptr<HpackAllocator> hpack_mem_;
  nghttp2_hd_inflater* inflater_ = nullptr;
  GrpcService* service_;
  GrpcLimits limits_;
  size_t budget_;
  int64_t now_ns_ = 0;  // of the bytes being fed
  Streams streams_;
  std::vector<Streams::node_type> spare_;  // recycled records (kSpareStreams)
  // Each call's reply (its strings' capacity, at most kKeptCapacity for the
  // message, kept between calls).
  GrpcService::Reply reply_;
  mutable std::deque<int32_t> order_;  // streams by start (pruned as read)
  std::deque<int32_t> ready_;          // ended, to be answered
  std::deque<int32_t> blocked_;        // DATA waiting for a window
  size_t buffered_ = 0;
  size_t responses_ = 0;    // answers' bytes not yet sent (and server-streaming calls' requests)
  size_t watches_ = 0;      // server-streaming streams open
  size_t hpack_bytes_ = 0;  // held by the inflater
  size_t held_limit_;
  uint64_t answered_ = 0;
  uint64_t refused_ = 0;

  // The last request header block that left the HPACK table as it was
  // (only indexed fields and literals not indexed: RFC 7541 6.1, 6.2.2,
  // 6.2.3), and what its fields made of a stream. While no block since may
  // have changed the table (table_generation_, bumped by every other
  // block), the same bytes mean the same fields: a client sending the same
  // headers on every call (an HTTP/2 client's :path is often a literal not
  // indexed, the rest indexed once the first call put them in the table)
  // is not decoded again, which was a fifth of a lone call's instructions.
  struct RepeatedBlock {
    std::string bytes;
    uint64_t generation = 0;
    Heads heads;
  };
  // Whether the block is only fields that leave the table as it was (no
  // literal with indexing, no size update), parsed to its last byte.
  static bool LeavesTableAsIs(const uint8_t* p, size_t n);
  // True when the block was the remembered one (its stream set from it).
  bool FromRepeatedBlock(Stream& s, const uint8_t* p, size_t n) const;
  // The longest block remembered (an Envoy's or grpc's are 40-150 bytes).
  static constexpr size_t kMaxRepeatedBlock = 512;
  RepeatedBlock repeated_;
  uint64_t table_generation_ = 1;  // repeated_ is valid only when equal

  // The connection's HTTP/2 state.
  std::string out_;             // frames to send
  std::string partial_;         // a frame cut between two reads (its buffer kept: one frame at most)
  size_t preface_seen_ = 0;     // bytes of the client preface matched so far
  bool settings_seen_ = false;  // the client's first frame must be SETTINGS
  uint32_t last_stream_ = 0;    // the highest stream id the client began
  // A header block in progress: its stream (0: none), whether its fields
  // are a new stream's request headers (else decoded and dropped: trailers,
  // a refused or closed stream), its END_STREAM, CONTINUATIONs so far.
  uint32_t block_stream_ = 0;
  bool block_request_ = false;
  bool block_end_stream_ = false;
  uint32_t block_continuations_ = 0;
  int64_t send_window_ = 0;  // connection-level DATA we may still send
  int64_t recv_window_ = 0;  // connection-level DATA the client may still send
  int64_t recv_unacked_ = 0;
  int64_t peer_initial_window_ = 0;  // the client's SETTINGS_INITIAL_WINDOW_SIZE
  uint32_t peer_max_frame_ = 0;      // the client's SETTINGS_MAX_FRAME_SIZE
  // The client lowered SETTINGS_HEADER_TABLE_SIZE: our next header block
  // begins with a dynamic table size update (RFC 7541 4.2), to 0, after
  // which no later value needs one (WriteHeaders).
  bool table_update_due_ = false;
  bool table_zeroed_ = false;
  double reset_tokens_ = 0;  // rapid reset's bucket
  int64_t reset_refill_ns_ = 0;
  uint32_t goaway_last_ = 0;    // the stream our first GOAWAY named
  uint32_t last_answered_ = 0;  // the highest stream whose call was answered
  bool goaway_sent_ = false;
  bool goaway_received_ = false;
  bool failed_ = false;
};

}  // namespace frs::server
