// GrpcSession without sockets: HTTP/2 frames built by hand (as
// tests/envoy/test_hostile_h2.py does), the answers' headers decoded with
// nghttp2's own HPACK inflater. What is checked: grpc-message's percent
// encoding, the bound on calls answered per Receive(), the buffer budget
// (REFUSED_STREAM past it) and the start of the oldest unanswered stream.
#include "server/grpc_session.h"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <map>
#include <string>
#include <vector>

namespace frs::server {
namespace {

const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

std::string Frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload) {
  std::string f;
  const uint32_t n = static_cast<uint32_t>(payload.size());
  f.push_back(static_cast<char>(n >> 16));
  f.push_back(static_cast<char>(n >> 8));
  f.push_back(static_cast<char>(n));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  for (int s = 24; s >= 0; s -= 8) f.push_back(static_cast<char>((stream >> s) & 0xff));
  return f + payload;
}

std::string Start() { return kPreface + Frame(4, 0, 0, ""); }

// HPACK: :method POST (static 3), :scheme http (6), :authority "x" and
// :path literals without indexing (names 1 and 4), content-type (31).
std::string Headers(uint32_t stream, bool end_stream, const std::string& path = "/test.Echo/Call",
                    const std::string& type = "application/grpc") {
  std::string b = "\x83\x86\x01\x01x\x04";
  b.push_back(static_cast<char>(path.size()));
  b += path;
  b += "\x0f\x10";
  b.push_back(static_cast<char>(type.size()));
  b += type;
  return Frame(1, static_cast<uint8_t>(0x4 | (end_stream ? 0x1 : 0)), stream, b);
}

std::string Prefix(uint32_t declared) {
  std::string p(1, '\0');
  for (int s = 24; s >= 0; s -= 8) p.push_back(static_cast<char>((declared >> s) & 0xff));
  return p;
}

std::string Data(uint32_t stream, const std::string& payload, bool end_stream) {
  return Frame(0, end_stream ? 1 : 0, stream, payload);
}

// Echoes the message; "fail:" + text answers INTERNAL with that text.
struct Echo : GrpcService {
  int calls = 0;
  int refused = 0;  // calls the session refused before Call
  void Refused(int method) override {
    EXPECT_EQ(method, 0);
    ++refused;
  }
  int MethodOf(std::string_view path) const override { return path == "/test.Echo/Call" ? 0 : -1; }
  void Call(int, std::string_view message, Reply* out) override {
    ++calls;
    if (message.starts_with("fail:")) {
      out->code = GrpcCode::kInternal;
      out->message.assign(message.substr(5));
      return;
    }
    out->body.assign(message);
  }
};

struct Frames {
  // stream -> decoded header fields, in order; RST_STREAM codes by stream.
  std::map<uint32_t, std::vector<std::pair<std::string, std::string>>> headers;
  std::map<uint32_t, uint32_t> rst;
};

class Client {
 public:
  Client() { nghttp2_hd_inflate_new(&inflater_); }
  ~Client() { nghttp2_hd_inflate_del(inflater_); }
  void Parse(const std::string& wire, Frames* out) {
    buf_ += wire;
    size_t at = 0;
    while (buf_.size() - at >= 9) {
      const auto* p = reinterpret_cast<const uint8_t*>(buf_.data() + at);
      const size_t n = (size_t{p[0]} << 16) | (size_t{p[1]} << 8) | p[2];
      if (buf_.size() - at < 9 + n) break;
      const uint32_t stream =
          ((uint32_t{p[5]} << 24) | (uint32_t{p[6]} << 16) | (uint32_t{p[7]} << 8) | p[8]) & 0x7fffffff;
      if (p[3] == 1) Inflate(p + 9, n, &out->headers[stream]);
      if (p[3] == 3 && n == 4)
        out->rst[stream] = (uint32_t{p[9]} << 24) | (uint32_t{p[10]} << 16) | (uint32_t{p[11]} << 8) | p[12];
      at += 9 + n;
    }
    buf_.erase(0, at);
  }

