// The connection state machine and the handler, driven with in-memory bytes
// against a fake engine (no sockets).
#include "server/connection.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "fake_engine.h"
#include "server/handler.h"

namespace frs::server {
namespace {

struct Harness {
  explicit Harness(std::string token = "")
      : handler(Backend(&engine, nullptr, &engine.clk), HandlerOptions{std::move(token), 4, {}}, nullptr, nullptr) {}
  testing::FakeEngine engine;
  Handler handler;
  ConnectionLimits limits{1024, 1024};
  Connection conn{os::UniqueFd(), limits, &handler};

  // Feeds `in` in pieces of `chunk` bytes, answering as it goes; returns
  // everything written.
  std::string Send(const std::string& in, size_t chunk = 1 << 20) {
    std::string out;
    size_t pos = 0;
    while (pos < in.size()) {
      std::span<char> room = conn.ReadSpace();
      if (room.empty()) break;
      size_t n = std::min({chunk, room.size(), in.size() - pos});
      std::memcpy(room.data(), in.data() + pos, n);
      pos += n;
      conn.Produced(n, 0);
      conn.Process();
      Drain(&out);
    }
    return out;
  }
  void Drain(std::string* out) {
    while (conn.WantsWrite()) {
      std::string_view p = conn.PendingOutput();
      out->append(p);
      conn.Consumed(p.size());
      conn.Process();
    }
  }
};

std::string Post(const std::string& body, const std::string& extra = "") {
  return "POST /frs HTTP/1.1\r\nHost: x\r\n" + extra + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         body;
}

int CountOf(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

TEST(Connection, AnswersPipelinedGetsInOrder) {
  Harness h;
  std::string in;
  for (int i = 0; i < 6; ++i) in += "GET /acquire?biz=login&key=u1 HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string out = h.Send(in);
  EXPECT_EQ(CountOf(out, "HTTP/1.1 200 OK"), 5) << out;
  EXPECT_EQ(CountOf(out, "HTTP/1.1 429 Too Many Requests"), 1);
  // The denial is the last answer.
  EXPECT_GT(out.find("429"), out.rfind("HTTP/1.1 200"));
  EXPECT_NE(out.find("Retry-After: 60\r\n"), std::string::npos);
  EXPECT_NE(out.find("RateLimit-Limit: 5\r\nRateLimit-Remaining: 4\r\nRateLimit-Reset: 60\r\n"), std::string::npos)
      << out;
  EXPECT_EQ(h.conn.state(), Connection::State::kOpen);
}

// RFC 9112 requires a server to accept the absolute form; it was a 404.
TEST(Connection, AbsoluteFormTargetsAreAccepted) {
  Harness h;
  const std::string body = "<request cmd=\"query\" biz=\"login\" key=\"abs\"/>";
  std::string out = h.Send(
      "GET http://127.0.0.1:8300/acquire?biz=login&key=abs HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET HTTP://frs.example/health HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST https://frs.example/frs HTTP/1.1\r\nHost: x\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body + "GET http://frs.example HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(CountOf(out, "HTTP/1.1 200 OK"), 3) << out;
  EXPECT_NE(out.find("count=\"1\""), std::string::npos) << "the absolute-form acquire counted on key abs\n" << out;
  EXPECT_EQ(CountOf(out, "HTTP/1.1 404"), 1) << "http://host alone is the path /, which is not an endpoint\n" << out;
}

TEST(Connection, SameAnswersWhenBytesTrickle) {
  Harness h;
  std::string body = R"(<request cmd="acquire" biz="login" key="k" n="2"/>)";
  std::string out = h.Send(Post(body) + Post(body), 1);
  EXPECT_EQ(CountOf(out, "HTTP/1.1 200 OK"), 2) << out;
  EXPECT_NE(out.find("count=\"4\" limit=\"5\" remaining=\"1\""), std::string::npos) << out;
  EXPECT_EQ(h.engine.Count(1, "k"), 4);
}

TEST(Connection, ConnectionCloseAndHttp10End) {
  Harness h;
  std::string out = h.Send("GET /health HTTP/1.1\r\nConnection: close\r\n\r\nGET /health HTTP/1.1\r\n\r\n");
  EXPECT_EQ(CountOf(out, "HTTP/1.1 200"), 1);
  EXPECT_NE(out.find("Connection: close\r\n"), std::string::npos);
  EXPECT_TRUE(h.conn.Done());

  Harness h10;
  out = h10.Send("GET /health HTTP/1.0\r\n\r\n");
  EXPECT_NE(out.find("Connection: close"), std::string::npos);
  EXPECT_TRUE(h10.conn.Done());

  Harness ka;
  out = ka.Send("GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_NE(out.find("Connection: keep-alive"), std::string::npos);
  EXPECT_FALSE(ka.conn.Done());
}

TEST(Connection, MalformedHttpAnswers400AndCloses) {
  Harness h;
  std::string out = h.Send("BLAH\x01\r\n\r\nGET /health HTTP/1.1\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 400 Bad Request", 0), 0u) << out;
  EXPECT_EQ(CountOf(out, "HTTP/1.1 "), 1);
  EXPECT_NE(out.find("<response code=\"400\" msg=\""), std::string::npos);
  EXPECT_TRUE(h.conn.NeedsLinger());
}

TEST(Connection, ErrorStatuses) {
  struct Case {
    std::string req;
    int status;
  } cases[] = {
      {"GET /nowhere HTTP/1.1\r\n\r\n", 404},
      {"GET /frs HTTP/1.1\r\n\r\n", 405},
      {"POST /acquire?biz=login&key=k HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405},
      {"POST /frs HTTP/1.1\r\n\r\n", 411},
      {"POST /frs HTTP/1.1\r\nContent-Length: 5000\r\n\r\n", 413},
      {"GET / HTTP/1.1\r\nX: " + std::string(2000, 'a') + "\r\n\r\n", 431},
      {Post("<nope"), 400},
      {Post(R"(<request cmd="acquire" biz="nosuch" key="k"/>)"), 404},
      {Post(R"(<request cmd="set" biz="login" key="k" count="1"/>)"), 403},
      {"GET /acquire?biz=login HTTP/1.1\r\n\r\n", 400},
      {"GET /acquire?biz=nosuch&key=k HTTP/1.1\r\n\r\n", 404},
  };
  for (const Case& c : cases) {
    Harness h;
    std::string out = h.Send(c.req);
    std::string want = "HTTP/1.1 " + std::to_string(c.status) + " ";
    EXPECT_EQ(out.rfind(want, 0), 0u) << c.req << "\n---\n" << out;
    EXPECT_NE(out.find("<response code=\"" + std::to_string(c.status) + "\" msg=\""), std::string::npos) << out;
    EXPECT_TRUE(h.engine.counts.empty() || h.engine.counts.begin()->second == 0) << c.req;
  }
}

TEST(Connection, AdminCommandsNeedTheToken) {
  Harness h("t0k");
  std::string out = h.Send(Post(R"(<request cmd="set" biz="login" key="k" count="3" token="bad"/>)"));
  EXPECT_EQ(out.rfind("HTTP/1.1 403", 0), 0u);
  out = h.Send(Post(R"(<request cmd="set" biz="login" key="k" count="3" token="t0k"/>)"));
  EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << out;
  EXPECT_EQ(h.engine.Count(1, "k"), 3);
  out = h.Send(Post(R"(<request cmd="delete" biz="login" key="k" token="t0k"/>)"));
  EXPECT_NE(out.find("<response code=\"0\" found=\"1\"/>"), std::string::npos) << out;
  out = h.Send(Post(R"(<request cmd="reset" biz="login" token="t0k"/>)"));
  EXPECT_NE(out.find("erased=\""), std::string::npos) << out;
}

TEST(Connection, BatchIsAllOrNothing) {
  Harness h;
  h.engine.counts[std::make_pair(uint16_t{2}, std::string("b"))] = 5;  // full
  std::string batch =
      R"(<batch><request cmd="acquire" biz="login" key="a"/><request cmd="acquire" biz="api" key="b"/></batch>)";
  std::string out = h.Send(Post(batch));
  EXPECT_NE(out.find("<batch allowed=\"0\">"), std::string::npos) << out;
  EXPECT_EQ(CountOf(out, "<response "), 2);
  EXPECT_EQ(h.engine.Count(1, "a"), 0);
  // An unknown biz anywhere fails the whole batch before anything runs.
  h.engine.counts[std::make_pair(uint16_t{2}, std::string("b"))] = 0;
  std::string bad =
      R"(<batch><request cmd="acquire" biz="login" key="a"/><request cmd="acquire" biz="zzz" key="b"/></batch>)";
  out = h.Send(Post(bad));
  EXPECT_EQ(out.rfind("HTTP/1.1 404", 0), 0u) << out;
  EXPECT_EQ(h.engine.Count(1, "a"), 0);
  out = h.Send(Post(batch));
  EXPECT_NE(out.find("<batch allowed=\"1\">"), std::string::npos) << out;
  EXPECT_EQ(h.engine.Count(1, "a"), 1);
}

TEST(Connection, SendsContinueForExpect) {
  Harness h;
  std::string body = R"(<request cmd="query" biz="login" key="k"/>)";
  std::string req = Post(body, "Expect: 100-continue\r\n");
  std::string head = req.substr(0, req.size() - body.size());
  std::string out = h.Send(head);
  EXPECT_EQ(out, "HTTP/1.1 100 Continue\r\n\r\n");
  out = h.Send(body);
  EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0u);
}

TEST(Connection, StopsProcessingWhenTheClientDoesNotRead) {
  Harness h;
  std::string one = "GET /health HTTP/1.1\r\n\r\n";
  size_t answered = 0;
  // Feed without draining: processing must stop near the high-water mark.
  for (int i = 0; i < 20000 && !h.conn.ReadSpace().empty(); ++i) {
    std::span<char> room = h.conn.ReadSpace();
    size_t n = std::min(room.size(), one.size());
    std::memcpy(room.data(), one.data(), n);
    h.conn.Produced(n, 0);
    h.conn.Process();
    answered = h.conn.PendingOutput().size();
  }
  EXPECT_FALSE(h.conn.WantsRead());
  EXPECT_LT(answered, Connection::kOutputHighWater + 4096);
  std::string out;
  h.Drain(&out);
  EXPECT_TRUE(h.conn.WantsRead());
}

// A client that pipelines past the output high-water mark and then
// half-closes gets every whole request answered: the ones left buffered
// when processing stopped for room are answered once output drains (the
// worker comes back for them: HasBacklog), only a request cut by the EOF
// is not.
TEST(Connection, RequestsBufferedAtAHalfCloseAreAllAnswered) {
  Harness h;
  const std::string one = "GET /health HTTP/1.1\r\n\r\n";
  std::string all;
  for (int i = 0; i < 40000; ++i) all += one;
  size_t fed = 0;
  while (fed < all.size()) {
    std::span<char> room = h.conn.ReadSpace();
    if (room.empty()) break;
    const size_t n = std::min(room.size(), all.size() - fed);
    std::memcpy(room.data(), all.data() + fed, n);
    fed += n;
    h.conn.Produced(n, 0);
    h.conn.Process();
  }
  ASSERT_GE(h.conn.PendingOutput().size(), Connection::kOutputHighWater);  // stopped for room
  h.conn.PeerClosed();
  h.conn.Process();
  EXPECT_EQ(h.conn.state(), Connection::State::kOpen);
  EXPECT_FALSE(h.conn.HasBacklog());  // nothing to do until output drains
  std::string out;
  for (int turns = 0; turns < 10000; ++turns) {
    if (h.conn.WantsWrite()) {
      std::string_view p = h.conn.PendingOutput();
      out.append(p);
      h.conn.Consumed(p.size());
      h.conn.Process();
    } else if (h.conn.HasBacklog()) {
      h.conn.Process();
    } else {
      break;
    }
  }
  EXPECT_EQ(CountOf(out, "HTTP/1.1 200"), static_cast<int>(fed / one.size())) << fed;
  EXPECT_GT(fed / one.size(), 1000u) << "the feed stopped early";
  EXPECT_TRUE(h.conn.Done());
}

TEST(Connection, ShutdownClosesIdleAndFinishesBusy) {
  Harness idle;
  idle.conn.BeginShutdown();
  EXPECT_TRUE(idle.conn.Done());

  Harness busy;
  std::string req = "GET /health HTTP/1.1\r\n\r\n";
  busy.Send(req.substr(0, 10));
  busy.conn.BeginShutdown();
  EXPECT_FALSE(busy.conn.Done());
  std::string out = busy.Send(req.substr(10));
  EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << out;  // the request in flight is answered
  EXPECT_NE(out.find("Connection: close"), std::string::npos);
  EXPECT_TRUE(busy.conn.Done());
}

TEST(Connection, TimeoutOfAPartialRequestAnswers408) {
  Harness h;
  h.Send("GET /hea");
  h.conn.OnTimeout();
  std::string out;
  h.Drain(&out);
  EXPECT_EQ(out.rfind("HTTP/1.1 408", 0), 0u) << out;
}

}  // namespace
}  // namespace frs::server
