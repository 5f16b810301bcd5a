// Statistics by key field (map.xml <stats>) through the Engine: what the
// platform asks of them (requests and denials per app, per app and
// interface, distinct users per app), days, reopening, merging, and the
// map's errors.
#include "stats/field_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/stats_map.h"
#include "common/temp_dir.h"
#include "frs/admin_engine.h"
#include "limit/map_config.h"
#include "limit/rule_harness.h"

namespace frs {
namespace field_stats_test {

using limit::testing::kDay0;

const std::string kApiMap = "<map>\n" + testing::StatsApiBiz(50) +
                            "  <biz id=\"8\" name=\"plain\"><rule interval=\"60\" max=\"5\"/></biz>\n</map>";

// One engine over its own store directory.
struct Server {
  Server(const std::string& dir, const std::string& map, const Clock* clock) : dir(dir) { Open(map, clock); }
  void Open(const std::string& map, const Clock* clock) {
    StoreOptions so;
    so.dir = dir;
    so.geometry = StoreGeometry{1, 16384, 8};
    auto s = Store::Open(so);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store = std::move(s.value());
    auto e = AdminEngine::Open(EngineOptions{.map_path = dir + "/map.xml",
                                             .map_text = map,
                                             .timezone = "UTC",
                                             .store = store.get(),
                                             .stats_dir = dir,
                                             .clock = clock,
                                             .on_problem = nullptr,
                                             .lease_key_file = {}});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine = std::move(e.value());
  }
  void Close() {
    engine.reset();
    store.reset();
  }
  Decision Do(Cmd cmd, std::string_view biz, std::string_view key, int64_t n = 1) {
    return engine->Execute(Request{.cmd = cmd, .biz = biz, .key = key, .n = n});
  }
  GroupStats Stats(const std::string& by, int64_t day = -1, const std::string& value = "", uint32_t top = 0,
                   bool sketches = false, const std::string& biz = "api") {
    auto r = engine->StatsBy(
        GroupStatsQuery{.biz = biz, .by = by, .day = day, .value = value, .top = top, .sketches = sketches});
    EXPECT_TRUE(r.ok()) << by << ": " << r.status().ToString();
    return r.ok() ? r.value() : GroupStats{};
  }

  std::string dir;
  std::unique_ptr<Store> store;
  std::unique_ptr<AdminEngine> engine;
};

struct Counts {
  uint64_t requests = 0, allowed = 0, denied = 0, units = 0;
};

// What the rule (fixed window of 3600 s, max 50, everything inside one
// window) answers, and what each group must have counted.
class Truth {
 public:
  // Sends one request and checks the engine decided as the rule says.
  void Send(Server& s, Cmd cmd, const std::string& app, const std::string& user, const std::string& iface,
            int64_t n = 1) {
    const std::string key = app + "|" + user + "|" + iface;
    int64_t& used = used_[key];
    const bool within = used + n <= 50;
    const Decision d = s.Do(cmd, "api", key, n);
    ASSERT_TRUE(d.ok()) << key << ": " << d.status.ToString();
    ASSERT_EQ(d.allowed, within) << key << " after " << used << " uses, n=" << n;
    uint64_t units = 0;
    if (cmd == Cmd::kUpdate || (cmd == Cmd::kAcquire && within)) {
      used += n;
      units = static_cast<uint64_t>(n);
    }
    for (Counts* c : {&by_app[app], &by_app_iface[app + "|" + iface]}) {
      ++c->requests;
      ++(within ? c->allowed : c->denied);
      c->units += units;
    }
    users[app].insert(user);
  }

  std::map<std::string, Counts> by_app, by_app_iface;
  std::map<std::string, std::set<std::string>> users;