 private:
  void Inflate(const uint8_t* in, size_t len, std::vector<std::pair<std::string, std::string>>* out) {
    for (;;) {
      nghttp2_nv nv;
      int flags = 0;
      const ssize_t rv = nghttp2_hd_inflate_hd2(inflater_, &nv, &flags, in, len, 1);
      ASSERT_GE(rv, 0);
      in += rv;
      len -= static_cast<size_t>(rv);
      if (flags & NGHTTP2_HD_INFLATE_EMIT)
        out->emplace_back(std::string(reinterpret_cast<char*>(nv.name), nv.namelen),
                          std::string(reinterpret_cast<char*>(nv.value), nv.valuelen));
      if (flags & NGHTTP2_HD_INFLATE_FINAL) {
        nghttp2_hd_inflate_end_headers(inflater_);
        break;
      }
      if (rv == 0 && len == 0) break;
    }
  }
  nghttp2_hd_inflater* inflater_ = nullptr;
  std::string buf_;
};

std::string Field(const std::vector<std::pair<std::string, std::string>>& h, const std::string& name) {
  for (const auto& [n, v] : h)
    if (n == name) return v;
  return "<none>";
}

// `in` received in one read, and the frames the session answers with.
Frames Exchange(GrpcSession& g, const std::string& in) {
  Frames f;
  EXPECT_TRUE(g.Receive(in, 1));
  std::string out;
  g.Drain(&out);
  Client c;
  c.Parse(out, &f);
  return f;
}

TEST(GrpcMessage, PercentEncoded) {
  EXPECT_EQ(PercentEncodeGrpcMessage("plain text: ok"), "plain text: ok");
  EXPECT_EQ(PercentEncodeGrpcMessage("50%"), "50%25");
  EXPECT_EQ(PercentEncodeGrpcMessage(std::string("a\nb\x7f\xff\x00~ ", 8)), "a%0Ab%7F%FF%00~ ");
  EXPECT_EQ(PercentEncodeGrpcMessage("caf\xc3\xa9"), "caf%C3%A9");
  EXPECT_EQ(PercentEncodeGrpcMessage(""), "");
}

TEST(GrpcSession, GrpcMessageOnTheWireIsPercentEncoded) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  std::string out;
  const std::string msg = std::string("fail:bad\r\nkey \xff%", 16);
  ASSERT_TRUE(
      g->Receive(Start() + Headers(1, false) + Data(1, Prefix(static_cast<uint32_t>(msg.size())) + msg, true), 1));
  g->Drain(&out);
  Client c;
  Frames f;
  c.Parse(out, &f);
  ASSERT_EQ(echo.calls, 1);
  EXPECT_EQ(Field(f.headers[1], "grpc-status"), "13");
  EXPECT_EQ(Field(f.headers[1], "grpc-message"), "bad%0D%0Akey %FF%25");
}

TEST(GrpcSession, AtMostABoundedNumberOfCallsPerReceive) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  std::string in = Start();
  const int kStreams = 40;
  for (int i = 0; i < kStreams; ++i) in += Headers(2 * i + 1, false) + Data(2 * i + 1, Prefix(2) + "hi", true);
  ASSERT_TRUE(g->Receive(in, 1));
  EXPECT_EQ(g->answered(), GrpcSession::kMaxCallsPerReceive);
  EXPECT_TRUE(g->HasBacklog());
  ASSERT_TRUE(g->Receive({}, 2));
  EXPECT_EQ(g->answered(), 2 * GrpcSession::kMaxCallsPerReceive);
  while (g->HasBacklog()) ASSERT_TRUE(g->Receive({}, 3));
  EXPECT_EQ(g->answered(), static_cast<uint64_t>(kStreams));
  EXPECT_EQ(echo.calls, kStreams);
  std::string out;
  g->Drain(&out);
  Client c;
  Frames f;
  c.Parse(out, &f);
  for (int i = 0; i < kStreams; ++i) EXPECT_EQ(Field(f.headers[2 * i + 1], ":status"), "200") << i;
}

