#include "frs/admin_engine.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/temp_dir.h"
#include "limit/alloc_count.h"
#include "limit/lease_id.h"
#include "limit/rule_harness.h"
#include "limit/rule_state.h"
#include "store/format.h"

namespace frs {
namespace {

using limit::testing::kDay0;

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override { store_ = OpenStore(dir_ / "store", StoreGeometry{1, 1024, 8}); }

  static std::unique_ptr<Store> OpenStore(const std::string& path, StoreGeometry geo) {
    StoreOptions o;
    o.dir = path;
    o.geometry = geo;
    auto s = Store::Open(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s.value()) : nullptr;
  }

  void WriteMap(const std::string& xml, const std::string& name = "map.xml") { std::ofstream(dir_ / name) << xml; }

  // An engine over map.xml written as `xml`.
  std::unique_ptr<AdminEngine> EngineFor(const std::string& xml) {
    WriteMap(xml);
    return OpenEngine();
  }

  std::unique_ptr<AdminEngine> OpenEngine(Store* store = nullptr, const std::string& map = "map.xml",
                                          const std::string& tz = "UTC") {
    EngineOptions o;
    o.map_path = dir_ / map;
    o.store = store ? store : store_.get();
    o.stats_dir = dir_ / "store";
    o.clock = &clock_;
    o.timezone = tz;
    auto e = AdminEngine::Open(o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e.value()) : nullptr;
  }

  static Decision Do(Engine& e, Cmd cmd, std::string_view biz, std::string_view key, int64_t n = 1, int64_t count = 0) {
    return e.Execute(Request{.cmd = cmd, .biz = biz, .key = key, .n = n, .count = count});
  }

  testing::TempDir dir_;
  FakeClock clock_{kDay0 * 1000 + 123};
  std::unique_ptr<Store> store_;
};

constexpr const char* kAdMap = R"(<map>
  <biz id="2" name="ad_user">
    <rule algo="calendar" interval="86400" max="3"/>
    <rule algo="sliding"  interval="3600"  max="1"/>
  </biz>
</map>)";

TEST_F(EngineTest, RulesAreJudgedTogetherAndTheMostRestrictiveAnswers) {
  WriteMap(kAdMap);
  auto e = OpenEngine();
  Decision d = Do(*e, Cmd::kAcquire, "ad_user", "u1");
  ASSERT_TRUE(d.ok()) << d.status.ToString();
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.nrules, 2u);
  EXPECT_EQ(d.count, 1);  // sliding: 1 of 1, least remaining
  EXPECT_EQ(d.remaining, 0);

  clock_.Advance(600'000);
  d = Do(*e, Cmd::kAcquire, "ad_user", "u1");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 3000);
  EXPECT_EQ(d.rules[0].count, 1);  // nothing recorded on the calendar rule either
  EXPECT_TRUE(d.rules[0].allowed);
  EXPECT_FALSE(d.rules[1].allowed);

  for (int i = 0; i < 2; ++i) {
    clock_.Advance(3'600'000);
    ASSERT_TRUE(Do(*e, Cmd::kAcquire, "ad_user", "u1").allowed) << i;
  }
  clock_.Advance(3'600'000);
  d = Do(*e, Cmd::kAcquire, "ad_user", "u1");
  EXPECT_FALSE(d.allowed);
  // Both deny; the calendar waits until midnight, longer: it answers.
  EXPECT_EQ(d.reset, kDay0 + 86400);
  EXPECT_EQ(d.retry_after, kDay0 + 86400 - clock_.NowMs() / 1000);
  EXPECT_EQ(d.count, 3);
  EXPECT_EQ(d.limit, 3);
}

TEST_F(EngineTest, ErrorsAndNumericIds) {
  WriteMap(kAdMap);
  auto e = OpenEngine();
  EXPECT_EQ(Do(*e, Cmd::kAcquire, "nope", "k").status.code(), Status::Code::kNotFound);
  // Echoed with what a C string or a terminal would not show as %XX.
  EXPECT_EQ(Do(*e, Cmd::kAcquire, std::string_view("log\0in\x1b", 7), "k").status.message(),
            "unknown biz 'log%00in%1B'");
  EXPECT_EQ(Do(*e, Cmd::kAcquire, "caf\xc3\xa9", "k").status.message(), "unknown biz 'caf\xc3\xa9'");
  EXPECT_EQ(Do(*e, Cmd::kAcquire, "ad_user", "").status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Do(*e, Cmd::kAcquire, "ad_user", "a\x01").status.code(), Status::Code::kInvalidArgument);
  // A key the protocol refuses (no XML character): not made in-process
  // either, where a lease of it could only have expired.
  EXPECT_EQ(Do(*e, Cmd::kAcquire, "ad_user", "w\xef\xbf\xbe").status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Do(*e, Cmd::kAcquire, "ad_user", "k", 0).status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Do(*e, Cmd::kAcquire, "ad_user", "k", kMaxUses + 1).status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Do(*e, Cmd::kSet, "ad_user", "k", 1, -1).status.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Do(*e, Cmd::kAcquire, "2", "k").allowed);
  EXPECT_FALSE(Do(*e, Cmd::kAcquire, "ad_user", "k").allowed);  // the same node
  EXPECT_EQ(e->ResolveBiz("2").value(), 2);
  EXPECT_FALSE(e->ResolveBiz("3").ok());
  // An id is an id however many zeros lead it (no name is only digits).
  for (const char* id : {"02", "00002", "000002", "000000000000000000002", "0000000000000000000000000000000002"})
    EXPECT_EQ(e->ResolveBiz(id).value(), 2) << id;
  EXPECT_FALSE(e->ResolveBiz("000000000000000065536").ok());
  EXPECT_FALSE(e->ResolveBiz("100000000000000000002").ok());
  EXPECT_FALSE(e->ResolveBiz("000000").ok());  // id 0 is no biz's
}

TEST_F(EngineTest, QueryNeverCreatesAndDeniedAcquireNeverCreates) {
  auto e = EngineFor(R"(<map><biz id="1" name="b"><rule interval="60" max="2"/></biz></map>)");
  EXPECT_TRUE(Do(*e, Cmd::kQuery, "b", "k").allowed);
  EXPECT_FALSE(Do(*e, Cmd::kAcquire, "b", "k", 3).allowed);
  Decision g = Do(*e, Cmd::kGet, "b", "k");
  EXPECT_FALSE(g.found);
  EXPECT_EQ(g.count, 0);
  EXPECT_EQ(store_->Stats().total.nodes_used, 0u);
}