 private:
  std::map<std::string, int64_t> used_;
};

void ExpectRow(const GroupStat& got, const Counts& want, const std::string& what) {
  EXPECT_EQ(got.requests, want.requests) << what;
  EXPECT_EQ(got.allowed, want.allowed) << what;
  EXPECT_EQ(got.denied, want.denied) << what;
  EXPECT_EQ(got.units, want.units) << what;
}

std::map<std::string, const GroupStat*> ByValue(const GroupStats& s) {
  std::map<std::string, const GroupStat*> m;
  for (const GroupStat& g : s.rows) m[g.value] = &g;
  return m;
}

// Most requests first, ties by value: the order StatsBy answers in.
std::vector<std::string> Ranked(const std::map<std::string, Counts>& truth) {
  std::vector<std::string> v;
  for (const auto& [value, c] : truth) v.push_back(value);
  std::stable_sort(v.begin(), v.end(), [&](const std::string& a, const std::string& b) {
    return truth.at(a).requests > truth.at(b).requests;
  });
  return v;
}

class FieldStatsTest : public ::testing::Test {
 protected:
  // The platform's traffic: app "big" with 20,000 users, "mid" with 300,
  // "tiny" with 7 (some over the rule's max), over a few interfaces, with
  // acquires, updates and queries.
  void SendTraffic(Server& s, Truth* t) {
    for (int u = 0; u < 20000; ++u) {
      const std::string user = "u" + std::to_string(u);
      for (int k = 0; k <= u % 2; ++k) t->Send(s, Cmd::kAcquire, "big", user, "if" + std::to_string(u % 3));
      if (u % 10 == 0) t->Send(s, Cmd::kQuery, "big", user, "login");
    }
    for (int u = 0; u < 300; ++u) {
      const std::string user = "m" + std::to_string(u);
      for (int i = 0; i < 3; ++i)
        for (int k = 0; k < 2 + (u + i) % 3; ++k) t->Send(s, Cmd::kAcquire, "mid", user, "if" + std::to_string(i));
      if (u % 50 == 0) t->Send(s, Cmd::kUpdate, "mid", user, "if0", 48);  // 48 more: within for some, not all
    }
    for (int u = 0; u < 7; ++u) {
      const std::string user = "t" + std::to_string(u);
      for (int k = 0; k < 40 + 5 * u; ++k) t->Send(s, Cmd::kAcquire, "tiny", user, "pay");  // users 3..6: denials
      for (int k = 0; k < 3; ++k) t->Send(s, Cmd::kUpdate, "tiny", user, "get", 20);        // the third is over
      t->Send(s, Cmd::kAcquire, "tiny", user, "pay", 3);
    }
  }