TEST(GrpcSession, BufferedBodiesStayWithinTheBudgetAndTheRestIsRefused) {
  Echo echo;
  GrpcLimits limits;  // 64 KiB messages: a budget of 4 x (64 KiB + 5)
  auto g = GrpcSession::Create(&echo, limits).value();
  const size_t budget = GrpcSession::kBufferedMessages * (limits.max_message_bytes + 5);
  std::string in = Start();
  // 20 streams, each declaring a maximal message and sending 1000 bytes of it.
  for (int i = 0; i < 20; ++i)
    in += Headers(2 * i + 1, false) + Data(2 * i + 1, Prefix(limits.max_message_bytes) + std::string(1000, 'x'), false);
  ASSERT_TRUE(g->Receive(in, 1));
  EXPECT_LE(g->buffered(), budget);
  EXPECT_EQ(g->buffered(), 4 * (limits.max_message_bytes + 5));
  EXPECT_EQ(g->refused(), 16u);
  // Once the budget is spent a new stream is refused at its HEADERS.
  ASSERT_TRUE(g->Receive(Headers(41, false), 2));
  EXPECT_EQ(g->refused(), 17u);
  std::string out;
  g->Drain(&out);
  Client c;
  Frames f;
  c.Parse(out, &f);
  EXPECT_EQ(f.rst.size(), 17u);
  for (const auto& [stream, code] : f.rst) EXPECT_EQ(code, static_cast<uint32_t>(NGHTTP2_REFUSED_STREAM)) << stream;
  EXPECT_EQ(echo.calls, 0);
  // A small call on a fresh stream still fits once the budget has room:
  // here it has none, so it is refused too; nothing was buffered for it.
  EXPECT_LE(g->buffered(), budget);
}

TEST(GrpcSession, OldestUnansweredStreamStart) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  EXPECT_EQ(g->OldestUnansweredNs(), -1);
  ASSERT_TRUE(g->Receive(Start() + Headers(1, false) + Data(1, Prefix(2), false), 100));
  EXPECT_EQ(g->OldestUnansweredNs(), 100);
  // Another stream begun and answered later does not move it.
  ASSERT_TRUE(g->Receive(Headers(3, false) + Data(3, Prefix(2) + "ok", true), 200));
  EXPECT_EQ(g->answered(), 1u);
  EXPECT_EQ(g->OldestUnansweredNs(), 100);
  ASSERT_TRUE(g->Receive(Headers(5, false), 300));
  ASSERT_TRUE(g->Receive(Data(1, "ok", true), 400));
  EXPECT_EQ(g->OldestUnansweredNs(), 300);
  // The client resets stream 5: nothing is left unanswered.
  ASSERT_TRUE(g->Receive(Frame(3, 0, 5, std::string("\0\0\0\x8", 4)), 500));
  EXPECT_EQ(g->OldestUnansweredNs(), -1);
}

// HPACK for a stream whose :path is the dynamic table's first entry
// (index 62): after PathIntoTheTable put it there, two bytes name it.
std::string HeadersNamingTheTable(uint32_t stream) {
  return Frame(1, 0x4, stream, std::string("\x83\x86\x01\x01x\xbe\x0f\x10\x10") + "application/grpc");
}

// The same headers, :path a literal with incremental indexing (0x44: name
// index 4), so that later streams can name it by index.
std::string PathIntoTheTable(uint32_t stream, const std::string& path) {
  std::string b = "\x83\x86\x01\x01x\x44";
  // The length, an HPACK integer of a 7-bit prefix.
  if (path.size() < 127) {
    b.push_back(static_cast<char>(path.size()));
  } else {
    b.push_back('\x7f');
    for (size_t v = path.size() - 127;; v >>= 7) {
      if (v < 128) {
        b.push_back(static_cast<char>(v));
        break;
      }
      b.push_back(static_cast<char>(0x80 | (v & 0x7f)));
    }
  }
  b += path;
  b += "\x0f\x10";
  b.push_back(16);
  b += "application/grpc";
  return Frame(1, 0x4, stream, b);
}

std::string RstStream(uint32_t stream) { return Frame(3, 0, stream, std::string("\0\0\0\x08", 4)); }