TEST_F(EngineTest, UpdateRecordsRegardlessAndTellsWhetherWithin) {
  auto e = EngineFor(R"(<map><biz id="1" name="push"><rule algo="calendar" interval="86400" max="2"/></biz></map>)");
  EXPECT_TRUE(Do(*e, Cmd::kUpdate, "push", "u").allowed);
  EXPECT_TRUE(Do(*e, Cmd::kUpdate, "push", "u").allowed);
  Decision d = Do(*e, Cmd::kUpdate, "push", "u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.count, 3);
  EXPECT_FALSE(Do(*e, Cmd::kQuery, "push", "u").allowed);
}

TEST_F(EngineTest, WeightsSumRewards) {
  auto e = EngineFor(R"(<map><biz id="1" name="reward"><rule algo="sliding" interval="600" max="100"/></biz></map>)");
  EXPECT_TRUE(Do(*e, Cmd::kAcquire, "reward", "u", 60).allowed);
  EXPECT_FALSE(Do(*e, Cmd::kAcquire, "reward", "u", 41).allowed);
  EXPECT_TRUE(Do(*e, Cmd::kAcquire, "reward", "u", 40).allowed);
  // max 100 is bucketed (24 s buckets for 600 s): uses may be held up to 23 s
  // longer than exact, never shorter.
  clock_.Advance(599'000);
  EXPECT_FALSE(Do(*e, Cmd::kAcquire, "reward", "u", 1).allowed);
  clock_.Advance(24'000);
  EXPECT_TRUE(Do(*e, Cmd::kAcquire, "reward", "u", 100).allowed);
}

TEST_F(EngineTest, ShadowCountsAndNeverDeniesOffCountsNothing) {
  auto e = EngineFor(R"(<map>
    <biz id="1" name="s" mode="shadow"><rule interval="60" max="1"/></biz>
    <biz id="2" name="o" mode="off"><rule interval="60" max="1"/></biz>
  </map>)");
  Decision d1 = Do(*e, Cmd::kAcquire, "s", "k");
  EXPECT_TRUE(d1.allowed && d1.shadow && !d1.would_deny);
  Decision d2 = Do(*e, Cmd::kAcquire, "s", "k");
  EXPECT_TRUE(d2.allowed && d2.shadow);
  EXPECT_TRUE(d2.would_deny);
  EXPECT_FALSE(d2.rules[0].allowed);
  EXPECT_EQ(d2.retry_after, 0);
  EXPECT_EQ(Do(*e, Cmd::kGet, "s", "k").count, 2);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Do(*e, Cmd::kAcquire, "o", "k").allowed);
  EXPECT_FALSE(Do(*e, Cmd::kGet, "o", "k").found);
}

// A batch draws its leases' and reservations' serials from one half: a
// member naming another is refused with the rest, nothing granted.
TEST_F(EngineTest, ABatchOfMembersInTwoHalvesIsRefusedWhole) {
  auto e = EngineFor(R"(<map><biz id="1" name="inflight"><rule algo="concurrency" max="3" lease="60"/></biz></map>)");
  Request reqs[2] = {{.cmd = Cmd::kAcquire, .biz = "inflight", .key = "a", .serial_half = SerialHalf::kOdd},
                     {.cmd = Cmd::kAcquire, .biz = "inflight", .key = "b", .serial_half = SerialHalf::kEven}};
  Decision out[2];
  EXPECT_FALSE(e->ExecuteBatch(reqs, out));
  for (const Decision& d : out) {
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.status.code(), Status::Code::kInvalidArgument);
    EXPECT_NE(d.status.message().find("from one half"), std::string::npos) << d.status.ToString();
  }
  EXPECT_FALSE(Do(*e, Cmd::kGet, "inflight", "a").found);
  reqs[1].serial_half = SerialHalf::kOdd;
  EXPECT_TRUE(e->ExecuteBatch(reqs, out));
  EXPECT_EQ(out[0].lease_serial % 2, 1u);
  EXPECT_EQ(out[1].lease_serial % 2, 1u);
}

TEST_F(EngineTest, BatchAcquireIsAllOrNothing) {
  auto e = EngineFor(R"(<map>
    <biz id="1" name="ip_app"><rule interval="3600" max="10000"/></biz>
    <biz id="2" name="api_user"><rule interval="3600" max="1"/></biz>
  </map>)");
  Request reqs[2] = {{.cmd = Cmd::kAcquire, .biz = "ip_app", .key = "10.1.2.3|app7"},
                     {.cmd = Cmd::kAcquire, .biz = "api_user", .key = "app7|u42|if3"}};
  Decision out[2];
  EXPECT_TRUE(e->ExecuteBatch(reqs, out));
  EXPECT_TRUE(out[0].allowed && out[1].allowed);
  EXPECT_FALSE(e->ExecuteBatch(reqs, out));
  EXPECT_FALSE(out[0].allowed);
  EXPECT_TRUE(out[0].rules[0].allowed);  // its own rule would allow, but nothing was recorded
  EXPECT_FALSE(out[1].allowed);
  EXPECT_EQ(out[1].retry_after, 3600);
  EXPECT_EQ(Do(*e, Cmd::kGet, "ip_app", "10.1.2.3|app7").count, 1);

  // The same node twice in one batch sees its own earlier member.
  reqs[1] = reqs[0];
  reqs[0].biz = reqs[1].biz = "api_user";
  reqs[0].key = reqs[1].key = "fresh";
  EXPECT_FALSE(e->ExecuteBatch(reqs, out));
  EXPECT_EQ(out[1].retry_after, kNeverCurable);  // max 1: the two never fit one window
  EXPECT_FALSE(Do(*e, Cmd::kGet, "api_user", "fresh").found);

  // An invalid member: nothing recorded either.
  reqs[0].key = "other";
  reqs[1].biz = "missing";
  EXPECT_FALSE(e->ExecuteBatch(reqs, out));
  EXPECT_EQ(out[1].status.code(), Status::Code::kNotFound);
  EXPECT_FALSE(Do(*e, Cmd::kGet, "api_user", "other").found);

  // Less room for decisions than requests: nothing done, and the room there
  // is says so (its one decision read OK and allowed).
  reqs[1].biz = "api_user";
  Decision one[1];
  EXPECT_FALSE(e->ExecuteBatch(reqs, one));
  EXPECT_EQ(one[0].status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(one[0].status.message(), "a batch of 2 requests given room for 1 decisions: nothing was done");
  EXPECT_FALSE(one[0].allowed);
  EXPECT_FALSE(Do(*e, Cmd::kGet, "api_user", "other").found);
  // A command no name stands for (a cast integer): refused, not allowed.
  const Request bad{.cmd = static_cast<Cmd>(200), .biz = "api_user", .key = "other"};
  EXPECT_EQ(e->CheckRequest(bad).code(), Status::Code::kInvalidArgument);
  Decision d = e->Execute(bad);
  EXPECT_EQ(d.status.message(), "cmd 200 is not a command (frs/decision.h: Cmd)");
  EXPECT_FALSE(d.allowed);
  EXPECT_STREQ(CmdName(bad.cmd), "?");
  EXPECT_STREQ(AlgoName(static_cast<Algo>(200)), "?");
  EXPECT_STREQ(ModeName(static_cast<Mode>(200)), "?");
  EXPECT_STREQ(AlgoName(Algo::kConcurrency), "concurrency");
}

// A batch's members on one node are judged together: when no window could
// ever grant their uses (or leases) at once, the denial says no wait cures
// it (-1), though each member alone would fit; when a wait can, it says how
// long, as a lone acquire would.
TEST_F(EngineTest, ABatchNoWindowCouldGrantSaysNoWaitCuresIt) {
  auto e = EngineFor(R"(<map>
    <biz id="1" name="five"><rule interval="60" max="5"/></biz>
    <biz id="2" name="owed"><rule interval="60" max="5" borrow="2"/></biz>
    <biz id="3" name="bucket"><rule algo="token_bucket" interval="60" max="60" burst="4"/></biz>
    <biz id="4" name="inflight"><rule algo="concurrency" max="2" lease="30"/></biz>
  </map>)");
  auto batch = [&](std::string_view biz, std::string_view key, std::initializer_list<int64_t> ns) {
    std::vector<Request> reqs;
    for (int64_t n : ns) reqs.push_back({.cmd = Cmd::kAcquire, .biz = biz, .key = key, .n = n});
    std::vector<Decision> out(reqs.size());
    EXPECT_FALSE(e->ExecuteBatch(reqs, out)) << biz;
    EXPECT_FALSE(Do(*e, Cmd::kGet, biz, key).found) << biz << ": nothing recorded";
    return out.back();
  };
  // 3 + 3 > 5, and 4 + 4 > 5 + 2 borrowed, 3 + 2 > a burst of 4: never.
  EXPECT_EQ(batch("five", "k", {3, 3}).retry_after, kNeverCurable);
  EXPECT_EQ(batch("five", "k", {1, 1, 1, 1, 1, 1}).retry_after, kNeverCurable);
  EXPECT_EQ(batch("owed", "k", {4, 4}).retry_after, kNeverCurable);
  EXPECT_EQ(batch("bucket", "k", {3, 2}).retry_after, kNeverCurable);
  EXPECT_EQ(batch("inflight", "k", {1, 1, 1}).retry_after, kNeverCurable);
  // Together within the rule, denied by what others used: the window's end.
  ASSERT_TRUE(Do(*e, Cmd::kAcquire, "five", "used", 2).allowed);
  std::vector<Request> reqs = {{.cmd = Cmd::kAcquire, .biz = "five", .key = "used", .n = 2},
                               {.cmd = Cmd::kAcquire, .biz = "five", .key = "used", .n = 2}};
  std::vector<Decision> out(2);
  EXPECT_FALSE(e->ExecuteBatch(reqs, out));
  EXPECT_GT(out[1].retry_after, 0);
  EXPECT_EQ(Do(*e, Cmd::kGet, "five", "used").count, 2);
  // A node at its limit, and a batch that no window could grant at once:
  // denied at its first member, and still no wait cures it (it said the
  // window's end, 60 s, to a client that would then loop for good).
  ASSERT_TRUE(Do(*e, Cmd::kAcquire, "five", "full", 5).allowed);
  std::vector<Request> six(6, Request{.cmd = Cmd::kAcquire, .biz = "five", .key = "full", .n = 1});
  std::vector<Decision> out6(6);
  EXPECT_FALSE(e->ExecuteBatch(six, out6));
  EXPECT_EQ(out6[0].retry_after, kNeverCurable);
  // Members on other keys are not summed.
  reqs[1].key = "other";
  reqs[0].n = reqs[1].n = 3;
  EXPECT_TRUE(e->ExecuteBatch(reqs, out));
}

// A node keeps what room its slots leave of its key (an ad cap's two rules:
// 4 bytes): Inspect, asked by the key, shows the key whole; a walk, which
// knows only the node, shows the kept bytes and says they are cut.
TEST_F(EngineTest, InspectByKeyShowsTheKeyWholeWhereTheNodeKeptItsStart) {
  auto e = EngineFor(R"(<map><biz id="3" name="ad"><rule algo="calendar" interval="86400" max="3"/>)"
                     R"(<rule algo="sliding" interval="3600" max="1"/></biz></map>)");
  const std::string key = "u0000005|ad5";
  ASSERT_TRUE(Do(*e, Cmd::kAcquire, "ad", key).ok());
  auto view = e->Inspect("ad", key);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(view->key, key);
  EXPECT_FALSE(view->key_truncated);
  EXPECT_TRUE(view->key_kept);
  auto walked = e->View(view->node);
  ASSERT_TRUE(walked.ok()) << walked.status().ToString();
  EXPECT_TRUE(walked->key_truncated);
  EXPECT_LT(walked->key.size(), key.size());
  EXPECT_EQ(key.rfind(walked->key, 0), 0u) << walked->key;
}

TEST_F(EngineTest, GetSetDeleteReset) {
  auto e = EngineFor(R"(<map><biz id="4" name="partner"><rule interval="3600" max="1000" borrow="300"/></biz></map>)");
  Decision s = Do(*e, Cmd::kSet, "partner", "p", 1, 1200);
  ASSERT_TRUE(s.ok()) << s.status.ToString();
  Decision g = Do(*e, Cmd::kGet, "partner", "p");
  EXPECT_TRUE(g.found);
  EXPECT_EQ(g.count, 1200);
  EXPECT_EQ(g.rules[0].debt, 200);
  auto view = e->Inspect("partner", "p");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(view->rules[0].debt, 200);
  EXPECT_EQ(view->rules[0].window_end_ms - view->rules[0].window_start_ms, 3'600'000);
  EXPECT_FALSE(view->rules[0].denies);
  EXPECT_EQ(view->count, 1200);
  EXPECT_TRUE(Do(*e, Cmd::kDelete, "partner", "p").found);
  EXPECT_FALSE(Do(*e, Cmd::kGet, "partner", "p").found);
  EXPECT_TRUE(e->Inspect("partner", "p").status().IsNotFound());
  for (int i = 0; i < 5; ++i) Do(*e, Cmd::kAcquire, "partner", "k" + std::to_string(i));
  EXPECT_EQ(Do(*e, Cmd::kReset, "partner", "").erased, 5u);
  EXPECT_EQ(store_->Stats().total.nodes_used, 0u);
}

TEST_F(EngineTest, ClockSteppingBackNeverGrantsExtraUses) {
  auto e = EngineFor(R"(<map><biz id="1" name="b">
    <rule interval="60" max="1"/><rule algo="token_bucket" interval="60" max="2"/>
    <rule algo="sliding" interval="60" max="1"/><rule algo="calendar" interval="60" max="1"/>
  </biz></map>)");
  EXPECT_TRUE(Do(*e, Cmd::kAcquire, "b", "k").allowed);
  clock_.Advance(-3'600'000);
  EXPECT_FALSE(Do(*e, Cmd::kAcquire, "b", "k").allowed);
  clock_.Set(0);
  EXPECT_FALSE(Do(*e, Cmd::kAcquire, "b", "k").allowed);
}

TEST_F(EngineTest, ClockSteppingBackCountsTheWaitFromTheClock) {
  // A block ahead of the clock is held at its own time until the clock
  // reaches it: Retry-After said the wait from that time (61 s for a lease
  // that freed in an hour, found from outside), so a client retried early,
  // and again.
  auto e = EngineFor(R"(<map>
    <biz id="1" name="fixed"><rule interval="60" max="1"/></biz>
    <biz id="2" name="sliding"><rule algo="sliding" interval="60" max="1"/></biz>
    <biz id="3" name="calendar"><rule algo="calendar" interval="60" max="1"/></biz>
    <biz id="4" name="leases"><rule algo="concurrency" max="1" lease="60"/></biz>
  </map>)");
  const char* bizzes[] = {"fixed", "sliding", "calendar", "leases"};
  for (const char* biz : bizzes) ASSERT_TRUE(Do(*e, Cmd::kAcquire, biz, "k").allowed) << biz;
  int64_t wait[4];
  for (int i = 0; i < 4; ++i) {
    const Decision d = Do(*e, Cmd::kAcquire, bizzes[i], "k");
    ASSERT_FALSE(d.allowed) << bizzes[i];
    wait[i] = d.retry_after;
    EXPECT_GT(wait[i], 0) << bizzes[i];
    EXPECT_LE(wait[i], 61) << bizzes[i];
  }
  clock_.Advance(-3'600'000);
  for (int i = 0; i < 4; ++i) {
    const Decision d = Do(*e, Cmd::kAcquire, bizzes[i], "k");
    EXPECT_FALSE(d.allowed) << bizzes[i];
    EXPECT_EQ(d.retry_after, wait[i] + 3600) << bizzes[i];
  }
}

// A rule renamed while a key still held a block of its old name's earlier
// interval (untouched since that change) started the key from zero: the new
// name knew only its own past. The names it was renamed from count as its
// past (an outside run: r1 600 s -> 1200 s -> renamed rx -> rx 1800 s ->
// renamed ry -> ry 2400 s, a key used only before all of it kept 3).
TEST_F(EngineTest, ARenamedRuleKeepsTheCountsOfKeysUntouchedSinceItsOldNamesIntervalChanged) {
  auto map = [](const char* name, int interval) {
    return std::string("<map><biz id=\"1\" name=\"login\"><rule name=\"") + name + "\" interval=\"" +
           std::to_string(interval) + "\" max=\"50\"/></biz></map>";
  };
  auto e = EngineFor(map("r1", 600));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Do(*e, Cmd::kAcquire, "login", "kA").allowed);
  for (auto [name, interval] : {std::pair{"r1", 1200}, {"rx", 1200}, {"rx", 1800}, {"ry", 1800}, {"ry", 2400}}) {
    WriteMap(map(name, interval));
    ASSERT_TRUE(e->Reload("").ok());
    EXPECT_EQ(Do(*e, Cmd::kGet, "login", "kA").rules[0].count, 3) << name << " " << interval;
  }
  // Read, never written in between: the first write converts the block.
  ASSERT_TRUE(Do(*e, Cmd::kAcquire, "login", "kA").allowed);
  EXPECT_EQ(Do(*e, Cmd::kGet, "login", "kA").rules[0].count, 4);
}

// A rule added with a removed name's newest interval inherits that name's
// past, but not an identity another rule had: a block of it is that rule's
// (R2 at 60 s here), which the new rule took, R2 then starting from zero.
TEST_F(EngineTest, AnInheritedPastNeverTakesAnotherRulesBlock) {
  auto e = EngineFor(R"(<map><biz id="1" name="a"><rule name="N" interval="60" max="50"/>
    <rule name="R2" interval="600" max="50"/></biz></map>)");
  WriteMap(R"(<map><biz id="1" name="a"><rule name="N" interval="3600" max="50"/>
    <rule name="R2" interval="600" max="50"/></biz></map>)");
  ASSERT_TRUE(e->Reload("").ok());
  WriteMap(R"(<map><biz id="1" name="a"><rule name="R2" interval="60" max="50"/></biz></map>)");
  ASSERT_TRUE(e->Reload("").ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Do(*e, Cmd::kAcquire, "a", "K").allowed);
  WriteMap(R"(<map><biz id="1" name="a"><rule name="R1" interval="3600" max="50"/>
    <rule name="R2" interval="120" max="50"/></biz></map>)");
  ASSERT_TRUE(e->Reload("").ok());
  Decision d = Do(*e, Cmd::kGet, "a", "K");
  ASSERT_EQ(d.nrules, 2u);
  EXPECT_EQ(d.rules[1].count, 3) << "R2's count was taken";
  EXPECT_EQ(d.rules[0].count, 0);
}

TEST_F(EngineTest, ReloadKeepsCountsAppliesMaxAndResetsOnlyChangedRules) {
  auto e = EngineFor(R"(<map>
    <biz id="1" name="a"><rule interval="600" max="5"/><rule algo="calendar" interval="86400" max="10"/></biz>
    <biz id="2" name="b"><rule interval="600" max="5"/></biz>
  </map>)");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Do(*e, Cmd::kAcquire, "a", "k").allowed);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Do(*e, Cmd::kAcquire, "b", "k").allowed);

  // Unchanged: counts kept.
  ASSERT_TRUE(e->Reload("").ok());
  EXPECT_EQ(Do(*e, Cmd::kGet, "a", "k").rules[0].count, 3);

  // b's max lowered to 2: applies at once to the count of 3.
  // a: the fixed rule's interval changed (fresh), the calendar rule moved first (kept).
  WriteMap(R"(<map>
    <biz id="1" name="a"><rule algo="calendar" interval="86400" max="10"/><rule interval="300" max="5"/>
      <rule algo="sliding" interval="60" max="4"/></biz>
    <biz id="2" name="b"><rule interval="600" max="2"/></biz>
  </map>)");
  ASSERT_TRUE(e->Reload("").ok());
  Decision b = Do(*e, Cmd::kAcquire, "b", "k");
  EXPECT_FALSE(b.allowed);
  EXPECT_EQ(b.count, 3);
  EXPECT_EQ(b.limit, 2);
  Decision a = Do(*e, Cmd::kGet, "a", "k");
  ASSERT_EQ(a.nrules, 3u);
  EXPECT_EQ(a.rules[0].algo, Algo::kCalendar);
  EXPECT_EQ(a.rules[0].count, 3);
  EXPECT_EQ(a.rules[1].count, 0);
  EXPECT_EQ(a.rules[2].count, 0);
  ASSERT_TRUE(Do(*e, Cmd::kAcquire, "a", "k").allowed);
  a = Do(*e, Cmd::kGet, "a", "k");
  EXPECT_EQ(a.rules[0].count, 4);
  EXPECT_EQ(a.rules[1].count, 1);

  // Back to one rule: the node's state shrinks and the kept rule keeps its count.
  WriteMap(R"(<map><biz id="1" name="a"><rule interval="300" max="5"/></biz>
    <biz id="2" name="b"><rule interval="600" max="20"/></biz></map>)");
  ASSERT_TRUE(e->Reload("").ok());
  Decision shrunk = Do(*e, Cmd::kAcquire, "a", "k");
  EXPECT_TRUE(shrunk.allowed);
  EXPECT_EQ(Do(*e, Cmd::kGet, "a", "k").count, 2);
  EXPECT_TRUE(Do(*e, Cmd::kAcquire, "b", "k").allowed);
  EXPECT_EQ(Do(*e, Cmd::kGet, "b", "k").count, 4);
}

TEST_F(EngineTest, BrokenMapIsRefusedAndTheOldOneStays) {
  auto e = EngineFor(R"(<map><biz id="1" name="a"><rule interval="600" max="1"/></biz></map>)");
  ASSERT_TRUE(Do(*e, Cmd::kAcquire, "a", "k").allowed);
  WriteMap("<map>\n<biz id=\"1\" name=\"a\">\n<rule algo=\"nope\" interval=\"600\" max=\"9\"/></biz></map>");
  Status s = e->Reload("");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            (dir_ / "map.xml") + ":3: unknown algo 'nope' (fixed, calendar, sliding, token_bucket or concurrency)");
  EXPECT_FALSE(Do(*e, Cmd::kAcquire, "a", "k").allowed);
  EXPECT_EQ(Do(*e, Cmd::kGet, "a", "k").limit, 1);
}

