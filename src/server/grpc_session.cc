#include "server/grpc_session.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "base/ascii_case.h"
#include "frs/percent_encode.h"

namespace frs::server {

namespace {

constexpr size_t kPrefixBytes = 5;  // compressed flag, 32-bit big-endian length
// What nghttp2 allocates for a session (its buffers, HPACK tables, the
// settings queue) and for each open stream, measured with its allocator
// (GrpcSessionHeld.* in tests/server/grpc_session_test.cc) and rounded up:
// part of held_limit(), so that a session of legitimate calls is never
// refused for them.
constexpr size_t kNghttp2SessionBytes = 64 * 1024;
constexpr size_t kNghttp2StreamBytes = 1024;

// application/grpc or application/grpc+proto (kProto), its parameters
// after ';' ignored and its letters in any case (a media type's are not
// case sensitive); application/grpc+ another codec (+json, ...: kOtherCodec)
// is a gRPC call this service cannot read, answered with a gRPC status as
// gRPC servers answer it (a 415 made clients report UNKNOWN); anything else
// is no gRPC call (kNone: 415, grpc's PROTOCOL-HTTP2.md).
enum class GrpcType : uint8_t { kNone, kProto, kOtherCodec };
GrpcType GrpcTypeOf(std::string_view v) {
  const size_t semi = v.find(';');
  std::string_view type = v.substr(0, semi);
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
  if (EqualsAsciiLower(type, "application/grpc") || EqualsAsciiLower(type, "application/grpc+proto"))
    return GrpcType::kProto;
  constexpr std::string_view kGrpcPlus = "application/grpc+";
  if (type.size() > kGrpcPlus.size() && EqualsAsciiLower(type.substr(0, kGrpcPlus.size()), kGrpcPlus))
    return GrpcType::kOtherCodec;
  return GrpcType::kNone;
}

nghttp2_nv Nv(std::string_view name, std::string_view value) {
  // nghttp2 copies names and values on submit (no NO_COPY flags).
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
                    NGHTTP2_NV_FLAG_NONE};
}

// A header of string literals: nghttp2 keeps pointers to them instead of
// copies (they outlive the session).
template <size_t N, size_t M>
nghttp2_nv StaticNv(const char (&name)[N], const char (&value)[M]) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name)),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value)), N - 1, M - 1,
                    NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE};
}

// Empties `s`, keeping its buffer for the next stream when it is small.
void KeepSmall(std::string* s) {
  if (s->capacity() > GrpcSession::kKeptCapacity) std::string().swap(*s);
  else s->clear();
}

const char* CodeText(GrpcCode c) {
  static thread_local char buf[4];
  std::snprintf(buf, sizeof buf, "%u", static_cast<unsigned>(c));
  return buf;
}

}  // namespace

std::string PercentEncodeGrpcMessage(std::string_view text) {
  // gRPC's grpc-message: printable ASCII but '%' as itself, every other
  // byte (UTF-8's among them) as %XX.
  static constexpr PercentTable kGrpcMessage(0x20, 0x7e, "%", PercentHigh::kEscape);
  return PercentEncoded(text, kGrpcMessage);
}

// nghttp2's C callbacks, friends of the session. nghttp2 is C: nothing may
// unwind through it, so each catches everything (an allocation failure)
// and fails the session instead (NGHTTP2_ERR_CALLBACK_FAILURE: mem_recv
// returns it, the connection closes).
struct GrpcCallbacks {
  static GrpcSession* Self(void* user) { return static_cast<GrpcSession*>(user); }

