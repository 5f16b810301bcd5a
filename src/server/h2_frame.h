// server/h2_frame.h: HTTP/2's frames as they are on the wire (RFC 9113
// sections 4 and 6), and the one HPACK representation (RFC 7541 6.2.2, a
// literal field never put in a table) that GrpcSession writes its answers'
// headers with.
//
// The answers' headers need no encoder of their own: a literal "without
// indexing" leaves the client's decoding table as it was, so a header block
// is the same bytes for every stream and is written without a table, a
// search or a Huffman pass. The requests' headers are decoded by libnghttp2's
// HPACK inflater (GrpcSession), the one part of HTTP/2 whose state (the
// dynamic table, Huffman) is worth a library.
//
// Thread safety: constants and pure functions (they append to the caller's
// string).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace frs::server::h2 {

inline constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
inline constexpr size_t kFrameHeaderBytes = 9;
// SETTINGS_MAX_FRAME_SIZE's initial value: what we accept (we never raise
// it) and the least a peer may set.
inline constexpr uint32_t kMinMaxFrameSize = 16384;
inline constexpr uint32_t kOurMaxFrameSize = kMinMaxFrameSize;  // SETTINGS_MAX_FRAME_SIZE we keep
inline constexpr uint32_t kMaxMaxFrameSize = (1u << 24) - 1;
inline constexpr int64_t kInitialWindow = 65535;
inline constexpr int64_t kMaxWindow = 0x7fffffff;
// SETTINGS_HEADER_TABLE_SIZE's initial value (RFC 9113 6.5.2).
inline constexpr uint32_t kInitialHeaderTable = 4096;

enum Type : uint8_t {
  kData = 0,
  kHeaders = 1,
  kPriority = 2,
  kRstStream = 3,
  kSettings = 4,
  kPushPromise = 5,
  kPing = 6,
  kGoaway = 7,
  kWindowUpdate = 8,
  kContinuation = 9,
};

enum Flag : uint8_t {
  kEndStream = 0x1,
  kAck = 0x1,
  kEndHeaders = 0x4,
  kPadded = 0x8,
  kPriorityFlag = 0x20,
};

enum Error : uint32_t {
  kNoError = 0x0,
  kProtocolError = 0x1,
  kInternalError = 0x2,
  kFlowControlError = 0x3,
  kStreamClosed = 0x5,
  kFrameSizeError = 0x6,
  kRefusedStream = 0x7,
  kCompressionError = 0x9,
  kEnhanceYourCalm = 0xb,
};

enum Setting : uint16_t {
  kHeaderTableSize = 0x1,
  kEnablePush = 0x2,
  kMaxConcurrentStreams = 0x3,
  kInitialWindowSize = 0x4,
  kMaxFrameSize = 0x5,
  kMaxHeaderListSize = 0x6,
};

struct FrameHeader {
  uint32_t length;
  uint8_t type;
  uint8_t flags;
  uint32_t stream;  // the reserved bit cleared
};

inline uint32_t ReadU32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

inline FrameHeader ReadFrameHeader(const uint8_t* p) {
  return FrameHeader{(uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | uint32_t{p[2]}, p[3], p[4],
                     ReadU32(p + 5) & 0x7fffffffu};
}

inline void PutU32(char* p, uint32_t v) {
  p[0] = static_cast<char>(v >> 24);
  p[1] = static_cast<char>(v >> 16);
  p[2] = static_cast<char>(v >> 8);
  p[3] = static_cast<char>(v);
}

inline void AppendFrameHeader(std::string* out, uint32_t length, uint8_t type, uint8_t flags, uint32_t stream) {
  char h[kFrameHeaderBytes] = {static_cast<char>(length >> 16), static_cast<char>(length >> 8),
                               static_cast<char>(length), static_cast<char>(type), static_cast<char>(flags)};
  PutU32(h + 5, stream);
  out->append(h, sizeof h);
}

// A frame whose payload is one 32-bit word (RST_STREAM, WINDOW_UPDATE).
inline void AppendWordFrame(std::string* out, uint8_t type, uint32_t stream, uint32_t word) {
  AppendFrameHeader(out, 4, type, 0, stream);
  char w[4];
  PutU32(w, word);
  out->append(w, sizeof w);
}

// An HPACK integer (RFC 7541 5.1) of a `prefix_bits`-bit prefix, the first
// byte's higher bits `high`.
void AppendHpackInt(std::string* out, uint8_t high, int prefix_bits, uint64_t v);

// A literal header field without indexing (RFC 7541 6.2.2), its strings
// not Huffman-coded: its name by static table index (1-61), or by
// `name` itself when `name_index` is 0.
void AppendLiteral(std::string* out, uint8_t name_index, std::string_view name, std::string_view value);

}  // namespace frs::server::h2
