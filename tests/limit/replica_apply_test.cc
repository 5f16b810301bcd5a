// A replica's side of <cluster replicas="1">: the changes one engine tells
// its ChangeSink are applied by another engine (AdminEngine::ApplyChanges)
// so that both answer alike; a batch sent again is applied once; a node the
// receiver also counted itself (a split) keeps both sides' uses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "common/node_bytes.h"
#include "common/temp_dir.h"
#include "frs/admin_engine.h"
#include "frs/store.h"
#include "limit/engine_impl.h"
#include "limit/lease_id.h"
#include "limit/reservation.h"
#include "limit/rule_harness.h"
#include "store/test_hooks.h"

namespace frs {
namespace {

using limit::testing::kDay0;

constexpr char kMap[] = R"(<map>
  <biz id="1" name="fixed"><rule algo="fixed" interval="600" max="5"/></biz>
  <biz id="2" name="sliding"><rule algo="sliding" interval="60" max="4"/></biz>
  <biz id="3" name="bucket"><rule algo="token_bucket" interval="60" max="60" burst="6"/></biz>
  <biz id="4" name="two"><rule algo="fixed" interval="60" max="3"/><rule algo="fixed" interval="3600" max="10"/></biz>
  <biz id="5" name="lease"><rule algo="concurrency" lease="60" max="3"/></biz>
  <biz id="6" name="tokens"><rule algo="fixed" interval="600" max="100"/></biz>
  <biz id="7" name="calendar"><rule algo="calendar" interval="10" max="5"/></biz>
  <biz id="8" name="calendar_borrow"><rule algo="calendar" interval="10" max="5" borrow="3"/></biz>
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

  std::unique_ptr<AdminEngine> OpenEngine(Store* store, const std::string& name, const std::string& key_file = "",
                                          const std::string& also_file = "") {
    EngineOptions o;
    o.map_path = dir_ / "map.xml";
    o.store = store;
    o.stats_dir = dir_ / name;
    o.lease_key_file = key_file;
    o.lease_key_also_file = also_file;
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

  // What the owner recorded since the last call, kept apart: the changes of
  // one of its workers, sent on that worker's link (each has its own, and
  // two links' batches arrive in any order).
  struct Batch {
    std::vector<Change> changes;
    std::vector<std::string> keys;  // the changes' keys point into these
  };
  Batch TakeBatch() {
    Batch b{std::move(rec_.changes), std::move(rec_.keys)};
    for (size_t i = 0; i < b.changes.size(); ++i) b.changes[i].key = b.keys[i];
    rec_.changes.clear();
    rec_.keys.clear();
    return b;
  }
  Result<bool> Apply(const Batch& b, const std::string& stream, uint64_t seq) {
    return replica_->ApplyChanges(b.changes, stream, seq);
  }
  // An event made by hand, at the clock's now.
  Change Event(Change::Event e, uint16_t biz, std::string_view key, uint32_t item) {
    Change c;
    c.kind = Change::Kind::kEvent;
    c.event = e;
    c.biz_id = biz;
    c.key = key;
    c.item = item;
    c.at_ms = clock_.NowMs();
    return c;
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

// A calendar key's copy counts every window, not only its first: the uses
// of a later window went into the copy's ended one (merged as two open
// fixed windows), the copy read 0, and a failover granted the limit again
// (found from outside: 20 of 10 a day, an hour, a minute).
TEST_F(ReplicaApplyTest, ACalendarCopyCountsEveryWindowNotOnlyItsFirst) {
  uint64_t seq = 0;
  for (int window = 0; window < 3; ++window) {
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, "calendar", "day").allowed) << window;
    ASSERT_FALSE(Do(*owner_, Cmd::kAcquire, "calendar", "day").allowed);
    ASSERT_TRUE(Ship(++seq).ok());
    EXPECT_EQ(Do(*replica_, Cmd::kQuery, "calendar", "day").count, 5) << "window " << window;
    // A failover now: the copy grants nothing more in this window.
    EXPECT_FALSE(Do(*replica_, Cmd::kAcquire, "calendar", "day").allowed) << "window " << window;
    clock_.Advance(10000);
  }
  // With borrow: the next window owes what the last one borrowed, on the
  // copy as on the owner (the copy carries its own debt in).
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, "calendar_borrow", "b").allowed) << i;
  ASSERT_TRUE(Ship(++seq).ok());
  clock_.Advance(10000);
  ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, "calendar_borrow", "b").allowed);
  ASSERT_TRUE(Ship(++seq).ok());
  const Decision owner = Do(*owner_, Cmd::kQuery, "calendar_borrow", "b");
  const Decision copy = Do(*replica_, Cmd::kQuery, "calendar_borrow", "b");
  EXPECT_EQ(copy.count, owner.count);
  EXPECT_EQ(copy.remaining, owner.remaining);
  EXPECT_EQ(copy.remaining, 1);  // 5 - 3 owed - 1 used
  // A window's uses that reach the copy after it ended (a batch late, a
  // spool after an outage): the debt they carry into the next one counts
  // there on the copy too (summed after their window's end, it was lost).
  clock_.Advance(10000);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, "calendar_borrow", "late").allowed) << i;
  clock_.Advance(10000);
  ASSERT_TRUE(Ship(++seq).ok());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "calendar_borrow", "late").remaining,
            Do(*owner_, Cmd::kQuery, "calendar_borrow", "late").remaining);
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "calendar_borrow", "late").remaining, 2);
  // Both holders serving one window (a split): each side's uses are kept.
  ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, "calendar", "split").allowed);
  ASSERT_TRUE(Do(*replica_, Cmd::kAcquire, "calendar", "split", 2).allowed);
  ASSERT_TRUE(Ship(++seq).ok());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "calendar", "split").count, 3);
}

// A map edit that reached the owner first (or left the replica first): the
// changes of a biz the replica's map has not are skipped, and the batch's
// other changes applied. A refusal of the whole batch stopped the link, for
// every biz, until the maps agreed.
TEST_F(ReplicaApplyTest, AChangeOfABizTheMapHasNotIsSkippedAndTheRestApplied) {
  std::string less = kMap;
  less.erase(less.find("  <biz id=\"6\""), less.find("</map>") - less.find("  <biz id=\"6\""));
  std::ofstream(dir_ / "less.xml") << less;
  ASSERT_TRUE(replica_->Reload(dir_ / "less.xml").ok());
  ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, "tokens", "k").allowed);
  ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, "fixed", "k").allowed);
  ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, "tokens", "k").allowed);
  auto r = Ship(1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r.value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "k").count, 1);
  EXPECT_FALSE(replica_->ResolveBiz("tokens").ok());
  ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, "fixed", "k").allowed);
  ASSERT_TRUE(Ship(2).ok());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "k").count, 2);
}

// Two uses of one fixed window reach the copy out of order (the owner's two
// workers each send on a stream of their own; a backlog delivered after a
// later use): the copy's window opens at the first use's second, as the
// owner's did, and ends with it. It opened at the later one's, 2 s late, and
// every later window with it (found from outside: a failover then granted 7
// of 5).
TEST_F(ReplicaApplyTest, UsesArrivingOutOfOrderOpenTheCopysWindowAtTheFirst) {
  ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, "fixed", "late").allowed);
  const Batch first = TakeBatch();
  clock_.Advance(2000);
  ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, "fixed", "late").allowed);
  const Batch second = TakeBatch();
  clock_.Advance(1000);
  ASSERT_TRUE(Apply(second, "worker1", 1).value());
  ASSERT_TRUE(Apply(first, "worker0", 1).value());
  const Decision o = Do(*owner_, Cmd::kQuery, "fixed", "late");
  const Decision r = Do(*replica_, Cmd::kQuery, "fixed", "late");
  EXPECT_EQ(r.count, 2);
  EXPECT_EQ(r.reset, o.reset);
  // A use from a window that ended long ago is counted where it lands, and
  // moves nothing.
  clock_.Advance(700000);
  Change old;
  old.kind = Change::Kind::kAdd;
  old.biz_id = 1;
  old.key = "late";
  old.n = 1;
  old.at_ms = clock_.NowMs() - 650000;
  ASSERT_TRUE(Do(*replica_, Cmd::kAcquire, "fixed", "late").allowed);
  const int64_t reset = Do(*replica_, Cmd::kQuery, "fixed", "late").reset;
  std::vector<Change> batch = {old};
  ASSERT_TRUE(replica_->ApplyChanges(batch, "worker0", 2).value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "late").reset, reset);
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

// A node that grows between two reads (another link or process wrote it)
// is read again; one that keeps growing ends the pass with Busy, so that a
// replica batch is sent again rather than answered as a duplicate.
TEST(WithWholeNodes, ReadsAgainWhileANodeGrowsThenAnswersBusy) {
  struct Item {
    uint32_t state_bytes = 44;
  };
  Item items[2];
  uint32_t need[2] = {0, 0};
  int passes = 0;
  Status s = limit::WithWholeNodes(std::span<Item>(items), std::span<uint32_t>(need), [&] {
    ++passes;
    need[1] = passes < 3 ? items[1].state_bytes + 16 : 0;  // grew twice, then read whole
    return Status::OK();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(passes, 3);
  EXPECT_EQ(items[1].state_bytes, 44u + 32u);
  passes = 0;
  s = limit::WithWholeNodes(std::span<Item>(items), std::span<uint32_t>(need), [&] {
    ++passes;
    need[0] = items[0].state_bytes + 16;  // never whole
    return Status::OK();
  });
  EXPECT_EQ(s.code(), Status::Code::kBusy) << s.ToString();
  EXPECT_EQ(passes, limit::kWholeReadPasses);
}

// A delete and uses after it in one batch: the copy erases what it held and
// counts the uses since, as the owner did (before, the node was erased and
// the later uses dropped: after a failover they were granted again).
TEST_F(ReplicaApplyTest, UsesAfterADeleteInOneBatchAreCountedOnTheCopy) {
  Do(*owner_, Cmd::kAcquire, "fixed", "d", 4);
  ASSERT_TRUE(Ship(1).value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "d").count, 4);
  owner_->Execute(Request{.cmd = Cmd::kDelete, .biz = "fixed", .key = "d", .n = 1});
  Do(*owner_, Cmd::kAcquire, "fixed", "d", 3);
  ASSERT_TRUE(Ship(2).value());
  EXPECT_EQ(Do(*owner_, Cmd::kQuery, "fixed", "d").count, 3);
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "d").count, 3);
}

