#include "server/grpc_session.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>

namespace frs::server {

namespace {

constexpr size_t kPrefixBytes = 5;  // compressed flag, 32-bit big-endian length

nghttp2_nv Nv(std::string_view name, std::string_view value) {
  // nghttp2 copies names and values on submit (no NO_COPY flags).
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
                    NGHTTP2_NV_FLAG_NONE};
}

const char* CodeText(GrpcCode c) {
  static thread_local char buf[4];
  std::snprintf(buf, sizeof buf, "%u", static_cast<unsigned>(c));
  return buf;
}

}  // namespace

// nghttp2's C callbacks, friends of the session.
struct GrpcCallbacks {
  static GrpcSession* Self(void* user) { return static_cast<GrpcSession*>(user); }

  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
      Self(user)->streams_.try_emplace(frame->hd.stream_id);
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                      const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    GrpcSession* g = Self(user);
    auto it = g->streams_.find(frame->hd.stream_id);
    if (it == g->streams_.end()) return 0;  // trailers of a stream we did not track
    GrpcSession::Stream& s = it->second;
    s.header_bytes += static_cast<uint32_t>(namelen + valuelen);
    // Past the limit the stream is reset (nghttp2 sends RST_STREAM).
    if (s.header_bytes > g->limits_.max_header_bytes) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":path") s.path.assign(v);
    else if (n == ":method") s.post = v == "POST";
    else if (n == "content-type") s.grpc_type = v == "application/grpc" || v.starts_with("application/grpc+") ||
                                                v.starts_with("application/grpc;");
    return 0;
  }

  static int OnData(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
    GrpcSession* g = Self(user);
    auto it = g->streams_.find(id);
    if (it == g->streams_.end()) return 0;
    GrpcSession::Stream& s = it->second;
    if (s.too_long) return 0;
    if (s.body.size() + len > g->limits_.max_message_bytes + kPrefixBytes) {
      s.too_long = true;  // dropped from here on; answered when the stream ends
      s.body.clear();
      s.body.shrink_to_fit();
      return 0;
    }
    s.body.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    GrpcSession* g = Self(user);
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      auto it = g->streams_.find(frame->hd.stream_id);
      if (it != g->streams_.end()) g->Answer(frame->hd.stream_id, it->second);
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t id, uint32_t, void* user) {
    Self(user)->streams_.erase(id);
    return 0;
  }

  static ssize_t ReadBody(nghttp2_session* session, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                          nghttp2_data_source*, void* user) {
    GrpcSession* g = Self(user);
    auto it = g->streams_.find(id);
    if (it == g->streams_.end()) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    GrpcSession::Stream& s = it->second;
    const size_t n = std::min(length, s.response.size() - s.sent);
    std::memcpy(buf, s.response.data() + s.sent, n);
    s.sent += n;
    if (s.sent == s.response.size()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      const nghttp2_nv trailers[] = {Nv("grpc-status", "0")};
      if (nghttp2_submit_trailer(session, id, trailers, 1) != 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return static_cast<ssize_t>(n);
  }
};

Result<std::unique_ptr<GrpcSession>> GrpcSession::Create(GrpcService* service, const GrpcLimits& limits) {
  std::unique_ptr<GrpcSession> g(new GrpcSession(service, limits));
  nghttp2_session_callbacks* cb = nullptr;
  if (nghttp2_session_callbacks_new(&cb) != 0) return Status::IOError("nghttp2: out of memory");
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, GrpcCallbacks::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(cb, GrpcCallbacks::OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, GrpcCallbacks::OnData);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, GrpcCallbacks::OnFrameRecv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, GrpcCallbacks::OnStreamClose);
  nghttp2_option* opt = nullptr;
  nghttp2_option_new(&opt);
  // Headers of a request are bounded like HTTP/1.1's (<limits header_bytes>).
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
  const int rc = nghttp2_session_server_new2(&g->session_, cb, g.get(), opt);
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
  if (!s.post || !s.grpc_type) {
    // Not a gRPC request: 415, as gRPC servers answer one (grpc's PROTOCOL-HTTP2.md).
    const nghttp2_nv h[] = {Nv(":status", s.post ? "415" : "405")};
    nghttp2_submit_response(session_, id, h, 1, nullptr);
    return;
  }
  GrpcService::Reply reply;
  uint32_t len = 0;
  if (s.too_long) {
    reply.code = GrpcCode::kResourceExhausted;
    reply.message = "the request message is longer than " + std::to_string(limits_.max_message_bytes) + " bytes";
  } else if (s.body.size() < kPrefixBytes ||
             (len = (static_cast<uint32_t>(static_cast<uint8_t>(s.body[1])) << 24) |
                    (static_cast<uint32_t>(static_cast<uint8_t>(s.body[2])) << 16) |
                    (static_cast<uint32_t>(static_cast<uint8_t>(s.body[3])) << 8) |
                    static_cast<uint32_t>(static_cast<uint8_t>(s.body[4])),
              s.body.size() != kPrefixBytes + len)) {
    reply.code = GrpcCode::kInternal;
    reply.message = "the request is not one length-prefixed message";
  } else if (s.body[0] != 0) {
    reply.code = GrpcCode::kUnimplemented;
    reply.message = "compressed messages are not accepted (no grpc-encoding is offered)";
  } else {
    try {
      service_->Call(s.path, std::string_view(s.body).substr(kPrefixBytes), &reply);
    } catch (const std::exception& e) {
      // nghttp2 is C: nothing may unwind through it.
      reply = GrpcService::Reply{GrpcCode::kInternal, std::string("internal error: ") + e.what(), {}};
    }
  }
  s.body.clear();
  if (reply.code != GrpcCode::kOk) {
    const std::string code = CodeText(reply.code);
    const nghttp2_nv h[] = {Nv(":status", "200"), Nv("content-type", "application/grpc"), Nv("grpc-status", code),
                            Nv("grpc-message", reply.message)};
    nghttp2_submit_response(session_, id, h, reply.message.empty() ? 3 : 4, nullptr);
    return;
  }
  const uint32_t n = static_cast<uint32_t>(reply.body.size());
  s.response.reserve(kPrefixBytes + n);
  s.response.push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8) s.response.push_back(static_cast<char>((n >> shift) & 0xff));
  s.response.append(reply.body);
  s.sent = 0;
  const nghttp2_nv h[] = {Nv(":status", "200"), Nv("content-type", "application/grpc")};
  nghttp2_data_provider prd;
  prd.source.ptr = nullptr;
  prd.read_callback = GrpcCallbacks::ReadBody;
  nghttp2_submit_response(session_, id, h, 2, &prd);
}

bool GrpcSession::Receive(std::string_view in) {
  if (failed_) return false;
  const ssize_t rc = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(in.data()), in.size());
  if (rc < 0) {
    // NGHTTP2_ERR_BAD_CLIENT_MAGIC, NGHTTP2_ERR_FLOODED and the like: a
    // GOAWAY may be queued; send it and close.
    failed_ = true;
    nghttp2_session_terminate_session(session_, NGHTTP2_PROTOCOL_ERROR);
    return true;
  }
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
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_),
                        NGHTTP2_NO_ERROR, nullptr, 0);
}

void GrpcSession::Terminate(uint32_t error) { nghttp2_session_terminate_session(session_, error); }

}  // namespace frs::server
