// A replica's side of <cluster replicas="1">: the changes one engine tells
// its ChangeSink are applied by another engine (AdminEngine::ApplyChanges)
// so that both answer alike; a batch sent again is applied once; a node the
// receiver also counted itself (a split) keeps both sides' uses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "frs/admin_engine.h"
#include "frs/store.h"
#include "limit/rule_harness.h"

namespace frs {
namespace {

using limit::testing::kDay0;

constexpr char kMap[] = R"(<map>
  <biz id="1" name="fixed"><rule algo="fixed" interval="600" max="5"/></biz>
  <biz id="2" name="sliding"><rule algo="sliding" interval="60" max="4"/></biz>
  <biz id="3" name="bucket"><rule algo="token_bucket" interval="60" max="60" burst="6"/></biz>
  <biz id="4" name="two"><rule algo="fixed" interval="60" max="3"/><rule algo="fixed" interval="3600" max="10"/></biz>
</map>
)";

// Keeps what an engine tells it, with the keys copied.
class Recorder final : public ChangeSink {
 public:
  void OnChange(const Change& c) override {
    keys.emplace_back(c.key);
    changes.push_back(c);
  }
  // The changes, keys pointing into `keys` (valid while it is not touched).
  std::vector<Change> Take() {
    std::vector<Change> out = changes;
    for (size_t i = 0; i < out.size(); ++i) out[i].key = keys[i];
    return out;
  }
  std::vector<Change> changes;
  std::vector<std::string> keys;
};

class ReplicaApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_ / "map.xml") << kMap;
    owner_store_ = OpenStore("owner");
    replica_store_ = OpenStore("replica");
    owner_ = OpenEngine(owner_store_.get(), "owner");
    replica_ = OpenEngine(replica_store_.get(), "replica");
    owner_->SetChangeSink(&rec_);
  }

  std::unique_ptr<Store> OpenStore(const std::string& name) {
    StoreOptions o;
    o.dir = dir_ / name;
    o.geometry = StoreGeometry{1, 1024, 8};
    auto s = Store::Open(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s.value());
  }

  std::unique_ptr<AdminEngine> OpenEngine(Store* store, const std::string& name) {
    EngineOptions o;
    o.map_path = dir_ / "map.xml";
    o.store = store;
    o.stats_dir = dir_ / name;
    o.clock = &clock_;
    auto e = AdminEngine::Open(o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return std::move(e.value());
  }

  static Decision Do(Engine& e, Cmd cmd, std::string_view biz, std::string_view key, int64_t n = 1) {
    return e.Execute(Request{.cmd = cmd, .biz = biz, .key = key, .n = n});
  }

  // Ships what the owner recorded since the last call as batch `seq`.
  Result<bool> Ship(uint64_t seq, const std::string& stream = "s1") {
    std::vector<Change> changes = rec_.Take();
    auto r = replica_->ApplyChanges(changes, stream, seq);
    rec_.changes.clear();
    rec_.keys.clear();
    return r;
  }

  testing::TempDir dir_;
  FakeClock clock_{kDay0 * 1000 + 500};
  Recorder rec_;
  std::unique_ptr<Store> owner_store_, replica_store_;
  std::unique_ptr<AdminEngine> owner_, replica_;
};

TEST_F(ReplicaApplyTest, TheReplicaAnswersAsTheOwnerForEveryAlgorithm) {
  uint64_t seq = 0;
  for (const char* biz : {"fixed", "sliding", "bucket", "two"}) {
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, biz, "user:1").allowed);
      clock_.Advance(700);
    }
    auto r = Ship(++seq);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r.value());
    const Decision a = Do(*owner_, Cmd::kQuery, biz, "user:1"), b = Do(*replica_, Cmd::kQuery, biz, "user:1");
    EXPECT_EQ(a.count, b.count) << biz;
    EXPECT_EQ(a.remaining, b.remaining) << biz;
    EXPECT_EQ(a.allowed, b.allowed) << biz;
  }
  // Denied acquires change nothing and send nothing.
  for (int i = 0; i < 4; ++i) Do(*owner_, Cmd::kAcquire, "fixed", "user:1");
  const size_t sent = rec_.changes.size();
  EXPECT_EQ(sent, 2u);  // 3 + 2 = the limit of 5; the last two were denied
  ASSERT_TRUE(Ship(++seq).ok());
  EXPECT_FALSE(Do(*replica_, Cmd::kAcquire, "fixed", "user:1").allowed);
}

