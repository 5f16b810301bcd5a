// GrpcSession without sockets: HTTP/2 frames built by hand (as
// tests/envoy/test_hostile_h2.py does), the answers' headers decoded with
// nghttp2's HPACK inflater. What is checked: the gRPC answers (status,
// percent-encoded grpc-message, refusals before the service), the bounds
// (calls per Receive(), the buffer budget, what a connection holds, the
// request time-out's oldest stream), the frame layer (frames cut between
// reads, flow control both ways, stream and connection errors with their
// codes, GOAWAY, rapid reset), the remembered header block, and
// server-streaming watches.
#include "server/grpc_session.h"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <map>
#include <string>
#include <vector>

#include "os/unique_fd.h"
#include "server/connection.h"

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
  std::map<uint32_t, std::string> data;   // DATA payloads by stream, joined
  std::map<uint32_t, int> header_frames;  // HEADERS and CONTINUATION frames by stream
  int goaways = 0;
  uint32_t goaway_last = 0, goaway_code = 0;  // the last GOAWAY's
  int settings_acks = 0;
  std::vector<std::string> ping_acks;
  int window_updates = 0;
  std::map<uint32_t, int> window_updates_by_stream;  // 0: the connection's
};

class Client {
 public:
  Client() { nghttp2_hd_inflate_new(&inflater_); }
  ~Client() { nghttp2_hd_inflate_del(inflater_); }
  // What the client's SETTINGS_HEADER_TABLE_SIZE, once acknowledged, does
  // to its decoder (nghttp2's session calls the same).
  void TableSize(size_t n) { ASSERT_EQ(nghttp2_hd_inflate_change_table_size(inflater_, n), 0); }
  void Parse(const std::string& wire, Frames* out) {
    buf_ += wire;
    size_t at = 0;
    while (buf_.size() - at >= 9) {
      const auto* p = reinterpret_cast<const uint8_t*>(buf_.data() + at);
      const size_t n = (size_t{p[0]} << 16) | (size_t{p[1]} << 8) | p[2];
      if (buf_.size() - at < 9 + n) break;
      const uint32_t stream =
          ((uint32_t{p[5]} << 24) | (uint32_t{p[6]} << 16) | (uint32_t{p[7]} << 8) | p[8]) & 0x7fffffff;
      auto u32 = [](const uint8_t* q) {
        return (uint32_t{q[0]} << 24) | (uint32_t{q[1]} << 16) | (uint32_t{q[2]} << 8) | q[3];
      };
      const char* payload = reinterpret_cast<const char*>(p + 9);
      if (p[3] == 1 || p[3] == 9) {
        // A header block, decoded once its END_HEADERS frame is in.
        ++out->header_frames[stream];
        block_.append(payload, n);
        if (p[4] & 0x4) {
          Inflate(reinterpret_cast<const uint8_t*>(block_.data()), block_.size(), &out->headers[stream]);
          block_.clear();
        }
      }
      if (p[3] == 0) out->data[stream].append(payload, n);
      if (p[3] == 3 && n == 4) out->rst[stream] = u32(p + 9);
      if (p[3] == 4 && (p[4] & 1)) ++out->settings_acks;
      if (p[3] == 6 && (p[4] & 1)) out->ping_acks.emplace_back(payload, n);
      if (p[3] == 7 && n >= 8) {
        ++out->goaways;
        out->goaway_last = u32(p + 9) & 0x7fffffff;
        out->goaway_code = u32(p + 13);
      }
      if (p[3] == 8) {
        ++out->window_updates;
        ++out->window_updates_by_stream[stream];
      }
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
  std::string block_;
};

std::string Field(const std::vector<std::pair<std::string, std::string>>& h, const std::string& name) {
  for (const auto& [n, v] : h)
    if (n == name) return v;
  return "<none>";
}

// A SETTINGS frame of one entry; a 31-bit word.
std::string Settings(uint16_t id, uint32_t value) {
  std::string e;
  e.push_back(static_cast<char>(id >> 8));
  e.push_back(static_cast<char>(id));
  for (int s = 24; s >= 0; s -= 8) e.push_back(static_cast<char>((value >> s) & 0xff));
  return Frame(4, 0, 0, e);
}

std::string Word(uint32_t v) {
  std::string w;
  for (int s = 24; s >= 0; s -= 8) w.push_back(static_cast<char>((v >> s) & 0xff));
  return w;
}

// What the session has to send, parsed (its answers' header blocks need no
// decoder state from earlier ones: they never use the dynamic table).
Frames Drained(GrpcSession& g) {
  std::string out;
  g.Drain(&out);
  Frames f;
  Client c;
  c.Parse(out, &f);
  return f;
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

TEST(GrpcSession, ALoweredHeaderTableSizeIsAcknowledgedInTheNextHeaderBlock) {
  // A client that lowers SETTINGS_HEADER_TABLE_SIZE (Envoy's hpack_table_size:
  // 0) fails a header block that does not begin with a table size update
  // (RFC 7541 4.2; nghttp2's decoder does): every answer after it must.
  // Stream 1 is answered while the client's window is closed, so that its
  // trailers follow the change in a later write.
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  Client c;  // one decoder for the whole connection, as a client has
  Frames f;
  std::string out;
  ASSERT_TRUE(g->Receive(kPreface + Settings(4, 0) + Headers(1, false) + Data(1, Prefix(2) + "hi", true), 1));
  g->Drain(&out);
  c.Parse(out, &f);
  ASSERT_EQ(Field(f.headers[1], ":status"), "200");
  ASSERT_EQ(f.data.count(1), 0u);
  out.clear();
  ASSERT_TRUE(g->Receive(Settings(1, 0) + Settings(4, 65535), 2));
  g->Drain(&out);
  ASSERT_EQ(static_cast<uint8_t>(out[3]), 4);  // the first SETTINGS ACK comes first
  ASSERT_EQ(static_cast<uint8_t>(out[4]), 1);
  c.TableSize(0);
  c.Parse(out, &f);
  EXPECT_EQ(f.data[1], Prefix(2) + "hi");
  EXPECT_EQ(Field(f.headers[1], "grpc-status"), "0");
  // Later answers decode too, the update said once.
  out.clear();
  ASSERT_TRUE(g->Receive(Headers(3, false) + Data(3, Prefix(2) + "ho", true) + Settings(1, 0), 3));
  ASSERT_TRUE(g->Receive(Headers(5, false) + Data(5, Prefix(2) + "hu", true), 4));
  g->Drain(&out);
  c.Parse(out, &f);
  EXPECT_EQ(Field(f.headers[3], "grpc-status"), "0");
  EXPECT_EQ(Field(f.headers[5], "grpc-status"), "0");
  EXPECT_EQ(f.data[5], Prefix(2) + "hu");
  EXPECT_EQ(echo.calls, 3);
}

// A gRPC connection whose output is past the high-water mark has no
// backlog for the worker, whatever calls wait: it answers none of them
// until the output drains (with answers held for a replica, no write event
// would come, and the worker came back every turn to do nothing).
TEST(GrpcSession, NoBacklogPastTheOutputHighWater) {
  Echo echo;
  Connection c(os::UniqueFd(), ConnectionLimits{4096, 4096}, nullptr);
  c.UseGrpc(GrpcSession::Create(&echo, GrpcLimits{}).value());
  // The client's windows wide open, as Envoy's are: answers pile up in the
  // connection's output, not in the session's flow control.
  std::string in = kPreface + Settings(4, 1u << 30) + Frame(8, 0, 0, Word(1u << 30));
  const std::string msg(100, 'm');
  for (uint32_t i = 0; i < 4000; ++i) in += Headers(2 * i + 1, false) + Data(2 * i + 1, Prefix(100) + msg, true);
  size_t fed = 0;
  while (fed < in.size()) {
    std::span<char> room = c.ReadSpace();
    if (room.empty()) break;
    const size_t n = std::min(room.size(), in.size() - fed);
    std::memcpy(room.data(), in.data() + fed, n);
    fed += n;
    c.Produced(n, 1);
    c.Process();
  }
  ASSERT_GE(c.PendingOutput().size(), Connection::kOutputHighWater);
  const uint64_t answered = echo.calls;
  EXPECT_FALSE(c.HasBacklog());
  c.Process();
  EXPECT_EQ(echo.calls, answered);  // nothing to do indeed
  c.Consumed(c.PendingOutput().size());
  EXPECT_TRUE(c.HasBacklog());  // calls wait, and there is room for their answers
  c.Process();
  EXPECT_GT(echo.calls, answered);
}

TEST(GrpcSession, AConnectionErrorLeavesNoBacklog) {
  // Calls queued past one Receive's share, then a connection error in a
  // later read: nothing more is answered, and nothing is left for the
  // worker to come back to (it would every loop turn until the time-out).
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  std::string in = Start();
  for (int i = 0; i < 20; ++i) in += Headers(2 * i + 1, false) + Data(2 * i + 1, Prefix(2) + "hi", true);
  ASSERT_TRUE(g->Receive(in, 1));
  ASSERT_TRUE(g->HasBacklog());
  EXPECT_FALSE(g->Receive(Frame(5, 4, 1, std::string("\0\0\0\2", 4)), 2));  // PUSH_PROMISE from a client
  EXPECT_TRUE(g->Failed());
  EXPECT_FALSE(g->HasBacklog());
  EXPECT_FALSE(g->Receive({}, 3));
  EXPECT_EQ(echo.calls, static_cast<int>(GrpcSession::kMaxCallsPerReceive));
  // The GOAWAY names the last stream answered (the 16th, 31): the client
  // may retry the four after it.
  Frames f = Drained(*g);
  EXPECT_EQ(f.goaways, 1);
  EXPECT_EQ(f.goaway_last, 2 * GrpcSession::kMaxCallsPerReceive - 1);
  EXPECT_TRUE(g->Finished());
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

// The worker's budget (<grpc buffered_bytes>) bounds what all its
// connections buffer together: a connection within its own budget is
// refused once the others have spent the worker's, and what a connection
// held comes back when it closes.
TEST(GrpcSession, TheWorkersBudgetBoundsEveryConnectionTogether) {
  Echo echo;
  GrpcLimits limits;
  GrpcBudget worker;
  const size_t message = limits.max_message_bytes + 5;
  worker.limit = 3 * message;
  limits.worker = &worker;
  auto a = GrpcSession::Create(&echo, limits).value();
  auto b = GrpcSession::Create(&echo, limits).value();
  // a: two maximal messages under way; b: one, then a second that does not fit.
  ASSERT_TRUE(a->Receive(Start() + Headers(1, false) + Data(1, Prefix(limits.max_message_bytes) + "x", false) +
                             Headers(3, false) + Data(3, Prefix(limits.max_message_bytes) + "x", false),
                         1));
  ASSERT_TRUE(b->Receive(Start() + Headers(1, false) + Data(1, Prefix(limits.max_message_bytes) + "x", false) +
                             Headers(3, false) + Data(3, Prefix(limits.max_message_bytes) + "x", false),
                         1));
  EXPECT_EQ(worker.used, 3 * message);
  EXPECT_EQ(b->buffered(), message);
  EXPECT_EQ(b->refused(), 1u);
  // Spent: a new stream is refused at its HEADERS, on either connection.
  ASSERT_TRUE(b->Receive(Headers(5, false), 2));
  EXPECT_EQ(b->refused(), 2u);
  // a closes: its bytes come back, and b's next message fits.
  a.reset();
  EXPECT_EQ(worker.used, message);
  ASSERT_TRUE(b->Receive(Headers(7, false) + Data(7, Prefix(2) + "ok", true), 3));
  EXPECT_EQ(b->answered(), 1u);
  EXPECT_EQ(echo.calls, 1);
  EXPECT_EQ(worker.used, message);  // the answered call's bytes were given back
  b.reset();
  EXPECT_EQ(worker.used, 0u);
}

// The client's side ended with one request half sent and one whole: the
// half-sent one is forgotten (its bytes back to the budgets), the whole one
// is still answered, and then no stream is left to keep the connection.
TEST(GrpcSession, APeersEndForgetsTheRequestsItCanNoLongerFinish) {
  Echo echo;
  GrpcLimits limits;
  GrpcBudget worker;
  limits.worker = &worker;
  auto g = GrpcSession::Create(&echo, limits).value();
  ASSERT_TRUE(g->Receive(Start() + Headers(1, false) + Data(1, Prefix(1000) + "x", false), 1));
  EXPECT_EQ(worker.used, 1005u);
  g->PeerEnded();
  EXPECT_EQ(worker.used, 0u);
  EXPECT_EQ(g->buffered(), 0u);
  EXPECT_FALSE(g->HasOpenStreams());
  ASSERT_TRUE(g->Receive(Headers(3, false) + Data(3, Prefix(2) + "ok", true), 2));
  g->PeerEnded();
  std::string out;
  g->Drain(&out);
  EXPECT_EQ(g->answered(), 1u);
  EXPECT_EQ(echo.calls, 1);
  EXPECT_FALSE(g->HasOpenStreams());
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
// compressed: with grpc-accept-encoding) is answered with its code and
// told to the service, which counts it as it counts the calls it refuses
// itself; one of an unknown method has no method to tell.
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
  EXPECT_EQ(Field(f.headers[5], "grpc-accept-encoding"), "identity");  // what a client may fall back to
  EXPECT_EQ(Field(f.headers[7], "grpc-status"), "12");
  EXPECT_EQ(Field(f.headers[7], "grpc-accept-encoding"), "<none>");
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

namespace frs::server {
namespace {

// Calls whose frames are cut anywhere between reads are answered as when
// they come whole: the frame layer keeps the cut frame until the rest comes.
TEST(GrpcSessionFrames, FramesCutAnywhereBetweenReads) {
  for (const size_t slice : {size_t{1}, size_t{7}, size_t{9}, size_t{1000}}) {
    Echo echo;
    auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
    std::string in = Start() + Frame(4, 1, 0, "");
    for (int i = 0; i < 50; ++i)
      in += Headers(2 * i + 1, false) + Data(2 * i + 1, Prefix(7) + "call" + std::to_string(100 + i), true);
    std::string out;
    for (size_t at = 0; at < in.size(); at += slice) {
      ASSERT_TRUE(g->Receive(std::string_view(in).substr(at, slice), 1)) << slice << " at " << at;
      g->Drain(&out);
    }
    while (g->HasBacklog()) ASSERT_TRUE(g->Receive({}, 2));
    g->Drain(&out);
    EXPECT_EQ(echo.calls, 50) << slice;
    Client c;
    Frames f;
    c.Parse(out, &f);
    for (int i = 0; i < 50; ++i) {
      EXPECT_EQ(Field(f.headers[2 * i + 1], "grpc-status"), "0") << slice << " " << i;
      EXPECT_EQ(f.data[2 * i + 1], Prefix(7) + "call" + std::to_string(100 + i)) << slice << " " << i;
    }
    EXPECT_EQ(f.settings_acks, 1);
    EXPECT_FALSE(g->HasOpenStreams());
  }
}

// The answers' DATA wait for the client's windows: none with a stream
// window of 0 (SETTINGS_INITIAL_WINDOW_SIZE), then as much as a
// WINDOW_UPDATE opens, the trailers after the last byte.
TEST(GrpcSessionFrames, AnswersWaitForTheClientsWindow) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  std::string out;
  ASSERT_TRUE(g->Receive(kPreface + Settings(4, 0) + Headers(1, false) + Data(1, Prefix(4) + "abcd", true), 1));
  g->Drain(&out);
  Client c;
  Frames f;
  c.Parse(out, &f);
  EXPECT_EQ(Field(f.headers[1], ":status"), "200");
  EXPECT_EQ(f.data.count(1), 0u);
  EXPECT_EQ(Field(f.headers[1], "grpc-status"), "<none>");
  EXPECT_TRUE(g->HasOpenStreams());
  out.clear();
  ASSERT_TRUE(g->Receive(Frame(8, 0, 1, Word(3)), 2));
  g->Drain(&out);
  c.Parse(out, &f);
  EXPECT_EQ(f.data[1], std::string("\0\0\0", 3));
  EXPECT_EQ(Field(f.headers[1], "grpc-status"), "<none>");
  out.clear();
  // A larger initial window opens the rest (RFC 9113 6.9.2).
  ASSERT_TRUE(g->Receive(Settings(4, 100), 3));
  g->Drain(&out);
  c.Parse(out, &f);
  EXPECT_EQ(f.data[1], Prefix(4) + "abcd");
  EXPECT_EQ(Field(f.headers[1], "grpc-status"), "0");
  EXPECT_FALSE(g->HasOpenStreams());
}

// A request's DATA past a window we gave is a flow-control error; within
// them, windows are given back as they are consumed.
TEST(GrpcSessionFrames, ReceiveWindowsAreGivenBackAsConsumed) {
  Echo echo;
  GrpcLimits limits;
  limits.max_message_bytes = 100000;
  auto g = GrpcSession::Create(&echo, limits).value();
  // A message of 80,005 bytes: past the initial stream window (65,535), so
  // the client may send it only if the window is given back on the way.
  // The client opens its own windows for the echoed answer.
  std::string in = Start() + Headers(1, false) + Frame(8, 0, 0, Word(100000)) + Frame(8, 0, 1, Word(100000)) +
                   Data(1, Prefix(80000), false);
  for (int i = 0; i < 5; ++i) in += Data(1, std::string(16000, 'x'), i == 4);
  Frames f = Exchange(*g, in);
  EXPECT_EQ(f.goaways, 0);
  EXPECT_EQ(f.rst.count(1), 0u);
  EXPECT_EQ(echo.calls, 1);
  EXPECT_EQ(Field(f.headers[1], "grpc-status"), "0");
  EXPECT_GE(f.window_updates_by_stream[1], 1);  // the stream's
  EXPECT_GE(f.window_updates_by_stream[0], 1);  // the connection's
}

// HEADERS on a stream already closed, or skipped (a later one began), is
// reset STREAM_CLOSED, not left unanswered; the connection goes on.
TEST(GrpcSessionFrames, HeadersOnAClosedStreamAreReset) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  ASSERT_TRUE(g->Receive(Start() + Headers(5, false) + Data(5, Prefix(2) + "ok", true), 1));
  EXPECT_EQ(Field(Drained(*g).headers[5], "grpc-status"), "0");
  Frames f = Exchange(*g, Headers(3, true) + Headers(5, true) + Headers(7, false) + Data(7, Prefix(2) + "ok", true));
  EXPECT_EQ(f.rst[3], 0x5u);
  EXPECT_EQ(f.rst[5], 0x5u);
  EXPECT_EQ(f.goaways, 0);
  EXPECT_EQ(Field(f.headers[7], "grpc-status"), "0");
  EXPECT_EQ(echo.calls, 2);
}

// Headers past max_header_bytes (each field its name, its value and 32
// bytes) reset their stream ENHANCE_YOUR_CALM; the rest of the block is
// still decoded (the next stream's headers, which name the table, work).
TEST(GrpcSessionFrames, HeadersPastTheLimitResetTheirStream) {
  Echo echo;
  GrpcLimits limits;
  limits.max_header_bytes = 300;
  auto g = GrpcSession::Create(&echo, limits).value();
  const std::string path = "/test.Echo/Call";
  // 5 fields of about 50 bytes each fit; with a 200-byte path they do not.
  Frames f = Exchange(*g, Start() + PathIntoTheTable(1, "/" + std::string(199, 'p')) + Headers(3, false, path) +
                              Data(3, Prefix(2) + "ok", true));
  EXPECT_EQ(f.rst[1], 0xbu);
  EXPECT_EQ(f.goaways, 0);
  EXPECT_EQ(Field(f.headers[3], "grpc-status"), "0");
  EXPECT_EQ(echo.calls, 1);
}

// The same header block on every call is decoded once while the HPACK
// table is unchanged; a block that changes the table makes the same bytes
// mean what the table now says.
TEST(GrpcSessionFrames, ARepeatedHeaderBlockMeansWhatTheTableSaysNow) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  std::string in = Start() + PathIntoTheTable(1, "/test.Echo/Call") + Data(1, Prefix(2) + "ok", true);
  for (uint32_t id = 3; id <= 9; id += 2) in += HeadersNamingTheTable(id) + Data(id, Prefix(2) + "ok", true);
  // Index 62 is now another method; the very same bytes name it.
  in += PathIntoTheTable(11, "/no.Such/Method") + Data(11, Prefix(2) + "ok", true);
  in += HeadersNamingTheTable(13) + Data(13, Prefix(2) + "ok", true);
  in += PathIntoTheTable(15, "/test.Echo/Call") + Data(15, Prefix(2) + "ok", true);
  in += HeadersNamingTheTable(17) + Data(17, Prefix(2) + "ok", true);
  Frames f = Exchange(*g, in);
  for (uint32_t id = 1; id <= 9; id += 2) EXPECT_EQ(Field(f.headers[id], "grpc-status"), "0") << id;
  EXPECT_EQ(Field(f.headers[11], "grpc-status"), "12");
  EXPECT_EQ(Field(f.headers[13], "grpc-status"), "12");
  EXPECT_EQ(Field(f.headers[15], "grpc-status"), "0");
  EXPECT_EQ(Field(f.headers[17], "grpc-status"), "0");
  EXPECT_EQ(echo.calls, 7);
}

// Breaches of the protocol end the connection with GOAWAY and the code RFC
// 9113 names; what the protocol allows is answered or ignored.
TEST(GrpcSessionFrames, ConnectionErrorsAreGoawaysWithTheirCode) {
  struct Case {
    const char* what;
    std::string in;
    uint32_t code;
  };
  const std::vector<Case> cases = {
      {"first frame not SETTINGS", kPreface + Frame(6, 0, 0, std::string(8, 'p')), 0x1},
      {"DATA on stream 0", Start() + Data(0, "x", false), 0x1},
      {"HEADERS on an even stream", Start() + Headers(2, true), 0x1},
      {"DATA on an idle stream", Start() + Data(5, "x", false), 0x1},
      {"SETTINGS of 5 bytes", Start() + Frame(4, 0, 0, "abcde"), 0x6},
      {"SETTINGS ACK with a payload", Start() + Frame(4, 1, 0, "abcdef"), 0x6},
      {"PING of 7 bytes", Start() + Frame(6, 0, 0, "1234567"), 0x6},
      {"a frame past 16384 bytes", Start() + Data(1, std::string(16385, 'x'), false), 0x6},
      {"connection window past 2^31-1", Start() + Frame(8, 0, 0, Word(0x7fffffff)), 0x3},
      {"WINDOW_UPDATE of 0 on the connection", Start() + Frame(8, 0, 0, Word(0)), 0x1},
      {"INITIAL_WINDOW_SIZE past 2^31-1", Start() + Settings(4, 0x80000000u), 0x3},
      {"MAX_FRAME_SIZE below 16384", Start() + Settings(5, 100), 0x1},
      {"PUSH_PROMISE from a client", Start() + Frame(5, 4, 1, std::string(4, '\0')), 0x1},
      {"CONTINUATION without HEADERS", Start() + Frame(9, 4, 1, "\x83"), 0x1},
      {"a frame between HEADERS and CONTINUATION", Start() + Frame(1, 0, 1, "\x83") + Frame(6, 0, 0, "12345678"), 0x1},
      {"an HPACK index past the table", Start() + Frame(1, 5, 1, "\xfe"), 0x9},
      {"RST_STREAM of an idle stream", Start() + Frame(3, 0, 9, Word(8)), 0x1},
      {"PRIORITY of 4 bytes for an idle stream", Start() + Frame(2, 0, 9, "abcd"), 0x6},
      {"PRIORITY making an idle stream depend on itself", Start() + Frame(2, 0, 9, Word(9) + "\x10"), 0x1},
      {"HEADERS whose priority field is cut", Start() + Frame(1, 0x24, 1, "abc"), 0x6},
  };
  for (const Case& k : cases) {
    Echo echo;
    auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
    EXPECT_FALSE(g->Receive(k.in, 1)) << k.what;
    std::string out;
    g->Drain(&out);
    Client c;
    Frames f;
    c.Parse(out, &f);
    EXPECT_EQ(f.goaways, 1) << k.what;
    EXPECT_EQ(f.goaway_code, k.code) << k.what;
    EXPECT_TRUE(g->Finished()) << k.what;
    EXPECT_EQ(echo.calls, 0) << k.what;
  }
}

// PINGs are answered with their payload, unknown frame types and PRIORITY
// ignored, a stream error (a stream's window overflowed) resets only that
// stream, and a header block larger than a frame is split into
// CONTINUATIONs (a long grpc-message).
TEST(GrpcSessionFrames, WhatTheProtocolAllowsIsAnsweredOrIgnored) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  const std::string text = "fail:" + std::string(8000, '\x01');  // 24,000 bytes percent-encoded
  std::string body = Prefix(static_cast<uint32_t>(text.size())) + text;
  std::string in = Start() + Frame(6, 0, 0, "pingpong") + Frame(0xfa, 0, 0, "extension") +
                   Frame(2, 0, 3, std::string(5, '\0')) + Headers(1, false) + Data(1, body, true) + Headers(3, false) +
                   Frame(8, 0, 3, Word(0x7fffffff)) + Headers(5, false) + Data(5, Prefix(2) + "ok", true);
  Frames f = Exchange(*g, in);
  ASSERT_EQ(f.ping_acks.size(), 1u);
  EXPECT_EQ(f.ping_acks[0], "pingpong");
  EXPECT_EQ(f.goaways, 0);
  EXPECT_EQ(Field(f.headers[1], "grpc-status"), "13");
  EXPECT_EQ(Field(f.headers[1], "grpc-message").size(), 24000u);
  EXPECT_GE(f.header_frames[1], 2);
  EXPECT_EQ(f.rst[3], 0x3u);  // FLOW_CONTROL_ERROR
  EXPECT_EQ(Field(f.headers[5], "grpc-status"), "0");
}

// Shutdown: GOAWAY NO_ERROR naming the last stream; a stream begun before
// it is still answered, one begun after is not; then the session is over.
TEST(GrpcSessionFrames, ShutdownAnswersWhatBeganAndTakesNothingNew) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  ASSERT_TRUE(g->Receive(Start() + Headers(1, false), 1));
  g->Shutdown();
  EXPECT_FALSE(g->Finished());
  ASSERT_TRUE(g->Receive(Data(1, Prefix(2) + "ok", true) + Headers(3, false) + Data(3, Prefix(2) + "ok", true), 2));
  Frames f = Drained(*g);
  EXPECT_EQ(f.goaways, 1);
  EXPECT_EQ(f.goaway_last, 1u);
  EXPECT_EQ(f.goaway_code, 0u);
  EXPECT_EQ(Field(f.headers[1], "grpc-status"), "0");
  EXPECT_EQ(f.headers.count(3), 0u);
  EXPECT_EQ(echo.calls, 1);
  EXPECT_TRUE(g->Finished());
}

// Rapid reset (CVE-2023-44487): streams opened and reset at once are
// allowed a burst, then the connection ends (ENHANCE_YOUR_CALM).
TEST(GrpcSessionFrames, RapidResetEndsTheConnection) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  std::string in = Start();
  for (uint32_t i = 0; i < GrpcSession::kResetBurst + 10; ++i)
    in += Headers(2 * i + 1, false) + Frame(3, 0, 2 * i + 1, Word(8));
  EXPECT_FALSE(g->Receive(in, 1));
  Frames f = Drained(*g);
  EXPECT_EQ(f.goaways, 1);
  EXPECT_EQ(f.goaway_code, 0xbu);
}

// Resets of streams already answered (a client cancelling calls whose
// answers crossed its RST_STREAMs) are not rapid reset: past the burst the
// connection goes on and its calls are answered.
TEST(GrpcSessionFrames, ResetsOfAnsweredStreamsAreNotRapidReset) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  ASSERT_TRUE(g->Receive(Start(), 1));
  uint32_t id = 1;
  for (int round = 0; round < 12; ++round) {
    std::string calls, resets;
    for (int i = 0; i < 100; ++i, id += 2) {
      calls += Headers(id, false) + Data(id, Prefix(2) + "hi", true);
      resets += Frame(3, 0, id, Word(8));
    }
    ASSERT_TRUE(g->Receive(calls, 2 + round));
    while (g->HasBacklog()) ASSERT_TRUE(g->Receive({}, 2 + round));
    ASSERT_TRUE(g->Receive(resets, 2 + round)) << round;
  }
  Frames f = Drained(*g);
  EXPECT_EQ(f.goaways, 0);
  EXPECT_EQ(echo.calls, 1200);
  EXPECT_EQ(Field(f.headers[id - 2], "grpc-status"), "0");
}

}  // namespace
}  // namespace frs::server