// One 4 KB :path in the HPACK table, named by index on 99 more streams that
// stay open: each stream holds its record, not a copy of the path (before,
// each kept its own: 100 streams of 1,000 connections held 444 MB), every
// byte is counted in held(), within held_limit(), and all of it but the
// table's entry comes back when the streams are reset.
TEST(GrpcSessionHeld, StreamsNamingALargeIndexedPathHoldNoCopyOfIt) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  std::string out;
  ASSERT_TRUE(g->Receive(Start() + Frame(4, 1, 0, ""), 1));
  g->Drain(&out);
  const size_t idle = g->held();
  const std::string path = "/" + std::string(3999, 'p');
  ASSERT_TRUE(g->Receive(PathIntoTheTable(1, path), 2));
  const size_t one = g->held();
  std::string more;
  for (uint32_t i = 1; i < 100; ++i) more += HeadersNamingTheTable(2 * i + 1);
  ASSERT_TRUE(g->Receive(more, 3));
  g->Drain(&out);
  ASSERT_TRUE(g->HasOpenStreams());
  const size_t per_stream = (g->held() - one) / 99;
  EXPECT_LT(per_stream, size_t{2048}) << "held " << g->held() << ", with one stream " << one << ", idle " << idle;
  EXPECT_LE(g->held(), g->held_limit());
  RecordProperty("held_idle", static_cast<int>(idle));
  RecordProperty("held_per_stream", static_cast<int>(per_stream));
  std::string rst;
  for (uint32_t i = 0; i < 100; ++i) rst += RstStream(2 * i + 1);
  ASSERT_TRUE(g->Receive(rst, 4));
  g->Drain(&out);
  EXPECT_FALSE(g->HasOpenStreams());
  // The table's entry (the path and 32 bytes) stays with the connection.
  EXPECT_LE(g->held(), idle + path.size() + 1024) << "idle " << idle;
}

// An unknown method is answered UNIMPLEMENTED without asking the service.
TEST(GrpcSession, AnUnknownMethodIsUnimplemented) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  std::string out;
  ASSERT_TRUE(g->Receive(Start() + Headers(1, false, "/no.Such/Method") + Data(1, Prefix(2) + "hi", true), 1));
  g->Drain(&out);
  Client c;
  Frames f;
  c.Parse(out, &f);
  EXPECT_EQ(Field(f.headers[1], "grpc-status"), "12");
  EXPECT_EQ(echo.calls, 0);
}

// A call refused before its message is read (too long, badly framed,
// compressed) is answered with its code and told to the service, which
// counts it as it counts the calls it refuses itself; one of an unknown
// method has no method to tell.
TEST(GrpcSession, ACallRefusedBeforeItsMessageIsToldToTheService) {
  Echo echo;
  GrpcLimits limits;
  limits.max_message_bytes = 16;
  auto g = GrpcSession::Create(&echo, limits).value();
  std::string compressed = Prefix(2) + "hi";
  compressed[0] = 1;
  std::string in = Start() + Headers(1, false) + Data(1, Prefix(40) + std::string(40, 'x'), true) +  // too long
                   Headers(3, false) + Data(3, Prefix(9) + "hi", true) +                             // 2 of 9 bytes
                   Headers(5, false) + Data(5, compressed, true) +                                   // compressed
                   Headers(7, false, "/no.Such/Method") + Data(7, Prefix(2) + "hi", true) +          // unknown
                   Headers(9, false) + Data(9, Prefix(2) + "ok", true);                              // served
  Frames f = Exchange(*g, in);
  EXPECT_EQ(Field(f.headers[1], "grpc-status"), "8");
  EXPECT_EQ(Field(f.headers[3], "grpc-status"), "13");
  EXPECT_EQ(Field(f.headers[5], "grpc-status"), "12");
  EXPECT_EQ(Field(f.headers[7], "grpc-status"), "12");
  EXPECT_EQ(Field(f.headers[9], "grpc-status"), "0");
  EXPECT_EQ(echo.refused, 3);
  EXPECT_EQ(echo.calls, 1);
}