// A batch whose resets were applied and which then failed (here a store
// error in its own write) is sent again: its resets are not applied twice,
// so what was counted on the copy in between stays (before, the second
// delivery erased it).
TEST_F(ReplicaApplyTest, AResetOfABatchThatFailedIsNotAppliedAgainWhenItIsSentAgain) {
  struct Failed {};
  Do(*owner_, Cmd::kAcquire, "fixed", "k", 2);
  ASSERT_TRUE(Ship(1).value());
  owner_->Execute(Request{.cmd = Cmd::kReset, .biz = "fixed", .key = {}});
  Do(*owner_, Cmd::kAcquire, "fixed", "k");
  Batch b = TakeBatch();
  // The store calls the hook once for the receipts' read, once for the
  // resets' mark and once for the batch: the third fails.
  int calls = 0;
  store::SetTestHookInCriticalSection(replica_store_.get(), [&](int phase) {
    if (phase == 0 && ++calls == 3) throw Failed{};
  });
  EXPECT_THROW((void)Apply(b, "s1", 2), Failed);
  store::SetTestHookInCriticalSection(replica_store_.get(), nullptr);
  ASSERT_EQ(calls, 3) << "the batch's write is no longer the store's third update of a reset batch";
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "k").count, 0);  // the reset was applied, the add not
  Do(*replica_, Cmd::kAcquire, "fixed", "k");                    // counted here in between
  ASSERT_TRUE(Apply(b, "s1", 2).value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "k").count, 2);
}

// A reset is applied outside the batch's transaction: a batch that
// carries one, sent again (a lost acknowledgement, a spool delivered again
// after a stop), or carried by a snapshot, must not erase what was counted
// since. Before, it erased the biz at each delivery.
TEST_F(ReplicaApplyTest, AResetSentAgainOrCarriedErasesNothingCountedSince) {
  owner_->Execute(Request{.cmd = Cmd::kReset, .biz = "fixed", .key = {}});
  Do(*owner_, Cmd::kAcquire, "fixed", "k");
  std::vector<Change> batch = rec_.Take();
  std::vector<std::string> keys = rec_.keys;  // batch's keys point into rec_.keys
  ASSERT_EQ(batch.size(), 2u);
  ASSERT_EQ(batch[0].kind, Change::Kind::kResetBiz);
  ASSERT_TRUE(replica_->ApplyChanges(batch, "s1", 1).value());
  Do(*replica_, Cmd::kAcquire, "fixed", "k");  // counted since, here
  Do(*replica_, Cmd::kAcquire, "fixed", "other");
  EXPECT_FALSE(replica_->ApplyChanges(batch, "s1", 1).value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "k").count, 2);
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "other").count, 1);
  // A snapshot carried the reset (and the add): a new stream's batch skips both.
  ASSERT_TRUE(replica_->ApplyChanges(batch, "s2", 1, /*skip_first=*/2).value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "other").count, 1);
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "k").count, 2);
}

// A reset is applied before the batch's nodes: the uses of its biz that
// came before it in the same batch must not count on the copy (before, the
// copy held them while the owner's reset had taken them off).
TEST_F(ReplicaApplyTest, UsesBeforeAResetInTheSameBatchAreErasedOnTheCopyAsOnTheOwner) {
  Do(*owner_, Cmd::kAcquire, "fixed", "k");
  Do(*owner_, Cmd::kAcquire, "fixed", "gone");
  Do(*owner_, Cmd::kAcquire, "sliding", "other");
  owner_->Execute(Request{.cmd = Cmd::kReset, .biz = "fixed", .key = {}});
  Do(*owner_, Cmd::kAcquire, "fixed", "k");
  owner_->Execute(Request{.cmd = Cmd::kReset, .biz = "fixed", .key = {}});
  Do(*owner_, Cmd::kAcquire, "fixed", "k");
  Do(*owner_, Cmd::kAcquire, "fixed", "after");
  ASSERT_TRUE(Ship(1).value());
  for (const char* key : {"k", "gone", "after"})
    EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", key).count, Do(*owner_, Cmd::kQuery, "fixed", key).count) << key;
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "k").count, 1);
  EXPECT_FALSE(Do(*replica_, Cmd::kGet, "fixed", "gone").found);
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "sliding", "other").count, 1);  // another biz's use stays
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
  // (A change of a biz this map has not is skipped, not refused:
  // AChangeOfABizTheMapHasNotIsSkippedAndTheRestApplied.)
  Change huge = good[0];
  huge.n = int64_t{1} << 40;
  auto r = replica_->ApplyChanges(std::vector<Change>{good[0], huge}, "s1", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(replica_->ApplyChanges(std::vector<Change>{huge}, "s1", 1).ok());
  EXPECT_FALSE(replica_->ApplyChanges(good, "", 1).ok());
  EXPECT_FALSE(replica_->ApplyChanges(good, "s1", 0).ok());
  // A bad key is refused with the reason, as a request's is.
  Change nul = good[0];
  nul.key = std::string_view("a\0b", 3);
  auto bad = replica_->ApplyChanges(std::vector<Change>{nul}, "s1", 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("change 1: bad key: "), std::string::npos) << bad.status().message();
  EXPECT_GT(bad.status().message().size(), std::string("change 1: bad key: ").size()) << bad.status().message();
  EXPECT_FALSE(Do(*replica_, Cmd::kGet, "fixed", "k").found);
  // The stream is still at 0: seq 1 applies.
  EXPECT_TRUE(replica_->ApplyChanges(good, "s1", 1).value());
  // A key holding U+FFFE, which no request makes now but an earlier
  // version's peer may send: applied, not refused (a refusal stops the
  // link for every key).
  Change earlier = good[0];
  const std::string noncharacter = "w\xef\xbf\xbe";
  earlier.key = noncharacter;
  auto applied = replica_->ApplyChanges(std::vector<Change>{earlier}, "s1", 2);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_TRUE(applied.value());
}

TEST_F(ReplicaApplyTest, ATimeOutOfRangeIsRefusedAndOneAheadIsAppliedAsOfNow) {
  Do(*owner_, Cmd::kAcquire, "fixed", "k");
  Do(*owner_, Cmd::kAcquire, "bucket", "b");
  std::vector<Change> good = rec_.Take();
  ASSERT_EQ(good.size(), 2u);
  // Before 1970, or an until past year 9999: refused, nothing changed
  // (INT64_MIN once overflowed the clock's arithmetic and killed the worker).
  for (int64_t at : {int64_t{-1}, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}) {
    std::vector<Change> bad = good;
    bad[1].at_ms = at;
    auto r = replica_->ApplyChanges(bad, "s1", 1);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("change 2: its time is unix milliseconds"), std::string::npos)
        << r.status().message();
  }
  std::vector<Change> far = good;
  far[0].until = std::numeric_limits<int64_t>::max();
  EXPECT_FALSE(replica_->ApplyChanges(far, "s1", 1).ok());
  EXPECT_FALSE(Do(*replica_, Cmd::kGet, "fixed", "k").found);
  // Ahead of this engine's clock, by a year or by a century: counted now,
  // in the window open now (not one that holds the key in the future).
  std::vector<Change> ahead = good;
  ahead[0].at_ms += 365LL * 86400 * 1000;
  ahead[1].at_ms += 36500LL * 86400 * 1000;
  ASSERT_TRUE(replica_->ApplyChanges(ahead, "s1", 1).value());
  const Decision d = Do(*replica_, Cmd::kQuery, "fixed", "k");
  EXPECT_EQ(d.count, 1);
  EXPECT_LE(d.reset, kDay0 + 600) << "a window opened in the future";
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "bucket", "b").count, Do(*owner_, Cmd::kQuery, "bucket", "b").count);
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

// Leases: with one key file (<cluster lease_key>) on both holders, the
// owner's events give the replica the same leases under the same ids; the
// replica's go back the same way.
class LeaseReplicaTest : public ReplicaApplyTest {
 protected:
  void SetUp() override {
    ReplicaApplyTest::SetUp();
    const std::string key = dir_ / "cluster.key";
    std::ofstream(key, std::ios::binary) << "0123456789abcdef";
    std::filesystem::permissions(key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    owner_ = OpenEngine(owner_store_.get(), "owner", key);
    replica_ = OpenEngine(replica_store_.get(), "replica", key);
    owner_->SetChangeSink(&rec_);
    replica_->SetChangeSink(&back_);
  }

  static std::string Id(const Decision& d) { return limit::LeaseIdText(d.lease_serial, d.lease_mac); }
  static Decision Lease(Engine& e, Cmd cmd, std::string_view key, std::string_view id) {
    return e.Execute(Request{.cmd = cmd, .biz = "lease", .key = key, .lease = id});
  }
  // The owner's lease of `key`, shipped to the replica, renewed there 30 s
  // later (the owner away: not shipped back), and past that renewal's end.
  void RenewAwayAndLetExpire(std::string_view key) {
    const Decision a = Do(*owner_, Cmd::kAcquire, "lease", key);
    ASSERT_TRUE(Ship(1).value());
    clock_.Advance(30000);
    ASSERT_TRUE(Lease(*replica_, Cmd::kRenew, key, Id(a)).ok());
    clock_.Advance(62000);
  }

  // Ships what the replica recorded to the owner.
  Result<bool> ShipBack(uint64_t seq) {
    std::vector<Change> changes = back_.Take();
    auto r = owner_->ApplyChanges(changes, "back", seq);
    back_.changes.clear();
    back_.keys.clear();
    return r;
  }

  Recorder back_;
};

// A lease's node deleted and a lease granted again in one batch: the copy
// holds the new lease alone, under its id; the one held before the delete
// is gone there as on the owner.
TEST_F(LeaseReplicaTest, ALeaseGrantedAfterADeleteInOneBatchIsTheCopysOnlyOne) {
  const Decision before = Do(*owner_, Cmd::kAcquire, "lease", "e");
  ASSERT_NE(before.lease_serial, 0u);
  ASSERT_TRUE(Ship(1).value());
  owner_->Execute(Request{.cmd = Cmd::kDelete, .biz = "lease", .key = "e", .n = 1});
  const Decision after = Do(*owner_, Cmd::kAcquire, "lease", "e");
  ASSERT_NE(after.lease_serial, 0u);
  ASSERT_TRUE(Ship(2).value());
  EXPECT_EQ(Do(*owner_, Cmd::kQuery, "lease", "e").count, 1);
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "lease", "e").count, 1);
  const auto release = [](Engine& e, const Decision& l) {
    return e.Execute(Request{.cmd = Cmd::kRelease,
                             .biz = "lease",
                             .key = "e",
                             .lease = limit::LeaseIdText(l.lease_serial, l.lease_mac)});
  };
  EXPECT_FALSE(release(*replica_, before).released);
  EXPECT_TRUE(release(*replica_, after).released);
}