namespace frs::server {
namespace {

// What a connection holds does not grow with the calls it has made: a
// connection whose calls are each answered within their read kept an entry
// per call it ever made (4 bytes a call, for its life).
TEST(GrpcSessionBounds, HeldDoesNotGrowWithTheCallsMade) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  std::string out;
  ASSERT_TRUE(g->Receive(Start() + Frame(4, 1, 0, ""), 1));
  size_t after_first = 0;
  for (uint32_t i = 0; i < 20000; ++i) {
    const uint32_t id = 2 * i + 1;
    // The connection's window given back as a client does.
    ASSERT_TRUE(g->Receive(Headers(id, false) + Data(id, Prefix(2) + "ok", true) + Frame(8, 0, 0, Word(7)), 2 + i));
    out.clear();
    g->Drain(&out);
    if (i == 10) after_first = g->held();
  }
  EXPECT_EQ(echo.calls, 20000);
  EXPECT_LE(g->held(), after_first + 1024) << "after 10 calls " << after_first;
  // One stream left unanswered at the front holds the answered ones
  // behind it only while they are few.
  ASSERT_TRUE(g->Receive(Headers(40001, false), 30000));
  for (uint32_t i = 0; i < 20000; ++i) {
    const uint32_t id = 40003 + 2 * i;
    ASSERT_TRUE(g->Receive(Headers(id, false) + Data(id, Prefix(2) + "ok", true) + Frame(8, 0, 0, Word(7)), 30001 + i));
    out.clear();
    g->Drain(&out);
  }
  EXPECT_EQ(g->OldestUnansweredNs(), 30000);
  EXPECT_LE(g->held(), after_first + 2048);
}

// Answers waiting for a window the client never opens, their streams then
// reset by the client: nothing of them is kept.
TEST(GrpcSessionBounds, BlockedAnswersOfResetStreamsAreForgotten) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  std::string out;
  ASSERT_TRUE(g->Receive(kPreface + Settings(4, 0) + Frame(4, 1, 0, ""), 1));
  g->Drain(&out);
  const size_t idle = g->held();
  for (uint32_t i = 0; i < 5000; ++i) {
    const uint32_t id = 2 * i + 1;
    ASSERT_TRUE(g->Receive(Headers(id, false) + Data(id, Prefix(2) + "ok", true), 2));
    // 30 a second: under the rapid-reset bound (33 a second past a burst).
    ASSERT_TRUE(g->Receive(Frame(3, 0, id, Word(8)), (3 + int64_t{i} / 30) * 1'000'000'000));
    out.clear();
    g->Drain(&out);
  }
  EXPECT_EQ(echo.calls, 5000);
  EXPECT_FALSE(g->HasOpenStreams());
  EXPECT_LE(g->held(), idle + 2048) << "idle " << idle;
}

// A frame begun and not finished marks the connection as mid-request (the
// request time-out then applies, not the idle one a trickle renews).
TEST(GrpcSessionBounds, AFrameBegunIsMidFrame) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  ASSERT_TRUE(g->Receive(Start() + Headers(1, false) + Data(1, Prefix(2) + "ok", true), 1));
  EXPECT_FALSE(g->MidFrame());
  const std::string next = Frame(0xfa, 0, 0, std::string(100, 'x'));
  ASSERT_TRUE(g->Receive(next.substr(0, 5), 2));
  EXPECT_TRUE(g->MidFrame());
  ASSERT_TRUE(g->Receive(next.substr(5), 3));
  EXPECT_FALSE(g->MidFrame());
  // A header block waiting for its CONTINUATION is too.
  ASSERT_TRUE(g->Receive(Frame(1, 0, 3, "\x83"), 4));
  EXPECT_TRUE(g->MidFrame());
  ASSERT_TRUE(g->Receive(Frame(9, 4, 3, "\x86"), 5));
  EXPECT_FALSE(g->MidFrame());
}

// After the GOAWAY of a graceful stop, a connection error's GOAWAY names
// no later stream (RFC 9113 6.8): the last one answered, here none, since
// stream 1 never will be; a SETTINGS whose window change overflows is not
// acknowledged before its GOAWAY.
TEST(GrpcSessionBounds, GoawaysNeverNameALaterStream) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  ASSERT_TRUE(g->Receive(Start() + Headers(1, false), 1));
  g->Shutdown();
  EXPECT_FALSE(g->Receive(Headers(3, false) + Headers(5, false) + Data(0, "x", false), 2));
  Frames f = Drained(*g);
  EXPECT_EQ(f.goaways, 2);
  EXPECT_EQ(f.goaway_last, 0u);
  EXPECT_EQ(f.goaway_code, 0x1u);