  static int OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* user) try {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    GrpcSession* g = Self(user);
    const int32_t id = frame->hd.stream_id;
    if (g->buffered_ >= g->budget_ || g->held() >= g->held_limit_) {
      // The budget is spent on messages still arriving: not tracked, so its
      // headers and data are ignored until the reset closes it.
      ++g->refused_;
      return nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM) == 0
                 ? 0
                 : NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (!g->streams_.contains(id)) g->Begin(id);
    return 0;
  } catch (...) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                      const uint8_t* value, size_t valuelen, uint8_t, void* user) try {
    GrpcSession* g = Self(user);
    auto it = g->streams_.find(frame->hd.stream_id);
    if (it == g->streams_.end()) return 0;  // trailers of a stream we did not track
    GrpcSession::Stream& s = it->second;
    s.header_bytes += static_cast<uint32_t>(namelen + valuelen);
    // Past the limit the stream is reset (nghttp2 sends RST_STREAM).
    if (s.header_bytes > g->limits_.max_header_bytes) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":path") s.method = g->service_->MethodOf(v);
    else if (n == ":method") s.post = v == "POST";
    else if (n == "content-type") {
      const GrpcType t = GrpcTypeOf(v);
      s.grpc_type = t != GrpcType::kNone;
      s.other_codec = t == GrpcType::kOtherCodec;
    }
    return 0;
  } catch (...) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }

  static int OnData(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) try {
    return Self(user)->OnData(id, reinterpret_cast<const char*>(data), len);
  } catch (...) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user) try {
    GrpcSession* g = Self(user);
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      auto it = g->streams_.find(frame->hd.stream_id);
      if (it != g->streams_.end() && !it->second.refused && !it->second.ended) {
        // Answered by Receive() after the input is fed, at most
        // kMaxCallsPerReceive at a time.
        it->second.ended = true;
        g->ready_.push_back(frame->hd.stream_id);
      }
    }
    return 0;
  } catch (...) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }

  // A message too long is answered at its prefix (OnData); once that answer
  // is out, a client still sending the rest is told to stop (RST_STREAM
  // NO_ERROR after a complete answer, RFC 9113 8.1). Submitted here, after
  // the answer went: a reset submitted beside it drops it unsent.
  static int OnFrameSend(nghttp2_session* session, const nghttp2_frame* frame, void* user) try {
    if (frame->hd.type != NGHTTP2_HEADERS || (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) return 0;
    GrpcSession* g = Self(user);
    auto it = g->streams_.find(frame->hd.stream_id);
    if (it == g->streams_.end() || !it->second.too_long || it->second.ended) return 0;
    return nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR) == 0
               ? 0
               : NGHTTP2_ERR_CALLBACK_FAILURE;
  } catch (...) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }

  static int OnStreamClose(nghttp2_session*, int32_t id, uint32_t, void* user) try {
    GrpcSession* g = Self(user);
    auto it = g->streams_.find(id);
    if (it == g->streams_.end()) return 0;
    if (it->second.watch) --g->watches_;
    g->Release(it->second);
    g->Forget(it);  // order_ and ready_ skip it when they reach it
    return 0;
  } catch (...) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }

  static ssize_t ReadBody(nghttp2_session* session, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                          nghttp2_data_source*, void* user) try {
    GrpcSession* g = Self(user);
    auto it = g->streams_.find(id);
    if (it == g->streams_.end()) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    GrpcSession::Stream& s = it->second;
    const size_t n = std::min(length, s.response.size() - s.sent);
    std::memcpy(buf, s.response.data() + s.sent, n);
    s.sent += n;
    if (s.watch && !s.closing && s.sent == s.response.size()) {
      // A server-streaming call stays open: nothing more until PollWatches
      // queues a message and resumes it.
      g->responses_ -= s.response.size();
      KeepSmall(&s.response);
      s.sent = 0;
      return n > 0 ? static_cast<ssize_t>(n) : static_cast<ssize_t>(NGHTTP2_ERR_DEFERRED);
    }
    if (s.sent == s.response.size()) {
      // Out of our hands (nghttp2 has copied it into its frame).
      g->responses_ -= s.response.size();
      KeepSmall(&s.response);
      s.sent = 0;
      *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      const nghttp2_nv trailers[] = {StaticNv("grpc-status", "0")};
      if (nghttp2_submit_trailer(session, id, trailers, 1) != 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return static_cast<ssize_t>(n);
  } catch (...) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
};

GrpcSession::GrpcSession(GrpcService* service, const GrpcLimits& limits)
    : service_(service),
      limits_(limits),
      budget_(limits.max_buffered_bytes != 0 ? limits.max_buffered_bytes
                                             : size_t{kBufferedMessages} * (limits.max_message_bytes + kPrefixBytes)),
      held_limit_(budget_ + size_t{limits.max_streams} * (kStreamBytes + kNghttp2StreamBytes) +
                  kSpareStreams * kStreamBytes + kNghttp2SessionBytes + limits.max_header_bytes) {
  spare_.reserve(kSpareStreams);
}

int GrpcSession::OnData(int32_t id, const char* data, size_t len) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return 0;
  Stream& s = it->second;
  while (len > 0 && !s.too_long && !s.bad_length && !s.refused) {
    if (s.body.size() < kPrefixBytes) {
      // The prefix first (in the string's own storage: no allocation).
      const size_t n = std::min(len, kPrefixBytes - s.body.size());
      s.body.append(data, n);
      data += n;
      len -= n;
      if (s.body.size() < kPrefixBytes) return 0;
      const uint32_t declared = (static_cast<uint32_t>(static_cast<uint8_t>(s.body[1])) << 24) |
                                (static_cast<uint32_t>(static_cast<uint8_t>(s.body[2])) << 16) |
                                (static_cast<uint32_t>(static_cast<uint8_t>(s.body[3])) << 8) |
                                static_cast<uint32_t>(static_cast<uint8_t>(s.body[4]));
      if (declared > limits_.max_message_bytes) {
        // Answered now (8 RESOURCE_EXHAUSTED), not when the stream ends: a
        // client still sending would otherwise stream up to 4 GB into the
        // void, its window opened for each frame, until the request timeout
        // closed the whole connection. Its further data is dropped.
        s.too_long = true;
        ready_.push_back(id);
        return 0;
      }
      // Admitted whole, for the length it declares, or refused now: the
      // connection's buffers never exceed the budget, whatever the
      // interleaving of streams.
      const size_t charge = kPrefixBytes + declared;
      if (buffered_ + charge > budget_) {
        Refuse(id, s);
        return 0;
      }
      s.body.reserve(charge);
      s.charged = charge;
      buffered_ += charge;
      continue;
    }
    if (s.body.size() + len > s.charged) {
      s.bad_length = true;  // more than declared: 13 INTERNAL when it ends
      Release(s);
      return 0;
    }
    s.body.append(data, len);
    return 0;
  }
  return 0;
}