TEST_F(EngineTest, RemovedBizBecomesStaleAndIsEvictedFirst) {
  // One chain of 8 slots: 8 one-slot nodes fill it.
  auto tiny = OpenStore(dir_ / "tiny", StoreGeometry{1, 1, 8});
  WriteMap(R"(<map><biz id="1" name="old"><rule interval="3600" max="9"/></biz>
    <biz id="2" name="new"><rule interval="3600" max="9"/></biz></map>)");
  auto e = OpenEngine(tiny.get());
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(Do(*e, Cmd::kAcquire, "old", "k" + std::to_string(i)).allowed);
  ASSERT_TRUE(Do(*e, Cmd::kAcquire, "new", "n0").allowed);
  EXPECT_EQ(tiny->Stats().total.evictions_live, 1u);
  WriteMap(R"(<map><biz id="2" name="new"><rule interval="3600" max="9"/></biz></map>)");
  ASSERT_TRUE(e->Reload("").ok());
  EXPECT_EQ(Do(*e, Cmd::kAcquire, "old", "k1").status.code(), Status::Code::kNotFound);
  ASSERT_TRUE(Do(*e, Cmd::kAcquire, "new", "n1").allowed);
  EXPECT_EQ(tiny->Stats().total.evictions_stale, 1u);
  EXPECT_EQ(tiny->Stats().total.evictions_live, 1u);
  EXPECT_EQ(Do(*e, Cmd::kGet, "new", "n0").count, 1);
}