  testing::TempDir dir_;
  FakeClock clock_{kDay0 * 1000 + 123};
};

TEST_F(FieldStatsTest, ThePlatformsThreeQuestions) {
  Server s(dir_ / "a", kApiMap, &clock_);
  ASSERT_NE(s.engine, nullptr);
  Truth t;
  SendTraffic(s, &t);
  // Keys whose field count is wrong: decided, but counted as field errors.
  for (const char* bad : {"big|u1", "big|u1|if0|extra", "big", "big:u1:if0"}) {
    Decision d = s.Do(Cmd::kAcquire, "api", bad);
    ASSERT_TRUE(d.ok()) << bad;
  }
  // A biz without <stats> counts nothing anywhere.
  ASSERT_TRUE(s.Do(Cmd::kAcquire, "plain", "big|u1|if0").ok());
  ASSERT_GT(t.by_app["tiny"].denied, 0u);
  ASSERT_GT(t.by_app["mid"].denied, 0u);

  // 1. Requests, allowed, denied and units per app.
  const GroupStats by_app = s.Stats("app");
  EXPECT_EQ(by_app.biz, "api");
  EXPECT_EQ(by_app.biz_id, 7u);
  EXPECT_EQ(by_app.by, "app");
  EXPECT_EQ(by_app.day, kDay0 / 86400);
  EXPECT_EQ(by_app.distinct_fields, std::vector<std::string>{"user"});
  EXPECT_EQ(by_app.field_errors, 4u);
  EXPECT_EQ(by_app.lost, 0u);
  EXPECT_EQ(by_app.groups, 3u);
  ASSERT_EQ(by_app.rows.size(), 3u);
  const std::vector<std::string> app_order = Ranked(t.by_app);
  for (size_t i = 0; i < 3; ++i) {
    const GroupStat& g = by_app.rows[i];
    EXPECT_EQ(g.value, app_order[i]) << i;
    ExpectRow(g, t.by_app[g.value], g.value);
    ASSERT_EQ(g.distinct.size(), 1u) << g.value;
    EXPECT_TRUE(g.sketches.empty());
  }
  // 2. Requests (and the rest) per app and interface.
  const GroupStats by_ai = s.Stats("app,iface");
  EXPECT_EQ(by_ai.by, "app,iface");
  EXPECT_TRUE(by_ai.distinct_fields.empty());
  EXPECT_EQ(by_ai.field_errors, 4u);
  ASSERT_EQ(by_ai.rows.size(), t.by_app_iface.size());
  EXPECT_EQ(by_ai.groups, t.by_app_iface.size());
  const auto ai = ByValue(by_ai);
  for (const auto& [value, want] : t.by_app_iface) {
    ASSERT_EQ(ai.count(value), 1u) << value;
    ExpectRow(*ai.at(value), want, value);
    EXPECT_TRUE(ai.at(value)->distinct.empty());
  }
  // 3. Distinct users per app: exact for 7 and 300, within 2 % for 20,000.
  const auto apps = ByValue(by_app);
  ASSERT_EQ(t.users["tiny"].size(), 7u);
  ASSERT_EQ(t.users["mid"].size(), 300u);
  ASSERT_EQ(t.users["big"].size(), 20000u);
  EXPECT_EQ(apps.at("tiny")->distinct[0], 7u);
  EXPECT_EQ(apps.at("mid")->distinct[0], 300u);
  EXPECT_NEAR(static_cast<double>(apps.at("big")->distinct[0]), 20000.0, 0.02 * 20000);
}

TEST_F(FieldStatsTest, TopValueAndTheOrderOfBy) {
  Server s(dir_ / "a", kApiMap, &clock_);
  ASSERT_NE(s.engine, nullptr);
  Truth t;
  for (int app = 0; app < 6; ++app)
    for (int i = 0; i < 4; ++i)
      for (int k = 0; k < (app + 1) * (i + 1); ++k)  // app5|if3: 24 requests, ... app0|if0: 1
        t.Send(s, Cmd::kAcquire, "app" + std::to_string(app), "u" + std::to_string(k % 5), "if" + std::to_string(i));
  // Ties (app1|if2 and app2|if1: 6 each) go by value.
  const std::vector<std::string> ranked = Ranked(t.by_app_iface);
  for (uint32_t top : {1u, 3u, 10u, 24u, 100u}) {
    const GroupStats g = s.Stats("app,iface", -1, "", top);
    ASSERT_EQ(g.rows.size(), std::min<size_t>(top, 24)) << top;
    EXPECT_EQ(g.groups, 24u) << "groups counts every group, whatever top returns";
    for (size_t i = 0; i < g.rows.size(); ++i) {
      EXPECT_EQ(g.rows[i].value, ranked[i]) << "top " << top << " row " << i;
      ExpectRow(g.rows[i], t.by_app_iface[ranked[i]], ranked[i]);
    }
  }
  // value=: one group.
  const GroupStats one = s.Stats("app,iface", -1, "app3|if2");
  ASSERT_EQ(one.rows.size(), 1u);
  EXPECT_EQ(one.rows[0].value, "app3|if2");
  EXPECT_EQ(one.rows[0].requests, 12u);
  ExpectRow(one.rows[0], t.by_app_iface["app3|if2"], "app3|if2");
  const GroupStats app4 = s.Stats("app", -1, "app4");
  ASSERT_EQ(app4.rows.size(), 1u);
  ExpectRow(app4.rows[0], t.by_app["app4"], "app4");
  ASSERT_EQ(app4.rows[0].distinct.size(), 1u);
  EXPECT_EQ(app4.rows[0].distinct[0], 5u);
  EXPECT_TRUE(s.Stats("app,iface", -1, "app9|if0").rows.empty());
  EXPECT_TRUE(s.Stats("app", -1, "app3|if2").rows.empty());
  // ~other, asked for, when nothing overflowed: no row, as for any group
  // that counted nothing (it showed a row of zeros).
  EXPECT_TRUE(s.Stats("app", -1, "~other").rows.empty());

  // by in another order finds the same table, named as the map names it.
  const GroupStats swapped = s.Stats("iface,app");
  EXPECT_EQ(swapped.by, "app,iface");
  ASSERT_EQ(swapped.rows.size(), 24u);
  const GroupStats straight = s.Stats("app,iface");
  for (size_t i = 0; i < 24; ++i) {
    EXPECT_EQ(swapped.rows[i].value, straight.rows[i].value);
    EXPECT_EQ(swapped.rows[i].requests, straight.rows[i].requests);
  }
  // The biz by id.
  EXPECT_EQ(s.Stats("app", -1, "", 0, false, "7").rows.size(), 6u);

  // An unknown by: NotFound, naming the tables the biz keeps.
  for (const char* by : {"user", "iface", "app,user", "app,iface,user", "", "nosuch"}) {
    GroupStatsQuery q;
    q.biz = "api";
    q.by = by;
    auto r = s.engine->StatsBy(q);
    ASSERT_FALSE(r.ok()) << by;
    EXPECT_TRUE(r.status().IsNotFound()) << r.status().ToString();
    const std::string& m = r.status().message();
    EXPECT_NE(m.find("by=\"app\""), std::string::npos) << m;
    EXPECT_NE(m.find("by=\"app,iface\""), std::string::npos) << m;
  }
  // An unknown biz, and one that keeps no <stats>: NotFound too.
  GroupStatsQuery q;
  q.biz = "nosuch";
  q.by = "app";
  auto r = s.engine->StatsBy(q);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("nosuch"), std::string::npos) << r.status().message();
  q.biz = "plain";
  r = s.engine->StatsBy(q);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("plain"), std::string::npos) << r.status().message();
}