// After a ring change the old owner stays as successor, holding leases of
// its node's nonce, and the new owner grants one of its own node's before
// the handoff: the copy holds it as another lease (not as its own of the
// same serial), shows it without an id, and frees it on the owner's release.
TEST_F(LeaseReplicaTest, ACopyHoldsTheOtherSeriesLeasesBesideItsOwn) {
  const Decision own1 = Do(*replica_, Cmd::kAcquire, "lease", "g"), own2 = Do(*replica_, Cmd::kAcquire, "lease", "g");
  ASSERT_EQ(own1.lease_serial, 1u);
  back_.changes.clear();
  back_.keys.clear();
  const Decision gap = Do(*owner_, Cmd::kAcquire, "lease", "g");  // the owner's node: another nonce, serial 1
  ASSERT_EQ(gap.lease_serial, 1u);
  ASSERT_TRUE(Ship(1).value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "lease", "g").count, 3);  // not 2: serial 1 twice is two leases
  EXPECT_FALSE(Do(*replica_, Cmd::kAcquire, "lease", "g").allowed);
  auto view = replica_->Inspect("lease", "g");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  size_t other = 0;
  for (const LeaseView& l : view.value().leases) {
    if (!l.other_series) continue;
    ++other;
    EXPECT_TRUE(l.id.empty()) << l.id;  // no id of this node's names it
  }
  EXPECT_EQ(other, 1u);
  EXPECT_EQ(Lease(*replica_, Cmd::kRelease, "g", Id(gap)).status.code(), Status::Code::kConflict);
  // The owner's release frees its lease on the copy, not the copy's serial 1.
  ASSERT_TRUE(Lease(*owner_, Cmd::kRelease, "g", Id(gap)).released);
  ASSERT_TRUE(Ship(2).value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "lease", "g").count, 2);
  EXPECT_TRUE(Lease(*replica_, Cmd::kRelease, "g", Id(own1)).released);
  EXPECT_TRUE(Lease(*replica_, Cmd::kRelease, "g", Id(own2)).released);
}

// Found by an attack with the admin token: a set of 0, or a use, of a biz
// with a concurrency rule only, applied from a batch, left a node that
// never expired ("expires never": its rule untouched); a lease-grant whose
// until was 2^32-1 held a 60-s lease 18 h.
TEST_F(LeaseReplicaTest, ChangesThatHoldNothingLeaveNoNodeForGoodAndALeaseLastsItsLength) {
  Change set;
  set.kind = Change::Kind::kSet;
  set.biz_id = 5;
  set.key = "never1";
  set.n = 0;
  set.at_ms = clock_.NowMs();
  Change use = set;
  use.kind = Change::Kind::kAdd;
  use.key = "never2";
  use.n = 1;
  Change grant = Event(Change::Event::kLeaseGrant, 5, "far", 1);
  grant.until = 4294967295;
  grant.nonce = 7;
  std::vector<Change> batch = {set, use, grant};
  ASSERT_TRUE(replica_->ApplyChanges(batch, "attack", 1).value());
  const int64_t now_s = clock_.NowMs() / 1000;
  for (const char* key : {"never1", "never2"}) {
    auto view = replica_->Inspect("lease", key);
    if (!view.ok()) continue;  // not kept at all: as good
    EXPECT_NE(view->node.expire_s, 0u) << key << " never expires";
    EXPECT_LE(view->node.expire_s, static_cast<uint32_t>(now_s)) << key;
  }
  auto far = replica_->Inspect("lease", "far");
  ASSERT_TRUE(far.ok()) << far.status().ToString();
  ASSERT_EQ(far->leases.size(), 1u);
  EXPECT_LE(far->leases[0].expires_s, now_s + 61);
  EXPECT_LE(far->node.expire_s, static_cast<uint32_t>(now_s + 61));
}

TEST_F(LeaseReplicaTest, TheReplicaHoldsTheOwnersLeasesUnderTheirIds) {
  const Decision a1 = Do(*owner_, Cmd::kAcquire, "lease", "k"), a2 = Do(*owner_, Cmd::kAcquire, "lease", "k");
  ASSERT_NE(a1.lease_serial, 0u);
  ASSERT_NE(a2.lease_serial, 0u);
  // Each acquire sent its count's change and the lease's grant.
  ASSERT_EQ(rec_.changes.size(), 4u);
  EXPECT_EQ(rec_.changes[1].kind, Change::Kind::kEvent);
  EXPECT_EQ(rec_.changes[1].event, Change::Event::kLeaseGrant);
  EXPECT_EQ(rec_.changes[1].item, a1.lease_serial);
  EXPECT_EQ(rec_.changes[1].until, a1.lease_expires);
  EXPECT_NE(rec_.changes[1].nonce, 0u);
  ASSERT_TRUE(Ship(1).value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "lease", "k").count, 2);  // two leases, not four

  // The owner is gone: its ids work on the replica, a forged one does not.
  std::string forged = Id(a2);
  forged.back() = forged.back() == '0' ? '1' : '0';
  EXPECT_EQ(Lease(*replica_, Cmd::kRelease, "k", forged).status.code(), Status::Code::kConflict);
  const Decision r1 = Lease(*replica_, Cmd::kRelease, "k", Id(a1));
  ASSERT_TRUE(r1.ok()) << r1.status.ToString();
  EXPECT_TRUE(r1.released);
  EXPECT_EQ(Lease(*replica_, Cmd::kRelease, "k", Id(a1)).status.code(), Status::Code::kGone);
  clock_.Advance(5000);
  const Decision n2 = Lease(*replica_, Cmd::kRenew, "k", Id(a2));
  ASSERT_TRUE(n2.ok()) << n2.status.ToString();
  EXPECT_EQ(n2.lease_expires, a2.lease_expires + 5);
  // Up to max with the owner's lease counted: two more, then none.
  const Decision b1 = Do(*replica_, Cmd::kAcquire, "lease", "k");
  EXPECT_TRUE(Do(*replica_, Cmd::kAcquire, "lease", "k").allowed);
  EXPECT_FALSE(Do(*replica_, Cmd::kAcquire, "lease", "k").allowed);
  EXPECT_NE(b1.lease_serial, a1.lease_serial);  // a serial the owner used is never granted again
  EXPECT_NE(b1.lease_serial, a2.lease_serial);

  // Back to the owner: the same leases, the replica's release and renewal
  // done, and the replica's lease releases there.
  ASSERT_TRUE(ShipBack(1).value());
  EXPECT_EQ(Do(*owner_, Cmd::kQuery, "lease", "k").count, 3);
  EXPECT_EQ(Lease(*owner_, Cmd::kRelease, "k", Id(a1)).status.code(), Status::Code::kGone);
  EXPECT_EQ(Lease(*owner_, Cmd::kRenew, "k", Id(a2)).lease_expires, n2.lease_expires);
  EXPECT_TRUE(Lease(*owner_, Cmd::kRelease, "k", Id(b1)).released);
  ASSERT_TRUE(Ship(2).value());
  EXPECT_EQ(Lease(*replica_, Cmd::kRelease, "k", Id(b1)).status.code(), Status::Code::kGone);
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "lease", "k").count, 2);
}

// A release without an id (Envoy's negative hits) gives the same uses back
// on the other holder: the same first-expiring leases end, a rate rule's
// count is lowered the same, never below 0.
TEST_F(LeaseReplicaTest, AGiveBackLowersTheReplicasCountsAsTheOwners) {
  Do(*owner_, Cmd::kAcquire, "lease", "k");
  clock_.Advance(1000);
  const Decision second = Do(*owner_, Cmd::kAcquire, "lease", "k");
  clock_.Advance(1000);
  const Decision third = Do(*owner_, Cmd::kAcquire, "lease", "k");
  for (int i = 0; i < 4; ++i) Do(*owner_, Cmd::kAcquire, "fixed", "k");
  ASSERT_TRUE(Ship(1).value());
  const Decision g1 = owner_->Execute(Request{.cmd = Cmd::kRelease, .biz = "lease", .key = "k", .give_back = true});
  ASSERT_TRUE(g1.ok()) << g1.status.ToString();
  EXPECT_EQ(g1.given_back, 1);
  const Decision g2 =
      owner_->Execute(Request{.cmd = Cmd::kRelease, .biz = "fixed", .key = "k", .n = 9, .give_back = true});
  EXPECT_EQ(g2.given_back, 4);
  // The lease's give-back names the lease it ended, by serial: the copy
  // ends that one, not its own first-expiring.
  ASSERT_EQ(rec_.changes.size(), 3u);
  EXPECT_EQ(rec_.changes[0].event, Change::Event::kGiveBack);
  EXPECT_EQ(rec_.changes[0].item, 1u);
  EXPECT_EQ(rec_.changes[1].event, Change::Event::kLeaseRelease);
  EXPECT_EQ(rec_.changes[1].item, second.lease_serial - 1);
  EXPECT_EQ(rec_.changes[2].event, Change::Event::kGiveBack);
  ASSERT_TRUE(Ship(2).value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "lease", "k").count, 2);
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "fixed", "k").count, 0);
  // The leases left are the same two on both: the first granted ended.
  EXPECT_TRUE(Lease(*replica_, Cmd::kRelease, "k", Id(second)).released);
  EXPECT_TRUE(Lease(*replica_, Cmd::kRelease, "k", Id(third)).released);
}

TEST_F(LeaseReplicaTest, AnExpiryIsCountedByTheHolderThatFoundItOnly) {
  const Decision a = Do(*owner_, Cmd::kAcquire, "lease", "k");
  ASSERT_TRUE(Ship(1).value());
  clock_.Advance(62000);  // past its expiry (60 + 1 s)
  const Decision renew = Lease(*owner_, Cmd::kRenew, "k", Id(a));
  EXPECT_EQ(renew.status.code(), Status::Code::kGone);
  EXPECT_EQ(renew.leases_expired, 1);
  ASSERT_EQ(rec_.changes.size(), 1u);
  EXPECT_EQ(rec_.changes[0].event, Change::Event::kLeaseSweep);
  ASSERT_TRUE(Ship(2).value());
  // The replica's next write finds nothing expired left to count.
  const Decision b = Do(*replica_, Cmd::kAcquire, "lease", "k");
  EXPECT_TRUE(b.allowed);
  EXPECT_EQ(b.leases_expired, 0);
}

// A lease the replica granted while the owner was away, expired before the
// owner took it back (its catch-up): the owner's next write counts it, and
// the replica, which the owner's sweep reaches, does not count it again.
// Before, the owner dropped it on arrival and the replica dropped its own
// copy when the owner's next change came: counted on neither holder.
TEST_F(LeaseReplicaTest, ALeaseThatExpiredBeforeItReachedTheOtherHolderIsCountedOnce) {
  ASSERT_TRUE(Do(*replica_, Cmd::kAcquire, "lease", "away").allowed);
  ASSERT_TRUE(Do(*replica_, Cmd::kAcquire, "lease", "away").allowed);
  clock_.Advance(62000);  // both past their expiry on the replica, unswept
  ASSERT_TRUE(ShipBack(1).value());
  const Decision d = Do(*owner_, Cmd::kAcquire, "lease", "away");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.leases_expired, 2);
  ASSERT_TRUE(Ship(1).value());
  EXPECT_EQ(Do(*replica_, Cmd::kAcquire, "lease", "away").leases_expired, 0);
  EXPECT_EQ(Do(*owner_, Cmd::kAcquire, "lease", "away").leases_expired, 0);
}

// The replica renewed the owner's lease while the owner was away, and it
// expired there; the owner, back, applies the renewal late: its own copy
// of the lease, expired too, stays for its next write to count, once.
TEST_F(LeaseReplicaTest, ALeaseRenewedAwayAndExpiredIsCountedByTheNextWrite) {
  RenewAwayAndLetExpire("renewed");
  ASSERT_TRUE(ShipBack(1).value());
  EXPECT_EQ(Do(*owner_, Cmd::kAcquire, "lease", "renewed").leases_expired, 1);
  ASSERT_TRUE(Ship(2).value());
  EXPECT_EQ(Do(*replica_, Cmd::kAcquire, "lease", "renewed").leases_expired, 0);
}

