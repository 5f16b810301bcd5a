// frsctl grow: a store of every algorithm, with daily statistics, grown to
// another geometry keeps every node (state, so every count; expiry; last use;
// key; route) and the statistics; grow refuses bad geometries, a process
// that maps the store and a running frsd; and a grow killed at any instant
// leaves the old store or the new one whole, its leftovers removed by the
// next grow.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/temp_dir.h"
#include "ctl_runner.h"
#include "frs/clock.h"
#include "frs/engine.h"
#include "frs/service.h"
#include "frs/store.h"
#include "json_in.h"
#include "store/format.h"
#include "store_users.h"

extern char** environ;

namespace frs::ctl {
namespace {

namespace fs = std::filesystem;

// Every algorithm; windows long enough that nothing moves during a test,
// and one short one (login, 600 s) whose nodes of earlier days are expired.
const std::string kMap = ctl_test::SlowMap(R"(  <biz id="3" name="api" fields="name,n" separator=":">
    <rule algo="token_bucket" interval="3600" max="10" burst="20"/>
    <stats by="name" distinct="n"/>
  </biz>
)");
constexpr const char* kBizzes[] = {"login", "ad_user", "api", "partner"};

using ctl_test::CtlRun;
using ctl_test::Quote;
using ctl_test::ReadFile;
using frs::testing::WriteFile;

using NodeMap = std::map<std::pair<uint64_t, uint64_t>, NodeInfo>;

// Every field grow promises to keep (not the position, which is new).
void ExpectSameNode(const NodeInfo& want, const NodeInfo& got) {
  const std::string who = std::to_string(want.biz) + "/" + want.key;
  EXPECT_EQ(got.biz, want.biz) << who;
  EXPECT_EQ(got.key, want.key) << who;
  EXPECT_EQ(got.key_len, want.key_len) << who;
  EXPECT_EQ(got.state, want.state) << who;
  EXPECT_EQ(got.expire_s, want.expire_s) << who;
  EXPECT_EQ(got.last_access_s, want.last_access_s) << who;
  EXPECT_EQ(got.route_pos, want.route_pos) << who;
  EXPECT_EQ(got.route_known, want.route_known) << who;
}

class GrowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    std::ofstream(dir_ / "map.xml") << kMap;
    WriteConfig(from_);
  }

  void WriteConfig(const StoreGeometry& g, const std::string& extra = "<pidfile>frsd.pid</pidfile>",
                   const std::string& name = "srv.xml") {
    std::ofstream(dir_ / name) << "<frs>\n  <listen host=\"127.0.0.1\" port=\"" << port_
                               << "\"/><workers>1</workers>\n  <map>map.xml</map>\n  <store dir=\"data\" files=\""
                               << g.files << "\" keynodes=\"" << g.keynodes << "\" chain=\"" << g.chain
                               << "\"/>\n  <timezone>UTC</timezone>\n  " << extra << "\n</frs>\n";
  }

  CtlRun Ctl(const std::vector<std::string>& args, const std::string& config = "srv.xml") {
    return ctl_test::RunCtl(dir_.path(), dir_ / config, args);
  }

  Result<Service> Open(bool create = false) {
    ServiceOpenOptions o;
    o.create_if_missing = create;
    o.clock = &clock_;
    return OpenFromConfig(dir_ / "srv.xml", o);
  }

  // Acquires over three days and today, at different seconds, so that last
  // uses, expiries and daily statistics differ from node to node; some keys
  // are denied (login allows 5 per 600 s; ad_user 1 per hour).
  void Fill() {
    Result<Service> svc = Open(/*create=*/true);
    ASSERT_TRUE(svc.ok()) << svc.status().message();
    for (int day = 0; day < 4; ++day) {
      for (int i = 0; i < 30; ++i) {
        if ((i + day) % 3 == 0 && day != 3) continue;  // not every key every day
        for (const char* biz : kBizzes) {
          const std::string key = std::string(biz) + ":" + std::to_string(i) + (i % 5 == 0 ? std::string(40, 'x') : "");
          clock_.Set(start_ms_ + int64_t{day} * 86400000 + i * 7000);
          for (int n = 0; n <= i % 7; ++n) {
            Request req;
            req.cmd = Cmd::kAcquire;
            req.biz = biz;
            req.key = key;
            Decision d = svc->engine->Execute(req);
            ASSERT_TRUE(d.ok()) << d.status.ToString();
          }
        }
      }
    }
    // The statistics' days are those of the acquires: the day of the last
    // one, and the three before. Not the day the clock reads next: 10 min
    // past the last acquire may be the next day, without statistics (the
    // test failed so when run between 00:50 and 01:00).
    last_day_ = svc->engine->Today();
    clock_.Set(end_ms_ + 600000);  // after the last acquire, still in the past
  }

