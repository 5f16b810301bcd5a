// tests/common/engine_fixture.h: a store and an engine over one map.xml in a
// temp dir, on a fake clock, for the TESTs of one algorithm or feature that
// drive the engine's verbs (leases, reservations).
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "common/temp_dir.h"
#include "frs/admin_engine.h"
#include "frs/clock.h"
#include "frs/store.h"

namespace frs::testing {

class EngineFixture : public ::testing::Test {
 protected:
  // `map`: map.xml's text; `start_ms`: the fake clock's first reading.
  EngineFixture(const char* map, int64_t start_ms) : map_(map), clock_(start_ms) {}

  void SetUp() override {
    std::ofstream(dir_ / "map.xml") << map_;
    store_ = OpenStore();
    engine_ = OpenEngine(store_.get());
  }

  // One small file (1024 key nodes, chains of 8) in dir_/store: a test may
  // open it again, as a restart does.
  std::unique_ptr<Store> OpenStore() {
    StoreOptions o;
    o.dir = dir_ / "store";
    o.geometry = StoreGeometry{1, 1024, 8};
    auto s = Store::Open(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s.value()) : nullptr;
  }
  // The options OpenEngine opens with: the map, the store and its
  // directory, the fake clock.
  EngineOptions OptionsFor(Store* store) {
    EngineOptions o;
    o.map_path = dir_ / "map.xml";
    o.store = store;
    o.stats_dir = dir_ / "store";
    o.clock = &clock_;
    return o;
  }
  std::unique_ptr<AdminEngine> OpenEngine(Store* store) {
    auto e = AdminEngine::Open(OptionsFor(store));
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e.value()) : nullptr;
  }

  Decision Acquire(std::string_view biz, std::string_view key, int64_t n = 1) {
    return engine_->Execute(Request{.cmd = Cmd::kAcquire, .biz = biz, .key = key, .n = n});
  }
  // The node of `key` (any biz) as ExportNode's JSON line, as a handoff or
  // a snapshot sends it; empty when there is none.
  std::string ExportOf(std::string_view key) {
    std::string line;
    EXPECT_TRUE(store_
                    ->ForEach(
                        {},
                        [&](const NodeInfo& node) {
      if (node.key != key) return;
      auto exported = engine_->ExportNode(node);
      EXPECT_TRUE(exported.ok()) << exported.status().ToString();
      if (exported.ok()) line = exported.value();
                        })
                    .ok());
    return line;
  }

  const char* map_;
  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<AdminEngine> engine_;
};

}  // namespace frs::testing
