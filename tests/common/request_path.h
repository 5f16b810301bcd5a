// tests/common/request_path.h: the request path of one frsd worker, in
// process: a store and an engine over a given map.xml in a temp dir, a
// handler, and one Connection (without a socket) that requests are fed to.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/temp_dir.h"
#include "frs/admin_engine.h"
#include "frs/store.h"
#include "server/connection.h"
#include "server/handler.h"

namespace frs::testing {

class RequestPath {
 public:
  explicit RequestPath(const std::string& map_xml, server::HandlerOptions ho = {}) {
    const std::string map = dir_ / "map.xml";
    std::ofstream(map, std::ios::binary) << map_xml;
    StoreOptions so;
    so.dir = dir_ / "data";
    so.geometry = StoreGeometry{1, 1024, 8};
    auto store = Store::Open(so);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store.value());
    EngineOptions eo;
    eo.map_path = map;
    eo.store = store_.get();
    eo.stats_dir = so.dir;
    auto engine = AdminEngine::Open(eo);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(engine.value());
    handler_ = std::make_unique<server::Handler>(server::Backend(engine_.get(), store_.get()), ho, nullptr, nullptr);
    conn_ =
        std::make_unique<server::Connection>(os::UniqueFd(), server::ConnectionLimits{16384, 1 << 20}, handler_.get());
  }

  AdminEngine* engine() const { return engine_.get(); }
  // The connection's peer, as a worker sets it on accept ("10.0.0.7", "::1").
  void SetPeer(std::string_view ip) {
    IpAddress a;
    ASSERT_TRUE(IpAddress::Parse(ip, &a)) << ip;
    conn_->set_peer(a);
  }

  // Sends `req` through the connection (as many reads as its buffer takes)
  // and returns the answer's status line, valid until the next call: it
  // allocates nothing, for the tests that count allocations.
  std::string_view RoundTrip(const std::string& req) {
    Feed(req);
    std::string_view out = conn_->PendingOutput();
    const std::string_view line = out.substr(0, std::min(out.find('\r'), sizeof status_));
    std::memcpy(status_, line.data(), line.size());
    conn_->Consumed(out.size());
    conn_->Process();
    return std::string_view(status_, line.size());
  }

  // As RoundTrip, the whole answer (head and body) as a string.
  std::string RoundTripWhole(const std::string& req) {
    Feed(req);
    std::string out(conn_->PendingOutput());
    conn_->Consumed(out.size());
    conn_->Process();
    return out;
  }

  static std::string Get(const std::string& target) { return "GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n"; }
  static std::string Post(const std::string& target, const std::string& body) {
    return "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
           body;
  }

 private:
  // `req` into the connection, as many reads as its buffer takes.
  void Feed(const std::string& req) {
    size_t pos = 0;
    while (pos < req.size()) {
      std::span<char> room = conn_->ReadSpace();
      const size_t n = std::min(room.size(), req.size() - pos);
      std::memcpy(room.data(), req.data() + pos, n);
      pos += n;
      conn_->Produced(n, 0);
      conn_->Process();
    }
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<AdminEngine> engine_;
  std::unique_ptr<server::Handler> handler_;
  std::unique_ptr<server::Connection> conn_;
  char status_[64];
};

}  // namespace frs::testing