TEST_F(FieldStatsTest, EachDayCountsFromZeroAndOldDaysAreDropped) {
  const std::string map = R"(<map>
  <biz id="3" name="api" fields="app,user" separator=":">
    <rule interval="60" max="1000"/>
    <stats by="app" distinct="user" days="2"/>
  </biz>
</map>)";
  Server s(dir_ / "a", map, &clock_);
  ASSERT_NE(s.engine, nullptr);
  const uint32_t day0 = kDay0 / 86400;
  const std::string table_dir = dir_ / "a/stats/3/app+user";
  // Day 0, up to its last second.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s.Do(Cmd::kAcquire, "api", "web:u" + std::to_string(i)).allowed);
  clock_.Set((kDay0 + 86399) * 1000 + 999);
  ASSERT_TRUE(s.Do(Cmd::kAcquire, "api", "web:late").ok());
  EXPECT_EQ(s.engine->Today(), day0);
  GroupStats g = s.Stats("app");
  ASSERT_EQ(g.rows.size(), 1u);
  EXPECT_EQ(g.rows[0].requests, 6u);
  EXPECT_EQ(g.rows[0].distinct[0], 6u);

  // Midnight (UTC): today starts at zero, yesterday still answers.
  clock_.Set((kDay0 + 86400) * 1000);
  EXPECT_EQ(s.engine->Today(), day0 + 1);
  g = s.Stats("app");
  EXPECT_EQ(g.day, day0 + 1);
  EXPECT_TRUE(g.rows.empty());
  EXPECT_EQ(g.groups, 0u);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.Do(Cmd::kAcquire, "api", "web:u" + std::to_string(i)).ok());
  ASSERT_TRUE(s.Do(Cmd::kAcquire, "api", "app2:u0").ok());
  g = s.Stats("app");
  ASSERT_EQ(g.rows.size(), 2u);
  EXPECT_EQ(g.rows[0].value, "web");
  EXPECT_EQ(g.rows[0].requests, 3u);
  EXPECT_EQ(g.rows[0].distinct[0], 3u);
  g = s.Stats("app", day0);
  EXPECT_EQ(g.day, day0);
  ASSERT_EQ(g.rows.size(), 1u);
  EXPECT_EQ(g.rows[0].requests, 6u);
  EXPECT_TRUE(std::filesystem::exists(table_dir + "/" + DayText(day0) + ".frs"));
  EXPECT_TRUE(std::filesystem::exists(table_dir + "/" + DayText(day0 + 1) + ".frs"));
  // A day never counted answers no groups (not an error).
  EXPECT_TRUE(s.Stats("app", day0 - 10).rows.empty());

  // Day 2 (days="2" keeps today and yesterday): day 0's file goes.
  clock_.Set((kDay0 + 2 * 86400) * 1000 + 5);
  ASSERT_TRUE(s.Do(Cmd::kAcquire, "api", "web:u9").ok());
  EXPECT_FALSE(std::filesystem::exists(table_dir + "/" + DayText(day0) + ".frs"));
  EXPECT_TRUE(std::filesystem::exists(table_dir + "/" + DayText(day0 + 1) + ".frs"));
  EXPECT_TRUE(s.Stats("app", day0).rows.empty()) << "the dropped day still answers";
  EXPECT_EQ(s.Stats("app", day0 + 1).rows.size(), 2u);
  EXPECT_EQ(s.Stats("app").rows.size(), 1u);
  // And after a restart too.
  s.Close();
  s.Open(map, &clock_);
  ASSERT_NE(s.engine, nullptr);
  EXPECT_TRUE(s.Stats("app", day0).rows.empty());
  EXPECT_EQ(s.Stats("app", day0 + 1).rows.size(), 2u);
  ASSERT_EQ(s.Stats("app").rows.size(), 1u);
  EXPECT_EQ(s.Stats("app").rows[0].requests, 1u);
}