TEST_F(EngineTest, AnImportedDebtOutOfRangeIsRefusedAndACountAtItsTopIsTaken) {
  // Found from outside: a fixed rule's debt of 2^31 imported without a word
  // made the key's limit 0 until its window ended. A count of 2^32 - 1 is
  // one the store writes itself (its counts stop there: a settle's overrun,
  // Envoy's hits): refused, one such key refused a whole export.
  auto e = EngineFor(R"(<map><biz id="7" name="api"><rule interval="3600" max="100"/>
    <rule algo="sliding" interval="600" max="50"/></biz></map>)");
  ASSERT_TRUE(Do(*e, Cmd::kAcquire, "api", "k", 2).allowed);
  std::string line;
  ASSERT_TRUE(store_->ForEach({}, [&](const NodeInfo& n) { line = e->ExportNode(n).value(); }).ok());
  ASSERT_TRUE(e->CheckImport(line).ok());
  const size_t fixed = line.find("\"state\":\"") + 9;
  const size_t sliding = line.find("\"state\":\"", fixed) + 9;
  ASSERT_NE(sliding, std::string::npos + 9);
  std::string bad = line;
  bad.replace(fixed + 24, 8, "00000080");
  const Status s = e->CheckImport(bad);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
  EXPECT_NE(s.message().find("a debt of 2147483648 (at most 2147483647)"), std::string::npos) << s.ToString();
  EXPECT_EQ(e->ImportNode(bad).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Do(*e, Cmd::kGet, "api", "k").count, 2);
  std::string most = line;
  most.replace(fixed + 24, 8, "ffffff7f");  // 2^31 - 1
  EXPECT_TRUE(e->CheckImport(most).ok());
  std::string top = line;
  top.replace(fixed + 16, 8, "ffffffff");
  top.replace(sliding + 16, 8, "ffffffff");
  ASSERT_TRUE(e->CheckImport(top).ok()) << e->CheckImport(top).ToString();
  ASSERT_TRUE(e->ImportNode(top).ok());
  const Decision d = Do(*e, Cmd::kGet, "api", "k");
  EXPECT_EQ(d.rules[0].count, int64_t{UINT32_MAX});
  EXPECT_FALSE(Do(*e, Cmd::kAcquire, "api", "k").allowed);
}

TEST_F(EngineTest, AnImportedTimeFarAheadIsRefused) {
  // Found from outside: a fixed window, a calendar window, a sliding
  // window's use, a lease's base and a reservation imported a year ahead
  // were taken, and held their key (denied, or a place taken) for that
  // year: a clock behind a block is held at it. Here the export is made,
  // then the clock goes back: the export's times lie ahead of it.
  auto e = EngineFor(R"(<map>
    <biz id="1" name="fx"><rule interval="60" max="5"/></biz>
    <biz id="2" name="cal"><rule algo="calendar" interval="86400" max="3"/></biz>
    <biz id="3" name="narrow"><rule algo="sliding" interval="3600" max="5"/></biz>
    <biz id="4" name="buckets"><rule algo="sliding" interval="600" max="50"/></biz>
    <biz id="5" name="wide"><rule algo="sliding" interval="172800" max="3"/></biz>
    <biz id="6" name="cc"><rule algo="concurrency" max="3" lease="30"/></biz>
    <biz id="7" name="tb"><rule algo="token_bucket" interval="1" max="10" burst="20"/></biz>
    <biz id="8" name="plain_tb"><rule algo="token_bucket" interval="1" max="10" burst="20"/></biz>
  </map>)");
  for (const char* biz : {"fx", "cal", "narrow", "buckets", "wide", "cc", "plain_tb"})
    ASSERT_TRUE(Do(*e, Cmd::kAcquire, biz, "k").allowed) << biz;
  ASSERT_TRUE(e->Execute(Request{.cmd = Cmd::kAcquire, .biz = "tb", .key = "k", .n = 3, .reserve = 60}).allowed);
  std::map<std::string, std::string> line_of;
  ASSERT_TRUE(store_
                  ->ForEach(
                      {},
                      [&](const NodeInfo& n) {
    const std::string line = e->ExportNode(n).value();
    const size_t at = line.find("\"biz_name\":\"") + 12;
    line_of[line.substr(at, line.find('"', at) - at)] = line;
                      })
                  .ok());
  ASSERT_EQ(line_of.size(), 8u);
  const std::map<std::string, std::string> says = {
      {"fx", "a fixed rule's state holds a window that starts "},
      {"cal", "a calendar rule's state holds a window that starts "},
      {"narrow", "a sliding rule's state holds a use counted "},
      {"buckets", "a sliding rule's state holds a use counted "},
      {"wide", "a sliding rule's state holds a use counted "},
      {"cc", "a concurrency rule's state holds leases timed from a second "},
      {"tb", "the reservation table holds reservation #1 taken "},
  };
  // Within the hour a clock may run ahead: taken.
  clock_.Advance(-(limit::kMostAheadS - 60) * 1000);
  for (const auto& [biz, line] : line_of) EXPECT_TRUE(e->CheckImport(line).ok()) << biz;
  // Two days ahead (the calendar window began at midnight): refused, the
  // store unchanged; a token bucket's refill a set can put that far is not.
  clock_.Advance(-2 * 86400 * 1000);
  for (const auto& [biz, line] : line_of) {
    const Status s = e->CheckImport(line);
    if (biz == "plain_tb") {
      EXPECT_TRUE(s.ok()) << s.ToString();
      continue;
    }
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << biz;
    EXPECT_NE(s.message().find(says.at(biz)), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find(" s after this machine's clock"), std::string::npos) << s.ToString();
    EXPECT_EQ(e->ImportNode(line).status().code(), Status::Code::kInvalidArgument) << biz;
  }
  clock_.Advance((2 * 86400 + limit::kMostAheadS - 60) * 1000);
  EXPECT_EQ(Do(*e, Cmd::kGet, "fx", "k").count, 1);
  // A reservation that expires more than 65,535 s after its take: no
  // take here makes one.
  std::string tb = line_of["tb"];
  const size_t table = tb.find("\"reservations\":\"") + 16;
  tb.replace(table + 2 * (16 + 12), 8, "ffffff7f");  // the first entry's expiry: 2^31 - 1
  Status s = e->CheckImport(tb);
  EXPECT_NE(s.message().find("reservation #1 that expires "), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(" s after its take (at most 65535)"), std::string::npos) << s.ToString();
  // A table longer than 14 entries, whose tag's length wraps to another
  // (256 bytes: 0x80000000), was taken and its reservations lost.
  std::string wrapped = line_of["tb"];
  const size_t end = wrapped.find('"', table);
  std::string hex = wrapped.substr(table, end - table);
  hex.replace(0, 8, "00000080");
  hex.resize(2 * 256, '0');
  wrapped.replace(table, end - table, hex);
  EXPECT_EQ(e->CheckImport(wrapped).code(), Status::Code::kInvalidArgument);
  // A lease granted under a longer lease, kept by a reload that shortened
  // it, holds past the new lease + 1 s: its export imports.
  WriteMap(R"(<map><biz id="6" name="cc"><rule algo="concurrency" max="3" lease="3600"/></biz></map>)", "long.xml");
  auto long_lease = OpenEngine(nullptr, "long.xml");
  ASSERT_TRUE(Do(*long_lease, Cmd::kAcquire, "cc", "held").allowed);
  WriteMap(R"(<map><biz id="6" name="cc"><rule algo="concurrency" max="3" lease="60"/></biz></map>)", "short.xml");
  auto short_lease = OpenEngine(nullptr, "short.xml");
  ASSERT_TRUE(Do(*short_lease, Cmd::kAcquire, "cc", "held").allowed);  // written under the shorter lease
  std::string held;
  ASSERT_TRUE(store_
                  ->ForEach(
                      {},
                      [&](const NodeInfo& n) {
    const std::string l = short_lease->ExportNode(n).value();
    if (l.find("\"key\":\"held\"") != std::string::npos) held = l;
                      })
                  .ok());
  ASSERT_FALSE(held.empty());
  EXPECT_TRUE(short_lease->CheckImport(held).ok()) << short_lease->CheckImport(held).ToString();
}