// The content types of the protobuf codec, in any case and with
// parameters, are served; another codec's (+json: its body is no protobuf)
// is a gRPC call refused with INTERNAL, as gRPC servers answer it (a 415
// made clients report UNKNOWN); what is no gRPC type is 415. A flag byte other than 0 and 1 is damage (13), not a
// compressed message (12 said "compressed" of it). Found by an outside run.
TEST(GrpcSession, ContentTypesOfTheProtobufCodecAndTheFlagByte) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  std::string flagged = Prefix(2) + "hi";
  flagged[0] = 7;
  const std::string path = "/test.Echo/Call";
  std::string in = Start() + Headers(1, false, path, "application/grpc+proto") + Data(1, Prefix(2) + "ok", true) +
                   Headers(3, false, path, "Application/GRPC; charset=utf-8") + Data(3, Prefix(2) + "ok", true) +
                   Headers(5, false, path, "application/grpc+json") + Data(5, Prefix(2) + "{}", true) +
                   Headers(7, false, path, "application/grpcfoo") + Data(7, Prefix(2) + "ok", true) +
                   Headers(9, false) + Data(9, flagged, true);
  Frames f = Exchange(*g, in);
  EXPECT_EQ(Field(f.headers[1], "grpc-status"), "0");
  EXPECT_EQ(Field(f.headers[3], "grpc-status"), "0");
  EXPECT_EQ(Field(f.headers[5], ":status"), "200");
  EXPECT_EQ(Field(f.headers[5], "grpc-status"), "13");
  EXPECT_NE(Field(f.headers[5], "grpc-message").find("no codec for the request's content-subtype"), std::string::npos)
      << Field(f.headers[5], "grpc-message");
  EXPECT_EQ(Field(f.headers[7], ":status"), "415");
  EXPECT_EQ(Field(f.headers[9], "grpc-status"), "13");
  EXPECT_NE(Field(f.headers[9], "grpc-message").find("flag byte is 7"), std::string::npos)
      << Field(f.headers[9], "grpc-message");
  EXPECT_EQ(echo.calls, 2);
}

// A message whose prefix declares more than the limit is answered at its
// prefix, and its stream reset (NO_ERROR): a client still sending it stops,
// and the connection's other streams go on. It was answered when the stream
// ended, if ever: the client could stream 4 GB until the request timeout.
TEST(GrpcSession, AMessageTooLongIsAnsweredAtItsPrefix) {
  Echo echo;
  GrpcLimits limits;
  limits.max_message_bytes = 16;
  auto g = GrpcSession::Create(&echo, limits).value();
  ASSERT_TRUE(g->Receive(Start() + Headers(1, false) + Data(1, Prefix(0xffffffffu) + std::string(100, 'x'), false), 1));
  std::string out;
  g->Drain(&out);
  Client c;
  Frames f;
  c.Parse(out, &f);
  ASSERT_EQ(f.headers.count(1), 1u) << out.size() << " rst " << f.rst.count(1);
  EXPECT_EQ(Field(f.headers[1], "grpc-status"), "8");
  ASSERT_EQ(f.rst.count(1), 1u);
  EXPECT_EQ(f.rst[1], 0u);  // NO_ERROR
  // More of it is dropped; another stream is served.
  ASSERT_TRUE(
      g->Receive(Data(1, std::string(100, 'y'), true) + Headers(3, false) + Data(3, Prefix(2) + "ok", true), 2));
  out.clear();
  g->Drain(&out);
  Frames more;
  c.Parse(out, &more);
  EXPECT_EQ(more.headers.count(1), 0u);
  EXPECT_EQ(Field(more.headers[3], "grpc-status"), "0");
  EXPECT_EQ(echo.refused, 1);
  EXPECT_EQ(echo.calls, 1);
}

TEST(GrpcSession, ReceiveIsFalseOnceTheSessionFailed) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  EXPECT_FALSE(g->Receive("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1));
  EXPECT_FALSE(g->Receive(Start(), 2));
  std::string out;
  g->Drain(&out);
  EXPECT_TRUE(g->Finished());
}

}  // namespace
}  // namespace frs::server