// The other order: the owner swept the lease (and counted it) before the
// replica's renewal, made while the owner was away, reached it: the late
// renewal does not bring the lease back for the next write to count again.
TEST_F(LeaseReplicaTest, ARenewalThatArrivesAfterItsLeaseWasSweptIsNotCountedAgain) {
  RenewAwayAndLetExpire("late");
  EXPECT_EQ(Do(*owner_, Cmd::kAcquire, "lease", "late").leases_expired, 1);
  ASSERT_TRUE(ShipBack(1).value());
  EXPECT_EQ(Do(*owner_, Cmd::kAcquire, "lease", "late").leases_expired, 0);
}

// The owner's change reaches a copy that holds an expired lease the owner
// never had: the copy keeps it until its own write counts it.
TEST_F(LeaseReplicaTest, AnExpiredLeaseOnlyThisCopyHeldOutlivesTheOtherHoldersChanges) {
  ASSERT_TRUE(Do(*replica_, Cmd::kAcquire, "lease", "mine").allowed);
  back_.changes.clear();  // not sent: the replica's link is down
  back_.keys.clear();
  clock_.Advance(62000);
  ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, "lease", "mine").allowed);
  ASSERT_TRUE(Ship(1).value());
  EXPECT_EQ(Do(*replica_, Cmd::kAcquire, "lease", "mine").leases_expired, 1);
}

// A renewal made on one of the owner's workers can reach the copy before
// the grant another worker made: the copy holds the lease until the
// renewal's expiry, not the grant's (it freed it early, and after a
// failover granted its place to another client while the lease was held).
TEST_F(LeaseReplicaTest, ARenewalThatArrivesBeforeItsGrantKeepsItsExpiry) {
  const Decision a = Do(*owner_, Cmd::kAcquire, "lease", "r");
  ASSERT_TRUE(a.allowed);
  const Batch grant = TakeBatch();
  clock_.Advance(30000);
  const Decision n = Lease(*owner_, Cmd::kRenew, "r", Id(a));
  ASSERT_TRUE(n.ok()) << n.status.ToString();
  ASSERT_EQ(n.lease_expires, a.lease_expires + 30);
  const Batch renewal = TakeBatch();
  ASSERT_TRUE(Apply(renewal, "worker1", 1).value());
  ASSERT_TRUE(Apply(grant, "worker0", 1).value());
  clock_.Advance(40000);  // past the grant's expiry, before the renewal's
  auto view = replica_->Inspect("lease", "r");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_EQ(view.value().leases.size(), 1u);
  EXPECT_EQ(view.value().leases[0].expires_s, n.lease_expires);
  EXPECT_TRUE(Lease(*replica_, Cmd::kRelease, "r", Id(a)).released);
}

// An admin set that grants leases (here on a key neither holder has): the
// copy holds the owner's, under the owner's ids, where it granted its own
// of another nonce, which the owner's ids did not release.
// A set on a holder of a replicated route grants in its half: every other
// serial. The copy is sent those, not the ones in between (it was sent a
// run of consecutive serials: none when the first was not granted, a lease
// that did not exist otherwise; found by a review).
TEST_F(LeaseReplicaTest, ASetInAHalfSendsTheSerialsItGranted) {
  for (const SerialHalf half : {SerialHalf::kOdd, SerialHalf::kEven}) {
    const std::string key = half == SerialHalf::kOdd ? "odd" : "even";
    const auto set = [&](int64_t count) {
      return owner_->Execute(
          Request{.cmd = Cmd::kSet, .biz = "lease", .key = key, .count = count, .serial_half = half});
    };
    ASSERT_TRUE(set(1).ok());  // a new node
    ASSERT_TRUE(set(3).ok());  // two more, from a next serial of the other half
    ASSERT_TRUE(Ship(half == SerialHalf::kOdd ? 1 : 2).value());
    auto mine = owner_->Inspect("lease", key), copy = replica_->Inspect("lease", key);
    ASSERT_TRUE(mine.ok() && copy.ok());
    ASSERT_EQ(mine.value().leases.size(), 3u) << key;
    ASSERT_EQ(copy.value().leases.size(), 3u) << key;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(copy.value().leases[i].id, mine.value().leases[i].id) << key;
      EXPECT_EQ(mine.value().leases[i].serial % 2, half == SerialHalf::kOdd ? 1u : 0u) << key;
    }
  }
}

// Envoy's give-backs spread over both holders of a route, two at once: each
// ends its own half's lease first, so the two end two leases and the key
// holds none. Both ended the first to expire before, the same lease, and
// the key held one no client held until its expiry (found from outside:
// a pair locked at its limit within a second).
TEST_F(LeaseReplicaTest, TwoGiveBacksAtOnceOnTheTwoHoldersEndTwoLeases) {
  const auto acquire = [](Engine& e, SerialHalf half) {
    return e.Execute(Request{.cmd = Cmd::kAcquire, .biz = "lease", .key = "gb", .serial_half = half});
  };
  const auto give_back = [](Engine& e, SerialHalf half) {
    return e.Execute(
        Request{.cmd = Cmd::kRelease, .biz = "lease", .key = "gb", .n = 1, .give_back = true, .serial_half = half});
  };
  ASSERT_TRUE(acquire(*owner_, SerialHalf::kOdd).allowed);
  ASSERT_TRUE(Ship(1).value());
  ASSERT_TRUE(acquire(*replica_, SerialHalf::kEven).allowed);  // expires last
  ASSERT_TRUE(ShipBack(1).value());
  ASSERT_EQ(Do(*owner_, Cmd::kQuery, "lease", "gb").count, 2);
  ASSERT_EQ(give_back(*owner_, SerialHalf::kOdd).given_back, 1);
  ASSERT_EQ(give_back(*replica_, SerialHalf::kEven).given_back, 1);
  ASSERT_TRUE(Ship(2).value());
  ASSERT_TRUE(ShipBack(2).value());
  EXPECT_EQ(Do(*owner_, Cmd::kQuery, "lease", "gb").count, 0);
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "lease", "gb").count, 0);
  // A holder holding only the other's: it ends the other's last to expire.
  ASSERT_TRUE(acquire(*replica_, SerialHalf::kEven).allowed);
  clock_.Advance(1000);
  const Decision later = acquire(*replica_, SerialHalf::kEven);
  ASSERT_TRUE(ShipBack(3).value());
  ASSERT_EQ(give_back(*owner_, SerialHalf::kOdd).given_back, 1);
  auto held = owner_->Inspect("lease", "gb");
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held.value().leases.size(), 1u);
  EXPECT_NE(held.value().leases[0].serial, later.lease_serial);
}

TEST_F(LeaseReplicaTest, ASetsLeasesAreTheOwnersOnTheCopy) {
  const Decision set = owner_->Execute(Request{.cmd = Cmd::kSet, .biz = "lease", .key = "s", .count = 2});
  ASSERT_TRUE(set.ok()) << set.status.ToString();
  ASSERT_TRUE(Ship(1).value());
  auto mine = owner_->Inspect("lease", "s"), copy = replica_->Inspect("lease", "s");
  ASSERT_TRUE(mine.ok() && copy.ok());
  ASSERT_EQ(mine.value().leases.size(), 2u);
  ASSERT_EQ(copy.value().leases.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(copy.value().leases[i].id, mine.value().leases[i].id);
    EXPECT_EQ(copy.value().leases[i].expires_s, mine.value().leases[i].expires_s);
  }
  // The owner's id releases on the copy; a release on the owner frees the
  // copy's too; a set to fewer keeps the same one on both.
  EXPECT_TRUE(Lease(*replica_, Cmd::kRelease, "s", mine.value().leases[0].id).released);
  EXPECT_TRUE(Lease(*owner_, Cmd::kRelease, "s", mine.value().leases[0].id).released);
  ASSERT_TRUE(owner_->Execute(Request{.cmd = Cmd::kSet, .biz = "lease", .key = "s", .count = 3}).ok());
  ASSERT_TRUE(Ship(2).value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "lease", "s").count, 3);
  mine = owner_->Inspect("lease", "s");
  copy = replica_->Inspect("lease", "s");
  ASSERT_TRUE(mine.ok() && copy.ok());
  ASSERT_EQ(copy.value().leases.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(copy.value().leases[i].id, mine.value().leases[i].id);
  ASSERT_TRUE(owner_->Execute(Request{.cmd = Cmd::kSet, .biz = "lease", .key = "s", .count = 1}).ok());
  ASSERT_TRUE(Ship(3).value());
  mine = owner_->Inspect("lease", "s");
  copy = replica_->Inspect("lease", "s");
  ASSERT_TRUE(mine.ok() && copy.ok());
  ASSERT_EQ(copy.value().leases.size(), 1u);
  EXPECT_EQ(copy.value().leases[0].id, mine.value().leases[0].id);
}

// An admin set and a give-back end leases by serial on the copy, the ones
// the owner ended. A set to 0, then a grant another of the owner's workers
// made, whose event reaches the copy first: the copy ended that grant too
// (it kept "the latest 0"), and after a failover granted its place again.
TEST_F(LeaseReplicaTest, ASetOvertakenByALaterGrantEndsTheSameLeasesOnTheCopy) {
  const Decision first = Do(*owner_, Cmd::kAcquire, "lease", "s");
  ASSERT_TRUE(first.allowed);
  ASSERT_TRUE(Ship(1).value());
  clock_.Advance(1000);
  const Decision set = owner_->Execute(Request{.cmd = Cmd::kSet, .biz = "lease", .key = "s", .count = 0});
  ASSERT_TRUE(set.ok()) << set.status.ToString();
  ASSERT_EQ(set.leases_ended_n, 1u);
  EXPECT_EQ(set.leases_ended[0], first.lease_serial);
  const Batch ending = TakeBatch();
  clock_.Advance(1000);
  const Decision later = Do(*owner_, Cmd::kAcquire, "lease", "s");
  ASSERT_TRUE(later.allowed);
  const Batch grant = TakeBatch();
  ASSERT_TRUE(Apply(grant, "worker1", 1).value());
  ASSERT_TRUE(Apply(ending, "worker0", 1).value());
  auto copy = replica_->Inspect("lease", "s");
  ASSERT_TRUE(copy.ok());
  ASSERT_EQ(copy.value().leases.size(), 1u);
  EXPECT_EQ(Lease(*replica_, Cmd::kRelease, "s", Id(first)).status.code(), Status::Code::kGone);
  EXPECT_TRUE(Lease(*replica_, Cmd::kRelease, "s", Id(later)).released);
}