TEST_F(FieldStatsTest, CountsSurviveAReopen) {
  Truth t;
  {
    Server s(dir_ / "a", kApiMap, &clock_);
    ASSERT_NE(s.engine, nullptr);
    for (int u = 0; u < 1000; ++u)
      t.Send(s, Cmd::kAcquire, "app" + std::to_string(u % 4), "u" + std::to_string(u),
             "if" + std::to_string(u / 4 % 2));
    ASSERT_TRUE(s.Do(Cmd::kAcquire, "api", "broken").ok());
  }  // the engine, then the store, closed
  Server s(dir_ / "a", kApiMap, &clock_);
  ASSERT_NE(s.engine, nullptr);
  const GroupStats g = s.Stats("app");
  ASSERT_EQ(g.rows.size(), 4u);
  EXPECT_EQ(g.field_errors, 1u);
  for (const GroupStat& r : g.rows) {
    ExpectRow(r, t.by_app[r.value], r.value);
    EXPECT_EQ(r.distinct[0], 250u) << r.value;
  }
  const GroupStats ai = s.Stats("app,iface");
  EXPECT_EQ(ai.rows.size(), 8u);
  for (const GroupStat& r : ai.rows) ExpectRow(r, t.by_app_iface[r.value], r.value);
  // And it goes on counting into the same file.
  t.Send(s, Cmd::kAcquire, "app0", "u0", "if0");
  EXPECT_EQ(s.Stats("app", -1, "app0").rows[0].requests, t.by_app["app0"].requests);
  EXPECT_EQ(s.Stats("app", -1, "app0").rows[0].distinct[0], 250u);
}

TEST_F(FieldStatsTest, BatchesCountLikeSingleRequests) {
  Server s(dir_ / "a", kApiMap, &clock_);
  ASSERT_NE(s.engine, nullptr);
  const std::string keys[6] = {"a|u1|x", "a|u2|x", "b|u1|y", "a|u1|x", "bad", "b|u3|y"};
  Request reqs[6];
  for (int i = 0; i < 6; ++i) {
    reqs[i].cmd = i == 2 ? Cmd::kQuery : i == 5 ? Cmd::kUpdate : Cmd::kAcquire;
    reqs[i].biz = "api";
    reqs[i].key = keys[i];
    reqs[i].n = 2;
  }
  Decision out[6];
  s.engine->ExecuteBatch(reqs, out);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(out[i].ok()) << i << ": " << out[i].status.ToString();
  const GroupStats g = s.Stats("app");
  EXPECT_EQ(g.field_errors, 1u);
  const auto rows = ByValue(g);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows.at("a")->requests, 3u);
  EXPECT_EQ(rows.at("a")->distinct[0], 2u);
  EXPECT_EQ(rows.at("b")->requests, 2u);
  EXPECT_EQ(rows.at("b")->distinct[0], 2u);
  // All allowed: a's three acquires record 2 each; b's query records none, its update 2.
  EXPECT_EQ(rows.at("a")->allowed + rows.at("b")->allowed, 5u);
  EXPECT_EQ(rows.at("a")->units, 6u);
  EXPECT_EQ(rows.at("b")->units, 2u);
}

// mode="shadow": what enforce would have denied counts as denied, and its
// uses are recorded (units).
TEST_F(FieldStatsTest, ShadowWouldDenyCountsAsDenied) {
  const std::string map = R"(<map>
  <biz id="5" name="sh" mode="shadow" fields="app,user">
    <rule interval="3600" max="2"/>
    <stats by="app" distinct="user"/>
  </biz>
</map>)";
  Server s(dir_ / "a", map, &clock_);
  ASSERT_NE(s.engine, nullptr);
  for (int i = 0; i < 4; ++i) {
    const Decision d = s.Do(Cmd::kAcquire, "sh", "web:u1");
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.would_deny, i >= 2) << i;
  }
  const GroupStats g = s.Stats("app", -1, "", 0, false, "sh");
  ASSERT_EQ(g.rows.size(), 1u);
  EXPECT_EQ(g.rows[0].requests, 4u);
  EXPECT_EQ(g.rows[0].allowed, 2u);
  EXPECT_EQ(g.rows[0].denied, 2u);
  EXPECT_EQ(g.rows[0].units, 4u);  // a shadow denial records its use too
  EXPECT_EQ(g.rows[0].distinct[0], 1u);
}