void GrpcSession::Release(Stream& s) {
  buffered_ -= s.charged;
  s.charged = 0;
  KeepSmall(&s.body);
  responses_ -= s.response.size() + s.request.size() + s.last.size();
  KeepSmall(&s.response);
  std::string().swap(s.request);
  std::string().swap(s.last);
}

void GrpcSession::Stream::Recycle() {
  KeepSmall(&body);
  KeepSmall(&response);
  std::string b = std::move(body), r = std::move(response);  // moved, not copied: no allocation
  *this = Stream{};
  body = std::move(b);
  response = std::move(r);
}

void GrpcSession::Begin(int32_t id) {
  Streams::iterator it;
  if (spare_.empty()) {
    it = streams_.try_emplace(id).first;
  } else {
    Streams::node_type node = std::move(spare_.back());
    spare_.pop_back();
    node.key() = id;
    it = streams_.insert(std::move(node)).position;
  }
  it->second.start_ns = now_ns_;
  order_.push_back(id);
}

void GrpcSession::Forget(Streams::iterator it) {
  Streams::node_type node = streams_.extract(it);
  if (spare_.size() < kSpareStreams) {
    node.mapped().Recycle();
    spare_.push_back(std::move(node));
  }
}

void GrpcSession::QueueMessage(int32_t id, Stream& s, const std::string& body) {
  const uint32_t n = static_cast<uint32_t>(body.size());
  responses_ += kPrefixBytes + n;
  s.response.push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8) s.response.push_back(static_cast<char>((n >> shift) & 0xff));
  s.response.append(body);
  responses_ -= s.last.size();
  s.last = body;
  responses_ += s.last.size();
  nghttp2_session_resume_data(session_, id);
}

void GrpcSession::PollWatches() {
  if (watches_ == 0) return;
  for (auto& [id, s] : streams_) {
    if (!s.watch || s.closing) continue;
    GrpcService::Reply reply;
    try {
      service_->Call(s.method, s.request, &reply);
    } catch (const std::exception&) {
      continue;  // nothing new to say
    }
    if (reply.code == GrpcCode::kOk && reply.body != s.last) QueueMessage(id, s, reply.body);
  }
}