TEST_F(EngineTest, ExportImportAcrossGeometriesAndIds) {
  auto e = EngineFor(R"(<map><biz id="7" name="api"><rule interval="3600" max="100" borrow="5"/>
    <rule algo="token_bucket" interval="10" max="3"/><rule algo="sliding" interval="600" max="50"/></biz></map>)");
  const std::string long_key(40, 'x');
  ASSERT_TRUE(Do(*e, Cmd::kAcquire, "api", "short", 2).allowed);
  ASSERT_TRUE(Do(*e, Cmd::kAcquire, "api", long_key, 3).allowed);
  std::vector<std::string> lines;
  ASSERT_TRUE(store_
                  ->ForEach(
                      {},
                      [&](const NodeInfo& n) {
    auto j = e->ExportNode(n);
    ASSERT_TRUE(j.ok());
    lines.push_back(j.value());
                      })
                  .ok());
  ASSERT_EQ(lines.size(), 2u);

  // Another geometry, the same biz under the same id: both keys come back.
  auto other = OpenStore(dir_ / "other", StoreGeometry{2, 64, 8});
  auto e2 = OpenEngine(other.get());
  // A key that disagrees with key_hex is refused (a keyless node was left).
  int disagreeing = 0;
  for (const std::string& l : lines) {
    if (l.find("\"key\":\"short\"") == std::string::npos) continue;
    ++disagreeing;
    std::string other_key = l;
    other_key.replace(other_key.find("\"key\":\"short\""), 13, "\"key\":\"shore\"");
    Status s = e2->ImportNode(other_key).status();
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("key and key_hex name different keys"), std::string::npos) << s.ToString();
  }
  EXPECT_EQ(disagreeing, 1);
  for (const std::string& l : lines) ASSERT_TRUE(e2->ImportNode(l).ok()) << l;
  EXPECT_EQ(Do(*e2, Cmd::kGet, "api", "short").count, 2);
  Decision d = Do(*e2, Cmd::kGet, "api", long_key);
  EXPECT_TRUE(d.found);
  EXPECT_EQ(d.rules[0].count, 3);
  EXPECT_EQ(d.rules[2].count, 3);
  EXPECT_EQ(d.rules[1].count, 3);

  // Another id: whole keys are fingerprinted again; a truncated one cannot be.
  WriteMap(R"(<map><biz id="9" name="api"><rule interval="3600" max="100"/></biz></map>)", "map9.xml");
  auto third = OpenStore(dir_ / "third", StoreGeometry{1, 64, 8});
  auto e3 = OpenEngine(third.get(), "map9.xml");
  int imported = 0;
  for (const std::string& l : lines) {
    Status s = e3->ImportNode(l).status();
    if (s.ok()) ++imported;
    else EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  }
  EXPECT_EQ(imported, 1);
  EXPECT_EQ(Do(*e3, Cmd::kGet, "api", "short").count, 2);

  WriteMap(R"(<map><biz id="3" name="web"><rule interval="60" max="1"/></biz></map>)", "map3.xml");
  auto e4 = OpenEngine(third.get(), "map3.xml");
  Status missing = e4->ImportNode(lines[0]).status();
  EXPECT_TRUE(missing.IsNotFound());
  EXPECT_NE(missing.message().find("'api'"), std::string::npos);
  EXPECT_FALSE(e4->ImportNode("{\"biz\":1}").ok());
  EXPECT_FALSE(e4->ImportNode("not json").ok());
}

TEST_F(EngineTest, DailyStatsCountAndSurviveRestart) {
  WriteMap(R"(<map><biz id="1" name="b"><rule interval="60" max="1"/></biz></map>)");
  {
    auto e = OpenEngine();
    Do(*e, Cmd::kAcquire, "b", "k1");
    Do(*e, Cmd::kAcquire, "b", "k1");
    Do(*e, Cmd::kQuery, "b", "k2");
    Do(*e, Cmd::kGet, "b", "k2");  // not a use: not counted
  }
  auto e = OpenEngine();
  auto stats = e->DailyStats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].name, "b");
  ASSERT_EQ(stats[0].days.size(), 1u);
  const BizStatsDay& today = stats[0].days[0];
  EXPECT_EQ(today.day, kDay0 / 86400);
  EXPECT_EQ(today.requests, 3u);
  EXPECT_EQ(today.allowed, 2u);
  EXPECT_EQ(today.denied, 1u);
  EXPECT_EQ(today.new_keys, 1u);
  clock_.Advance(86'400'000);
  Do(*e, Cmd::kAcquire, "b", "k3");
  stats = e->DailyStats();
  ASSERT_EQ(stats[0].days.size(), 2u);
  EXPECT_EQ(stats[0].days[0].requests, 1u);
}

// A batch adds its members' daily statistics once per run of one biz (a
// tally): runs that alternate bizzes, acquires judged together, and members
// that fail must all be counted as single requests would be.
void ExpectSameRule(const RuleResult& a, const RuleResult& b, const std::string& who) {
  EXPECT_EQ(a.algo, b.algo) << who;
  EXPECT_EQ(a.interval, b.interval) << who;
  EXPECT_EQ(a.count, b.count) << who;
  EXPECT_EQ(a.limit, b.limit) << who;
  EXPECT_EQ(a.remaining, b.remaining) << who;
  EXPECT_EQ(a.reset, b.reset) << who;
  EXPECT_EQ(a.retry_after, b.retry_after) << who;
  EXPECT_EQ(a.debt, b.debt) << who;
  EXPECT_EQ(a.quota, b.quota) << who;
  EXPECT_EQ(a.allowed, b.allowed) << who;
  EXPECT_EQ(std::memcmp(a.name, b.name, sizeof a.name), 0) << who;
}

// Every field, and every rule slot (those past nrules must be as
// constructed).
void ExpectSameDecision(const Decision& a, const Decision& b, const std::string& who) {
  EXPECT_EQ(a.status.code(), b.status.code()) << who;
  EXPECT_EQ(a.status.message(), b.status.message()) << who;
  EXPECT_EQ(a.allowed, b.allowed) << who;
  EXPECT_EQ(a.shadow, b.shadow) << who;
  EXPECT_EQ(a.found, b.found) << who;
  EXPECT_EQ(a.would_deny, b.would_deny) << who;
  EXPECT_EQ(a.count, b.count) << who;
  EXPECT_EQ(a.limit, b.limit) << who;
  EXPECT_EQ(a.remaining, b.remaining) << who;
  EXPECT_EQ(a.reset, b.reset) << who;
  EXPECT_EQ(a.retry_after, b.retry_after) << who;
  EXPECT_EQ(a.nrules, b.nrules) << who;
  EXPECT_EQ(a.top, b.top) << who;
  EXPECT_EQ(a.erased, b.erased) << who;
  EXPECT_EQ(a.given_back, b.given_back) << who;
  EXPECT_EQ(a.set_lease_first, b.set_lease_first) << who;
  EXPECT_EQ(a.set_leases, b.set_leases) << who;
  EXPECT_EQ(a.biz_id, b.biz_id) << who;
  EXPECT_EQ(a.now_s, b.now_s) << who;
  for (size_t i = 0; i < kMaxRulesPerBiz; ++i)
    ExpectSameRule(a.rules[i], b.rules[i], who + " rule " + std::to_string(i));
}