TEST_F(FieldStatsTest, MergeStatsByAddsCountsAndUnitesDistinctUsers) {
  Server a(dir_ / "a", kApiMap, &clock_);
  Server b(dir_ / "b", kApiMap, &clock_);
  ASSERT_NE(a.engine, nullptr);
  ASSERT_NE(b.engine, nullptr);
  Truth ta, tb;
  // big: A has users 0..3999, B 2000..5999 (union 6000); mid: A 0..99, B 50..149 (union 150).
  for (int u = 0; u < 4000; ++u)
    ta.Send(a, Cmd::kAcquire, "big", "u" + std::to_string(u), "if" + std::to_string(u % 2));
  for (int u = 2000; u < 6000; ++u)
    tb.Send(b, Cmd::kAcquire, "big", "u" + std::to_string(u), "if" + std::to_string(u % 2));
  for (int u = 0; u < 100; ++u) ta.Send(a, Cmd::kAcquire, "mid", "m" + std::to_string(u), "if0");
  for (int u = 50; u < 150; ++u) tb.Send(b, Cmd::kUpdate, "mid", "m" + std::to_string(u), "if0", 3);
  for (int u = 0; u < 5; ++u) ta.Send(a, Cmd::kAcquire, "onlyA", "x" + std::to_string(u), "if9");
  ASSERT_TRUE(a.Do(Cmd::kAcquire, "api", "a|b").ok());  // a field error in A
  ASSERT_TRUE(a.Do(Cmd::kAcquire, "api", "a|b|c|d").ok());

  for (const char* by : {"app", "app,iface"}) {
    const GroupStats from_a = a.Stats(by, -1, "", 0, true);
    if (std::string(by) == "app") {
      ASSERT_EQ(from_a.rows.size(), 3u);
      for (const GroupStat& r : from_a.rows) ASSERT_EQ(r.sketches.size(), 1u) << r.value;
    }
    Status st = b.engine->MergeStatsBy(from_a);
    ASSERT_TRUE(st.ok()) << by << ": " << st.ToString();
  }

  const GroupStats merged = b.Stats("app");
  EXPECT_EQ(merged.field_errors, 2u);
  const auto rows = ByValue(merged);
  ASSERT_EQ(rows.size(), 3u);
  for (const char* app : {"big", "mid", "onlyA"}) {
    Counts sum = ta.by_app[app];
    const Counts& other = tb.by_app[app];
    sum.requests += other.requests;
    sum.allowed += other.allowed;
    sum.denied += other.denied;
    sum.units += other.units;
    ASSERT_EQ(rows.count(app), 1u) << app;
    ExpectRow(*rows.at(app), sum, app);
  }
  // The union, not the sum (10,000 / 200).
  EXPECT_NEAR(static_cast<double>(rows.at("big")->distinct[0]), 6000.0, 0.02 * 6000);
  EXPECT_EQ(rows.at("mid")->distinct[0], 150u);
  EXPECT_EQ(rows.at("onlyA")->distinct[0], 5u);
  // The other table: counts add up per app and interface.
  const GroupStats by_iface = b.Stats("app,iface");  // ByValue points into it: kept alive
  const auto ai = ByValue(by_iface);
  std::map<std::string, Counts> want = tb.by_app_iface;
  for (const auto& [v, c] : ta.by_app_iface) {
    want[v].requests += c.requests;
    want[v].allowed += c.allowed;
    want[v].denied += c.denied;
    want[v].units += c.units;
  }
  ASSERT_EQ(ai.size(), want.size());
  for (const auto& [v, c] : want) {
    ASSERT_EQ(ai.count(v), 1u) << v;
    ExpectRow(*ai.at(v), c, v);
  }
  // A stays as it was.
  EXPECT_EQ(a.Stats("app", -1, "big").rows[0].requests, ta.by_app["big"].requests);

  // Refusals: an unknown table or biz, a sketch that is not one.
  GroupStats bad = a.Stats("app", -1, "mid", 0, true);
  bad.by = "user";
  EXPECT_TRUE(b.engine->MergeStatsBy(bad).IsNotFound());
  bad.by = "app";
  bad.biz = "nosuch";
  EXPECT_TRUE(b.engine->MergeStatsBy(bad).IsNotFound());
  bad.biz = "api";
  bad.rows[0].sketches[0] = "e:123";
  Status st = b.engine->MergeStatsBy(bad);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("user"), std::string::npos) << st.message();
  // Nothing of the refused merge was counted.
  EXPECT_EQ(b.Stats("app", -1, "mid").rows[0].requests, rows.at("mid")->requests);
}