namespace {

// Each block nghttp2 allocates carries its size in front, so that Free and
// Realloc can uncount it (nghttp2_mem's free is not told the size); 16
// bytes keep the block aligned as malloc's.
constexpr size_t kSizeHeader = 16;
static_assert(kSizeHeader >= sizeof(size_t) && kSizeHeader % alignof(std::max_align_t) == 0);

}  // namespace

void* GrpcSession::Malloc(size_t size, void* user) {
  if (size > SIZE_MAX - kSizeHeader) return nullptr;
  auto* p = static_cast<char*>(std::malloc(size + kSizeHeader));
  if (!p) return nullptr;
  std::memcpy(p, &size, sizeof size);
  static_cast<GrpcSession*>(user)->nghttp2_bytes_ += size;
  return p + kSizeHeader;
}

void GrpcSession::Free(void* ptr, void* user) {
  if (!ptr) return;
  char* p = static_cast<char*>(ptr) - kSizeHeader;
  size_t size;
  std::memcpy(&size, p, sizeof size);
  static_cast<GrpcSession*>(user)->nghttp2_bytes_ -= size;
  std::free(p);
}

void* GrpcSession::Calloc(size_t n, size_t size, void* user) {
  if (size != 0 && n > SIZE_MAX / size) return nullptr;
  void* p = Malloc(n * size, user);
  if (p) std::memset(p, 0, n * size);
  return p;
}

void* GrpcSession::Realloc(void* ptr, size_t size, void* user) {
  if (!ptr) return Malloc(size, user);
  if (size > SIZE_MAX - kSizeHeader) return nullptr;
  char* p = static_cast<char*>(ptr) - kSizeHeader;
  size_t old;
  std::memcpy(&old, p, sizeof old);
  auto* q = static_cast<char*>(std::realloc(p, size + kSizeHeader));
  if (!q) return nullptr;
  std::memcpy(q, &size, sizeof size);
  auto* g = static_cast<GrpcSession*>(user);
  g->nghttp2_bytes_ = g->nghttp2_bytes_ - old + size;
  return q + kSizeHeader;
}

void GrpcSession::Refuse(int32_t id, Stream& s) {
  Release(s);
  s.refused = true;
  ++refused_;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
}

int64_t GrpcSession::OldestUnansweredNs() const {
  while (!order_.empty()) {
    auto it = streams_.find(order_.front());
    if (it != streams_.end() && !it->second.answered && !it->second.refused) return it->second.start_ns;
    order_.pop_front();
  }
  return -1;
}