  auto h = GrpcSession::Create(&echo, GrpcLimits{}).value();
  ASSERT_TRUE(h->Receive(Start() + Headers(1, false), 1));
  EXPECT_EQ(Drained(*h).settings_acks, 1);  // the client's first SETTINGS
  EXPECT_FALSE(h->Receive(Frame(8, 0, 1, Word(0x7fff0000)) + Settings(4, 0x7fffffff), 2));
  Frames e = Drained(*h);
  EXPECT_EQ(e.settings_acks, 0);
  EXPECT_EQ(e.goaway_code, 0x3u);
}

// A PRIORITY frame of the wrong length for an open stream resets that
// stream (FRAME_SIZE_ERROR); the connection goes on.
TEST(GrpcSessionBounds, APriorityOfTheWrongLengthResetsItsStream) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  Frames f = Exchange(*g, Start() + Headers(1, false) + Frame(2, 0, 1, "abcdef") + Headers(3, false) +
                              Data(3, Prefix(2) + "ok", true));
  EXPECT_EQ(f.rst[1], 0x6u);
  EXPECT_EQ(f.goaways, 0);
  EXPECT_EQ(Field(f.headers[3], "grpc-status"), "0");
}

// One that makes an open stream depend on itself resets it PROTOCOL_ERROR
// (RFC 9113 5.3.1); one depending on another stream is dropped.
TEST(GrpcSessionBounds, APriorityOnItselfResetsItsStream) {
  Echo echo;
  auto g = GrpcSession::Create(&echo, GrpcLimits{}).value();
  Frames f = Exchange(*g, Start() + Headers(1, false) + Frame(2, 0, 1, Word(1) + "\x10") + Headers(3, false) +
                              Frame(2, 0, 3, Word(1) + "\x10") + Data(3, Prefix(2) + "ok", true));
  EXPECT_EQ(f.rst[1], 0x1u);
  EXPECT_EQ(f.rst.count(3), 0u);
  EXPECT_EQ(f.goaways, 0);
  EXPECT_EQ(Field(f.headers[3], "grpc-status"), "0");
}

}  // namespace
}  // namespace frs::server