// kRelease with give_back (Envoy's negative hits): a concurrency rule ends
// the leases that expire first, whoever holds them; a rate rule's count is
// lowered, never below 0; a key never counted gets no node; a bad n is
// refused and changes nothing.
TEST_F(EngineTest, GiveBackEndsTheOldestLeasesAndLowersARateCountNeverBelowZero) {
  auto e = EngineFor(R"(<map>
    <biz id="1" name="rate"><rule interval="60" max="5"/></biz>
    <biz id="2" name="inflight"><rule algo="concurrency" max="3" lease="100"/></biz>
  </map>)");
  auto give = [&](std::string_view biz, std::string_view key, int64_t n) {
    return e->Execute(Request{.cmd = Cmd::kRelease, .biz = biz, .key = key, .n = n, .give_back = true});
  };
  Do(*e, Cmd::kUpdate, "rate", "k", 4);
  Decision d = give("rate", "k", 3);
  ASSERT_TRUE(d.ok()) << d.status.ToString();
  EXPECT_EQ(d.given_back, 3);
  EXPECT_EQ(d.count, 1);
  EXPECT_EQ(give("rate", "k", 10).given_back, 1);
  EXPECT_EQ(Do(*e, Cmd::kQuery, "rate", "k").count, 0);

  const Decision first = Do(*e, Cmd::kAcquire, "inflight", "u");
  clock_.Advance(5'000);
  const Decision second = Do(*e, Cmd::kAcquire, "inflight", "u");
  ASSERT_NE(first.lease_serial, 0u);
  ASSERT_NE(second.lease_serial, 0u);
  d = give("inflight", "u", 1);
  EXPECT_EQ(d.given_back, 1);
  EXPECT_EQ(d.count, 1);
  // The older lease ended: its id is gone, the younger one still holds.
  auto id = [](const Decision& x) { return limit::LeaseIdText(x.lease_serial, x.lease_mac); };
  const std::string first_id = id(first), second_id = id(second);
  EXPECT_TRUE(
      e->Execute(Request{.cmd = Cmd::kRelease, .biz = "inflight", .key = "u", .lease = first_id}).status.code() ==
      Status::Code::kGone);
  EXPECT_TRUE(e->Execute(Request{.cmd = Cmd::kRenew, .biz = "inflight", .key = "u", .lease = second_id}).ok());
  EXPECT_EQ(give("inflight", "u", 5).given_back, 1);
  EXPECT_EQ(give("inflight", "u", 1).given_back, 0);

  EXPECT_EQ(give("inflight", "never", 1).given_back, 0);
  EXPECT_FALSE(Do(*e, Cmd::kGet, "inflight", "never").found);
  EXPECT_EQ(give("rate", "k", 0).status.code(), Status::Code::kInvalidArgument);
}

// ExecuteBatch resets the decisions it is given rule by rule as far as
// they were used (Decision::Reset), not whole: a span that held decisions of
// more rules, or errors, must come out exactly as fresh decisions would.
TEST_F(EngineTest, ABatchsDecisionsAreFreshWhateverTheSpanHeldBefore) {
  auto e = EngineFor(R"(<map>
    <biz id="1" name="one"><rule interval="60" max="5"/></biz>
    <biz id="2" name="four">
      <rule interval="60" max="5"/><rule algo="sliding" interval="3600" max="9"/>
      <rule algo="calendar" interval="86400" max="20"/><rule algo="token_bucket" interval="10" max="3" burst="4"/>
    </biz>
  </map>)");
  const std::string keys[4] = {"k0", "k1", "k2", "k3"};  // outlive the requests' views
  Request four[4], one[4];
  for (int i = 0; i < 4; ++i) {
    four[i].cmd = i == 3 ? Cmd::kUpdate : Cmd::kQuery;
    four[i].biz = i == 2 ? "nosuch" : "four";
    four[i].key = keys[i];
    one[i].cmd = Cmd::kQuery;
    one[i].biz = "one";
    one[i].key = keys[i];
  }
  Decision out[4];
  e->ExecuteBatch(four, out);
  ASSERT_EQ(out[0].nrules, 4u);
  ASSERT_FALSE(out[2].ok());
  e->ExecuteBatch(one, out);
  for (int i = 0; i < 4; ++i) {
    const Decision fresh = e->Execute(one[i]);  // a query: the same answer again
    ASSERT_EQ(fresh.nrules, 1u);
    ExpectSameDecision(out[i], fresh, "member " + std::to_string(i));
  }
}

// A batch's runs of reads go through Store::ReadEach, the other members one
// by one: in every mix, each member answers as the same request sent alone
// in its place would (acquires aside, which a batch judges together).
TEST_F(EngineTest, BatchReadsAnswerAsLoneRequestsWouldInTheirPlace) {
  WriteMap(R"(<map>
    <biz id="1" name="one"><rule interval="60" max="3"/></biz>
    <biz id="2" name="two"><rule interval="60" max="4"/><rule algo="sliding" interval="3600" max="6"/></biz>
    <biz id="3" name="shadow" mode="shadow"><rule interval="60" max="1"/></biz>
    <biz id="4" name="off" mode="off"><rule interval="60" max="1"/></biz>
  </map>)");
  auto batched = OpenEngine();
  std::unique_ptr<Store> lone_store = OpenStore(dir_ / "lone", StoreGeometry{1, 1024, 8});
  auto lone = OpenEngine(lone_store.get());
  std::vector<std::string> keys;  // outlive the requests' views
  for (int i = 0; i < 16; ++i) keys.push_back("k" + std::to_string(i));
  keys.push_back("");
  std::vector<Request> reqs;
  auto add = [&](Cmd cmd, const char* biz, int key, int64_t n = 1) {
    reqs.push_back(Request{.cmd = cmd, .biz = biz, .key = keys[key], .n = n});
  };
  for (int k = 0; k < 12; ++k) add(Cmd::kUpdate, "one", k, k % 4 + 1);
  for (int k = 0; k < 14; ++k) add(Cmd::kQuery, "one", (k * 5) % 14);  // a run longer than the store looks ahead
  add(Cmd::kUpdate, "one", 1, 2);
  add(Cmd::kQuery, "one", 1);
  add(Cmd::kQuery, "one", 1, 4);
  add(Cmd::kGet, "one", 1, 0);
  add(Cmd::kUpdate, "one", 1);
  add(Cmd::kQuery, "one", 1);  // a run of one, between updates
  add(Cmd::kUpdate, "one", 2);
  add(Cmd::kQuery, "nosuch", 1);
  add(Cmd::kQuery, "one", 1, 0);
  add(Cmd::kQuery, "one", 16);  // empty key
  add(Cmd::kQuery, "one", 3);
  add(Cmd::kQuery, "two", 1);
  add(Cmd::kUpdate, "two", 1, 3);
  add(Cmd::kQuery, "two", 1);
  add(Cmd::kQuery, "two", 1, 2);
  add(Cmd::kGet, "two", 15);
  add(Cmd::kQuery, "shadow", 1);
  add(Cmd::kUpdate, "shadow", 1, 2);
  add(Cmd::kQuery, "shadow", 1);
  add(Cmd::kGet, "shadow", 1);
  add(Cmd::kQuery, "off", 1);
  add(Cmd::kQuery, "off", 2);
  add(Cmd::kQuery, "one", 0);
  std::vector<Decision> out(reqs.size());
  batched->ExecuteBatch(reqs, out);
  for (size_t i = 0; i < reqs.size(); ++i)
    ExpectSameDecision(out[i], lone->Execute(reqs[i]), "member " + std::to_string(i));
  EXPECT_EQ(out[12].count, 1);  // k0 once (n=1)
  EXPECT_FALSE(out[33].ok());   // an unknown biz
  EXPECT_FALSE(out[34].ok());   // n=0
  EXPECT_FALSE(out[35].ok());   // an empty key
}

// A store file deleted under the engine: a batch's read run fails each
// member as the same request alone fails (status, message, biz).
TEST_F(EngineTest, BatchReadsOfADeletedStoreFileFailAsLoneRequestsDo) {
  auto e = EngineFor(R"(<map><biz id="7" name="one"><rule interval="60" max="3"/></biz></map>)");
  ASSERT_TRUE(Do(*e, Cmd::kUpdate, "one", "x").ok());
  ASSERT_TRUE(std::filesystem::remove(dir_ / "store/frs.0.store"));
  EXPECT_FALSE(store_->CheckFiles().ok());
  const std::string keys[3] = {"x", "y", "z"};
  Request reqs[3];
  for (int i = 0; i < 3; ++i) {
    reqs[i].cmd = i == 2 ? Cmd::kGet : Cmd::kQuery;
    reqs[i].biz = "one";
    reqs[i].key = keys[i];
  }
  Decision out[3];
  EXPECT_FALSE(e->ExecuteBatch(reqs, out));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].status.code(), Status::Code::kUnavailable) << i;
    EXPECT_EQ(out[i].biz_id, 7) << i;
    ExpectSameDecision(out[i], e->Execute(reqs[i]), "member " + std::to_string(i));
  }
}