// A max lowered on the owner first ends the leases past its places at the
// key's next touch (their holders are told 410); the copy, whose map still
// has the old max, ends the same ones. It kept them till their expiry, and
// a failover then refused the key with no place held (found from outside).
TEST_F(LeaseReplicaTest, ALeaseALoweredMaxEndedOnTheOwnerEndsOnTheCopy) {
  Decision held[3];
  for (Decision& d : held) {
    d = Do(*owner_, Cmd::kAcquire, "lease", "m");
    ASSERT_TRUE(d.allowed);
    clock_.Advance(1000);
  }
  ASSERT_TRUE(Ship(1).value());
  std::string lowered = kMap;
  const std::string was = R"(lease="60" max="3")";
  lowered.replace(lowered.find(was), was.size(), R"(lease="60" max="2")");
  ASSERT_TRUE(owner_->ReloadText(lowered, dir_ / "map.xml").ok());
  const Decision touch = Do(*owner_, Cmd::kAcquire, "lease", "m");
  EXPECT_FALSE(touch.allowed);
  ASSERT_EQ(touch.leases_ended_n, 1u);
  EXPECT_EQ(touch.leases_ended[0], held[0].lease_serial) << "the one that ends first";
  ASSERT_TRUE(Ship(2).value());
  auto copy = replica_->Inspect("lease", "m");
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(copy.value().leases.size(), 2u);
  EXPECT_EQ(Lease(*replica_, Cmd::kRelease, "m", Id(held[0])).status.code(), Status::Code::kGone);
  EXPECT_EQ(Lease(*owner_, Cmd::kRelease, "m", Id(held[0])).status.code(), Status::Code::kGone);
  EXPECT_TRUE(Lease(*replica_, Cmd::kRelease, "m", Id(held[1])).released);
  EXPECT_TRUE(Lease(*replica_, Cmd::kRelease, "m", Id(held[2])).released);
}

// A give-back ends the owner's first-expiring lease: one renewed on another
// worker, whose renewal has not reached the copy, is not it. The copy ends
// the lease the owner ended (it ended the renewed one, which the owner's
// client still held, and the renewal then brought it back beside the
// other: 2 held where the owner held 1).
TEST_F(LeaseReplicaTest, AGiveBackEndsTheLeaseTheOwnerEndedWhateverTheCopysExpiries) {
  const Decision a = Do(*owner_, Cmd::kAcquire, "lease", "g");
  clock_.Advance(1000);
  const Decision b = Do(*owner_, Cmd::kAcquire, "lease", "g");
  ASSERT_TRUE(Ship(1).value());
  clock_.Advance(5000);
  ASSERT_TRUE(Lease(*owner_, Cmd::kRenew, "g", Id(a)).ok());  // a now expires after b
  const Batch renewal = TakeBatch();
  const Decision g = owner_->Execute(Request{.cmd = Cmd::kRelease, .biz = "lease", .key = "g", .give_back = true});
  ASSERT_EQ(g.given_back, 1);
  ASSERT_EQ(g.leases_ended_n, 1u);
  EXPECT_EQ(g.leases_ended[0], b.lease_serial);
  const Batch give_back = TakeBatch();
  ASSERT_TRUE(Apply(give_back, "worker0", 1).value());
  EXPECT_EQ(Lease(*replica_, Cmd::kRelease, "g", Id(b)).status.code(), Status::Code::kGone);
  ASSERT_TRUE(Apply(renewal, "worker1", 1).value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "lease", "g").count, 1);
  EXPECT_EQ(Do(*owner_, Cmd::kQuery, "lease", "g").count, 1);
  EXPECT_TRUE(Lease(*replica_, Cmd::kRelease, "g", Id(a)).released);
}

// An earlier sender's give-back names no lease (item 0): the copy ends its
// own first-expiring leases, as it did.
TEST_F(LeaseReplicaTest, AnEarlierSendersGiveBackEndsTheCopysFirstExpiringLeases) {
  Do(*owner_, Cmd::kAcquire, "lease", "k");
  clock_.Advance(1000);
  const Decision second = Do(*owner_, Cmd::kAcquire, "lease", "k");
  ASSERT_TRUE(Ship(1).value());
  Change c = Event(Change::Event::kGiveBack, 5, "k", 0);
  c.n = 1;
  ASSERT_TRUE(replica_->ApplyChanges(std::span<const Change>(&c, 1), "s1", 2).value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "lease", "k").count, 1);
  EXPECT_TRUE(Lease(*replica_, Cmd::kRelease, "k", Id(second)).released);
}

// What a replica link asks of a grant it kept while the other holder was
// away (AdminEngine::LeaseEnded): a lease held is not ended; released, or
// past its expiry, it is; a key without a node only once the expiry the
// grant said has passed (handed off or evicted, it may be held elsewhere);
// a serial of another lease of the key, or another biz, is not asked about.
TEST_F(LeaseReplicaTest, ALeaseEndedOnlyWhenItSurelyIsNoMoreHeldHere) {
  const Decision a = Do(*owner_, Cmd::kAcquire, "lease", "e");
  const Decision b = Do(*owner_, Cmd::kAcquire, "lease", "e");
  ASSERT_TRUE(a.allowed && b.allowed);
  EXPECT_FALSE(owner_->LeaseEnded(5, "e", a.lease_serial, a.lease_expires));
  ASSERT_TRUE(Lease(*owner_, Cmd::kRelease, "e", Id(a)).released);
  EXPECT_TRUE(owner_->LeaseEnded(5, "e", a.lease_serial, a.lease_expires));
  EXPECT_FALSE(owner_->LeaseEnded(5, "e", b.lease_serial, b.lease_expires));
  EXPECT_FALSE(owner_->LeaseEnded(1, "e", b.lease_serial, b.lease_expires));  // no concurrency rule: not told
  EXPECT_FALSE(owner_->LeaseEnded(5, "absent", 1, clock_.NowMs() / 1000 + 30));
  EXPECT_TRUE(owner_->LeaseEnded(5, "absent", 1, clock_.NowMs() / 1000));
  clock_.Advance(62000);  // past b's expiry (60 + 1 s)
  EXPECT_TRUE(owner_->LeaseEnded(5, "e", b.lease_serial, b.lease_expires));
}

TEST_F(LeaseReplicaTest, AReleaseOfANodeTheReplicaLacksMakesNone) {
  Change c = Event(Change::Event::kLeaseRelease, 5, "absent", 1);
  ASSERT_TRUE(replica_->ApplyChanges(std::span<const Change>(&c, 1), "s1", 1).value());
  EXPECT_FALSE(Do(*replica_, Cmd::kGet, "lease", "absent").found);
  c.event = Change::Event::kNone;
  EXPECT_FALSE(replica_->ApplyChanges(std::span<const Change>(&c, 1), "s1", 2).ok());
}

// Both holders grant on one key at once (two proxies that disagree), each
// before the other's copy arrives: the owner's grant draws an odd serial,
// the successor's an even one (the server sets each request's half by the
// route), so each copy holds both leases, and each client's release frees
// its own alone. From one sequence, both drew serial 2: each copy took the
// other's grant for its own lease 2, held one lease for two clients, and
// the first release freed the place of both (found from outside: 11 held at
// once on a max of 3).
TEST_F(LeaseReplicaTest, TwoHoldersGrantingAtOnceHoldTwoLeasesAndFreeEachAlone) {
  const auto acquire = [](Engine& e, SerialHalf half) {
    return e.Execute(Request{.cmd = Cmd::kAcquire, .biz = "lease", .key = "both", .serial_half = half});
  };
  const Decision first = acquire(*owner_, SerialHalf::kOdd);
  ASSERT_TRUE(Ship(1).value());
  const Decision on_owner = acquire(*owner_, SerialHalf::kOdd);
  const Decision on_successor = acquire(*replica_, SerialHalf::kEven);
  ASSERT_TRUE(on_owner.allowed && on_successor.allowed);
  EXPECT_EQ(first.lease_serial % 2, 1u);
  EXPECT_EQ(on_owner.lease_serial % 2, 1u);
  EXPECT_EQ(on_successor.lease_serial % 2, 0u);
  ASSERT_TRUE(Ship(2).value());
  ASSERT_TRUE(ShipBack(1).value());
  EXPECT_EQ(Do(*owner_, Cmd::kQuery, "lease", "both").count, 3);
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "lease", "both").count, 3);
  EXPECT_FALSE(acquire(*owner_, SerialHalf::kOdd).allowed);
  // The owner's client releases: the successor's client's lease is held on both.
  ASSERT_TRUE(Lease(*owner_, Cmd::kRelease, "both", Id(on_owner)).released);
  ASSERT_TRUE(Ship(3).value());
  EXPECT_EQ(Do(*owner_, Cmd::kQuery, "lease", "both").count, 2);
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "lease", "both").count, 2);
  EXPECT_TRUE(Lease(*owner_, Cmd::kRenew, "both", Id(on_successor)).ok());
  EXPECT_TRUE(Lease(*replica_, Cmd::kRelease, "both", Id(on_successor)).released);
  EXPECT_TRUE(Lease(*replica_, Cmd::kRelease, "both", Id(first)).released);
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "lease", "both").count, 0);
}

// Reservations replicate as leases do: the replica holds the owner's under
// the same ids, settles one once, and a settle on either side moves the
// other's counts the same (docs/cluster.md, "Leases on replicas").
class ReservationReplicaTest : public LeaseReplicaTest {
 protected:
  static Decision Reserve(Engine& e, std::string_view key, int64_t n, int64_t s = 60) {
    return e.Execute(Request{.cmd = Cmd::kAcquire, .biz = "tokens", .key = key, .n = n, .reserve = s});
  }
  static Decision Settle(Engine& e, std::string_view key, const Decision& taken, int64_t real) {
    const std::string id = limit::LeaseIdText(taken.res_serial, taken.res_mac);
    return e.Execute(Request{.cmd = Cmd::kSettle, .biz = "tokens", .key = key, .n = real, .reservation = id});
  }
  static int64_t Count(Engine& e, std::string_view key) { return Do(e, Cmd::kQuery, "tokens", key).count; }
  // A reservation of `key` taken (estimate n) and settled at `real` on the
  // owner, the take's changes and the settle's kept apart: each ships on a
  // link of its own.
  struct TakenAndSettled {
    Decision taken;
    Batch take, settle;
  };
  TakenAndSettled TakeThenSettle(std::string_view key, int64_t n, int64_t real) {
    TakenAndSettled out;
    out.taken = Reserve(*owner_, key, n);
    EXPECT_NE(out.taken.res_serial, 0u);
    out.take = TakeBatch();
    EXPECT_TRUE(Settle(*owner_, key, out.taken, real).settled);
    out.settle = TakeBatch();
    return out;
  }