namespace frs::server {
namespace {

// A server-streaming method (as Health/Watch): its answer is the service's
// `state`, sent again whenever it changes.
struct Watcher : Echo {
  std::string state = "one";
  int MethodOf(std::string_view path) const override { return path == "/test.Echo/Call" ? 0 : -1; }
  bool Streaming(int) const override { return true; }
  void Call(int, std::string_view, Reply* out) override {
    ++calls;
    out->body = state;
  }
};

// A watch: its first message at once and the stream left open (not busy:
// HasOpenStreams is false), a message at each change PollWatches finds,
// none for no change, and at Shutdown the last one, then trailers.
TEST(GrpcSessionWatch, MessagesAtEachChangeThenTrailersAtShutdown) {
  Watcher w;
  auto g = GrpcSession::Create(&w, GrpcLimits{}).value();
  ASSERT_TRUE(g->Receive(Start() + Headers(1, false) + Data(1, Prefix(1) + "?", true), 1));
  Frames f = Drained(*g);
  EXPECT_EQ(Field(f.headers[1], ":status"), "200");
  EXPECT_EQ(f.data[1], Prefix(3) + "one");
  EXPECT_EQ(Field(f.headers[1], "grpc-status"), "<none>");
  EXPECT_TRUE(g->HasWatches());
  EXPECT_FALSE(g->HasOpenStreams());
  g->PollWatches();
  EXPECT_TRUE(Drained(*g).data.empty());  // nothing changed
  // Frames received do not ask the service again (PINGs would each cost a
  // call per watch): only PollWatches and Shutdown do.
  const int asked = w.calls;
  w.state = "two";
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(g->Receive(Frame(6, 0, 0, std::string(8, 'p')), 2));
  EXPECT_EQ(w.calls, asked);
  EXPECT_TRUE(Drained(*g).data.empty());
  g->PollWatches();
  EXPECT_EQ(Drained(*g).data[1], Prefix(3) + "two");
  w.state = "end";
  g->Shutdown();
  Frames last = Drained(*g);
  EXPECT_EQ(last.data[1], Prefix(3) + "end");
  EXPECT_EQ(Field(last.headers[1], "grpc-status"), "0");
  EXPECT_EQ(last.goaways, 1);
  EXPECT_FALSE(g->HasWatches());
  EXPECT_TRUE(g->Finished());
}

// A watch whose messages wait for the client's window: at Shutdown its
// trailers wait behind them, and go once the window opens.
TEST(GrpcSessionWatch, ABlockedWatchEndsAfterItsLastMessage) {
  Watcher w;
  auto g = GrpcSession::Create(&w, GrpcLimits{}).value();
  ASSERT_TRUE(g->Receive(kPreface + Settings(4, 0) + Headers(1, false) + Data(1, Prefix(1) + "?", true), 1));
  Frames f = Drained(*g);
  EXPECT_EQ(f.data.count(1), 0u);
  w.state = "two";
  g->PollWatches();
  g->Shutdown();
  Frames held = Drained(*g);
  EXPECT_EQ(held.data.count(1), 0u);
  EXPECT_EQ(Field(held.headers[1], "grpc-status"), "<none>");
  EXPECT_FALSE(g->Finished());
  ASSERT_TRUE(g->Receive(Frame(8, 0, 1, Word(100)), 2));
  Frames out = Drained(*g);
  EXPECT_EQ(out.data[1], Prefix(3) + "one" + Prefix(3) + "two");
  EXPECT_EQ(Field(out.headers[1], "grpc-status"), "0");
  EXPECT_TRUE(g->Finished());
}

}  // namespace
}  // namespace frs::server