TEST_F(ReplicaApplyTest, ABatchSentAgainIsAppliedOnce) {
  for (int i = 0; i < 3; ++i) Do(*owner_, Cmd::kAcquire, "fixed", "k");
  std::vector<Change> batch = rec_.Take();
  std::vector<std::string> keys = rec_.keys;  // batch's keys point into rec_.keys
  auto first = replica_->ApplyChanges(batch, "s1", 1);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first.value());
  auto again = replica_->ApplyChanges(batch, "s1", 1);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again.value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "k").count, 3);
  // An older seq of the stream is old too; another stream is not.
  EXPECT_FALSE(replica_->ApplyChanges(batch, "s1", 1).value());
  EXPECT_TRUE(replica_->ApplyChanges(batch, "s2", 1).value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "k").count, 6);
}

TEST_F(ReplicaApplyTest, BothHoldersServingKeepBothSidesUses) {
  // A split: the owner grants 2, the successor grants 2 of its own; each
  // sends its changes to the other. Both then hold 4.
  Do(*owner_, Cmd::kAcquire, "fixed", "k");
  Do(*owner_, Cmd::kAcquire, "fixed", "k");
  Recorder other;
  replica_->SetChangeSink(&other);
  Do(*replica_, Cmd::kAcquire, "fixed", "k");
  Do(*replica_, Cmd::kAcquire, "fixed", "k");
  replica_->SetChangeSink(nullptr);
  ASSERT_TRUE(Ship(1).ok());
  ASSERT_TRUE(owner_->ApplyChanges(other.Take(), "back", 1).ok());
  EXPECT_EQ(Do(*owner_, Cmd::kQuery, "fixed", "k").count, 4);
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "k").count, 4);
}

TEST_F(ReplicaApplyTest, SetDeleteAndResetReplicate) {
  Do(*owner_, Cmd::kAcquire, "fixed", "a");
  owner_->Execute(Request{.cmd = Cmd::kSet, .biz = "fixed", .key = "a", .count = 4});
  Do(*owner_, Cmd::kAcquire, "fixed", "b");
  ASSERT_TRUE(Ship(1).ok());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "a").count, 4);
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "b").count, 1);
  owner_->Execute(Request{.cmd = Cmd::kDelete, .biz = "fixed", .key = "a", .n = 1});
  ASSERT_TRUE(Ship(2).ok());
  EXPECT_FALSE(Do(*replica_, Cmd::kGet, "fixed", "a").found);
  owner_->Execute(Request{.cmd = Cmd::kReset, .biz = "fixed", .key = {}});
  ASSERT_TRUE(Ship(3).ok());
  EXPECT_FALSE(Do(*replica_, Cmd::kGet, "fixed", "b").found);
}

TEST_F(ReplicaApplyTest, ChangesASnapshotCarriedAreSkipped) {
  Do(*owner_, Cmd::kAcquire, "fixed", "k");
  clock_.Advance(1000);
  Do(*owner_, Cmd::kAcquire, "fixed", "k");
  std::vector<Change> batch = rec_.Take();
  auto r = replica_->ApplyChanges(batch, "s1", 1, /*skip_first=*/1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "k").count, 1);
}

TEST_F(ReplicaApplyTest, BadChangesAreRefusedAndChangeNothing) {
  Do(*owner_, Cmd::kAcquire, "fixed", "k");
  std::vector<Change> good = rec_.Take();
  Change unknown = good[0];
  unknown.biz_id = 77;
  std::vector<Change> bad = {good[0], unknown};
  auto r = replica_->ApplyChanges(bad, "s1", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound()) << r.status().ToString();
  Change huge = good[0];
  huge.n = int64_t{1} << 40;
  EXPECT_FALSE(replica_->ApplyChanges(std::vector<Change>{huge}, "s1", 1).ok());
  EXPECT_FALSE(replica_->ApplyChanges(good, "", 1).ok());
  EXPECT_FALSE(replica_->ApplyChanges(good, "s1", 0).ok());
  EXPECT_FALSE(Do(*replica_, Cmd::kGet, "fixed", "k").found);
  // The stream is still at 0: seq 1 applies.
  EXPECT_TRUE(replica_->ApplyChanges(good, "s1", 1).value());
}

TEST_F(ReplicaApplyTest, ManyChangesOfOneKeyInABatchFoldIntoOne) {
  for (int i = 0; i < 60; ++i) {
    Do(*owner_, Cmd::kAcquire, "bucket", "hot");
    clock_.Advance(10);
  }
  auto r = Ship(1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Decision a = Do(*owner_, Cmd::kQuery, "bucket", "hot"), b = Do(*replica_, Cmd::kQuery, "bucket", "hot");
  EXPECT_EQ(a.allowed, b.allowed);
  EXPECT_EQ(a.remaining, b.remaining);
}

}  // namespace
}  // namespace frs