  // ASnapshotsReservationsAreSeenFromTheReceiversSide, below.
  void ExpectASentTableReadFromTheReceiversSide(bool snapshot) {
    const auto reserve = [](Engine& e, SerialHalf half) {
      return e.Execute(
          Request{.cmd = Cmd::kAcquire, .biz = "tokens", .key = "snap", .n = 1, .reserve = 60, .serial_half = half});
    };
    const Decision owners_first = reserve(*owner_, SerialHalf::kOdd);
    ASSERT_TRUE(Ship(1).value());
    clock_.Advance(1000);
    const Decision successors = reserve(*replica_, SerialHalf::kEven);  // expires before all that follow
    ASSERT_TRUE(owners_first.allowed && successors.allowed);
    ASSERT_TRUE(ShipBack(1).value());
    clock_.Advance(1000);
    std::string line;
    ASSERT_TRUE(owner_store_
                    ->ForEach(
                        {},
                        [&](const NodeInfo& node) {
      if (node.key != "snap") return;
      auto exported = owner_->ExportNode(node);
      ASSERT_TRUE(exported.ok()) << exported.status().ToString();
      line = exported.value();
                        })
                    .ok());
    ASSERT_FALSE(line.empty());
    const std::string_view lines[] = {line};
    std::unique_ptr<Store> fresh_store;
    std::unique_ptr<AdminEngine> fresh;
    AdminEngine* receiver = replica_.get();
    if (snapshot) {
      // The successor's store is lost; it comes back on a new one.
      fresh_store = OpenStore("fresh");
      fresh = OpenEngine(fresh_store.get(), "fresh", dir_ / "cluster.key");
      receiver = fresh.get();
      std::vector<AdminEngine::LeftOutNode> left_out;
      auto merged = receiver->MergeKnownNodes(lines, "snapshot-1", &left_out);
      ASSERT_TRUE(merged.ok() && merged.value()) << merged.status().ToString();
      ASSERT_TRUE(left_out.empty());
    } else {
      auto replaced = receiver->ReplaceNodes(lines, "copy-1");
      ASSERT_TRUE(replaced.ok() && replaced.value()) << replaced.status().ToString();
    }
    // Its table filled (the bound is 8): five more of the owner's, one more
    // of its own taken meanwhile.
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(reserve(*owner_, SerialHalf::kOdd).allowed);
    ASSERT_TRUE(reserve(*receiver, SerialHalf::kEven).allowed);
    clock_.Advance(1000);
    ASSERT_TRUE(reserve(*owner_, SerialHalf::kOdd).allowed);  // the owner's eighth: its table is full
    std::vector<Change> changes = rec_.Take();
    ASSERT_TRUE(receiver->ApplyChanges(changes, "s1", 2).ok());
    // Full here: one of the owner's goes (its first, expiring first), never
    // the successor's own.
    EXPECT_TRUE(Settle(*receiver, "snap", successors, 1).settled);
    EXPECT_EQ(Settle(*receiver, "snap", owners_first, 1).status.code(), Status::Code::kGone);
  }
};

// The copy's table grows as the owner's did: three reservations taken on a
// key and shipped in one batch are all held there, and each settles there
// after a failover.
TEST_F(ReservationReplicaTest, ABatchOfTakesGrowsTheCopysTableForEveryOne) {
  Decision r[3];
  for (Decision& d : r) {
    d = Reserve(*owner_, "three", 10);
    ASSERT_NE(d.res_serial, 0u);
  }
  ASSERT_TRUE(Ship(1).value());
  EXPECT_EQ(Count(*replica_, "three"), 30);
  auto v = replica_->Inspect("tokens", "three");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.value().reservations.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Settle(*replica_, "three", r[i], i).res_returned, 10 - i);
  EXPECT_EQ(Count(*replica_, "three"), 0 + 1 + 2);
}

// A settle kept ahead of its take holds its entry while the copy's table
// can still grow: another take that comes before that take grows the table
// instead of pushing the settle out (before, it did, and the copy held the
// settled reservation at its estimate until its expiry).
TEST_F(ReservationReplicaTest, ASettleKeptAheadKeepsItsEntryWhileTheTableCanGrow) {
  const Decision r1 = Reserve(*owner_, "sa", 10);
  Batch t1 = TakeBatch();
  const Decision r2 = Reserve(*owner_, "sa", 10);
  Batch t2 = TakeBatch();
  ASSERT_TRUE(Settle(*owner_, "sa", r1, 3).settled);
  Batch s1 = TakeBatch();
  ASSERT_TRUE(Apply(s1, "w1", 1).value());
  ASSERT_TRUE(Apply(t2, "w1", 2).value());
  ASSERT_TRUE(Apply(t1, "w0", 1).value());
  EXPECT_EQ(Count(*owner_, "sa"), 13);
  EXPECT_EQ(Count(*replica_, "sa"), 13);
  auto v = replica_->Inspect("tokens", "sa");
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v.value().reservations.size(), 1u);
  EXPECT_EQ(v.value().reservations[0].serial, r2.res_serial);
  EXPECT_EQ(Settle(*replica_, "sa", r1, 3).status.code(), Status::Code::kGone);
  EXPECT_EQ(testing::NodeStateBytes(*owner_store_, "sa"), 16 + limit::Reservations::Bytes(2));
  EXPECT_EQ(testing::NodeStateBytes(*replica_store_, "sa"), testing::NodeStateBytes(*owner_store_, "sa"));
}

// Takes settled in the batch that carries them hold an entry only until
// their settle: the copy's table stays the owner's size (one entry), not one
// entry per event.
TEST_F(ReservationReplicaTest, TakesAndSettlesInOneBatchKeepTheCopysTableSmall) {
  for (int i = 0; i < 8; ++i) {
    const Decision r = Reserve(*owner_, "pairs", 10);
    ASSERT_TRUE(Settle(*owner_, "pairs", r, 2).settled);
  }
  ASSERT_TRUE(Ship(1).value());
  EXPECT_EQ(Count(*replica_, "pairs"), 16);
  EXPECT_EQ(testing::NodeStateBytes(*owner_store_, "pairs"), 16 + limit::Reservations::Bytes(1));
  EXPECT_EQ(testing::NodeStateBytes(*replica_store_, "pairs"), testing::NodeStateBytes(*owner_store_, "pairs"));
}

// A settle kept ahead and its take: the take uses the settle's entry, so
// the copy's table stays the owner's size. The same for reservations that
// expire and are swept by the owner's next acquire, one batch each.
TEST_F(ReservationReplicaTest, ASettleAheadOrASweepLeavesTheCopysTableTheOwnersSize) {
  const TakenAndSettled r1 = TakeThenSettle("sa1", 10, 3);
  ASSERT_TRUE(Apply(r1.settle, "w1", 1).value());
  ASSERT_TRUE(Apply(r1.take, "w0", 1).value());
  EXPECT_EQ(Count(*replica_, "sa1"), 3);
  EXPECT_EQ(testing::NodeStateBytes(*owner_store_, "sa1"), 16 + limit::Reservations::Bytes(1));
  EXPECT_EQ(testing::NodeStateBytes(*replica_store_, "sa1"), testing::NodeStateBytes(*owner_store_, "sa1"));
  uint64_t seq = 1;
  for (int i = 0; i < 4; ++i) {
    ASSERT_NE(Reserve(*owner_, "sw", 10, 1).res_serial, 0u);
    ASSERT_TRUE(Ship(++seq).value());
    clock_.Advance(3000);
  }
  EXPECT_EQ(testing::NodeStateBytes(*owner_store_, "sw"), 16 + limit::Reservations::Bytes(1));
  EXPECT_EQ(testing::NodeStateBytes(*replica_store_, "sw"), testing::NodeStateBytes(*owner_store_, "sw"));
}

// A copy that serves (the owner away) with a settle kept ahead of its take
// grows its table for its own reservation instead of reusing the settle's
// entry: the take that comes later is settled as the owner settled it.
TEST_F(ReservationReplicaTest, ACopyServingKeepsASettleAheadWhenItReserves) {
  const TakenAndSettled r1 = TakeThenSettle("fo", 10, 3);
  ASSERT_TRUE(Apply(r1.settle, "w1", 1).value());
  const Decision mine = Reserve(*replica_, "fo", 5);
  ASSERT_TRUE(mine.allowed);
  ASSERT_NE(mine.res_serial, 0u);
  ASSERT_TRUE(Apply(r1.take, "w0", 1).value());
  EXPECT_EQ(Count(*owner_, "fo"), 3);
  EXPECT_EQ(Count(*replica_, "fo"), 3 + 5);
}

// Reservations taken on both holders of a key at once: two reservations
// under two ids on both copies, each settled once, and both holders count
// the same. From one sequence both were one serial: each copy took the
// other's take for its own, the first settle ended both, and the second
// client's settle answered 410 (found from outside; the holders then stayed
// 76 apart until the window ended). Two tables made at the same instant
// each kept the other's nonce, and no id verified on the holder that
// answered it.
TEST_F(ReservationReplicaTest, TwoHoldersReservingAtOnceSettleEachOnce) {
  const auto reserve = [](Engine& e, int64_t n, SerialHalf half) {
    return e.Execute(
        Request{.cmd = Cmd::kAcquire, .biz = "tokens", .key = "both", .n = n, .reserve = 60, .serial_half = half});
  };
  const Decision on_owner = reserve(*owner_, 10, SerialHalf::kOdd);
  const Decision on_successor = reserve(*replica_, 20, SerialHalf::kEven);
  ASSERT_TRUE(on_owner.allowed && on_successor.allowed);
  ASSERT_NE(on_owner.res_serial, on_successor.res_serial);
  ASSERT_TRUE(Ship(1).value());
  ASSERT_TRUE(ShipBack(1).value());
  EXPECT_EQ(Count(*owner_, "both"), 30);
  EXPECT_EQ(Count(*replica_, "both"), 30);
  ASSERT_TRUE(Settle(*owner_, "both", on_owner, 4).settled);
  ASSERT_TRUE(Settle(*replica_, "both", on_successor, 25).settled);
  ASSERT_TRUE(Ship(2).value());
  ASSERT_TRUE(ShipBack(2).value());
  EXPECT_EQ(Count(*owner_, "both"), 4 + 25);
  EXPECT_EQ(Count(*replica_, "both"), 4 + 25);
  // The two tables were made at the same instant, each under a nonce of its
  // own, which each keeps: an id verifies on the holder that took it only.
  EXPECT_EQ(Settle(*replica_, "both", on_owner, 4).status.code(), Status::Code::kConflict);

  // A key whose table both hold already (one nonce): each id settles on
  // either holder, once.
  const Decision shared = reserve(*owner_, 1, SerialHalf::kOdd);
  ASSERT_TRUE(Ship(3).value());
  const Decision a = reserve(*owner_, 10, SerialHalf::kOdd), b = reserve(*replica_, 20, SerialHalf::kEven);
  ASSERT_TRUE(a.allowed && b.allowed);
  ASSERT_NE(a.res_serial, b.res_serial);
  ASSERT_TRUE(Ship(4).value());
  ASSERT_TRUE(ShipBack(3).value());
  ASSERT_TRUE(Settle(*replica_, "both", a, 2).settled);  // the owner's, on the successor
  ASSERT_TRUE(Settle(*owner_, "both", b, 7).settled);    // the successor's, on the owner
  ASSERT_TRUE(Settle(*owner_, "both", shared, 1).settled);
  ASSERT_TRUE(Ship(5).value());
  ASSERT_TRUE(ShipBack(4).value());
  EXPECT_EQ(Count(*owner_, "both"), 4 + 25 + 1 + 2 + 7);
  EXPECT_EQ(Count(*replica_, "both"), 4 + 25 + 1 + 2 + 7);
  EXPECT_EQ(Settle(*owner_, "both", a, 2).status.code(), Status::Code::kGone);
  EXPECT_EQ(Settle(*replica_, "both", b, 7).status.code(), Status::Code::kGone);
}