Result<std::unique_ptr<GrpcSession>> GrpcSession::Create(GrpcService* service, const GrpcLimits& limits) {
  std::unique_ptr<GrpcSession> g(new GrpcSession(service, limits));
  nghttp2_session_callbacks* cb = nullptr;
  if (nghttp2_session_callbacks_new(&cb) != 0) return Status::IOError("nghttp2: out of memory");
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, GrpcCallbacks::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(cb, GrpcCallbacks::OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, GrpcCallbacks::OnData);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, GrpcCallbacks::OnFrameRecv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, GrpcCallbacks::OnStreamClose);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, GrpcCallbacks::OnFrameSend);
  nghttp2_option* opt = nullptr;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cb);
    return Status::IOError("nghttp2: out of memory");
  }
  // Our own HPACK encoder's table (what we send): the protocol's default
  // size, whatever larger SETTINGS_HEADER_TABLE_SIZE a client offers. The
  // headers we receive are bounded by SETTINGS_MAX_HEADER_LIST_SIZE below
  // (nghttp2 refuses a larger list) and by OnHeader's count of
  // max_header_bytes (the stream is reset).
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
  // The limits nghttp2 applies to floods, set here rather than left to
  // the library's defaults (which a newer version might change): SETTINGS
  // entries per frame (a SETTINGS flood of huge frames), SETTINGS and PING
  // ACKs queued for a client that does not read (the PING/SETTINGS
  // floods), CONTINUATION frames after one HEADERS (CVE-2024-28182; in
  // Debian's 1.52.0-1+deb12u2), RST_STREAMs received (rapid reset,
  // CVE-2023-44487: a burst of 1000, then 33 a second).
  nghttp2_option_set_max_settings(opt, 32);
  nghttp2_option_set_max_outbound_ack(opt, 1000);
  nghttp2_option_set_max_continuations(opt, 8);
  nghttp2_option_set_stream_reset_rate_limit(opt, 1000, 33);
  // A closed stream is forgotten at once: nghttp2 would otherwise keep
  // recently closed ones (for the priority tree, which gRPC does not use),
  // bytes a connection holds after its streams are gone.
  nghttp2_option_set_no_closed_streams(opt, 1);
  // No HTTP messaging checks of each header field (a third of the library's
  // work on a lone call's request: 8 of ~28k instructions a call went to
  // the HPACK decoder and these checks, callgrind). They guard what an
  // HTTP server passes on; this one keeps no header value: OnHeader looks
  // at :path, :method and content-type by exact comparison, answers
  // anything else by those three (405, 415, UNIMPLEMENTED), and quotes the
  // client's bytes only percent-encoded. The frame layer (sizes, flow
  // control, stream states, HPACK itself, the floods below) stays nghttp2's.
  nghttp2_option_set_no_http_messaging(opt, 1);
  // nghttp2's every allocation goes through the session's counting
  // allocator: its streams, HPACK tables and queued frames are this
  // connection's bytes (held()).
  nghttp2_mem mem{g.get(), GrpcSession::Malloc, GrpcSession::Free, GrpcSession::Calloc, GrpcSession::Realloc};
  const int rc = nghttp2_session_server_new3(&g->session_, cb, g.get(), opt, &mem);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  if (rc != 0) return Status::IOError(std::string("nghttp2: ") + nghttp2_strerror(rc));
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits.max_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits.max_header_bytes},
  };
  if (nghttp2_submit_settings(g->session_, NGHTTP2_FLAG_NONE, settings, 2) != 0)
    return Status::IOError("nghttp2: cannot queue SETTINGS");
  return g;
}

GrpcSession::~GrpcSession() {
  if (session_) nghttp2_session_del(session_);
}