  NodeMap Nodes(Store& store) {
    NodeMap m;
    EXPECT_TRUE(store.ForEach(Store::Filter{}, [&](const NodeInfo& n) { m[{n.fp.lo, n.fp.hi}] = n; }).ok());
    return m;
  }

  // biz/key -> each rule's count, as explain and get show them now.
  std::map<std::string, std::vector<int64_t>> Counts(AdminEngine& engine, const NodeMap& nodes) {
    std::map<std::string, std::vector<int64_t>> out;
    for (const auto& [fp, n] : nodes) {
      Result<NodeView> v = engine.View(n);
      EXPECT_TRUE(v.ok()) << v.status().message();
      if (!v.ok()) continue;
      for (const RuleView& r : v->rules) out[v->biz_name + "/" + n.key].push_back(r.count);
    }
    return out;
  }

  struct Snapshot {
    NodeMap nodes;
    std::map<std::string, std::vector<int64_t>> counts;
    std::vector<BizStats> stats;
    std::string stats_file;
    std::vector<GroupStats> by_field;  // api's <stats by="name"> of each of the 4 days
  };

  Snapshot Take() {
    Snapshot s;
    Result<Service> svc = Open();
    EXPECT_TRUE(svc.ok()) << svc.status().message();
    if (!svc.ok()) return s;
    s.nodes = Nodes(*svc->store);
    s.counts = Counts(*svc->engine, s.nodes);
    s.stats = svc->engine->DailyStats();
    for (int64_t back = 0; back < 4; ++back) {
      GroupStatsQuery q;
      q.biz = "api";
      q.by = "name";
      q.day = static_cast<int64_t>(last_day_) - back;
      auto st = svc->engine->StatsBy(q);
      EXPECT_TRUE(st.ok()) << st.status().ToString();
      if (st.ok()) s.by_field.push_back(st.value());
    }
    Result<Store::VerifyReport> v = svc->store->Verify(false);
    EXPECT_TRUE(v.ok() && v->problems.empty()) << (v.ok() && !v->problems.empty() ? v->problems.front() : "");
    s.stats_file = ReadFile(dir_ / "data/stats.frs");
    return s;
  }

  void ExpectSame(const Snapshot& want, const Snapshot& got) {
    ASSERT_EQ(got.nodes.size(), want.nodes.size());
    for (const auto& [fp, n] : want.nodes) {
      auto it = got.nodes.find(fp);
      ASSERT_NE(it, got.nodes.end()) << n.biz << "/" << n.key << " is missing";
      ExpectSameNode(n, it->second);
    }
    EXPECT_EQ(got.counts, want.counts);
    // Statistics by key field, carried in stats/: every day's groups as counted.
    ASSERT_EQ(got.by_field.size(), want.by_field.size());
    for (size_t d = 0; d < want.by_field.size(); ++d) {
      ASSERT_EQ(got.by_field[d].rows.size(), want.by_field[d].rows.size()) << "day " << want.by_field[d].day;
      for (size_t r = 0; r < want.by_field[d].rows.size(); ++r) {
        EXPECT_EQ(got.by_field[d].rows[r].value, want.by_field[d].rows[r].value);
        EXPECT_EQ(got.by_field[d].rows[r].requests, want.by_field[d].rows[r].requests);
        EXPECT_EQ(got.by_field[d].rows[r].denied, want.by_field[d].rows[r].denied);
        EXPECT_EQ(got.by_field[d].rows[r].distinct, want.by_field[d].rows[r].distinct);
      }
    }
    ASSERT_EQ(got.stats.size(), want.stats.size());
    for (size_t b = 0; b < want.stats.size(); ++b) {
      EXPECT_EQ(got.stats[b].name, want.stats[b].name);
      ASSERT_EQ(got.stats[b].days.size(), want.stats[b].days.size()) << want.stats[b].name;
      for (size_t d = 0; d < want.stats[b].days.size(); ++d) {
        const BizStatsDay &w = want.stats[b].days[d], &g = got.stats[b].days[d];
        EXPECT_EQ(g.day, w.day);
        EXPECT_EQ(g.requests, w.requests) << want.stats[b].name << " day " << w.day;
        EXPECT_EQ(g.allowed, w.allowed);
        EXPECT_EQ(g.denied, w.denied);
        EXPECT_EQ(g.new_keys, w.new_keys);
      }
    }
    EXPECT_TRUE(got.stats_file == want.stats_file) << "stats.frs differs";
  }