// Two tables made at once (two nonces): once the copy holds none of its
// own, it takes the sender's nonce at the sender's next take, though it
// still holds the sender's earlier ones; counted as its own, a busy key's
// tables never came to one nonce, and the owner's ids answered 409 on the
// successor after a failover (found by a review).
TEST_F(ReservationReplicaTest, ACopyHoldingOnlyTheSendersTakesItsNonce) {
  const auto reserve = [](Engine& e, int64_t n, SerialHalf half) {
    return e.Execute(
        Request{.cmd = Cmd::kAcquire, .biz = "tokens", .key = "apart", .n = n, .reserve = 60, .serial_half = half});
  };
  const Decision first = reserve(*owner_, 10, SerialHalf::kOdd);
  const Decision mine = reserve(*replica_, 10, SerialHalf::kEven);  // made at once: another nonce
  ASSERT_TRUE(first.allowed && mine.allowed);
  ASSERT_TRUE(Ship(1).value());  // the owner's first, held on the copy beside its own: its nonce kept
  ASSERT_TRUE(Settle(*replica_, "apart", mine, 10).settled);  // the copy's own, gone
  const Decision next = reserve(*owner_, 10, SerialHalf::kOdd);
  ASSERT_TRUE(Ship(2).value());
  EXPECT_TRUE(Settle(*replica_, "apart", next, 5).settled);  // a failover: the owner's id verifies
  EXPECT_TRUE(Settle(*replica_, "apart", first, 5).settled);
}

// A table the owner sent whole, read by its successor: the reservation
// the successor took itself before (the owner holds it adopted) is its own,
// the owner's are adopted. Taken as sent, the marks said the opposite: a
// full table then left out the successor's own reservation for one of the
// owner's, and its client's settle there answered 410 (found by a review).
// `snapshot`: the successor back on a new store merges the owner's node as
// its snapshot does (by biz id); else the owner's handoff copy replaces the
// successor's node (replace="1", when replicas are switched on).
TEST_F(ReservationReplicaTest, ASnapshotsReservationsAreSeenFromTheReceiversSide) {
  ExpectASentTableReadFromTheReceiversSide(/*snapshot=*/true);
}

TEST_F(ReservationReplicaTest, AReplacedNodesReservationsAreSeenFromTheReceiversSide) {
  ExpectASentTableReadFromTheReceiversSide(/*snapshot=*/false);
}

// The sender's clock 5 s ahead: a change is moved back by as many seconds
// as it is ahead when it arrives, so a settle applied at once and a take
// that comes 4 s later carry expiries seconds apart. The settle kept ahead
// is its take's by the table's nonce all the same (by the expiry, within
// 2 s, it was lost: the copy held the reservation at its estimate, and the
// overrun the owner charged was granted again after a failover).
TEST_F(ReservationReplicaTest, ASettleKeptAheadFindsItsTakeWhenTheSendersClockIsAhead) {
  const Decision r = Reserve(*owner_, "sk", 10);
  ASSERT_NE(r.res_serial, 0u);
  Batch take = TakeBatch();
  clock_.Advance(1000);
  ASSERT_TRUE(Settle(*owner_, "sk", r, 25).settled);
  Batch settle = TakeBatch();
  for (Batch* b : {&take, &settle})
    for (Change& c : b->changes) {
      c.at_ms += 5000;
      if (c.until > 0) c.until += 5;
    }
  ASSERT_TRUE(Apply(settle, "worker1", 1).value());
  clock_.Advance(4000);
  ASSERT_TRUE(Apply(take, "worker0", 1).value());
  EXPECT_EQ(Count(*owner_, "sk"), 25);
  EXPECT_EQ(Count(*replica_, "sk"), 25);
  auto v = replica_->Inspect("tokens", "sk");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v.value().reservations.empty());
  EXPECT_EQ(Settle(*replica_, "sk", r, 10).status.code(), Status::Code::kGone);
}

// Engine::ExecuteInto writes a worker's one Decision in place, request
// after request: nothing of a set's ended leases or a reservation's id may
// stay in the next answer. The same query, in place after both and into a
// fresh Decision, answers alike in every field.
TEST_F(ReservationReplicaTest, ADecisionWrittenInPlaceKeepsNothingOfTheLastRequest) {
  Do(*owner_, Cmd::kAcquire, "lease", "d");
  Do(*owner_, Cmd::kAcquire, "lease", "d");
  Decision d;
  owner_->ExecuteInto(Request{.cmd = Cmd::kSet, .biz = "lease", .key = "d", .count = 0}, &d);
  ASSERT_TRUE(d.ok()) << d.status.ToString();
  ASSERT_EQ(d.leases_ended_n, 2u);
  ASSERT_NE(d.lease_nonce, 0u);
  owner_->ExecuteInto(Request{.cmd = Cmd::kAcquire, .biz = "tokens", .key = "d", .n = 10, .reserve = 60}, &d);
  ASSERT_NE(d.res_serial, 0u);
  const Request q{.cmd = Cmd::kQuery, .biz = "fixed", .key = "d"};
  owner_->ExecuteInto(q, &d);
  const Decision fresh = owner_->Execute(q);
  EXPECT_EQ(d.status.code(), fresh.status.code());
  EXPECT_EQ(d.allowed, fresh.allowed);
  EXPECT_EQ(d.count, fresh.count);
  EXPECT_EQ(d.limit, fresh.limit);
  EXPECT_EQ(d.nrules, fresh.nrules);
  EXPECT_EQ(d.leases_ended_n, 0u);
  EXPECT_EQ(d.lease_nonce, fresh.lease_nonce);
  EXPECT_EQ(d.lease_serial, 0u);
  EXPECT_EQ(d.lease_mac, 0u);
  EXPECT_EQ(d.lease_expires, fresh.lease_expires);
  EXPECT_EQ(d.set_leases, 0u);
  EXPECT_EQ(d.set_lease_first, 0u);
  EXPECT_EQ(d.given_back, 0);
  EXPECT_FALSE(d.released);
  EXPECT_EQ(d.res_serial, 0u);
  EXPECT_EQ(d.res_mac, 0u);
  EXPECT_EQ(d.res_nonce, fresh.res_nonce);
  EXPECT_EQ(d.res_expires, fresh.res_expires);
  EXPECT_FALSE(d.settled);
  EXPECT_FALSE(d.reservations_full);
}

