// libFuzzer target for the whole request path: bytes in, response bytes out.
//
// The input is split into reads by its first byte (so header and body
// boundaries land everywhere), fed through the same Connection, HTTP parser,
// XML protocol and Handler that frsd runs, against a real Engine and Store in
// a temp directory. Checked: no crash or sanitizer report, every answer is a
// well-formed HTTP/1.1 status line, and the connection always reaches a
// state the worker can act on.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

// Relative: the fuzz preset builds this file without the tests' include path.
#include "../common/temp_dir.h"
#include "frs/engine.h"
#include "frs/store.h"
#include "server/connection.h"
#include "server/handler.h"

namespace {

struct Env {
  frs::testing::TempDir tmp{"frs-fuzz"};
  std::string dir = tmp.path();
  std::unique_ptr<frs::Store> store;
  std::unique_ptr<frs::AdminEngine> engine;
  std::unique_ptr<frs::server::Handler> handler;

  Env() {
    if (dir.empty()) abort();
    std::string map = dir + "/map.xml";
    FILE* f = std::fopen(map.c_str(), "w");
    if (!f) abort();
    std::fputs(
        "<map>\n"
        "  <biz id=\"1\" name=\"login\"><rule interval=\"60\" max=\"5\"/></biz>\n"
        "  <biz id=\"2\" name=\"ad\"><rule algo=\"calendar\" interval=\"86400\" max=\"3\"/>"
        "<rule algo=\"sliding\" interval=\"3600\" max=\"1\"/></biz>\n"
        "  <biz id=\"3\" name=\"api\" mode=\"shadow\"><rule algo=\"token_bucket\" interval=\"1\" max=\"10\" "
        "burst=\"20\"/></biz>\n"
        "  <biz id=\"4\" name=\"partner\"><rule algo=\"fixed\" interval=\"3600\" max=\"1000\" borrow=\"300\"/></biz>\n"
        "  <biz id=\"5\" name=\"llm\" reservations=\"4\"><rule algo=\"concurrency\" max=\"3\" lease=\"60\"/>"
        "<rule algo=\"fixed\" interval=\"60\" max=\"1000\" overrun=\"limit\"/></biz>\n"
        "</map>\n",
        f);
    std::fclose(f);
    frs::StoreOptions so;
    so.dir = dir + "/data";
    so.geometry = frs::StoreGeometry{1, 64, 4};
    auto s = frs::Store::Open(so);
    if (!s.ok()) {
      std::fprintf(stderr, "fuzz: store: %s\n", s.status().ToString().c_str());
      abort();
    }
    store = std::move(s.value());
    frs::EngineOptions eo;
    eo.map_path = map;
    eo.store = store.get();
    eo.stats_dir = so.dir;
    auto e = frs::AdminEngine::Open(eo);
    if (!e.ok()) {
      std::fprintf(stderr, "fuzz: engine: %s\n", e.status().ToString().c_str());
      abort();
    }
    engine = std::move(e.value());
    handler = std::make_unique<frs::server::Handler>(frs::server::Backend(engine.get(), store.get()),
                                                     frs::server::HandlerOptions{"tok", 8, {}}, nullptr, nullptr);
  }
  ~Env() {
    handler.reset();
    engine.reset();
    store.reset();
  }
};

Env& GetEnv() {
  static Env env;
  return env;
}

void CheckAnswer(std::string_view out) {
  // Every response (and interim 100) starts with a status line.
  if (!out.empty() && out.substr(0, 9) != "HTTP/1.1 ") abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Env& env = GetEnv();
  size_t chunk = size > 0 ? (data[0] % 64) + 1 : 1;
  if (size > 0 && data[0] >= 192) chunk = 1 << 20;  // a quarter of runs: one read
  const char* in = reinterpret_cast<const char*>(data) + (size > 0 ? 1 : 0);
  size_t len = size > 0 ? size - 1 : 0;

  frs::server::ConnectionLimits limits{1024, 4096};
  frs::server::Connection conn(frs::os::UniqueFd(), limits, env.handler.get());
  std::string out;
  size_t pos = 0;
  while (pos < len) {
    std::span<char> room = conn.ReadSpace();
    if (room.empty()) {
      // The worker would wait for the client to read: let it read.
      if (!conn.WantsWrite()) break;
    } else {
      size_t n = std::min({chunk, room.size(), len - pos});
      std::memcpy(room.data(), in + pos, n);
      pos += n;
      conn.Produced(n, 0);
      conn.Process();
    }
    std::string_view p = conn.PendingOutput();
    out.append(p);
    conn.Consumed(p.size());
    conn.Process();
    if (conn.Done() || conn.NeedsLinger()) break;
  }
  // End of input: EOF from the peer, then whatever is left.
  conn.PeerClosed();
  conn.Process();
  for (int i = 0; i < 1000 && conn.WantsWrite(); ++i) {
    std::string_view p = conn.PendingOutput();
    out.append(p);
    conn.Consumed(p.size());
    conn.Process();
  }
  if (conn.WantsWrite()) abort();  // output that never drains
  if (!conn.Done() && !conn.NeedsLinger() && conn.state() != frs::server::Connection::State::kClosed) {
    // A connection at EOF must be finished.
    abort();
  }
  CheckAnswer(out);
  return 0;
}
