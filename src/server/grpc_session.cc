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
#include "server/h2_frame.h"

namespace frs::server {

namespace {

constexpr size_t kPrefixBytes = 5;  // compressed flag, 32-bit big-endian length
// What the session holds beside its streams, at most: the HPACK table
// (4,096 bytes of entries and their overhead), a frame cut between two
// reads (up to 16,393 bytes) and the frames not yet drained; part of
// held_limit(), so that a session of legitimate calls is never refused for
// them.
constexpr size_t kSessionBytes = 64 * 1024;
// Our receive windows (connection and stream) are the protocol's initial
// 65,535 bytes, given back (WINDOW_UPDATE) once half of one is consumed:
// what a request may send is bounded by the body budget, not the window.
constexpr int64_t kWindowRefill = h2::kInitialWindow / 2;

// The answers' header blocks (h2_frame.h: literals without indexing).
// :status 200 is the static table's entry 8 (0x88), content-type its name 31.
constexpr std::string_view kGrpcHeaders =
    "\x88\x0f\x10\x10"
    "application/grpc";
// Its first byte is NUL: the length is given, not found.
constexpr std::string_view kOkTrailers(
    "\x00\x0bgrpc-status\x01"
    "0",
    15);
constexpr uint8_t kStatusIndex = 8;

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

// Empties `s`, keeping its buffer for the next stream when it is small.
void KeepSmall(std::string* s) {
  if (s->capacity() > GrpcSession::kKeptCapacity) std::string().swap(*s);
  else s->clear();
}

// The length a gRPC message's 5-byte prefix declares (bytes 1-4, big-endian).
uint32_t DeclaredLength(std::string_view prefixed) {
  return h2::ReadU32(reinterpret_cast<const uint8_t*>(prefixed.data()) + 1);
}

const char* CodeText(GrpcCode c) {
  static thread_local char buf[4];
  std::snprintf(buf, sizeof buf, "%u", static_cast<unsigned>(c));
  return buf;
}

}  // namespace

struct HpackAllocator {
  nghttp2_mem mem;
};

std::string PercentEncodeGrpcMessage(std::string_view text) {
  // gRPC's grpc-message: printable ASCII but '%' as itself, every other
  // byte (UTF-8's among them) as %XX.
  static constexpr PercentTable kGrpcMessage(0x20, 0x7e, "%", PercentHigh::kEscape);
  return PercentEncoded(text, kGrpcMessage);
}

GrpcSession::GrpcSession(GrpcService* service, const GrpcLimits& limits)
    : service_(service),
      limits_(limits),
      budget_(limits.max_buffered_bytes != 0 ? limits.max_buffered_bytes
                                             : size_t{kBufferedMessages} * (limits.max_message_bytes + kPrefixBytes)),
      // The header bytes: a header block's fields are decoded into the
      // inflater's buffers before its stream is judged.
      held_limit_(budget_ + size_t{limits.max_streams} * kStreamBytes + kSpareStreams * kStreamBytes + kSessionBytes +
                  limits.max_header_bytes),
      send_window_(h2::kInitialWindow),
      recv_window_(h2::kInitialWindow),
      peer_initial_window_(h2::kInitialWindow),
      peer_max_frame_(h2::kMinMaxFrameSize),
      reset_tokens_(kResetBurst) {
  spare_.reserve(kSpareStreams);
}

Result<std::unique_ptr<GrpcSession>> GrpcSession::Create(GrpcService* service, const GrpcLimits& limits) {
  std::unique_ptr<GrpcSession> g(new GrpcSession(service, limits));
  // The inflater's every allocation goes through the session's counting
  // allocator: its table is this connection's bytes (held()). Its table's
  // size is the protocol's default (4,096), which our SETTINGS leave as is.
  g->hpack_mem_ = std::make_unique<HpackAllocator>(HpackAllocator{
      nghttp2_mem{g.get(), GrpcSession::Malloc, GrpcSession::Free, GrpcSession::Calloc, GrpcSession::Realloc}});
  if (nghttp2_hd_inflate_new2(&g->inflater_, &g->hpack_mem_->mem) != 0)
    return Status::IOError("HPACK inflater: out of memory");
  // Our SETTINGS, first on the wire (the connection drains them at once).
  h2::AppendFrameHeader(&g->out_, 12, h2::kSettings, 0, 0);
  char e[12];
  e[0] = 0;
  e[1] = static_cast<char>(h2::kMaxConcurrentStreams);
  h2::PutU32(e + 2, limits.max_streams);
  e[6] = 0;
  e[7] = static_cast<char>(h2::kMaxHeaderListSize);
  h2::PutU32(e + 8, limits.max_header_bytes);
  g->out_.append(e, sizeof e);
  return g;
}

GrpcSession::~GrpcSession() {
  if (inflater_) nghttp2_hd_inflate_del(inflater_);
  if (limits_.worker != nullptr) limits_.worker->used -= buffered_;
}

// ---- the frame layer ----

bool GrpcSession::Fail(uint32_t error) {
  if (!failed_) {
    failed_ = true;
    // Calls queued and not yet answered never will be: dropped, uncounted.
    ready_.clear();
    // Nor will any stream's message be read: its bytes go back to the
    // worker's budget now, not when the lingering connection closes (the
    // answers still to be sent stay).
    for (auto& [id, s] : streams_) ReleaseRequest(s);
    h2::AppendFrameHeader(&out_, 8, h2::kGoaway, 0, 0);
    char w[8];
    // The last stream whose call was answered: no later one was processed
    // nor will be, so a client may retry each of them elsewhere (RFC 9113
    // 6.8), where naming the last stream begun would have it count them
    // lost. Never later than a first GOAWAY's.
    h2::PutU32(w, goaway_sent_ ? std::min(goaway_last_, last_answered_) : last_answered_);
    h2::PutU32(w + 4, error);
    out_.append(w, sizeof w);
  }
  return false;
}

void GrpcSession::ResetStream(uint32_t id, uint32_t error) { h2::AppendWordFrame(&out_, h2::kRstStream, id, error); }

bool GrpcSession::Feed(std::string_view in) {
  const auto* p = reinterpret_cast<const uint8_t*>(in.data());
  size_t at = 0;
  const size_t size = in.size();
  if (preface_seen_ < h2::kPreface.size()) {
    const size_t n = std::min(size, h2::kPreface.size() - preface_seen_);
    if (std::memcmp(in.data(), h2::kPreface.data() + preface_seen_, n) != 0) return Fail(h2::kProtocolError);
    preface_seen_ += n;
    at = n;
  }
  if (!partial_.empty()) {
    // A frame begun in an earlier read: completed here first (partial_
    // never holds more than one frame).
    auto take = [&](size_t want) {
      if (partial_.size() >= want) return true;
      const size_t n = std::min(want - partial_.size(), size - at);
      partial_.append(in.data() + at, n);
      at += n;
      return partial_.size() == want;
    };
    if (!take(h2::kFrameHeaderBytes)) return true;
    const auto* h = reinterpret_cast<const uint8_t*>(partial_.data());
    const h2::FrameHeader f = h2::ReadFrameHeader(h);
    if (f.length > h2::kOurMaxFrameSize) return Fail(h2::kFrameSizeError);
    partial_.reserve(h2::kFrameHeaderBytes + f.length);
    if (!take(h2::kFrameHeaderBytes + f.length)) return true;
    h = reinterpret_cast<const uint8_t*>(partial_.data());
    if (!OnFrame(h, h + h2::kFrameHeaderBytes)) return false;
    // Its buffer is kept (at most one frame, in held()): a client streaming
    // large messages cuts a frame at most reads, and a buffer allocated and
    // freed for each was allocator churn (and, under AddressSanitizer, its
    // quarantine's memory).
    partial_.clear();
  }
  while (size - at >= h2::kFrameHeaderBytes) {
    const h2::FrameHeader f = h2::ReadFrameHeader(p + at);
    if (f.length > h2::kOurMaxFrameSize) return Fail(h2::kFrameSizeError);
    if (size - at < h2::kFrameHeaderBytes + f.length) break;
    if (!OnFrame(p + at, p + at + h2::kFrameHeaderBytes)) return false;
    at += h2::kFrameHeaderBytes + f.length;
  }
  if (size - at >= h2::kFrameHeaderBytes)
    partial_.reserve(h2::kFrameHeaderBytes + h2::ReadFrameHeader(p + at).length);  // the whole frame, once
  partial_.append(in.data() + at, size - at);
  return true;
}

bool GrpcSession::OnFrame(const uint8_t* header, const uint8_t* p) {
  const h2::FrameHeader f = h2::ReadFrameHeader(header);
  if (!settings_seen_) {
    // The client's preface ends with a SETTINGS frame (RFC 9113 3.4).
    if (f.type != h2::kSettings || (f.flags & h2::kAck)) return Fail(h2::kProtocolError);
    settings_seen_ = true;
  }
  if (block_stream_ != 0 && f.type != h2::kContinuation) return Fail(h2::kProtocolError);
  switch (f.type) {
    case h2::kData: return OnDataFrame(f.flags, f.stream, p, f.length);
    case h2::kHeaders: return OnHeadersFrame(f.flags, f.stream, p, f.length);
    case h2::kContinuation:
      if (block_stream_ == 0 || f.stream != block_stream_) return Fail(h2::kProtocolError);
      if (++block_continuations_ > kMaxContinuations) return Fail(h2::kEnhanceYourCalm);
      return OnHeaderBlock(p, f.length, f.flags & h2::kEndHeaders, false);
    case h2::kPriority:
      // Priorities are not used: checked and dropped. A wrong length
      // (FRAME_SIZE_ERROR, RFC 9113 6.3) or a stream depending on itself
      // (PROTOCOL_ERROR, 5.3.1) is the stream's error, the connection's for
      // a stream never opened (no RST_STREAM may name one).
      if (f.stream == 0) return Fail(h2::kProtocolError);
      if (f.length != 5 || (h2::ReadU32(p) & 0x7fffffffu) == f.stream) {
        const uint32_t error = f.length != 5 ? h2::kFrameSizeError : h2::kProtocolError;
        if (f.stream > last_stream_) return Fail(error);
        ResetStream(f.stream, error);
        if (auto it = streams_.find(static_cast<int32_t>(f.stream)); it != streams_.end()) Close(it);
      }
      return true;
    case h2::kRstStream:
      if (f.length != 4) return Fail(h2::kFrameSizeError);
      return OnRstStream(f.stream);
    case h2::kSettings:
      if (f.stream != 0) return Fail(h2::kProtocolError);
      return OnSettings(f.flags, p, f.length);
    case h2::kPushPromise: return Fail(h2::kProtocolError);  // a client may not push
    case h2::kPing:
      if (f.stream != 0) return Fail(h2::kProtocolError);
      if (f.length != 8) return Fail(h2::kFrameSizeError);
      if ((f.flags & h2::kAck) == 0) {
        h2::AppendFrameHeader(&out_, 8, h2::kPing, h2::kAck, 0);
        out_.append(reinterpret_cast<const char*>(p), 8);
      }
      return true;
    case h2::kGoaway:
      if (f.stream != 0) return Fail(h2::kProtocolError);
      if (f.length < 8) return Fail(h2::kFrameSizeError);
      goaway_received_ = true;
      return true;
    case h2::kWindowUpdate:
      if (f.length != 4) return Fail(h2::kFrameSizeError);
      return OnWindowUpdate(f.stream, h2::ReadU32(p) & 0x7fffffffu);
    default: return true;  // an extension's frame: ignored (RFC 9113 4.1)
  }
}

bool GrpcSession::OnDataFrame(uint8_t flags, uint32_t id, const uint8_t* p, uint32_t n) {
  if (id == 0) return Fail(h2::kProtocolError);
  if (id > last_stream_) return Fail(h2::kProtocolError);  // an idle stream
  // The whole frame, padding included, counts against both windows. Given
  // back once half of one is consumed (below), a window never comes near a
  // frame's size for a client that keeps to it; what a stream may make the
  // server hold is the body budget's to bound. The checks keep the
  // accounting honest should the refill change.
  if (n > recv_window_) return Fail(h2::kFlowControlError);
  recv_window_ -= n;
  recv_unacked_ += n;
  if (recv_unacked_ >= kWindowRefill) {
    h2::AppendWordFrame(&out_, h2::kWindowUpdate, 0, static_cast<uint32_t>(recv_unacked_));
    recv_window_ += recv_unacked_;
    recv_unacked_ = 0;
  }
  uint32_t pad = 0;
  if (flags & h2::kPadded) {
    if (n == 0 || p[0] >= n) return Fail(h2::kProtocolError);
    pad = p[0];
    ++p;
    --n;
  }
  auto it = streams_.find(static_cast<int32_t>(id));
  if (it == streams_.end()) return true;  // closed, reset or refused: dropped
  Stream& s = it->second;
  if (s.remote_closed) {
    ResetStream(id, h2::kStreamClosed);
    Close(it);
    return true;
  }
  const int64_t framed = int64_t{n} + (flags & h2::kPadded ? 1 : 0);
  if (framed > s.recv_window) {
    ResetStream(id, h2::kFlowControlError);
    Close(it);
    return true;
  }
  s.recv_window -= framed;
  OnData(s, static_cast<int32_t>(id), reinterpret_cast<const char*>(p), n - pad);
  if (s.refused) {
    ResetStream(id, h2::kRefusedStream);
    Close(it);
    return true;
  }
  if (flags & h2::kEndStream) {
    s.remote_closed = true;
    EndOfRequest(static_cast<int32_t>(id), s);
    return true;
  }
  s.recv_unacked += framed;
  if (s.recv_unacked >= kWindowRefill) {
    h2::AppendWordFrame(&out_, h2::kWindowUpdate, id, static_cast<uint32_t>(s.recv_unacked));
    s.recv_window += s.recv_unacked;
    s.recv_unacked = 0;
  }
  return true;
}

bool GrpcSession::OnHeadersFrame(uint8_t flags, uint32_t id, const uint8_t* p, uint32_t n) {
  if (id == 0 || id % 2 == 0) return Fail(h2::kProtocolError);
  uint32_t pad = 0;
  if (flags & h2::kPadded) {
    if (n == 0) return Fail(h2::kProtocolError);
    pad = p[0];
    ++p;
    --n;
  }
  bool self_dependent = false;
  if (flags & h2::kPriorityFlag) {
    if (n < 5) return Fail(h2::kFrameSizeError);
    self_dependent = (h2::ReadU32(p) & 0x7fffffffu) == id;
    p += 5;
    n -= 5;
  }
  if (pad > n) return Fail(h2::kProtocolError);
  n -= pad;
  block_stream_ = id;
  block_request_ = false;
  block_end_stream_ = flags & h2::kEndStream;
  block_continuations_ = 0;
  if (id > last_stream_) {
    // A new stream. Its block is decoded whatever becomes of it: the HPACK
    // table is the connection's.
    last_stream_ = id;
    if (goaway_sent_) {
      // Past our GOAWAY's last stream: ignored, as the GOAWAY told the client.
    } else if (self_dependent) {
      ResetStream(id, h2::kProtocolError);
    } else if (streams_.size() >= limits_.max_streams) {
      ResetStream(id, h2::kRefusedStream);
    } else if (buffered_ >= budget_ || held() >= held_limit_ || WorkerBudgetSpent(0)) {
      // The budget is spent on messages still arriving.
      ++refused_;
      ResetStream(id, h2::kRefusedStream);
    } else {
      Begin(static_cast<int32_t>(id));
      block_request_ = true;
    }
  } else {
    auto it = streams_.find(static_cast<int32_t>(id));
    if (it != streams_.end()) {
      // Trailers: they must end the stream.
      if (it->second.remote_closed || !block_end_stream_) {
        ResetStream(id, it->second.remote_closed ? h2::kStreamClosed : h2::kProtocolError);
        Close(it);
        block_end_stream_ = false;
      }
    } else {
      // A stream closed, or skipped (a later one began): no request can
      // start on it (RFC 9113 5.1.1). Reset, not ignored: a client that
      // began it would otherwise wait for an answer until its own deadline.
      ResetStream(id, h2::kStreamClosed);
    }
  }
  if (block_request_ && (flags & h2::kEndHeaders)) {
    auto it = streams_.find(static_cast<int32_t>(id));
    if (FromRepeatedBlock(it->second, p, n)) {
      block_stream_ = 0;
      if (block_end_stream_) {
        it->second.remote_closed = true;
        EndOfRequest(static_cast<int32_t>(id), it->second);
      }
      return true;
    }
    const bool leaves_table = LeavesTableAsIs(p, n);
    if (!OnHeaderBlock(p, n, true, leaves_table)) return false;
    // Remembered when it is of the kind that can be, and its stream took it.
    it = streams_.find(static_cast<int32_t>(id));
    if (it != streams_.end() && n <= kMaxRepeatedBlock && leaves_table) {
      const Stream& t = it->second;
      repeated_.bytes.assign(reinterpret_cast<const char*>(p), n);
      repeated_.generation = table_generation_;
      repeated_.heads = t.heads;
    }
    return true;
  }
  return OnHeaderBlock(p, n, flags & h2::kEndHeaders, (flags & h2::kEndHeaders) && LeavesTableAsIs(p, n));
}

namespace {

// An HPACK integer of a `bits`-bit prefix at p[*at] (RFC 7541 5.1); false
// when it runs past the block or past 2^28.
bool SkipHpackInt(const uint8_t* p, size_t n, size_t* at, int bits, uint32_t* v) {
  if (*at >= n) return false;
  const uint32_t mask = (1u << bits) - 1;
  *v = p[(*at)++] & mask;
  if (*v < mask) return true;
  for (int shift = 0; shift <= 21; shift += 7) {
    if (*at >= n) return false;
    const uint8_t b = p[(*at)++];
    *v += uint32_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// A string literal (H bit, 7-bit length, the bytes), skipped.
bool SkipHpackString(const uint8_t* p, size_t n, size_t* at) {
  uint32_t len = 0;
  if (!SkipHpackInt(p, n, at, 7, &len) || len > n - *at) return false;
  *at += len;
  return true;
}

}  // namespace

bool GrpcSession::LeavesTableAsIs(const uint8_t* p, size_t n) {
  size_t at = 0;
  uint32_t v = 0;
  while (at < n) {
    const uint8_t b = p[at];
    if (b & 0x80) {
      if (!SkipHpackInt(p, n, &at, 7, &v)) return false;  // indexed field
    } else if ((b & 0xe0) == 0) {
      // A literal without indexing (0000) or never indexed (0001).
      if (!SkipHpackInt(p, n, &at, 4, &v)) return false;
      if (v == 0 && !SkipHpackString(p, n, &at)) return false;
      if (!SkipHpackString(p, n, &at)) return false;
    } else {
      return false;  // a literal with indexing (01) or a size update (001)
    }
  }
  return n > 0;
}

bool GrpcSession::FromRepeatedBlock(Stream& s, const uint8_t* p, size_t n) const {
  if (repeated_.generation != table_generation_ || repeated_.bytes.size() != n ||
      std::memcmp(repeated_.bytes.data(), p, n) != 0)
    return false;
  s.heads = repeated_.heads;
  return true;
}

bool GrpcSession::OnHeaderBlock(const uint8_t* p, size_t n, bool end_headers, bool leaves_table) {
  // Any other block may change the table (a literal with indexing, a size
  // update, a field cut between frames): what was remembered of a block no
  // longer holds.
  if (!(end_headers && block_continuations_ == 0 && leaves_table)) ++table_generation_;
  for (;;) {
    nghttp2_nv nv;
    int inflate_flags = 0;
    const ssize_t rv = nghttp2_hd_inflate_hd2(inflater_, &nv, &inflate_flags, p, n, end_headers ? 1 : 0);
    if (rv < 0) return Fail(h2::kCompressionError);
    p += rv;
    n -= static_cast<size_t>(rv);
    if (inflate_flags & NGHTTP2_HD_INFLATE_EMIT)
      OnHeader(std::string_view(reinterpret_cast<const char*>(nv.name), nv.namelen),
               std::string_view(reinterpret_cast<const char*>(nv.value), nv.valuelen));
    if (inflate_flags & NGHTTP2_HD_INFLATE_FINAL) {
      nghttp2_hd_inflate_end_headers(inflater_);
      break;
    }
    if ((inflate_flags & NGHTTP2_HD_INFLATE_EMIT) == 0 && n == 0) break;
  }
  if (!end_headers) return true;
  const auto id = static_cast<int32_t>(block_stream_);
  block_stream_ = 0;
  if (!block_end_stream_) return true;
  auto it = streams_.find(id);
  if (it != streams_.end()) {
    it->second.remote_closed = true;
    EndOfRequest(id, it->second);
  }
  return true;
}

void GrpcSession::OnHeader(std::string_view n, std::string_view v) {
  auto it = streams_.find(static_cast<int32_t>(block_stream_));
  if (it == streams_.end()) return;  // a refused or closed stream's: dropped
  Stream& s = it->second;
  // As SETTINGS_MAX_HEADER_LIST_SIZE counts a field: its name, its value
  // and 32 bytes (RFC 9113 6.5.2), so that empty fields are not free.
  s.heads.header_bytes += static_cast<uint32_t>(n.size() + v.size() + 32);
  if (s.heads.header_bytes > limits_.max_header_bytes) {
    // Past what our SETTINGS_MAX_HEADER_LIST_SIZE allows: the stream is
    // reset (gRPC clients report RESOURCE_EXHAUSTED); the rest of its block
    // is still decoded, for the table.
    ResetStream(block_stream_, h2::kEnhanceYourCalm);
    Close(it);
    block_request_ = false;
    return;
  }
  if (!block_request_) return;  // trailers: nothing in them is read
  if (n == ":path") s.heads.method = service_->MethodOf(v);
  else if (n == ":method") s.heads.post = v == "POST";
  else if (n == "content-type") {
    const GrpcType t = GrpcTypeOf(v);
    s.heads.grpc_type = t != GrpcType::kNone;
    s.heads.other_codec = t == GrpcType::kOtherCodec;
  }
}

bool GrpcSession::OnSettings(uint8_t flags, const uint8_t* p, uint32_t n) {
  if (flags & h2::kAck) return n == 0 || Fail(h2::kFrameSizeError);
  if (n % 6 != 0) return Fail(h2::kFrameSizeError);
  if (n / 6 > kMaxSettings) return Fail(h2::kEnhanceYourCalm);
  int64_t window_delta = 0;
  for (uint32_t i = 0; i < n; i += 6) {
    const uint16_t id = static_cast<uint16_t>((p[i] << 8) | p[i + 1]);
    const uint32_t v = h2::ReadU32(p + i + 2);
    switch (id) {
      case h2::kEnablePush:
        if (v > 1) return Fail(h2::kProtocolError);
        break;
      case h2::kInitialWindowSize:
        if (v > h2::kMaxWindow) return Fail(h2::kFlowControlError);
        window_delta += int64_t{v} - peer_initial_window_;
        peer_initial_window_ = v;
        break;
      case h2::kMaxFrameSize:
        if (v < h2::kMinMaxFrameSize || v > h2::kMaxMaxFrameSize) return Fail(h2::kProtocolError);
        peer_max_frame_ = v;
        break;
      case h2::kHeaderTableSize:
        // Our encoder keeps no table, but the client's decoder, once it
        // acknowledges a size below the one in force (4,096), fails the
        // next header block that does not begin by saying ours is within it.
        if (v < h2::kInitialHeaderTable && !table_zeroed_) table_update_due_ = true;
        break;
      default:
        // The others are the client's to keep; unknown ones are ignored.
        break;
    }
  }
  if (window_delta > 0)
    for (const auto& [id, s] : streams_)
      if (s.send_window + window_delta > h2::kMaxWindow) return Fail(h2::kFlowControlError);
  h2::AppendFrameHeader(&out_, 0, h2::kSettings, h2::kAck, 0);
  if (window_delta != 0) {
    for (auto& [id, s] : streams_) s.send_window += window_delta;
    FlushBlocked();
  }
  return true;
}

bool GrpcSession::OnWindowUpdate(uint32_t id, uint32_t increment) {
  if (id == 0) {
    if (increment == 0) return Fail(h2::kProtocolError);
    send_window_ += increment;
    if (send_window_ > h2::kMaxWindow) return Fail(h2::kFlowControlError);
    FlushBlocked();
    return true;
  }
  if (id > last_stream_) return Fail(h2::kProtocolError);
  auto it = streams_.find(static_cast<int32_t>(id));
  if (it == streams_.end()) return true;
  Stream& s = it->second;
  if (increment == 0 || s.send_window + increment > h2::kMaxWindow) {
    ResetStream(id, increment == 0 ? h2::kProtocolError : h2::kFlowControlError);
    Close(it);
    return true;
  }
  s.send_window += increment;
  if (s.blocked) FlushBlocked();
  return true;
}

bool GrpcSession::OnRstStream(uint32_t id) {
  if (id == 0 || id > last_stream_) return Fail(h2::kProtocolError);
  auto it = streams_.find(static_cast<int32_t>(id));
  // Rapid reset: a token per stream reset before it was answered (work
  // begun, or about to be, and dropped), kResetsPerSecond come back a
  // second. A reset of a stream already answered costs nothing and is
  // what a client whose own deadline passed sends (RFC 9113 5.1 allows it
  // after the close): charged, a burst of such cancellations would end
  // the connection and every call in flight on it.
  if (it == streams_.end() || it->second.answered) {
    if (it != streams_.end()) Close(it);
    return true;
  }
  reset_tokens_ = std::min<double>(kResetBurst, reset_tokens_ + static_cast<double>(now_ns_ - reset_refill_ns_) *
                                                                    kResetsPerSecond / 1e9);
  reset_refill_ns_ = now_ns_;
  if (reset_tokens_ < 1) return Fail(h2::kEnhanceYourCalm);
  reset_tokens_ -= 1;
  Close(it);  // order_ and ready_ skip it when they reach it
  return true;
}

// ---- streams ----

void GrpcSession::EndOfRequest(int32_t id, Stream& s) {
  if (s.refused || s.ended) return;
  // Answered by Receive() after the input is fed, at most
  // kMaxCallsPerReceive at a time.
  s.ended = true;
  ready_.push_back(id);
}

void GrpcSession::Close(Streams::iterator it) {
  if (it->second.watch) --watches_;
  if (it->second.blocked) std::erase(blocked_, it->first);
  Release(it->second);
  Forget(it);
}

void GrpcSession::PeerEnded() {
  for (auto it = streams_.begin(); it != streams_.end();) {
    const auto next = std::next(it);
    // An answer under way (a message too long, answered before its end)
    // is still sent: the client may read after it stopped writing.
    if (!it->second.remote_closed && !it->second.local_closed) Close(it);
    it = next;
  }
}

void GrpcSession::Settle(Streams::iterator it) {
  Stream& s = it->second;
  if (!s.local_closed) return;
  if (!s.remote_closed) {
    // Answered before the request ended (a message too long): the client
    // still sending is told to stop (RST_STREAM NO_ERROR after a complete
    // answer, RFC 9113 8.1).
    ResetStream(static_cast<uint32_t>(it->first), h2::kNoError);
  }
  Close(it);
}

void GrpcSession::WriteHeaders(uint32_t id, std::string_view block, bool end_stream) {
  std::string sized;
  if (table_update_due_) [[unlikely]] {
    // A dynamic table size update to 0 (0x20), within any size the client
    // may set later: said once per connection.
    table_update_due_ = false;
    table_zeroed_ = true;
    sized.reserve(block.size() + 1);
    sized.push_back('\x20');
    sized.append(block);
    block = sized;
  }
  const uint8_t end = end_stream ? h2::kEndStream : 0;
  uint8_t type = h2::kHeaders;
  do {
    const size_t n = std::min<size_t>(block.size(), peer_max_frame_);
    const bool last = n == block.size();
    h2::AppendFrameHeader(&out_, static_cast<uint32_t>(n), type,
                          static_cast<uint8_t>((type == h2::kHeaders ? end : 0) | (last ? h2::kEndHeaders : 0)), id);
    out_.append(block.substr(0, n));
    block.remove_prefix(n);
    type = h2::kContinuation;
  } while (!block.empty());
}

void GrpcSession::SendData(int32_t id, Stream& s) {
  while (s.sent < s.response.size()) {
    const int64_t room = std::min({send_window_, s.send_window, int64_t{peer_max_frame_}});
    if (room <= 0) {
      if (!s.blocked) {
        s.blocked = true;
        blocked_.push_back(id);
      }
      return;
    }
    const size_t n = std::min<size_t>(s.response.size() - s.sent, static_cast<size_t>(room));
    h2::AppendFrameHeader(&out_, static_cast<uint32_t>(n), h2::kData, 0, static_cast<uint32_t>(id));
    out_.append(s.response, s.sent, n);
    s.sent += n;
    send_window_ -= static_cast<int64_t>(n);
    s.send_window -= static_cast<int64_t>(n);
  }
  // All of it is in out_, out of our hands.
  responses_ -= s.response.size();
  KeepSmall(&s.response);
  s.sent = 0;
  if (s.watch && !s.closing) return;  // the stream stays open for the next message
  WriteHeaders(static_cast<uint32_t>(id), kOkTrailers, true);
  s.local_closed = true;
}

void GrpcSession::FlushBlocked() {
  for (size_t n = blocked_.size(); n > 0 && send_window_ > 0; --n) {
    const int32_t id = blocked_.front();
    blocked_.pop_front();
    auto it = streams_.find(id);
    if (it == streams_.end() || !it->second.blocked) continue;  // reset meanwhile
    it->second.blocked = false;
    SendData(id, it->second);
    Settle(it);
  }
}

void GrpcSession::OnData(Stream& s, int32_t id, const char* data, size_t len) {
  while (len > 0 && !s.too_long && !s.bad_length && !s.refused) {
    if (s.body.size() < kPrefixBytes) {
      // The prefix first (in the string's own storage: no allocation).
      const size_t n = std::min(len, kPrefixBytes - s.body.size());
      s.body.append(data, n);
      data += n;
      len -= n;
      if (s.body.size() < kPrefixBytes) return;
      const uint32_t declared = DeclaredLength(s.body);
      if (declared > limits_.max_message_bytes) {
        // Answered now (8 RESOURCE_EXHAUSTED), not when the stream ends: a
        // client still sending would otherwise stream up to 4 GB into the
        // void, its window opened for each frame, until the request timeout
        // closed the whole connection. Its further data is dropped.
        s.too_long = true;
        ready_.push_back(id);
        return;
      }
      // Admitted whole, for the length it declares, or refused now: the
      // connection's buffers never exceed the budget, whatever the
      // interleaving of streams.
      const size_t charge = kPrefixBytes + declared;
      if (buffered_ + charge > budget_ || WorkerBudgetSpent(charge)) {
        Refuse(s);
        return;
      }
      s.body.reserve(charge);
      s.charged = charge;
      buffered_ += charge;
      if (limits_.worker != nullptr) limits_.worker->used += charge;
      continue;
    }
    if (s.body.size() + len > s.charged) {
      s.bad_length = true;  // more than declared: 13 INTERNAL when it ends
      Release(s);
      return;
    }
    s.body.append(data, len);
    return;
  }
}

void GrpcSession::ReleaseRequest(Stream& s) {
  buffered_ -= s.charged;
  if (limits_.worker != nullptr) limits_.worker->used -= s.charged;
  s.charged = 0;
  KeepSmall(&s.body);
}

void GrpcSession::Release(Stream& s) {
  ReleaseRequest(s);
  responses_ -= s.response.size() + s.request.size() + s.last.size();
  KeepSmall(&s.response);
  std::string().swap(s.request);
  std::string().swap(s.last);
}

void GrpcSession::Stream::Recycle() {
  // Field by field rather than `*this = Stream{}` (a fresh record's four
  // strings built and moved, 160 instructions of a lone call): a new field
  // must be reset here (the size check below says so).
#if defined(__GLIBCXX__) && __SIZEOF_POINTER__ == 8
  static_assert(sizeof(Stream) == 208, "a field added to Stream: reset it in Recycle()");
#endif
  heads = Heads{};
  too_long = bad_length = refused = ended = answered = false;
  remote_closed = local_closed = blocked = watch = closing = false;
  start_ns = send_window = recv_window = recv_unacked = 0;
  charged = sent = 0;
  KeepSmall(&body);
  KeepSmall(&response);
  std::string().swap(request);
  std::string().swap(last);
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
  it->second.send_window = peer_initial_window_;
  it->second.recv_window = h2::kInitialWindow;
  PruneOrder();
  order_.push_back(id);
}

void GrpcSession::PruneOrder() {
  // The streams answered or gone leave the front (a connection whose calls
  // are all answered within their read is never asked OldestUnansweredNs,
  // and kept an entry per call it ever made); one left unanswered at the
  // front holds those behind it only until they outnumber the open ones.
  OldestUnansweredNs();
  if (order_.size() <= 2 * streams_.size() + 16) return;
  std::erase_if(order_, [this](int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() || it->second.answered || it->second.refused;
  });
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
  char prefix[kPrefixBytes] = {0};
  h2::PutU32(prefix + 1, n);
  s.response.append(prefix, sizeof prefix);
  s.response.append(body);
  responses_ -= s.last.size();
  s.last = body;
  responses_ += s.last.size();
  if (!s.blocked) SendData(id, s);
}

void GrpcSession::PollWatches() {
  if (watches_ == 0) return;
  for (auto& [id, s] : streams_) {
    if (!s.watch || s.closing) continue;
    GrpcService::Reply reply;
    try {
      service_->Call(s.heads.method, s.request, &reply);
    } catch (const std::exception&) {
      continue;  // nothing new to say
    }
    if (reply.code == GrpcCode::kOk && reply.body != s.last) QueueMessage(id, s, reply.body);
  }
}

namespace {

// Each block the inflater allocates carries its size in front, so that Free and
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
  static_cast<GrpcSession*>(user)->hpack_bytes_ += size;
  return p + kSizeHeader;
}

void GrpcSession::Free(void* ptr, void* user) {
  if (!ptr) return;
  char* p = static_cast<char*>(ptr) - kSizeHeader;
  size_t size;
  std::memcpy(&size, p, sizeof size);
  static_cast<GrpcSession*>(user)->hpack_bytes_ -= size;
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
  g->hpack_bytes_ = g->hpack_bytes_ - old + size;
  return q + kSizeHeader;
}

void GrpcSession::Refuse(Stream& s) {
  // Reset by OnDataFrame once OnData returns.
  Release(s);
  s.refused = true;
  ++refused_;
}

int64_t GrpcSession::OldestUnansweredNs() const {
  while (!order_.empty()) {
    auto it = streams_.find(order_.front());
    if (it != streams_.end() && !it->second.answered && !it->second.refused) return it->second.start_ns;
    order_.pop_front();
  }
  return -1;
}

void GrpcSession::Answer(Streams::iterator it) {
  const int32_t id = it->first;
  Stream& s = it->second;
  ++answered_;
  s.answered = true;
  last_answered_ = std::max(last_answered_, static_cast<uint32_t>(id));
  if (!s.heads.post || !s.heads.grpc_type) {
    Release(s);
    // Not a gRPC request: 415 for its content type, as gRPC servers answer
    // one (grpc's PROTOCOL-HTTP2.md); 405 for a method other than POST.
    std::string block;
    h2::AppendLiteral(&block, kStatusIndex, {}, s.heads.post ? "415" : "405");
    WriteHeaders(static_cast<uint32_t>(id), block, true);
    s.local_closed = true;
    Settle(it);
    return;
  }
  // The session's own reply, its strings' capacity kept from call to call.
  GrpcService::Reply& reply = reply_;
  reply.code = GrpcCode::kOk;
  reply.message.clear();
  reply.body.clear();
  uint32_t len = 0;
  bool compressed = false;
  if (s.heads.other_codec) {
    reply.code = GrpcCode::kInternal;
    reply.message =
        "no codec for the request's content-subtype: this service reads protobuf (content-type "
        "application/grpc or application/grpc+proto)";
  } else if (s.too_long) {
    reply.code = GrpcCode::kResourceExhausted;
    reply.message = "the request message is longer than " + std::to_string(limits_.max_message_bytes) + " bytes";
  } else if (s.bad_length || s.body.size() < kPrefixBytes ||
             (len = DeclaredLength(s.body), s.body.size() != kPrefixBytes + len)) {
    reply.code = GrpcCode::kInternal;
    reply.message = "the request is not one length-prefixed message";
  } else if (s.body[0] == 1) {
    compressed = true;
    reply.code = GrpcCode::kUnimplemented;
    reply.message = "compressed messages are not accepted (no grpc-encoding is offered)";
  } else if (s.body[0] != 0) {
    // The flag is 0 or 1; other bits set are no encoding, only damage.
    reply.code = GrpcCode::kInternal;
    reply.message = "the message's flag byte is " + std::to_string(static_cast<uint8_t>(s.body[0])) +
                    ": 0 (not compressed) is what this service takes, 1 (compressed) is refused";
  } else if (s.heads.method < 0) {
    reply.code = GrpcCode::kUnimplemented;
    reply.message = "unknown method";
  }
  if (reply.code != GrpcCode::kOk) {
    if (s.heads.method >= 0) service_->Refused(s.heads.method);
  } else {
    try {
      service_->Call(s.heads.method, std::string_view(s.body).substr(kPrefixBytes), &reply);
    } catch (const std::exception& e) {
      // Nothing may unwind through the worker loop.
      reply = GrpcService::Reply{GrpcCode::kInternal, std::string("internal error: ") + e.what(), {}};
    }
  }
  std::string request;  // a server-streaming call's, asked again later
  if (reply.code == GrpcCode::kOk && s.heads.method >= 0 && service_->Streaming(s.heads.method))
    request.assign(std::string_view(s.body).substr(kPrefixBytes));
  Release(s);
  if (reply.code != GrpcCode::kOk) {
    const std::string code = CodeText(reply.code);
    // The message can quote the client's bytes (a method's name, a
    // descriptor): percent-encoded, it is a valid header value whatever
    // they are.
    const std::string text = PercentEncodeGrpcMessage(reply.message);
    std::string block(kGrpcHeaders);
    h2::AppendLiteral(&block, 0, "grpc-status", code);
    if (!text.empty()) h2::AppendLiteral(&block, 0, "grpc-message", text);
    // A compressed call refused says what the service accepts, as gRPC's
    // compression spec asks, so that a client can fall back to none.
    if (compressed) h2::AppendLiteral(&block, 0, "grpc-accept-encoding", "identity");
    WriteHeaders(static_cast<uint32_t>(id), block, true);
    s.local_closed = true;
    KeepSmall(&reply.body);
    KeepSmall(&reply.message);
    Settle(it);
    return;
  }
  if (service_->Streaming(s.heads.method)) {
    // Open from here on: the request kept to ask again (PollWatches).
    s.watch = true;
    ++watches_;
    s.request = std::move(request);
    s.last = reply.body;
    responses_ += s.request.size() + s.last.size();
  }
  const uint32_t n = static_cast<uint32_t>(reply.body.size());
  char prefix[kPrefixBytes] = {0};
  h2::PutU32(prefix + 1, n);
  const int64_t framed = int64_t{kPrefixBytes} + n;
  WriteHeaders(static_cast<uint32_t>(id), kGrpcHeaders, false);
  if (!s.watch && framed <= std::min({send_window_, s.send_window, int64_t{peer_max_frame_}})) {
    // The common answer: its DATA and trailers written at once, from the
    // reply itself.
    h2::AppendFrameHeader(&out_, static_cast<uint32_t>(framed), h2::kData, 0, static_cast<uint32_t>(id));
    out_.append(prefix, sizeof prefix);
    out_.append(reply.body);
    send_window_ -= framed;
    s.send_window -= framed;
    h2::AppendFrameHeader(&out_, static_cast<uint32_t>(kOkTrailers.size()), h2::kHeaders,
                          h2::kEndHeaders | h2::kEndStream, static_cast<uint32_t>(id));
    out_.append(kOkTrailers);
    s.local_closed = true;
  } else {
    s.response.reserve(static_cast<size_t>(framed));
    s.response.append(prefix, sizeof prefix);
    s.response.append(reply.body);
    s.sent = 0;
    responses_ += s.response.size();
    SendData(id, s);
  }
  KeepSmall(&reply.body);
  Settle(it);
}

bool GrpcSession::Receive(std::string_view in, int64_t now_ns) {
  if (failed_) return false;
  now_ns_ = now_ns;
  if (!in.empty() && !Feed(in)) return false;
  for (size_t n = 0; n < kMaxCallsPerReceive && !ready_.empty();) {
    const int32_t id = ready_.front();
    ready_.pop_front();
    auto it = streams_.find(id);
    if (it == streams_.end() || it->second.answered) continue;  // reset by the client meanwhile
    Answer(it);
    ++n;
  }
  PruneOrder();
  return true;
}

void GrpcSession::Drain(std::string* out) {
  if (out_.empty()) return;
  out->append(out_);
  out_.clear();
  if (out_.capacity() > kSessionBytes / 4) std::string().swap(out_);
}

bool GrpcSession::Finished() const {
  if (!out_.empty()) return false;
  return failed_ || ((goaway_sent_ || goaway_received_) && streams_.empty());
}

void GrpcSession::Shutdown() {
  if (failed_ || goaway_sent_) return;
  // Server-streaming calls get the service's last word (a health watch:
  // NOT_SERVING), then end.
  PollWatches();
  std::vector<int32_t> watching;
  for (auto& [id, s] : streams_)
    if (s.watch && !s.closing) watching.push_back(id);
  for (const int32_t id : watching) {
    auto it = streams_.find(id);
    it->second.closing = true;
    if (it->second.blocked) continue;  // its trailers follow its data
    SendData(id, it->second);
    Settle(it);
  }
  goaway_sent_ = true;
  goaway_last_ = last_stream_;
  h2::AppendFrameHeader(&out_, 8, h2::kGoaway, 0, 0);
  char w[8];
  h2::PutU32(w, goaway_last_);
  h2::PutU32(w + 4, h2::kNoError);
  out_.append(w, sizeof w);
}

void GrpcSession::Terminate(uint32_t error) { Fail(error); }

}  // namespace frs::server