// A node written under a two-rule layout, read after a reload kept one rule:
// it holds more state than the new layout, and a batch's read must read it
// whole to find the kept rule's count, as a lone query does.
TEST_F(EngineTest, BatchReadsOfANodeLargerThanItsLayoutReadItWhole) {
  auto e = EngineFor(R"(<map><biz id="1" name="a"><rule algo="calendar" interval="86400" max="10"/>
    <rule interval="300" max="5"/></biz></map>)");
  const std::string keys[6] = {"a0", "a1", "a2", "a3", "a4", "a5"};
  Request updates[6], queries[6];
  for (int i = 0; i < 6; ++i) {
    updates[i].cmd = Cmd::kUpdate;
    updates[i].biz = "a";
    updates[i].key = keys[i];
    updates[i].n = i % 3 + 1;
    queries[i] = updates[i];
    queries[i].cmd = Cmd::kQuery;
    queries[i].n = 1;
  }
  Decision out[6];
  e->ExecuteBatch(updates, out);
  WriteMap(R"(<map><biz id="1" name="a"><rule interval="300" max="5"/></biz></map>)");
  ASSERT_TRUE(e->Reload("").ok());
  e->ExecuteBatch(queries, out);
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(keys[i]);
    ASSERT_TRUE(out[i].ok()) << out[i].status.ToString();
    EXPECT_EQ(out[i].nrules, 1u);
    EXPECT_EQ(out[i].count, i % 3 + 1);
    ExpectSameDecision(out[i], e->Execute(queries[i]), keys[i]);
  }
}

// A run mixing nodes of the old, larger layout with nodes of the current
// one: only the old ones are read again, and each member keeps its own
// answer in its own place.
TEST_F(EngineTest, ARunOfReadsReadsAgainOnlyTheNodesLargerThanTheirLayout) {
  auto e = EngineFor(R"(<map><biz id="1" name="a"><rule algo="calendar" interval="86400" max="10"/>
    <rule interval="300" max="5"/></biz></map>)");
  auto request = [](Cmd cmd, const std::string& key, int64_t n) {
    Request r;
    r.cmd = cmd;
    r.biz = "a";
    r.key = key;
    r.n = n;
    return r;
  };
  const std::string keys[6] = {"old0", "new0", "old1", "new1", "new2", "old2"};
  for (int i : {0, 2, 5}) ASSERT_TRUE(e->Execute(request(Cmd::kUpdate, keys[i], i + 1)).ok());
  WriteMap(R"(<map><biz id="1" name="a"><rule interval="300" max="5"/></biz></map>)");
  ASSERT_TRUE(e->Reload("").ok());
  for (int i : {1, 3, 4}) ASSERT_TRUE(e->Execute(request(Cmd::kUpdate, keys[i], i)).ok());
  Request queries[6];
  for (int i = 0; i < 6; ++i) queries[i] = request(Cmd::kQuery, keys[i], 1);
  Decision out[6];
  e->ExecuteBatch(queries, out);
  const int64_t counts[6] = {1, 1, 3, 3, 4, 6};
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(keys[i]);
    ASSERT_TRUE(out[i].ok()) << out[i].status.ToString();
    EXPECT_EQ(out[i].nrules, 1u);
    EXPECT_EQ(out[i].count, counts[i]);
    ExpectSameDecision(out[i], e->Execute(queries[i]), keys[i]);
  }
}

TEST_F(EngineTest, BatchMembersAreCountedInDailyStatsPerBiz) {
  auto e = EngineFor(R"(<map>
    <biz id="1" name="a"><rule interval="60" max="2"/></biz>
    <biz id="2" name="b"><rule interval="60" max="100"/></biz>
  </map>)");
  const char* bizzes[] = {"a", "a", "b", "a", "b", "b", "a", "missing"};
  Request reqs[8];
  for (int i = 0; i < 8; ++i) {
    reqs[i].cmd = i % 3 == 2 ? Cmd::kQuery : Cmd::kUpdate;
    reqs[i].biz = bizzes[i];
    reqs[i].key = "k";
  }
  Decision out[8];
  e->ExecuteBatch(reqs, out);
  // a: update, update (allowed, count 2), update (denied), update (denied); b: query, update, query.
  Request acq[2] = {{.cmd = Cmd::kAcquire, .biz = "b", .key = "j"}, {.cmd = Cmd::kAcquire, .biz = "a", .key = "j"}};
  Decision aout[2];
  EXPECT_TRUE(e->ExecuteBatch(acq, aout));
  auto stats = e->DailyStats();
  ASSERT_EQ(stats.size(), 2u);
  for (const BizStats& b : stats) {
    ASSERT_EQ(b.days.size(), 1u) << b.name;
    const BizStatsDay& t = b.days[0];
    if (b.name == "a") {
      EXPECT_EQ(t.requests, 5u);
      EXPECT_EQ(t.allowed, 3u);
      EXPECT_EQ(t.denied, 2u);
      EXPECT_EQ(t.new_keys, 2u);
    } else {
      EXPECT_EQ(b.name, "b");
      EXPECT_EQ(t.requests, 4u);
      EXPECT_EQ(t.allowed, 4u);
      EXPECT_EQ(t.denied, 0u);
      EXPECT_EQ(t.new_keys, 2u);
    }
  }
}

TEST_F(EngineTest, CalendarDaysFollowTheEngineTimeZone) {
  WriteMap(R"(<map><biz id="1" name="push"><rule algo="calendar" interval="86400" max="2"/></biz></map>)");
  auto e = OpenEngine(nullptr, "map.xml", "Asia/Shanghai");
  clock_.Set((kDay0 + 16 * 3600 - 60) * 1000);  // 23:59 in Shanghai
  EXPECT_TRUE(Do(*e, Cmd::kAcquire, "push", "u").allowed);
  EXPECT_TRUE(Do(*e, Cmd::kAcquire, "push", "u").allowed);
  Decision d = Do(*e, Cmd::kAcquire, "push", "u");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 60);
  clock_.Advance(60'000);
  EXPECT_TRUE(Do(*e, Cmd::kAcquire, "push", "u").allowed);
}

TEST_F(EngineTest, ConcurrentAcquiresNeverOverAdmitWhileReloading) {
  auto e = EngineFor(R"(<map><biz id="1" name="b"><rule interval="3600" max="1000"/>
    <rule algo="sliding" interval="3600" max="5000"/></biz></map>)");
  std::atomic<int> allowed{0};
  std::atomic<bool> stop{false};
  std::thread reloader([&] {
    while (!stop) ASSERT_TRUE(e->Reload("").ok());
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&] {
      for (int i = 0; i < 600; ++i) allowed += Do(*e, Cmd::kAcquire, "b", "hot").allowed ? 1 : 0;
    });
  }
  for (auto& w : workers) w.join();
  stop = true;
  reloader.join();
  EXPECT_EQ(allowed.load(), 1000);
  EXPECT_EQ(Do(*e, Cmd::kGet, "b", "hot").count, 1000);
  auto stats = e->DailyStats();
  EXPECT_EQ(stats.at(0).days.at(0).requests, 2400u);  // the get is not a use
}

// A store that keeps nodes in a map: isolates the engine's own cost (the
// real store's locking is measured by its own tests).
class MapStore final : public Store {
 public:
  const StoreGeometry& geometry() const override { return geo_; }
  Status Update(const KeyRef& key, uint32_t state_bytes, uint32_t, const Mutator& fn, UpdateResult* r) override {
    auto it = nodes_.find({key.fp.lo, key.fp.hi});
    NodeRef ref;
    uint8_t buf[kMaxStateBytes] = {};
    ref.state = buf;
    ref.state_bytes = state_bytes;
    if (it != nodes_.end()) {
      ref.exists = true;
      ref.stored_state_bytes = static_cast<uint32_t>(it->second.size());
      std::memcpy(buf, it->second.data(), std::min<size_t>(it->second.size(), state_bytes));
    }
    if (r) *r = UpdateResult{ref.exists, !ref.exists, false, false};
    Commit c = fn(ref);
    if (c == Commit::kWrite) {
      if (it == nodes_.end()) it = nodes_.emplace(std::make_pair(key.fp.lo, key.fp.hi), std::vector<uint8_t>()).first;
      it->second.assign(buf, buf + state_bytes);
    } else if (c == Commit::kErase && it != nodes_.end()) {
      nodes_.erase(it);
    }
    return Status::OK();
  }
  Status UpdateBatch(std::span<const BatchItem>, uint32_t, const BatchMutator&, std::vector<UpdateResult>*) override {
    return Status::Unavailable("not in this fake");
  }
  Result<NodeInfo> Get(const KeyRef&) override { return Status::Unavailable("not in this fake"); }
  Status Erase(const KeyRef&) override { return Status::Unavailable("not in this fake"); }
  Status ForEach(const Filter&, const Visitor&) override { return Status::Unavailable("not in this fake"); }
  Result<uint64_t> EraseIf(const Filter&, const std::function<bool(const NodeInfo&)>&) override {
    return Status::Unavailable("not in this fake");
  }
  void SetLiveBizzes(std::vector<bool>) override {}
  StoreStats Stats() const override { return {}; }
  Status Flush(bool) override { return Status::OK(); }
  Status Reserve() override { return Status::OK(); }
  Status CheckFiles() override { return Status::OK(); }
  Result<uint32_t> RecoverDeadOwner(int32_t) override { return Status::Unavailable("not in this fake"); }
  Result<VerifyReport> Verify(bool) override { return Status::Unavailable("not in this fake"); }