  // The geometry the files of `dir` say they have.
  StoreGeometry OnDisk(const std::string& dir) {
    store::FileHeader h{};
    int fd = ::open((dir + "/frs.0.store").c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0) << dir;
    if (fd < 0) return {};
    EXPECT_EQ(::pread(fd, &h, sizeof h, 0), static_cast<ssize_t>(sizeof h));
    ::close(fd);
    return StoreGeometry{h.files, h.keynodes, h.chain};
  }

  std::vector<std::string> Leftovers() {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_.path()))
      if (e.path().filename().string().rfind("data.grow", 0) == 0) out.push_back(e.path().filename().string());
    return out;
  }

  JsonValue Parse(const std::string& text) {
    Result<JsonValue> v = ParseJson(text);
    EXPECT_TRUE(v.ok()) << v.status().message() << " in: " << text;
    return v.ok() ? v.value() : JsonValue{};
  }

  testing::TempDir dir_;
  const uint16_t port_ = 0;  // the frsd a test starts binds a port of its own
  const StoreGeometry from_{2, 64, 8};
  const StoreGeometry to_{2, 1024, 8};
  // From three days before to an hour before now: every acquire lies in the past.
  const int64_t end_ms_ = (static_cast<int64_t>(std::time(nullptr)) - 3600) * 1000;
  const int64_t start_ms_ = end_ms_ - 3 * int64_t{86400000};
  FakeClock clock_{end_ms_};
  uint32_t last_day_ = 0;  // the day of Fill's last acquire (Take's statistics end there)
};