// A key rotation's middle (<cluster lease_key_also>): the copy keyed by the
// new key with the old one beside it releases, renews and settles the ids
// the owner made under the old key, and says both checks; keyed by the new
// key alone, it refuses them (409), as two shards of two keys did.
TEST_F(ReservationReplicaTest, ARotationsSecondKeyVerifiesTheIdsOfTheOther) {
  const std::string old_key = dir_ / "cluster.key", new_key = dir_ / "new.key";
  std::ofstream(new_key, std::ios::binary) << "fedcba9876543210";
  std::filesystem::permissions(new_key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const Decision lease = Do(*owner_, Cmd::kAcquire, "lease", "rot");
  const Decision renewed = Do(*owner_, Cmd::kAcquire, "lease", "rot");
  const Decision r = Reserve(*owner_, "rot", 10);
  ASSERT_TRUE(lease.allowed && renewed.allowed && r.res_serial != 0);
  ASSERT_TRUE(Ship(1).value());
  replica_.reset();
  replica_ = OpenEngine(replica_store_.get(), "replica", new_key);
  EXPECT_EQ(Lease(*replica_, Cmd::kRelease, "rot", Id(lease)).status.code(), Status::Code::kConflict);
  EXPECT_EQ(Settle(*replica_, "rot", r, 4).status.code(), Status::Code::kConflict);
  replica_.reset();
  replica_ = OpenEngine(replica_store_.get(), "replica", new_key, old_key);
  EXPECT_NE(replica_->LeaseKeyAlsoCheck(), 0u);
  EXPECT_EQ(replica_->LeaseKeyAlsoCheck(), owner_->LeaseKeyCheck());
  EXPECT_NE(replica_->LeaseKeyCheck(), owner_->LeaseKeyCheck());
  EXPECT_TRUE(Lease(*replica_, Cmd::kRelease, "rot", Id(lease)).released);
  EXPECT_TRUE(Lease(*replica_, Cmd::kRenew, "rot", Id(renewed)).ok());
  EXPECT_TRUE(Settle(*replica_, "rot", r, 4).settled);
  // Its own grants are made under its key, which the owner (old key alone)
  // refuses until its own restart with the new one beside it.
  const Decision mine = Do(*replica_, Cmd::kAcquire, "lease", "rot");
  ASSERT_TRUE(mine.allowed);
  EXPECT_EQ(Lease(*owner_, Cmd::kRelease, "rot", Id(mine)).status.code(), Status::Code::kConflict);
  // A second key without a first is refused at open.
  EngineOptions o;
  o.map_path = dir_ / "map.xml";
  o.store = replica_store_.get();
  o.stats_dir = dir_ / "replica";
  o.lease_key_also_file = old_key;
  o.clock = &clock_;
  replica_.reset();
  auto e = AdminEngine::Open(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("lease_key_also> needs <cluster lease_key>"), std::string::npos)
      << e.status().ToString();
}

TEST_F(ReservationReplicaTest, TheOwnersReservationSettlesOnTheReplicaOnce) {
  const Decision r = Reserve(*owner_, "k", 50);
  ASSERT_NE(r.res_serial, 0u);
  // The estimate's add, then the reservation taken.
  ASSERT_EQ(rec_.changes.size(), 2u);
  EXPECT_EQ(rec_.changes[0].kind, Change::Kind::kAdd);
  EXPECT_EQ(rec_.changes[1].event, Change::Event::kResTake);
  EXPECT_EQ(rec_.changes[1].item, r.res_serial);
  EXPECT_EQ(rec_.changes[1].until, r.res_expires);
  EXPECT_EQ(rec_.changes[1].n, 50);
  EXPECT_NE(rec_.changes[1].nonce, 0u);
  ASSERT_TRUE(Ship(1).value());
  EXPECT_EQ(Count(*replica_, "k"), 50);

  // The owner is gone: its id settles on the replica, once.
  clock_.Advance(2000);
  const Decision s = Settle(*replica_, "k", r, 20);
  ASSERT_TRUE(s.ok()) << s.status.ToString();
  EXPECT_TRUE(s.settled);
  EXPECT_EQ(s.res_returned, 30);
  EXPECT_EQ(Count(*replica_, "k"), 20);
  EXPECT_EQ(Settle(*replica_, "k", r, 20).status.code(), Status::Code::kGone);
  // A reservation the replica takes gets a serial the owner never gave.
  const Decision mine = Reserve(*replica_, "k", 5);
  EXPECT_GT(mine.res_serial, r.res_serial);

  // Back to the owner: the same counts, the settled id gone there too.
  ASSERT_EQ(back_.changes.size(), 3u);
  EXPECT_EQ(back_.changes[0].event, Change::Event::kResSettle);
  EXPECT_EQ(back_.changes[0].item, r.res_serial);
  EXPECT_EQ(back_.changes[0].n, 20);
  ASSERT_TRUE(ShipBack(1).value());
  EXPECT_EQ(Count(*owner_, "k"), 25);
  EXPECT_EQ(Settle(*owner_, "k", r, 20).status.code(), Status::Code::kGone);
  EXPECT_TRUE(Settle(*owner_, "k", mine, 5).settled);
}

// Two takes made on two of the owner's workers arrive in the other order:
// the copy's next serial passes both, so a reservation it takes after a
// failover never gets the id of one the owner gave.
TEST_F(ReservationReplicaTest, TakesArrivingOutOfOrderNeverLeaveASerialToTakeAgain) {
  const Decision first = Reserve(*owner_, "o", 5);
  const Batch one = TakeBatch();
  const Decision second = Reserve(*owner_, "o", 5);
  const Batch two = TakeBatch();
  ASSERT_LT(first.res_serial, second.res_serial);
  ASSERT_TRUE(Apply(two, "worker1", 1).value());
  ASSERT_TRUE(Apply(one, "worker0", 1).value());
  const Decision mine = Reserve(*replica_, "o", 5);
  ASSERT_NE(mine.res_serial, 0u);
  EXPECT_GT(mine.res_serial, second.res_serial);
  EXPECT_TRUE(Settle(*replica_, "o", first, 5).settled);
  EXPECT_TRUE(Settle(*replica_, "o", second, 5).settled);
  EXPECT_TRUE(Settle(*replica_, "o", mine, 5).settled);
}

// A settle made on one of the owner's workers reaches the copy before the
// take another worker made: the copy settles it when the take comes, at the
// settle's instant, and never holds it. (It dropped the settle: the copy
// kept the estimate, below the real amount here, so that after a failover
// the overrun could be granted again; and held the reservation, which
// settled a second time there.)
TEST_F(ReservationReplicaTest, ASettleThatArrivesBeforeItsTakeIsAppliedWhenTheTakeComes) {
  for (const int64_t real : {3, 25}) {
    const std::string key = "ahead" + std::to_string(real);
    const Decision r = Reserve(*owner_, key, 10);
    ASSERT_NE(r.res_serial, 0u);
    const Batch take = TakeBatch();
    clock_.Advance(1000);
    ASSERT_TRUE(Settle(*owner_, key, r, real).settled);
    const Batch settle = TakeBatch();
    ASSERT_EQ(settle.changes.size(), 1u);
    EXPECT_EQ(settle.changes[0].until, r.res_expires);
    ASSERT_TRUE(Apply(settle, "worker1-" + key, 1).value());
    EXPECT_EQ(Count(*replica_, key), 0);  // nothing yet: its take has not come
    auto view = replica_->Inspect("tokens", key);
    ASSERT_TRUE(view.ok()) << view.status().ToString();
    EXPECT_TRUE(view.value().reservations.empty());
    ASSERT_TRUE(Apply(take, "worker0-" + key, 1).value());
    EXPECT_EQ(Count(*replica_, key), real) << real;
    EXPECT_EQ(Count(*owner_, key), real) << real;
    view = replica_->Inspect("tokens", key);
    ASSERT_TRUE(view.ok()) << view.status().ToString();
    EXPECT_TRUE(view.value().reservations.empty());
    EXPECT_EQ(Settle(*replica_, key, r, real).status.code(), Status::Code::kGone);
  }
  // A settle whose take never comes is dropped at the reservation's expiry,
  // not counted as one that expired.
  Change lone = Event(Change::Event::kResSettle, 6, "lone", 7);
  lone.n = 5;
  lone.until = clock_.NowMs() / 1000 + 30;
  ASSERT_TRUE(replica_->ApplyChanges(std::span<const Change>(&lone, 1), "s9", 1).value());
  EXPECT_EQ(Count(*replica_, "lone"), 0);
  clock_.Advance(31000);
  const Decision after = Reserve(*replica_, "lone", 1);
  EXPECT_EQ(after.res_expired, 0);
  EXPECT_GT(after.res_serial, 7u);  // the serial it named is never taken here
}

TEST_F(ReservationReplicaTest, ASettleOnTheOwnerMovesTheReplicasCountTheSame) {
  const Decision below = Reserve(*owner_, "k", 50), above = Reserve(*owner_, "k", 10);
  ASSERT_TRUE(Ship(1).value());
  EXPECT_EQ(Count(*replica_, "k"), 60);
  clock_.Advance(1000);
  ASSERT_TRUE(Settle(*owner_, "k", below, 20).settled);  // 30 given back
  ASSERT_EQ(rec_.changes.size(), 1u);
  EXPECT_EQ(rec_.changes[0].event, Change::Event::kResSettle);
  EXPECT_EQ(rec_.changes[0].item, below.res_serial);
  EXPECT_EQ(rec_.changes[0].n, 20);
  ASSERT_TRUE(Ship(2).value());
  EXPECT_EQ(Count(*replica_, "k"), Count(*owner_, "k"));
  EXPECT_EQ(Count(*replica_, "k"), 30);
  const Decision over = Settle(*owner_, "k", above, 45);  // 35 charged beyond the estimate
  ASSERT_TRUE(over.settled);
  EXPECT_EQ(over.res_overrun, 35);
  ASSERT_TRUE(Ship(3).value());
  EXPECT_EQ(Count(*owner_, "k"), 65);
  EXPECT_EQ(Count(*replica_, "k"), 65);
  // Both settled: neither id settles on the replica again.
  EXPECT_EQ(Settle(*replica_, "k", below, 1).status.code(), Status::Code::kGone);
  EXPECT_EQ(Settle(*replica_, "k", above, 1).status.code(), Status::Code::kGone);
}

TEST_F(ReservationReplicaTest, ASettleAfterItsWindowChangesNothingOnEither) {
  const Decision r = Reserve(*owner_, "k", 50, 3600);
  ASSERT_TRUE(Ship(1).value());
  clock_.Advance(601 * 1000);  // the 600 s window it was taken in has ended
  const Decision s = Settle(*owner_, "k", r, 90);
  ASSERT_TRUE(s.settled);
  EXPECT_EQ(s.res_overrun, 0);
  Do(*owner_, Cmd::kAcquire, "tokens", "k", 7);
  ASSERT_TRUE(Ship(2).value());
  EXPECT_EQ(Count(*owner_, "k"), 7);
  EXPECT_EQ(Count(*replica_, "k"), 7);
  EXPECT_EQ(Settle(*replica_, "k", r, 90).status.code(), Status::Code::kGone);
}

TEST_F(ReservationReplicaTest, AnExpiryIsCountedByTheHolderThatFoundItOnly) {
  Reserve(*owner_, "k", 10, 5);
  ASSERT_TRUE(Ship(1).value());
  clock_.Advance(7000);  // past its expiry (5 + 1 s)
  const Decision a = Do(*owner_, Cmd::kAcquire, "tokens", "k");
  EXPECT_EQ(a.res_expired, 1);
  ASSERT_EQ(rec_.changes.size(), 2u);
  EXPECT_EQ(rec_.changes[0].event, Change::Event::kResSweep);
  ASSERT_TRUE(Ship(2).value());
  // Charged its estimate on both (the add counted it), and the replica's
  // next write finds nothing expired left to count.
  const Decision b = Do(*replica_, Cmd::kAcquire, "tokens", "k");
  EXPECT_EQ(b.res_expired, 0);
  EXPECT_EQ(Count(*replica_, "k"), 12);
  EXPECT_EQ(Count(*owner_, "k"), 11);
}

// A fixed window merged on the replica moves its start on to the latest
// add's (the merge of two open windows keeps the later one). A settle of a
// reservation taken before such an add is still in its window on the owner,
// and must be judged so on the replica: the give-back lands on both.
TEST_F(ReservationReplicaTest, ASettleAfterALaterAddChargesTheReservationsWindowOnTheReplica) {
  const Decision r = Reserve(*owner_, "k", 50, 3600);
  ASSERT_TRUE(Ship(1).value());
  clock_.Advance(5000);
  ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, "tokens", "k", 4).allowed);
  ASSERT_TRUE(Ship(2).value());
  clock_.Advance(1000);
  const Decision s = Settle(*owner_, "k", r, 20);
  ASSERT_TRUE(s.settled);
  EXPECT_EQ(s.res_returned, 30);
  ASSERT_TRUE(Ship(3).value());
  EXPECT_EQ(Count(*owner_, "k"), 24);
  EXPECT_EQ(Count(*replica_, "k"), 24);
  // An overrun too: charged on both.
  const Decision o = Reserve(*owner_, "k", 10, 3600);
  ASSERT_TRUE(Ship(4).value());
  clock_.Advance(1000);
  Do(*owner_, Cmd::kAcquire, "tokens", "k", 1);
  ASSERT_TRUE(Ship(5).value());
  ASSERT_EQ(Settle(*owner_, "k", o, 30).res_overrun, 20);
  ASSERT_TRUE(Ship(6).value());
  EXPECT_EQ(Count(*owner_, "k"), 55);
  EXPECT_EQ(Count(*replica_, "k"), 55);
}

// The same in one batch, both holders serving the key: the replica's own
// use (a split) and the owner's add, take, later add and settle all reach it
// together; the settle is judged in the reservation's window there too.
TEST_F(ReservationReplicaTest, ASettleAfterAnAddOfTheSameBatchChargesTheReservationsWindow) {
  ASSERT_TRUE(Do(*replica_, Cmd::kAcquire, "tokens", "k", 3).allowed);  // the replica serves the key too
  clock_.Advance(2000);
  const Decision r = Reserve(*owner_, "k", 50, 3600);
  clock_.Advance(5000);
  ASSERT_TRUE(Do(*owner_, Cmd::kAcquire, "tokens", "k", 4).allowed);
  clock_.Advance(1000);
  const Decision s = Settle(*owner_, "k", r, 20);
  ASSERT_TRUE(s.settled);
  EXPECT_EQ(s.res_returned, 30);
  ASSERT_EQ(rec_.changes.size(), 4u);  // add, take, add, settle
  ASSERT_TRUE(Ship(1).value());
  EXPECT_EQ(Count(*replica_, "k"), 27);  // its own 3, the owner's 24
  EXPECT_EQ(Settle(*replica_, "k", r, 20).status.code(), Status::Code::kGone);
}

TEST_F(ReplicaApplyTest, WithoutOneKeyFileTheOwnersIdsAreUnknownToTheReplica) {
  // Each store keys its own ids (lease.key): the lease is held on both, its
  // id verifies on the owner only (docs/cluster.md, "Leases on replicas").
  const Decision a = Do(*owner_, Cmd::kAcquire, "lease", "k");
  ASSERT_TRUE(Ship(1).value());
  EXPECT_EQ(Do(*replica_, Cmd::kQuery, "lease", "k").count, 1);
  const std::string id = limit::LeaseIdText(a.lease_serial, a.lease_mac);
  EXPECT_EQ(replica_->Execute(Request{.cmd = Cmd::kRelease, .biz = "lease", .key = "k", .lease = id}).status.code(),
            Status::Code::kConflict);
  EXPECT_EQ(owner_->LeaseKeyCheck(), 0u);
}

}  // namespace
}  // namespace frs