 private:
  StoreGeometry geo_;
  std::map<std::pair<uint64_t, uint64_t>, std::vector<uint8_t>> nodes_;
};

TEST_F(EngineTest, HotPathMakesNoHeapAllocation) {
  WriteMap(R"(<map><biz id="1" name="login"><rule interval="60" max="1000000"/></biz>
    <biz id="2" name="ad"><rule algo="calendar" interval="86400" max="1000000"/>
      <rule algo="sliding" interval="3600" max="1000000"/><rule algo="token_bucket" interval="1" max="1000000"/></biz>
  </map>)");
  MapStore store;
  auto e = OpenEngine(&store);
  for (const char* biz : {"login", "ad"}) {
    ASSERT_TRUE(Do(*e, Cmd::kAcquire, biz, "user:42").allowed);
    const int kRounds = 20000;
    limit::testing::AllocCount allocs;
    auto start = std::chrono::steady_clock::now();
    bool all = true;
    for (int i = 0; i < kRounds; ++i) all = Do(*e, Cmd::kAcquire, biz, "user:42").allowed && all;
    auto took = std::chrono::steady_clock::now() - start;
    EXPECT_TRUE(all);
    EXPECT_EQ(allocs.count(), 0) << biz;
    RecordProperty(std::string("ns_per_acquire_") + biz,
                   static_cast<int>(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count() / kRounds));
  }
}

// An in-process program whose threads each decided once and then sit idle
// (never deciding again, never calling Store::ReleaseIdleWriters) holds no
// writer entry: another opener of the same files, frsd's worker, writes at
// once. Before, the 32 idle threads kept all 32 entries of the file, and
// frsd's writes waited writer_wait_ms (5 s) and answered 503 for as long
// as the program idled.
TEST_F(EngineTest, IdleThreadsOfAnInProcessProgramHoldNoWriterEntry) {
  WriteMap(R"(<map><biz id="1" name="api"><rule interval="60" max="100"/></biz></map>)");
  auto e = OpenEngine();
  constexpr int kThreads = 32;  // a file's writer entries
  std::mutex mu;
  std::condition_variable cv;
  int decided = 0;
  bool done = false;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const Decision d = Do(*e, Cmd::kAcquire, "api", "t" + std::to_string(t));
      EXPECT_TRUE(d.ok()) << d.status.ToString();
      std::unique_lock<std::mutex> l(mu);
      ++decided;
      cv.notify_all();
      cv.wait(l, [&] { return done; });
    });
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return decided == kThreads; });
  }
  // frsd: a store and engine of their own on the same files, waiting at
  // most 300 ms for an entry (a bound that fails, not one that is timed).
  StoreOptions o;
  o.dir = dir_ / "store";
  o.geometry = StoreGeometry{1, 1024, 8};
  o.writer_wait_ms = 300;
  auto frsd_store = Store::Open(o);
  ASSERT_TRUE(frsd_store.ok()) << frsd_store.status().ToString();
  auto frsd = OpenEngine(frsd_store.value().get());
  const Decision d = Do(*frsd, Cmd::kAcquire, "api", "frsd");
  EXPECT_TRUE(d.ok()) << d.status.ToString();
  EXPECT_TRUE(d.allowed);
  {
    std::lock_guard<std::mutex> l(mu);
    done = true;
  }
  cv.notify_all();
  for (auto& th : threads) th.join();
}

// Node damage is seen (store format 5: a check byte per node). Every byte
// of a node of each of the issue's shapes is flipped in turn, the rest of
// the store left as it is: `verify` reports the node, or (the last access
// second, which only orders eviction) the key's counts are what they were.
// Before, a zeroed expiry byte restarted a key and a flipped state byte
// made its count 4,278,190,135.
TEST_F(EngineTest, EveryByteOfANodeOfEachShapeIsCheckedOrHarmless) {
  struct Shape {
    const char* biz;
    int id;
    const char* keys;   // the biz's keys="..." ("": none)
    const char* rules;  // its <rule> elements
    int64_t n;
    int uses;
    uint32_t span;  // slots its node takes
  };
  const Shape shapes[] = {
      {"fixed1", 1, "", R"(<rule algo="fixed" interval="3600" max="5"/>)", 1, 2, 1},
      {"adcap", 2, "",
       R"(<rule algo="sliding" interval="3600" max="3"/>)"
       R"(<rule algo="calendar" interval="86400" max="10"/>)",
       1, 2, 2},
      {"sliding10", 3, "", R"(<rule algo="sliding" interval="3600" max="10"/>)", 1, 3, 2},
      {"goldsum", 4, "", R"(<rule algo="sliding" interval="600" max="100"/>)", 7, 3, 5},
      {"borrowing", 5, "", R"(<rule algo="fixed" interval="3600" max="2" borrow="3"/>)", 3, 1, 1},
      {"bucket", 6, "", R"(<rule algo="token_bucket" interval="3600" max="5"/>)", 1, 2, 1},
      {"kept", 7, "keep", R"(<rule algo="sliding" interval="86400" max="4"/>)", 1, 3, 3},
  };
  std::string map = "<map>\n";
  for (const Shape& sh : shapes) {
    map += "  <biz id=\"" + std::to_string(sh.id) + "\" name=\"" + sh.biz + "\"";
    if (*sh.keys != '\0') map += " keys=\"" + std::string(sh.keys) + "\"";
    map += ">" + std::string(sh.rules) + "</biz>\n";
  }
  auto e = EngineFor(map + "</map>");
  ASSERT_TRUE(e);
  const std::string path = dir_ / "store/frs.0.store";
  store::FileHeader h{};
  {
    int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pread(fd, &h, sizeof h, 0), static_cast<ssize_t>(sizeof h));
    ::close(fd);
  }
  auto counts = [&](const Shape& sh) {
    const Decision d = Do(*e, Cmd::kQuery, sh.biz, std::string("victim-") + sh.biz, 1);
    std::vector<int64_t> c;
    for (uint32_t i = 0; i < d.nrules; ++i) c.push_back(d.rules[i].count);
    return c;
  };
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(sh.biz);
    const std::string key = std::string("victim-") + sh.biz;
    for (int u = 0; u < sh.uses; ++u) Do(*e, Cmd::kAcquire, sh.biz, key, sh.n);
    const std::vector<int64_t> before = counts(sh);
    ASSERT_FALSE(before.empty());
    EXPECT_GT(before[0], 0);
    std::vector<NodeInfo> nodes;
    Store::Filter f;
    f.biz = sh.id;
    ASSERT_TRUE(store_->ForEach(f, [&](const NodeInfo& n) { nodes.push_back(n); }).ok());
    ASSERT_EQ(nodes.size(), 1u);
    const NodeInfo& n = nodes[0];
    EXPECT_EQ(n.span, sh.span);
    ASSERT_EQ(n.file, 0u);
    const uint64_t at = h.chains_offset + (uint64_t{n.keynode} * h.chain + n.slot) * kSlotBytes;
    int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    int detected = 0;
    for (uint32_t b = 0; b < n.span * kSlotBytes; ++b) {
      SCOPED_TRACE("byte " + std::to_string(b));
      uint8_t was = 0;
      ASSERT_EQ(::pread(fd, &was, 1, static_cast<off_t>(at + b)), 1);
      const uint8_t flipped = was ^ 0xFF;
      ASSERT_EQ(::pwrite(fd, &flipped, 1, static_cast<off_t>(at + b)), 1);
      auto v = store_->Verify(false);
      ASSERT_TRUE(v.ok());
      const bool seen = !v->problems.empty();
      const bool last_access =
          b >= offsetof(store::NodeHeader, last_access_s) && b < offsetof(store::NodeHeader, route_pos);
      if (seen) {
        ++detected;
        EXPECT_FALSE(last_access) << "the last access is no part of the check";
      } else {
        EXPECT_TRUE(last_access) << "a damaged byte went unseen";
        EXPECT_EQ(counts(sh), before);
      }
      ASSERT_EQ(::pwrite(fd, &was, 1, static_cast<off_t>(at + b)), 1);
      v = store_->Verify(false);
      ASSERT_TRUE(v.ok());
      EXPECT_TRUE(v->problems.empty()) << v->problems[0];
    }
    ::close(fd);
    EXPECT_EQ(detected, static_cast<int>(n.span * kSlotBytes) - 4);
    EXPECT_EQ(counts(sh), before);
  }
}

}  // namespace
}  // namespace frs