TEST_F(GrowTest, KeepsEveryNodeItsLastUseAndTheDailyStatistics) {
  Fill();
  const Snapshot before = Take();
  ASSERT_GT(before.nodes.size(), 100u);
  // The store holds nodes of every kind grow must carry: expired ones (login
  // keys of earlier days), multi-slot ones, and last uses spread over days.
  const uint32_t now = static_cast<uint32_t>(std::time(nullptr));
  size_t expired = 0, wide = 0;
  std::set<uint32_t> last_uses;
  for (const auto& [fp, n] : before.nodes) {
    expired += n.expire_s != 0 && n.expire_s <= now;
    wide += n.span > 1;
    last_uses.insert(n.last_access_s);
  }
  EXPECT_GT(expired, 0u);
  EXPECT_GT(wide, 0u);
  EXPECT_GT(last_uses.size(), 20u);
  ASSERT_EQ(before.stats.size(), 4u);
  for (const BizStats& b : before.stats) EXPECT_GE(b.days.size(), 4u) << b.name;
  ASSERT_EQ(before.by_field.size(), 4u);
  for (const GroupStats& g : before.by_field) {
    ASSERT_EQ(g.rows.size(), 1u) << "day " << g.day;  // one group: "api"
    EXPECT_GT(g.rows[0].requests, 0u);
    EXPECT_GT(g.rows[0].distinct.at(0), 10u);
  }

  CtlRun r = Ctl({"grow", "--keynodes", std::to_string(to_.keynodes), "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  JsonValue v = Parse(r.out);
  EXPECT_EQ(v.Find("nodes")->number, static_cast<double>(before.nodes.size()));
  EXPECT_EQ(v.Find("expired_nodes")->number, static_cast<double>(expired));
  EXPECT_EQ(v.Find("expired_dropped")->number, 0);
  EXPECT_EQ(v.Find("from")->Find("keynodes")->number, from_.keynodes);
  EXPECT_EQ(v.Find("to")->Find("keynodes")->number, to_.keynodes);
  EXPECT_EQ(v.Find("to")->Find("files")->number, from_.files);
  EXPECT_EQ(v.Find("to")->Find("chain")->number, from_.chain);
  EXPECT_TRUE(v.Find("stats_file")->boolean);
  EXPECT_FALSE(v.Find("srv_xml_matches")->boolean);
  EXPECT_NE(v.Find("srv_xml_store")->text.find("keynodes=\"1024\""), std::string::npos) << r.out;
  EXPECT_TRUE(Leftovers().empty());
  EXPECT_EQ(OnDisk(dir_ / "data"), to_);

  // srv.xml is the operator's: grow left it alone, and frsctl refuses the
  // store until it says the new geometry.
  EXPECT_NE(ReadFile(dir_ / "srv.xml").find("keynodes=\"64\""), std::string::npos);
  EXPECT_EQ(Ctl({"stat"}).rc, 3);
  WriteConfig(to_);
  const Snapshot after = Take();
  ExpectSame(before, after);
  EXPECT_EQ(Ctl({"verify"}).rc, 0);

  // The human form names the <store> line to set.
  r = Ctl({"grow", "--keynodes", "2048"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("now set in " + dir_ / "srv.xml"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("keynodes=\"2048\""), std::string::npos) << r.out;
  // As srv.xml names the store: relative to srv.xml's folder (it said the
  // absolute path, which an operator then pasted over "data").
  EXPECT_NE(r.out.find("<store dir=\"data\" files="), std::string::npos) << r.out;
  WriteConfig(StoreGeometry{2, 2048, 8});
  ExpectSame(before, Take());
}

// Grow places each node in as many slots as it had: a key of up to 8 bytes
// is known whole from the node's identity, and grow took it for a key kept
// (keys="keep"), moving two-rule nodes of 5- to 8-byte keys from 2 slots to
// 3 (found by an outside run: 30 slots became 32). Kept keys stay kept.
TEST_F(GrowTest, EveryNodeKeepsItsSpanAndAKeptKeyStaysKept) {
  std::ofstream(dir_ / "map.xml")
      << "<map>\n  <biz id=\"1\" name=\"two\"><rule interval=\"3600\" max=\"50\"/>"
         "<rule algo=\"calendar\" interval=\"86400\" max=\"500\"/></biz>\n"
         "  <biz id=\"2\" name=\"kept\" keys=\"keep\"><rule interval=\"3600\" max=\"50\"/></biz>\n"
         "  <biz id=\"3\" name=\"slide\"><rule algo=\"sliding\" interval=\"60\" max=\"10\"/></biz>\n</map>\n";
  {
    Result<Service> svc = Open(/*create=*/true);
    ASSERT_TRUE(svc.ok()) << svc.status().message();
    for (const char* biz : {"two", "kept", "slide"})
      for (const std::string& key : std::vector<std::string>{"a", "bbbb", "ccccc", "dddddddd", "12345", "10.1.2.3",
                                                             "a-longer-key-of-30-bytes.....", std::string(100, 'z')}) {
        Request req;
        req.cmd = Cmd::kAcquire;
        req.biz = biz;
        req.key = key;
        ASSERT_TRUE(svc->engine->Execute(req).ok()) << biz << "/" << key;
      }
  }
  auto nodes = [&] {
    Result<Service> svc = Open();
    EXPECT_TRUE(svc.ok()) << svc.status().message();
    return svc.ok() ? Nodes(*svc->store) : NodeMap();
  };
  const NodeMap before = nodes();
  ASSERT_EQ(before.size(), 24u);
  CtlRun r = Ctl({"grow", "--keynodes", std::to_string(to_.keynodes)});
  ASSERT_EQ(r.rc, 0) << r.err;
  WriteConfig(to_);
  const NodeMap after = nodes();
  ASSERT_EQ(after.size(), before.size());
  uint32_t slots_before = 0, slots_after = 0;
  for (const auto& [fp, n] : before) {
    auto it = after.find(fp);
    ASSERT_NE(it, after.end()) << n.biz << "/" << n.key;
    ExpectSameNode(n, it->second);
    EXPECT_EQ(it->second.span, n.span) << n.biz << "/" << n.key;
    EXPECT_EQ(it->second.compact, n.compact) << n.biz << "/" << n.key;
    slots_before += n.span;
    slots_after += it->second.span;
  }
  EXPECT_EQ(slots_after, slots_before);
}

// A grow is what live evictions call for, and the new store counts its own
// from 0 (stat's hint to grow names the geometry it is about): grow says
// the old store's once, so that they stay on record (found by an outside
// run: they were gone unsaid).
TEST_F(GrowTest, SaysTheEvictionsThatCalledForIt) {
  std::ofstream(dir_ / "map.xml") << "<map>\n  <biz id=\"1\" name=\"two\"><rule interval=\"3600\" max=\"50\"/>"
                                     "<rule algo=\"calendar\" interval=\"86400\" max=\"500\"/></biz>\n</map>\n";
  WriteConfig(StoreGeometry{1, 8, 8});
  {
    Result<Service> svc = Open(/*create=*/true);
    ASSERT_TRUE(svc.ok()) << svc.status().message();
    for (int i = 0; i < 150; ++i) {
      Request req;
      req.cmd = Cmd::kAcquire;
      req.biz = "two";
      const std::string key = "key" + std::to_string(i);
      req.key = key;
      Decision d = svc->engine->Execute(req);
      ASSERT_TRUE(d.ok()) << key << ": " << d.status.ToString();
    }
  }
  auto totals = [&] {
    Result<Service> svc = Open();
    EXPECT_TRUE(svc.ok()) << svc.status().message();
    return svc.ok() ? svc->store->Stats().total : FileStats{};
  };
  const FileStats before = totals();
  ASSERT_GT(before.evictions_live, 0u);
  CtlRun r = Ctl({"grow", "--keynodes", "64", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  JsonValue v = Parse(r.out);
  ASSERT_NE(v.Find("old_store"), nullptr) << r.out;
  EXPECT_EQ(v.Find("old_store")->Find("evictions_live")->number, static_cast<double>(before.evictions_live));
  EXPECT_EQ(v.Find("old_store")->Find("lock_recoveries")->number, static_cast<double>(before.lock_recoveries));
  WriteConfig(StoreGeometry{1, 64, 8});
  EXPECT_EQ(totals().evictions_live, 0u);
  // The human form says them in a row of its own, and only when there are
  // any: the grown store made none.
  r = Ctl({"grow", "--keynodes", "128"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find("old store"), std::string::npos) << r.out;
}

TEST_F(GrowTest, ShrinksWhileTheLiveNodesFitAndRefusesBelowThem) {
  Fill();
  const Snapshot before = Take();
  // Same geometry, no --keynodes, out of range: bad arguments.
  EXPECT_EQ(Ctl({"grow", "--keynodes", "64"}).rc, 2);
  EXPECT_NE(ReadFile(dir_ / "stderr").find("already has the geometry"), std::string::npos);
  EXPECT_EQ(Ctl({"grow"}).rc, 2);
  EXPECT_EQ(Ctl({"grow", "--keynodes", "64", "--chain", "65"}).rc, 2);
  // Fewer slots than the live nodes need.
  CtlRun r = Ctl({"grow", "--files", "1", "--keynodes", "4"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("cannot shrink"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("live nodes"), std::string::npos) << r.err;
  // Key-node groups smaller than the widest node: 4,099 key-nodes (a prime)
  // group one by one, so a chain of 1 is a group of 1 slot.
  r = Ctl({"grow", "--keynodes", "4099", "--chain", "1"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("make key-node groups of 1 slots, too few"), std::string::npos) << r.err;
  EXPECT_EQ(OnDisk(dir_ / "data"), from_);
  EXPECT_TRUE(Leftovers().empty());
  ExpectSame(before, Take());

  // A damaged file of the store directory (stats.frs's magic): refused as
  // verify reports it, nothing changed (grow said it kept the file, and frsd
  // then refused to start on it).
  const std::string stats = dir_ / "data/stats.frs";
  const std::string kept = ReadFile(stats);
  ASSERT_GE(kept.size(), 4u);
  WriteFile(stats, "XXXX" + kept.substr(4));
  r = Ctl({"grow", "--keynodes", "1024"});
  EXPECT_EQ(r.rc, 3);
  EXPECT_NE(r.err.find("stats.frs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("frsctl verify lists"), std::string::npos) << r.err;
  EXPECT_EQ(OnDisk(dir_ / "data"), from_);
  EXPECT_TRUE(Leftovers().empty());
  WriteFile(stats, kept);

  // Smaller, with room for every node: done, and nothing lost.
  r = Ctl({"grow", "--files", "1", "--keynodes", "96", "--chain", "10", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err.find("groups key-nodes"), std::string::npos) << r.err;
  WriteConfig(StoreGeometry{1, 96, 10});
  ExpectSame(before, Take());
  // A prime keynodes groups key-nodes one by one: done, and said as frsd -t
  // says it (nodes of several slots are evicted from a low fill).
  r = Ctl({"grow", "--keynodes", "1021"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("warning: <store keynodes=\"1021\" chain=\"10\"> groups key-nodes 1 by 1"), std::string::npos)
      << r.err;
  WriteConfig(StoreGeometry{1, 1021, 10});
  ExpectSame(before, Take());
}

TEST_F(GrowTest, RefusesWhileAProcessHoldsTheStoreMapped) {
  Fill();
  const Snapshot before = Take();
  {
    Result<Service> svc = Open();  // this test process maps every file
    ASSERT_TRUE(svc.ok()) << svc.status().message();
    // The program: frsctl names the other processes, not its own.
    CtlRun r = ctl_test::RunCtlProgram(dir_.path(), dir_ / "srv.xml", {"grow", "--keynodes", "1024"});
    EXPECT_EQ(r.rc, 3);
    EXPECT_NE(r.err.find("pid " + std::to_string(::getpid())), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("mapped"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  }
  {
    // A child that maps it and sleeps: named by its pid.
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      Result<Service> svc = Open();
      std::this_thread::sleep_for(std::chrono::seconds(30));
      ::_exit(svc.ok() ? 0 : 1);
    }
    CtlRun r;
    for (int i = 0; i < 100; ++i) {  // until the child has the store open
      r = Ctl({"grow", "--keynodes", "1024"});
      if (r.rc != 0 && r.err.find("pid " + std::to_string(child)) != std::string::npos) break;
      ASSERT_NE(r.rc, 0) << "grew while pid " << child << " maps the store";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(r.rc, 3);
    EXPECT_NE(r.err.find("pid " + std::to_string(child)), std::string::npos) << r.err;
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
  }
  EXPECT_EQ(OnDisk(dir_ / "data"), from_);
  EXPECT_TRUE(Leftovers().empty());
  // Once nobody holds it: grows.
  ASSERT_EQ(Ctl({"grow", "--keynodes", "1024"}).rc, 0) << ReadFile(dir_ / "stderr");
  WriteConfig(to_);
  ExpectSame(before, Take());
}

// A write made during a grow, between its copy and its swap (a frsctl set
// run meanwhile, against the docs' advice), was left in the old store: the
// swap put the grown store in its place, and the count set read its old
// value. The old files' bytes are compared again under the swap's locks:
// the grow stops, changing nothing, and the count set stays.
TEST_F(GrowTest, AWriteDuringTheGrowStopsItAndIsKept) {
  Fill();
  const std::string gate = dir_ / "gate";
  const std::string cmd = "TZ=UTC FRS_TEST_GROW_BEFORE_SWAP='" + gate + "' '" + std::string(FRSCTL_PATH) + "' -c '" +
                          std::string(dir_ / "srv.xml") + "' grow --keynodes 1024 >'" + std::string(dir_ / "grow.out") +
                          "' 2>'" + std::string(dir_ / "grow.err") + "'";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  bool ready = false;
  for (int i = 0; i < 3000 && !ready; ++i) {
    ready = std::filesystem::exists(gate + ".ready");
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CtlRun set, start;
  if (ready) {
    set = Ctl({"set", "login", "login:1", "3"});
    // frsd started meanwhile names the grow, not a pid an earlier frsd
    // left in the lock file.
    start = ctl_test::RunCtl(dir_.path(), "", {"-c", dir_ / "srv.xml", "--foreground"}, "", FRSD_PATH);
  }
  std::ofstream(gate) << "go\n";
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(ready) << ReadFile(dir_ / "grow.err");
  EXPECT_EQ(set.rc, 0) << set.err;
  EXPECT_NE(start.rc, 0);
  EXPECT_NE(start.err.find(": a grow or an upgrade) holds the store"), std::string::npos) << start.err;
  const std::string err = ReadFile(dir_ / "grow.err");
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 3) << err;
  EXPECT_NE(err.find("the store was written during the grow"), std::string::npos) << err;
  EXPECT_EQ(OnDisk(dir_ / "data"), from_);
  EXPECT_TRUE(Leftovers().empty());
  CtlRun get = Ctl({"--json", "get", "login", "login:1"});
  EXPECT_NE(get.out.find("\"count\":3"), std::string::npos) << get.out;
}

TEST_F(GrowTest, RefusesWhileFrsdServesTheStore) {
  Fill();
  const std::string config = dir_ / "srv.xml";
  std::string frsd = FRSD_PATH;
  // Daemonized, as an operator starts it: the launcher takes the store's
  // lock, forks the master and exits, and /proc/locks goes on naming the
  // launcher's pid (frsctl named that pid, gone, as the holder).
  char* argv[] = {frsd.data(), const_cast<char*>("-c"), const_cast<char*>(config.c_str()), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t launcher = 0;
  ASSERT_EQ(::posix_spawn(&launcher, frsd.c_str(), &fa, nullptr, argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  int launched = 0;
  ASSERT_EQ(::waitpid(launcher, &launched, 0), launcher);
  ASSERT_TRUE(WIFEXITED(launched) && WEXITSTATUS(launched) == 0) << "the launcher failed";
  // Up: it returns once the master serves, whose pid the pid file names.
  const pid_t pid = static_cast<pid_t>(std::atol(ReadFile(dir_ / "frsd.pid").c_str()));
  const bool up = pid > 0 && pid != launcher && ::kill(pid, 0) == 0;
  CtlRun by_pidfile, by_lock;
  if (up) {
    by_pidfile = Ctl({"grow", "--keynodes", "1024"});
    // A srv.xml without the pid file: frsd's store lock gives it away.
    WriteConfig(from_, "", "nopid.xml");
    by_lock = Ctl({"grow", "--keynodes", "1024"}, "nopid.xml");
  }
  if (pid > 0) ::kill(pid, SIGTERM);
  // Not this test's child: gone once signal 0 finds it no more.
  for (int i = 0; i < 400 && pid > 0 && ::kill(pid, 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  ASSERT_TRUE(up) << "frsd did not write its pid file";
  EXPECT_EQ(by_pidfile.rc, 3);
  EXPECT_NE(by_pidfile.err.find("frsd (pid " + std::to_string(pid)), std::string::npos) << by_pidfile.err;
  EXPECT_NE(by_pidfile.err.find("stop it first"), std::string::npos) << by_pidfile.err;
  EXPECT_EQ(by_lock.rc, 3);
  EXPECT_NE(by_lock.err.find("pid " + std::to_string(pid)), std::string::npos) << by_lock.err;
  EXPECT_EQ(OnDisk(dir_ / "data"), from_);
  EXPECT_TRUE(Leftovers().empty());
  // Stopped: grows (the stale pid file is no obstacle).
  CtlRun r = Ctl({"grow", "--keynodes", "1024"});
  EXPECT_EQ(r.rc, 0) << r.err;
}

// The two states a kill can leave behind, made on purpose: killed while
// building (DIR the old store, DIR.grow-new half a new one) and killed
// after the exchange (DIR the new store, DIR.grow-new the old one).
TEST_F(GrowTest, TheNextGrowRemovesWhatAnInterruptedOneLeft) {
  Fill();
  const Snapshot before = Take();
  const std::string data = dir_ / "data", left = dir_ / "data.grow-new";
  fs::create_directory(left);
  std::ofstream(left + "/frs.0.store") << "half a store";
  CtlRun r = Ctl({"grow", "--keynodes", "1024"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("removed " + left + ", left by an interrupted grow"), std::string::npos) << r.out;
  EXPECT_TRUE(Leftovers().empty());
  WriteConfig(to_);
  ExpectSame(before, Take());

  fs::copy(data, left, fs::copy_options::recursive);  // "the old store", after the exchange
  r = Ctl({"grow", "--keynodes", "2048", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  JsonValue v = Parse(r.out);
  ASSERT_EQ(v.Find("removed_leftovers")->items.size(), 1u) << r.out;
  EXPECT_EQ(v.Find("removed_leftovers")->items[0].text, left);
  EXPECT_TRUE(Leftovers().empty());
  WriteConfig(StoreGeometry{2, 2048, 8});
  ExpectSame(before, Take());

  // Without RENAME_EXCHANGE the swap is two renames. After both, only
  // DIR.grow-old (the old store) is left: removed.
  fs::copy(data, dir_ / "data.grow-old", fs::copy_options::recursive);
  r = Ctl({"grow", "--keynodes", "1024"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("removed " + dir_ / "data.grow-old"), std::string::npos) << r.out;
  EXPECT_TRUE(Leftovers().empty());
  WriteConfig(to_);
  ExpectSame(before, Take());
  // Between them: both leftovers, and DIR missing, or created since by an
  // frsd start. Explained, nothing touched: only the operator can choose.
  fs::copy(data, left, fs::copy_options::recursive);
  fs::rename(data, dir_ / "data.grow-old");
  r = Ctl({"grow", "--keynodes", "4096"});
  EXPECT_EQ(r.rc, 3);
  EXPECT_NE(r.err.find("an interrupted grow left"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is missing"), std::string::npos) << r.err;
  // Meanwhile nothing makes a store in DIR that would serve from zero: frsd
  // (its check and its start) and init refuse, and every command says why.
  const std::string config = dir_ / "srv.xml", why = "holds the store from before an interrupted frsctl grow";
  for (const std::vector<std::string>& cmd : {std::vector<std::string>{"10", FRSD_PATH, "-c", config, "--foreground"},
                                              std::vector<std::string>{"10", FRSD_PATH, "-c", config, "-t"}}) {
    r = ctl_test::RunCtl(dir_.path(), "", cmd, "", "/usr/bin/timeout");
    EXPECT_EQ(r.rc, 1) << cmd.back() << ": " << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  }
  for (const char* cmd : {"init", "stat"}) {
    r = Ctl({cmd});
    EXPECT_EQ(r.rc, 3) << cmd;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(data));
  fs::create_directory(data);  // by hand, or by an frsd from before that check
  ASSERT_EQ(Ctl({"init"}).rc, 0);
  r = Ctl({"grow", "--keynodes", "4096"});
  EXPECT_EQ(r.rc, 3);
  EXPECT_NE(r.err.find("created since"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir_ / "data.grow-old/frs.0.store"));
  EXPECT_TRUE(fs::exists(left + "/frs.0.store"));
}

TEST_F(GrowTest, AKillAtAnyInstantLeavesTheOldOrTheNewStoreWhole) {
  Fill();
  const Snapshot before = Take();
  const std::string data = dir_ / "data", pristine = dir_ / "pristine";
  fs::copy(data, pristine, fs::copy_options::recursive);

  // How long one grow takes here: the command alone, then the program the
  // kills stop (its start included: under the sanitizers most of its run).
  // The kills fall in the program's last stretch, where the command works,
  // but for one at its start and one long after its end.
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(Ctl({"grow", "--keynodes", "1024"}).rc, 0) << ReadFile(dir_ / "stderr");
  const auto command = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  fs::remove_all(data);
  fs::copy(pristine, data, fs::copy_options::recursive);
  WriteConfig(from_);
  t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(ctl_test::RunCtlProgram(dir_.path(), dir_ / "srv.xml", {"grow", "--keynodes", "1024"}).rc, 0)
      << ReadFile(dir_ / "stderr");
  const auto took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  const auto lead = took > command * 2 ? took - command * 2 : std::chrono::microseconds(0);

  int old_whole = 0, new_whole = 0, with_leftovers = 0;
  constexpr int kKills = 16;
  for (int k = 0; k <= kKills; ++k) {
    fs::remove_all(data);
    for (const std::string& l : Leftovers()) fs::remove_all(dir_ / l);
    fs::copy(pristine, data, fs::copy_options::recursive);
    WriteConfig(from_);
    // At its start, evenly over the grow's last stretch, and once well after it.
    const auto delay = k == 0        ? std::chrono::microseconds(0)
                       : k == kKills ? took * 4
                                     : lead + (took - lead) * k / kKills;
    ctl_test::RunCtlKilledAfter(dir_ / "srv.xml", {"grow", "--keynodes", "1024"}, delay);

    const StoreGeometry g = OnDisk(data);
    ASSERT_TRUE(g == from_ || g == to_) << "kill " << k << ": files say " << g.files << " x " << g.keynodes;
    (g == from_ ? old_whole : new_whole) += 1;
    WriteConfig(g);
    ExpectSame(before, Take());
    if (HasFatalFailure()) return;

    // The next grow removes what the killed one left, and completes.
    const bool left = !Leftovers().empty();
    with_leftovers += left;
    CtlRun r = Ctl({"grow", "--keynodes", g == from_ ? "1024" : "512", "--json"});
    ASSERT_EQ(r.rc, 0) << "kill " << k << ": " << r.err;
    EXPECT_EQ(Parse(r.out).Find("removed_leftovers")->items.size(), left ? 1u : 0u) << r.out;
    EXPECT_TRUE(Leftovers().empty());
    WriteConfig(g == from_ ? to_ : StoreGeometry{2, 512, 8});
    ExpectSame(before, Take());
  }
  std::printf("grow took %lld us; of %d kills, %d left the old store, %d the new, %d a leftover directory\n",
              static_cast<long long>(took.count()), kKills + 1, old_whole, new_whole, with_leftovers);
  EXPECT_GT(old_whole, 0);
  EXPECT_GT(new_whole, 0);
}

// A pid file naming a killed frsd whose parent has not reaped it yet (an
// init that reaps slowly after a kill -9): a zombie, no frsd running. grow,
// init and verify took it for one (found by an outside run).
TEST(StoreUsers, AZombieNamedByThePidFileIsNoLiveFrsd) {
  frs::testing::TempDir d;
  int go[2], named[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(named), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::prctl(PR_SET_NAME, "frsd");  // as frsd's comm reads
    ::close(go[1]);
    ::close(named[0]);
    char b = 1;
    while (::write(named[1], &b, 1) < 0) {
    }
    while (::read(go[0], &b, 1) < 0) {
    }
    ::_exit(0);
  }
  ::close(go[0]);
  ::close(named[1]);
  char b;
  ASSERT_EQ(::read(named[0], &b, 1), 1);  // named frsd by now
  ::close(named[0]);
  const std::string pidfile = (fs::path(d.path()) / "frsd.pid").string();
  WriteFile(pidfile, std::to_string(child) + "\n");
  EXPECT_EQ(LiveFrsdFromPidFile(pidfile), child);
  ::kill(child, SIGKILL);
  // Dead, not reaped: /proc/PID/stat says Z.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(LiveFrsdFromPidFile(pidfile), 0);
  ::waitpid(child, nullptr, 0);
  ::close(go[1]);
}

}  // namespace
}  // namespace frs::ctl