// A handoff re-sent (its answer lost) is taken once, by its receipt; a
// merge of a day the table does not keep, or of tomorrow, is refused and
// changes nothing.
TEST_F(FieldStatsTest, AReceiptIsTakenOnceAndOnlyKeptDaysAreTaken) {
  Server a(dir_ / "a", kApiMap, &clock_);
  Server b(dir_ / "b", kApiMap, &clock_);
  ASSERT_NE(a.engine, nullptr);
  ASSERT_NE(b.engine, nullptr);
  for (int u = 0; u < 30; ++u) ASSERT_TRUE(a.Do(Cmd::kAcquire, "api", "big|u" + std::to_string(u) + "|if0").ok());
  const GroupStats from_a = a.Stats("app", -1, "", 0, true);
  ASSERT_TRUE(b.engine->MergeStatsBy(from_a, "shard-a/stats/7/app+user/day#0").ok());
  ASSERT_TRUE(b.engine->MergeStatsBy(from_a, "shard-a/stats/7/app+user/day#0").ok());  // again: not taken
  EXPECT_EQ(b.Stats("app", -1, "big").rows.at(0).requests, 30u);
  ASSERT_TRUE(b.engine->MergeStatsBy(from_a, "shard-a/stats/7/app+user/day#1").ok());  // another receipt
  EXPECT_EQ(b.Stats("app", -1, "big").rows.at(0).requests, 60u);
  EXPECT_EQ(b.Stats("app", -1, "big").rows.at(0).distinct.at(0), 30u);  // the same users
  // Each receipt's file keeps what its groups take, not a day's 1 MB step:
  // a handoff in many pieces, or an admin's many posts, stay small.
  int received = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_ / "b")) {
    if (e.path().filename().string().find(".from-") == std::string::npos) continue;
    ++received;
    EXPECT_LE(e.file_size(), 64u << 10) << e.path();
  }
  EXPECT_EQ(received, 2);

  // A received file cut and grown back (its records read as zeros) is read
  // for what is left of it and counted in lost: never summed as if whole.
  std::string cut;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_ / "b"))
    if (e.path().filename().string().find(".from-") != std::string::npos) cut = e.path().string();
  const auto size = std::filesystem::file_size(cut);
  std::filesystem::resize_file(cut, 512);  // the header and the index stay (64 slots)
  std::filesystem::resize_file(cut, size);
  const GroupStats after_cut = b.Stats("app", -1, "big");
  EXPECT_EQ(after_cut.rows.at(0).requests, 30u);  // the other receipt's
  EXPECT_EQ(after_cut.lost, 1u);
  EXPECT_EQ(b.Stats("app").lost, 1u);  // every read says so

  GroupStats tomorrow = from_a;
  tomorrow.day = from_a.day + 1;
  EXPECT_EQ(b.engine->MergeStatsBy(tomorrow, "r-tomorrow").code(), Status::Code::kInvalidArgument);
  GroupStats gone = from_a;
  gone.day = from_a.day - 31;  // days="31" (the default): 31 days back is no longer kept
  EXPECT_EQ(b.engine->MergeStatsBy(gone, "r-gone").code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(b.Stats("app", from_a.day + 1).rows.size(), 0u);
  EXPECT_EQ(b.Stats("app", -1, "big").rows.at(0).requests, 30u);
}

// map.xml: what <biz fields separator> and <stats> refuse.
std::string MapError(const std::string& biz_attrs, const std::string& stats) {
  const std::string xml = "<map>\n<biz id=\"1\" name=\"b\"" + biz_attrs + ">\n<rule interval=\"60\" max=\"5\"/>\n" +
                          stats + "\n</biz>\n</map>";
  auto m = limit::ParseMap(xml, "map.xml");
  return m.ok() ? std::string("OK") : m.status().message();
}