void GrpcSession::Answer(int32_t id, Stream& s) {
  ++answered_;
  s.answered = true;
  if (!s.post || !s.grpc_type) {
    Release(s);
    // Not a gRPC request: 415, as gRPC servers answer one (grpc's PROTOCOL-HTTP2.md).
    const nghttp2_nv h[] = {Nv(":status", s.post ? "415" : "405")};
    nghttp2_submit_response(session_, id, h, 1, nullptr);
    return;
  }
  GrpcService::Reply reply;
  reply.body.swap(reply_body_);  // its capacity, empty
  uint32_t len = 0;
  if (s.other_codec) {
    reply.code = GrpcCode::kInternal;
    reply.message =
        "no codec for the request's content-subtype: this service reads protobuf (content-type "
        "application/grpc or application/grpc+proto)";
  } else if (s.too_long) {
    reply.code = GrpcCode::kResourceExhausted;
    reply.message = "the request message is longer than " + std::to_string(limits_.max_message_bytes) + " bytes";
  } else if (s.bad_length || s.body.size() < kPrefixBytes ||
             (len = (static_cast<uint32_t>(static_cast<uint8_t>(s.body[1])) << 24) |
                    (static_cast<uint32_t>(static_cast<uint8_t>(s.body[2])) << 16) |
                    (static_cast<uint32_t>(static_cast<uint8_t>(s.body[3])) << 8) |
                    static_cast<uint32_t>(static_cast<uint8_t>(s.body[4])),
              s.body.size() != kPrefixBytes + len)) {
    reply.code = GrpcCode::kInternal;
    reply.message = "the request is not one length-prefixed message";
  } else if (s.body[0] == 1) {
    reply.code = GrpcCode::kUnimplemented;
    reply.message = "compressed messages are not accepted (no grpc-encoding is offered)";
  } else if (s.body[0] != 0) {
    // The flag is 0 or 1; other bits set are no encoding, only damage.
    reply.code = GrpcCode::kInternal;
    reply.message = "the message's flag byte is " + std::to_string(static_cast<uint8_t>(s.body[0])) +
                    ": 0 (not compressed) is what this service takes, 1 (compressed) is refused";
  } else if (s.method < 0) {
    reply.code = GrpcCode::kUnimplemented;
    reply.message = "unknown method";
  }
  if (reply.code != GrpcCode::kOk) {
    if (s.method >= 0) service_->Refused(s.method);
  } else {
    try {
      service_->Call(s.method, std::string_view(s.body).substr(kPrefixBytes), &reply);
    } catch (const std::exception& e) {
      // nghttp2 is C: nothing may unwind through it.
      reply = GrpcService::Reply{GrpcCode::kInternal, std::string("internal error: ") + e.what(), {}};
    }
  }
  std::string request;  // a server-streaming call's, asked again later
  if (reply.code == GrpcCode::kOk && s.method >= 0 && service_->Streaming(s.method))
    request.assign(std::string_view(s.body).substr(kPrefixBytes));
  Release(s);
  if (reply.code != GrpcCode::kOk) {
    const std::string code = CodeText(reply.code);
    // The message can quote the client's bytes (a method's name, a
    // descriptor): percent-encoded, it is a valid header value whatever
    // they are.
    const std::string text = PercentEncodeGrpcMessage(reply.message);
    const nghttp2_nv h[] = {Nv(":status", "200"), Nv("content-type", "application/grpc"), Nv("grpc-status", code),
                            Nv("grpc-message", text)};
    nghttp2_submit_response(session_, id, h, text.empty() ? 3 : 4, nullptr);
    KeepSmall(&reply.body);
    reply_body_.swap(reply.body);
    return;
  }
  if (service_->Streaming(s.method)) {
    // Open from here on: the request kept to ask again (PollWatches).
    s.watch = true;
    ++watches_;
    s.request = std::move(request);
    s.last = reply.body;
    responses_ += s.request.size() + s.last.size();
  }
  const uint32_t n = static_cast<uint32_t>(reply.body.size());
  s.response.reserve(kPrefixBytes + n);
  s.response.push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8) s.response.push_back(static_cast<char>((n >> shift) & 0xff));
  s.response.append(reply.body);
  s.sent = 0;
  responses_ += s.response.size();
  KeepSmall(&reply.body);
  reply_body_.swap(reply.body);
  const nghttp2_nv h[] = {StaticNv(":status", "200"), StaticNv("content-type", "application/grpc")};
  nghttp2_data_provider prd;
  prd.source.ptr = nullptr;
  prd.read_callback = GrpcCallbacks::ReadBody;
  nghttp2_submit_response(session_, id, h, 2, &prd);
}

bool GrpcSession::Receive(std::string_view in, int64_t now_ns) {
  if (failed_) return false;
  now_ns_ = now_ns;
  if (!in.empty()) {
    const ssize_t rc = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(in.data()), in.size());
    if (rc < 0) {
      // NGHTTP2_ERR_BAD_CLIENT_MAGIC, NGHTTP2_ERR_FLOODED, a callback's
      // failure and the like: a GOAWAY may be queued; send it and close.
      failed_ = true;
      nghttp2_session_terminate_session(session_, NGHTTP2_PROTOCOL_ERROR);
      return false;
    }
  }
  for (size_t n = 0; n < kMaxCallsPerReceive && !ready_.empty();) {
    const int32_t id = ready_.front();
    ready_.pop_front();
    auto it = streams_.find(id);
    if (it == streams_.end() || it->second.answered) continue;  // reset by the client meanwhile
    Answer(id, it->second);
    ++n;
  }
  PollWatches();
  return true;
}

void GrpcSession::Drain(std::string* out) {
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n <= 0) {
      if (n < 0) failed_ = true;
      return;
    }
    out->append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
}

bool GrpcSession::Finished() const {
  return failed_ ? !nghttp2_session_want_write(session_)
                 : !nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_);
}

void GrpcSession::Shutdown() {
  // Server-streaming calls get the service's last word (a health watch:
  // NOT_SERVING), then end.
  PollWatches();
  for (auto& [id, s] : streams_)
    if (s.watch && !s.closing) {
      s.closing = true;
      nghttp2_session_resume_data(session_, id);
    }
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_),
                        NGHTTP2_NO_ERROR, nullptr, 0);
}

void GrpcSession::Terminate(uint32_t error) { nghttp2_session_terminate_session(session_, error); }

}  // namespace frs::server