TEST(FieldStatsMap, ParsesFieldsSeparatorAndJoinsStatsOfOneBy) {
  auto m = limit::ParseMap(R"(<map>
  <biz id="1" name="api" fields="app,user,iface" separator="|">
    <rule interval="60" max="5"/>
    <stats by="app"/>
    <stats by="app,iface" days="7" groups="500"/>
    <stats by="app" distinct="user" days="90"/>
  </biz>
  <biz id="2" name="plain"><rule interval="60" max="5"/></biz>
</map>)",
                           "map.xml");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const limit::BizConfig& api = m->bizzes[0];
  EXPECT_EQ(api.fields, (std::vector<std::string>{"app", "user", "iface"}));
  EXPECT_EQ(api.separator, '|');
  ASSERT_EQ(api.stats.size(), 2u);
  EXPECT_EQ(api.stats[0].DirName(api.fields), "app+user");
  EXPECT_EQ(api.stats[0].days, 90u);
  EXPECT_EQ(api.stats[0].groups, 100000u);
  EXPECT_EQ(api.stats[1].DirName(api.fields), "app,iface");
  EXPECT_EQ(api.stats[1].days, 7u);
  EXPECT_EQ(api.stats[1].groups, 500u);
  EXPECT_EQ(m->bizzes[1].separator, ':');
  EXPECT_TRUE(m->bizzes[1].stats.empty());
}

TEST(FieldStatsMap, ErrorsNameTheProblem) {
  struct Case {
    std::string biz_attrs, stats;
    std::vector<std::string> mentions;
  };
  const std::string f = " fields=\"app,user,iface\"";
  const std::vector<Case> cases = {
      {"", "<stats by=\"app\"/>", {"map.xml:4:", "'app'", "fields"}},               // no fields
      {f, "<stats by=\"region\"/>", {"map.xml:4:", "'region'", "app,user,iface"}},  // unknown by
      {f, "<stats by=\"app,nope\"/>", {"'nope'"}},
      {f, "<stats by=\"app\" distinct=\"ip\"/>", {"distinct", "'ip'"}},          // unknown distinct
      {f, "<stats by=\"app\" distinct=\"app\"/>", {"distinct", "'app'", "by"}},  // distinct in by
      {f, "<stats by=\"app,user\" distinct=\"user\"/>", {"distinct", "'user'"}},
      {" fields=\"a,b,c,d\"", "<stats by=\"a\" distinct=\"b,c,d\"/>", {"distinct", "2"}},  // > 2 distinct
      {" fields=\"a,b,c,d\"",
       "<stats by=\"a\" distinct=\"b,c\"/>\n<stats by=\"a\" distinct=\"d\"/>",
       {"distinct", "2"}},
      {f, "<stats by=\"app\" days=\"0\"/>", {"map.xml:4:", "days=\"0\""}},
      {f, "<stats by=\"app\" days=\"367\"/>", {"days", "367"}},
      {f, "<stats by=\"app\" days=\"x\"/>", {"days"}},
      {f, "<stats by=\"app\" groups=\"0\"/>", {"groups", "\"0\""}},
      {f, "<stats by=\"app\" groups=\"1000001\"/>", {"groups"}},
      {f + " separator=\"ab\"", "", {"map.xml:2:", "separator", "'ab'"}},  // bad separator
      {f + " separator=\"\"", "", {"separator"}},
      {f + " separator=\"a\"", "", {"separator", "'a'"}},
      {" fields=\"app,user,app\"", "", {"map.xml:2:", "fields", "'app'", "twice"}},  // duplicate field
      {" fields=\"app,,user\"", "", {"fields"}},
      {" fields=\"app,us er\"", "", {"fields"}},
      {f, "<stats/>", {"stats", "by"}},
      {f, "<stats by=\"app\" colour=\"red\"/>", {"'colour'"}},
      {f, "<stats by=\"app,app\"/>", {"'app'", "twice"}},
  };
  for (const Case& c : cases) {
    const std::string err = MapError(c.biz_attrs, c.stats);
    EXPECT_NE(err, "OK") << c.biz_attrs << " " << c.stats;
    for (const std::string& want : c.mentions)
      EXPECT_NE(err.find(want), std::string::npos) << "'" << err << "' does not mention " << want;
  }
  // And what is fine.
  EXPECT_EQ(MapError(f + " separator=\"|\"",
                     "<stats by=\"iface,app\" distinct=\"user\" days=\"366\" groups=\"1000000\"/>"),
            "OK");
  EXPECT_EQ(MapError(" fields=\"a,b,c\"", "<stats by=\"a\" distinct=\"b,c\"/>"), "OK");
}

}  // namespace field_stats_test
}  // namespace frs
