// Shards behind nginx's consistent hash, re-sharding and handoff, end to end:
// real frsd processes on loopback ports, a real nginx in front, frsctl
// handoff run as operators run it (and killed at each of its steps).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "common/nginx_runner.h"
#include "common/small_disk.h"
#include "common/temp_dir.h"
#include "e2e/frsd_harness.h"
#include "frs/group_stats.h"
#include "frs/ring.h"

namespace frs::e2e {
namespace {

constexpr const char* kMap = R"(<map>
  <biz id="1" name="login"><rule interval="3600" max="5"/></biz>
</map>
)";
constexpr int kMax = 5;

std::string Name(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

std::string ClusterXml(uint16_t self, const std::vector<uint16_t>& shards, bool enforce = true) {
  std::string x = "  <cluster self=\"" + Name(self) + "\" enforce=\"" + (enforce ? "1" : "0") + "\">\n";
  for (uint16_t p : shards) x += "    <shard>" + Name(p) + "</shard>\n";
  return x + "  </cluster>\n";
}

Ring RingOf(const std::vector<uint16_t>& ports) {
  std::vector<RingShard> s;
  for (uint16_t p : ports) s.push_back({Name(p), 1});
  return Ring::Make(s).value();
}

// One shard: an frsd on a port of its own binding (port 0), alone until
// SetCluster tells it the cluster (which names the ports the shards got).
class Shard {
 public:
  explicit Shard(const std::string& map = kMap, const std::string& token = "s3cret") : frsd_(Options(map, token)) {}
  static ServerOptions Options(const std::string& map, const std::string& token) {
    ServerOptions o;
    o.workers = 1;
    o.map = map;
    o.token = token;
    return o;
  }
  // Rewrites srv.xml with this <cluster> and its own bound port, and reloads
  // it live; returns once the shard answers with the new ring.
  void SetCluster(const std::vector<uint16_t>& shards) {
    frsd_.WriteConfig(port_);
    std::string cfg = ReadFile(frsd_.config());
    cfg.insert(cfg.rfind("</frs>"), ClusterXml(port_, shards));
    WriteFile(frsd_.config(), cfg);
    const std::string want = Digest(shards);
    kill(frsd_.pid(), SIGHUP);
    for (int i = 0; i < 200; ++i) {
      Client c(port_);
      if (c.Post("<request cmd=\"stats\"/>").body.find("digest=\"" + want + "\"") != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "shard " << port_ << " did not apply the new <cluster>: " << frsd_.log();
  }
  static std::string Digest(const std::vector<uint16_t>& shards) {
    char d[16];
    std::snprintf(d, sizeof d, "%08x", RingOf(shards).Digest());
    return d;
  }
  bool Start() {
    if (frsd_.Start()) {
      port_ = frsd_.port();
      return true;
    }
    ADD_FAILURE() << frsd_.log();
    return false;
  }
  uint16_t port() const { return port_; }
  Frsd& frsd() { return frsd_; }

  // frsctl handoff on this shard; returns its exit code, output in *out.
  int Handoff(std::string* out, const std::string& crash = "", const std::string& extra = "") {
    return Ctl("handoff --batch 8 " + extra, out, crash);
  }
  int Ctl(const std::string& args, std::string* out, const std::string& crash = "") {
    std::string cmd = (crash.empty() ? std::string() : "FRS_TEST_HANDOFF_CRASH=" + crash + " ") + FRSCTL_PATH + " -c " +
                      frsd_.config() + " " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096];
    out->clear();
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }

 private:
  uint16_t port_ = 0;
  Frsd frsd_;
};

int Acquire(uint16_t port, const std::string& key) {
  Client c(port);
  return c.Get("/acquire?biz=login&key=" + key).status;
}

// Uses `n` acquires of every key at its owner under `ports`.
void Use(const std::vector<uint16_t>& ports, const std::vector<std::string>& keys, int n) {
  Ring ring = RingOf(ports);
  std::map<uint16_t, std::unique_ptr<Client>> conns;
  for (uint16_t p : ports) conns[p] = std::make_unique<Client>(p);
  for (const std::string& k : keys) {
    uint16_t owner = ports[ring.OwnerIndex(k)];
    for (int i = 0; i < n; ++i) ASSERT_EQ(conns[owner]->Get("/acquire?biz=login&key=" + k).status, 200) << k;
  }
}

// Every key has exactly `left` uses left at its owner under `ports`.
void ExpectLeft(const std::vector<uint16_t>& ports, const std::vector<std::string>& keys, int left) {
  Ring ring = RingOf(ports);
  std::map<uint16_t, std::unique_ptr<Client>> conns;
  for (uint16_t p : ports) conns[p] = std::make_unique<Client>(p);
  int wrong = 0;
  for (const std::string& k : keys) {
    uint16_t owner = ports[ring.OwnerIndex(k)];
    int allowed = 0;
    for (int i = 0; i < kMax + 1; ++i) {
      int st = conns[owner]->Get("/acquire?biz=login&key=" + k).status;
      if (st == 200) ++allowed;
      else ASSERT_EQ(st, 429) << k << " at " << owner;
    }
    if (allowed != left && ++wrong <= 5) ADD_FAILURE() << k << ": " << allowed << " uses left, want " << left;
  }
  EXPECT_EQ(wrong, 0);
}

std::vector<std::string> Keys(const std::string& prefix, int n) {
  std::vector<std::string> k;
  for (int i = 0; i < n; ++i) k.push_back(prefix + std::to_string(i));
  return k;
}

// Starts `n` more shards into `shards`; returns their ports, in order.
std::vector<uint16_t> StartShards(std::vector<std::unique_ptr<Shard>>* shards, size_t n) {
  std::vector<uint16_t> ports;
  for (size_t i = 0; i < n; ++i) {
    shards->push_back(std::make_unique<Shard>());
    if (!shards->back()->Start()) return {};
    ports.push_back(shards->back()->port());
  }
  return ports;
}

TEST(ClusterE2E, ExactLimitsThroughNginxAndMisroutedIs421) {
  ASSERT_FALSE(testing::NginxBinary().empty()) << "nginx is not installed (tools/setup.sh --test installs it)";
  std::vector<std::unique_ptr<Shard>> shards;
  const std::vector<uint16_t> ports = StartShards(&shards, 3);
  ASSERT_EQ(ports.size(), 3u);
  for (auto& s : shards) s->SetCluster(ports);
  testing::TempDir dir;
  testing::Nginx nginx(dir.path(), "");
  const std::vector<uint16_t> front = testing::StartOnCandidatePorts(nginx, 1, [&](const std::vector<uint16_t>& p) {
    std::string http = "  upstream frs {\n    hash $arg_key consistent;\n";
    for (uint16_t shard : ports) http += "    server " + Name(shard) + ";\n";
    return http + "  }\n  server {\n    listen 127.0.0.1:" + std::to_string(p[0]) +
           ";\n    location / { proxy_pass http://frs; proxy_http_version 1.1; proxy_set_header Connection \"\"; }\n"
           "  }\n";
  });
  ASSERT_EQ(front.size(), 1u) << nginx.log();
  const uint16_t proxy = front[0];

  // Through the proxy every key gets exactly its limit, whichever shard owns it.
  std::map<int, int> per_status;
  for (const std::string& k : Keys("user", 200)) {
    Client c(proxy);  // nginx closes a connection after 1000 requests
    for (int i = 0; i < kMax + 2; ++i) ++per_status[c.Get("/acquire?biz=login&key=" + k).status];
  }
  EXPECT_EQ(per_status[200], 200 * kMax);
  EXPECT_EQ(per_status[429], 200 * 2);
  EXPECT_EQ(per_status.size(), 2u);

  // Straight to a shard that does not own the key: 421 naming the owner, nothing counted.
  Ring ring = RingOf(ports);
  const std::string key = "direct-key";
  const size_t owner = ring.OwnerIndex(key);
  const uint16_t other = ports[(owner + 1) % ports.size()];
  Client d(other);
  HttpResponse r = d.Get("/acquire?biz=login&key=" + key);
  EXPECT_EQ(r.status, 421);
  EXPECT_NE(r.body.find("owner=\"" + Name(ports[owner]) + "\""), std::string::npos) << r.body;
  EXPECT_NE(d.Get("/metrics").body.find("frs_misrouted_total 1"), std::string::npos);
  EXPECT_EQ(Acquire(ports[owner], key), 200);
  // A hash tag routes by the tag; a route parameter by itself.
  const std::string tagged = "login:{user7}";
  EXPECT_EQ(Client(ports[ring.OwnerIndex("user7")]).Get("/acquire?biz=login&key=" + tagged).status, 200);
  EXPECT_EQ(Client(ports[ring.OwnerIndex("r9")]).Get("/acquire?biz=login&key=anything&route=r9").status, 200);
  // A batch whose members route apart, without ?route=: 400 naming both.
  const std::string batch =
      "<batch><request cmd=\"query\" biz=\"login\" key=\"a1\"/>"
      "<request cmd=\"query\" biz=\"login\" key=\"b2\"/></batch>";
  HttpResponse b = Client(ports[0]).Post(batch);
  EXPECT_EQ(b.status, 400);
  EXPECT_NE(b.body.find("a1"), std::string::npos);
  EXPECT_NE(b.body.find("b2"), std::string::npos);
  EXPECT_EQ(Client(ports[ring.OwnerIndex("rb")]).Post(batch, "/frs?route=rb").status, 200);
}

TEST(ClusterE2E, AddingAndRemovingAShardKeepsEveryCount) {
  std::vector<std::unique_ptr<Shard>> shards;
  const std::vector<uint16_t> three = StartShards(&shards, 3);
  ASSERT_EQ(three.size(), 3u);
  for (auto& s : shards) s->SetCluster(three);
  const auto keys = Keys("k", 600);
  Use(three, keys, 2);

  // 1. The new shard starts with the new list; 2. the proxies route by it.
  const std::vector<uint16_t> fourth = StartShards(&shards, 1);
  ASSERT_EQ(fourth.size(), 1u);
  std::vector<uint16_t> ports = three;
  ports.push_back(fourth[0]);
  shards[3]->SetCluster(ports);
  Ring r3 = RingOf(three), r4 = RingOf(ports);
  size_t moved = 0;
  for (const std::string& k : keys) {
    if (r3.OwnerIndex(k) == r4.OwnerIndex(k)) continue;
    ++moved;
    EXPECT_EQ(r4.OwnerIndex(k), 3u) << k << " moved between old shards";
  }
  EXPECT_GT(moved, keys.size() * 15 / 100);
  EXPECT_LT(moved, keys.size() * 35 / 100);
  Use(ports, keys, 1);  // moved keys count from zero at the new shard meanwhile
  // Between the steps the shards run two lists: stat --cluster says which.
  std::string listing;
  EXPECT_EQ(shards[3]->Ctl("stat --cluster", &listing), 1) << listing;
  EXPECT_NE(listing.find("shard lists DIFFER"), std::string::npos) << listing;
  EXPECT_NE(listing.find("frsctl: shard 127.0.0.1:" + std::to_string(fourth[0]) + " runs the shard list of digest"),
            std::string::npos)
      << listing;
  // 3. Every old shard gets the new <cluster>; 4. handoff on each.
  for (int i = 0; i < 3; ++i) shards[i]->SetCluster(ports);
  EXPECT_EQ(shards[3]->Ctl("stat --cluster", &listing), 0) << listing;
  uint64_t sent = 0;
  for (int i = 0; i < 3; ++i) {
    std::string out;
    ASSERT_EQ(shards[i]->Handoff(&out), 0) << out;
    unsigned long long n = 0, m = 0, dup = 0;
    if (std::sscanf(out.c_str(), "%*[^:]:%*[^:]: %llu node(s) sent, %llu merged, %llu already", &n, &m, &dup) == 3) {
      sent += n;
      EXPECT_EQ(n, m);
    } else {
      EXPECT_NE(out.find("nothing to hand off"), std::string::npos) << out;
    }
  }
  EXPECT_EQ(sent, moved);
  ExpectLeft(ports, keys, kMax - 3);
  // The receipts the new shard keeps are part of a sound store, one per
  // batch of 8 from each sender, not one per node.
  std::string verify;
  EXPECT_EQ(shards[3]->Ctl("verify", &verify), 0) << verify;
  std::string st;
  ASSERT_EQ(shards[3]->Ctl("stat --json", &st), 0) << st;
  const size_t at = st.find("\"nodes_used\":");
  ASSERT_NE(at, std::string::npos) << st;
  const uint64_t nodes = std::stoull(st.substr(at + 13));
  EXPECT_GE(nodes, moved);
  EXPECT_LE(nodes, moved + moved / 8 + 3) << st;
  // The whole cluster's figures, asked over HTTP from any shard's srv.xml.
  std::string stat;
  EXPECT_EQ(shards[0]->Ctl("stat --cluster --json", &stat), 0) << stat;
  EXPECT_NE(stat.find("\"unreachable\":0"), std::string::npos) << stat;
  EXPECT_NE(stat.find(Name(ports[3])), std::string::npos) << stat;

  // Removing the fourth: it gets a list without itself and hands everything off.
  for (int i = 0; i < 3; ++i) shards[i]->SetCluster(three);
  shards[3]->SetCluster(three);
  std::string out;
  ASSERT_EQ(shards[3]->Handoff(&out), 0) << out;
  ExpectLeft(three, keys, 0);
  std::string again;
  ASSERT_EQ(shards[3]->Handoff(&again), 0) << again;
  EXPECT_NE(again.find("nothing to hand off"), std::string::npos) << again;
}

// Killed at each step, and ("torn") halfway through writing a batch's
// records (32 nodes' lines, more than a page), whose next run cuts the torn
// record: every node is sent once.
TEST(ClusterE2E, AHandoffKilledAtAnyStepLosesNothingWhenRunAgain) {
  for (const char* step : {"spooled", "erased", "sent", "torn"}) {
    SCOPED_TRACE(step);
    Shard a, b;
    ASSERT_TRUE(a.Start());
    ASSERT_TRUE(b.Start());
    const std::vector<uint16_t> one{a.port()}, ports{a.port(), b.port()};
    a.SetCluster(one);
    b.SetCluster(ports);
    const auto keys = Keys(std::string(step) + "-", 200);
    Use(one, keys, 2);
    Use(ports, keys, 1);
    a.SetCluster(ports);
    std::string out;
    const bool torn = std::string(step) == "torn";
    EXPECT_EQ(torn ? a.Ctl("handoff --batch 32", &out, step) : a.Handoff(&out, step), 137) << out;
    ASSERT_EQ(a.Handoff(&out), 0) << out;
    if (torn) {
      EXPECT_NE(out.find("byte(s) of a record a full disk or a kill left unfinished"), std::string::npos) << out;
    }
    ExpectLeft(ports, keys, kMax - 3);
    ASSERT_EQ(a.Handoff(&out), 0) << out;
    EXPECT_NE(out.find("nothing to hand off"), std::string::npos) << out;
  }
}

// A handoff whose spool fills the disk: the batches that fit are spooled,
// erased and sent; the one that does not fit stops the spooling with its
// nodes still here (room for a batch's records and marks is taken before
// any of its nodes is erased), the run says which disk, and a re-run once
// there is room sends the rest. No unit is lost, none counted twice. (It
// used to leave half a JSON line; every later run failed on it, and 2,851
// of 2,991 units were left only in the spool.)
TEST(ClusterE2E, AHandoffOnAFullDiskLosesNothingAndFinishesOnceThereIsRoom) {
  Shard a, b;
  testing::SmallDisk disk(a.frsd().dir() + "/data", "4m");
  if (!disk.mounted()) GTEST_SKIP() << "needs root to mount a small tmpfs (CI runs as root)";
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  const std::vector<uint16_t> only_a{a.port()}, only_b{b.port()};
  a.SetCluster(only_a);
  b.SetCluster(only_b);
  const auto keys = Keys("full-", 600);
  Use(only_a, keys, 2);
  // The disk holds the store (about 2.9 MB); leave about 40 KB of it free,
  // room for a few batches of records, not for 600 nodes'.
  std::system(("dd if=/dev/zero of='" + a.frsd().dir() + "/data/filler' bs=4k 2>/dev/null").c_str());
  std::filesystem::resize_file(a.frsd().dir() + "/data/filler",
                               std::filesystem::file_size(a.frsd().dir() + "/data/filler") - 40 * 1024);
  // A leaves the ring: every node goes to b.
  a.SetCluster(only_b);
  std::string out;
  EXPECT_EQ(a.Handoff(&out), 3) << out;
  EXPECT_NE(out.find("no room for"), std::string::npos) << out;
  EXPECT_NE(out.find("node(s) stay on this shard"), std::string::npos) << out;
  // Some batches went, the rest stayed here whole.
  std::string st;
  ASSERT_EQ(a.Ctl("stat --json", &st), 0) << st;
  const size_t at = st.find("\"nodes_used\":");
  ASSERT_NE(at, std::string::npos) << st;
  const uint64_t stayed = std::stoull(st.substr(at + 13));
  EXPECT_GT(stayed, 0u);
  EXPECT_LT(stayed, 600u);
  // Room again: the re-run sends the rest, and every key has its 3 uses
  // left at b, counted once.
  std::filesystem::remove(a.frsd().dir() + "/data/filler");
  ASSERT_EQ(a.Handoff(&out), 0) << out;
  ExpectLeft(only_b, keys, kMax - 2);
  std::string again;
  ASSERT_EQ(a.Handoff(&again), 0) << again;
  EXPECT_NE(again.find("nothing to hand off"), std::string::npos) << again;
}

// A shard that refuses its batches (its map lacks the biz), or that is left
// out of the run (it runs another <cluster>), stops neither the batches to
// the other shard nor the run's other steps: b gets its nodes, the run exits
// non-zero naming c, and once c is fixed a re-run hands c its nodes, each
// once.
TEST(ClusterE2E, AShardThatRefusesOrIsNotReadyStopsNoOtherShard) {
  // c refuses the batches (its map lacks the biz), runs another <cluster>,
  // or refuses the admin token the run sends (another one set there).
  for (const int why : {0, 1, 2}) {
    const bool refuses = why == 0, other_token = why == 2;
    SCOPED_TRACE(refuses ? "c refuses the batches" : other_token ? "c has another token" : "c runs another <cluster>");
    Shard a, b,
        c(refuses ? R"(<map><biz id="2" name="other"><rule interval="60" max="5"/></biz></map>)" : kMap,
          other_token ? "other" : "s3cret");
    ASSERT_TRUE(a.Start());
    ASSERT_TRUE(b.Start());
    ASSERT_TRUE(c.Start());
    const std::vector<uint16_t> only_a{a.port()}, bc{b.port(), c.port()};
    a.SetCluster(only_a);
    b.SetCluster(bc);
    c.SetCluster(refuses || other_token ? bc : std::vector<uint16_t>{c.port()});
    const auto keys = Keys("left-", 300);
    Use(only_a, keys, 2);
    a.SetCluster(bc);  // a leaves: its nodes go to b and c
    std::string out;
    // A dry run refuses where the run would (it went ahead, exit 0): a shard
    // that runs another <cluster>, or refuses the token, is seen without a
    // batch sent (one refusing the token had this shard's nodes spooled and
    // erased, then every batch refused).
    const std::string said = refuses       ? "shard " + Name(c.port()) + " refused a node"
                             : other_token ? "shard " + Name(c.port()) + " refused the admin token"
                                           : "shard " + Name(c.port()) + " runs another";
    EXPECT_EQ(a.Handoff(&out, "", "--dry-run"), refuses ? 0 : 2) << out;
    if (!refuses) {
      EXPECT_NE(out.find(said), std::string::npos) << out;
    }
    EXPECT_EQ(a.Handoff(&out), refuses ? 3 : 2) << out;  // 2: srv.xml's peers need fixing first
    EXPECT_NE(out.find(said), std::string::npos) << out;
    EXPECT_NE(out.find(Name(b.port()) + ": "), std::string::npos) << out;  // b's batches went
    Ring ring = RingOf(bc);
    std::vector<std::string> at_b, at_c;
    for (const std::string& k : keys) (ring.OwnerIndex(k) == 0 ? at_b : at_c).push_back(k);
    ASSERT_GT(at_b.size(), 50u);
    ASSERT_GT(at_c.size(), 50u);
    ExpectLeft(bc, at_b, kMax - 2);
    // c is fixed; the re-run hands it what it refused, or what stayed here.
    if (refuses) {
      WriteFile(c.frsd().dir() + "/map.xml", kMap);
      ASSERT_TRUE(c.frsd().ReloadAndWait()) << c.frsd().log();
    } else if (other_token) {
      const std::string cfg = ReadFile(c.frsd().config());
      const size_t at = cfg.find("token=\"other\"");
      ASSERT_NE(at, std::string::npos) << cfg;
      WriteFile(c.frsd().config(), cfg.substr(0, at) + "token=\"s3cret\"" + cfg.substr(at + 13));
      ASSERT_TRUE(c.frsd().ReloadAndWait()) << c.frsd().log();
    } else {
      c.SetCluster(bc);
    }
    ASSERT_EQ(a.Handoff(&out), 0) << out;
    ExpectLeft(bc, at_c, kMax - 2);
  }
}

// A shard that cannot be reached is named on standard error once, by stat
// --cluster and by stat --cluster --by over two bizzes alike (it was named
// once per biz, and plain stat --cluster named it on standard output only).
TEST(ClusterE2E, AnUnreachableShardIsNamedOnceOnStandardError) {
  Shard a(R"(<map>
  <biz id="1" name="api" fields="app,user"><rule interval="3600" max="1000"/><stats by="app"/></biz>
  <biz id="2" name="web" fields="app,user"><rule interval="3600" max="1000"/><stats by="app"/></biz>
</map>
)");
  ASSERT_TRUE(a.Start());
  a.SetCluster({a.port(), 9});  // the discard port: nothing listens there
  for (const char* args : {"stat --cluster", "stat --cluster --by app"}) {
    std::string out;
    EXPECT_EQ(a.Ctl(args, &out), 1) << args << ": " << out;
    const std::string named = "frsctl: shard 127.0.0.1:9: ";
    const size_t at = out.find(named);
    EXPECT_NE(at, std::string::npos) << args << ": " << out;
    EXPECT_EQ(out.find(named, at + 1), std::string::npos) << args << ": " << out;
  }
}

// Statistics by key field in a cluster: frsctl stat --cluster --by sums the
// shards and merges their distinct users (a user seen on both counts once);
// a shard leaving the ring hands its statistics to the one that stays, once.
TEST(ClusterE2E, StatisticsByFieldAreSummedAcrossShardsAndHandedOffOnce) {
  const std::string map = R"(<map>
  <biz id="1" name="login"><rule interval="3600" max="5"/></biz>
  <biz id="7" name="api" fields="app,user,iface" separator="|">
    <rule interval="3600" max="1000"/>
    <stats by="app" distinct="user"/>
  </biz>
</map>
)";
  Shard a(map), b(map);
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  const std::vector<uint16_t> both = {a.port(), b.port()};
  a.SetCluster(both);
  b.SetCluster(both);
  Ring ring = RingOf(both);
  // 60 users of app1, each on 4 interfaces: a user's keys land on both shards.
  uint64_t on[2] = {0, 0};
  {
    Client ca(a.port()), cb(b.port());
    for (int u = 0; u < 60; ++u)
      for (int i = 0; i < 4; ++i) {
        // A GET's route is its key as sent (what nginx hashes).
        const std::string key = "app1%7Cu" + std::to_string(u) + "%7Cif" + std::to_string(i);
        const size_t owner = ring.OwnerIndex(key);
        Client& c = owner == 0 ? ca : cb;
        ASSERT_EQ(c.Get("/acquire?biz=api&key=" + key).status, 200);
        ++on[owner];
      }
  }
  ASSERT_GT(on[0], 0u);
  ASSERT_GT(on[1], 0u);
  // And a day file larger than one request body (64 KB): 1,500 more apps of
  // one call each, and app "big" of 600 users (a dense sketch, ~32 KB of
  // text on its own), so the handoff sends it in pieces.
  {
    Client ca(a.port()), cb(b.port());
    for (int n = 0; n < 1500; ++n) {
      const std::string key = "x" + std::to_string(n) + "%7Cu1%7Cif0";
      ASSERT_EQ((ring.OwnerIndex(key) == 0 ? ca : cb).Get("/acquire?biz=api&key=" + key).status, 200);
    }
    for (int u = 0; u < 600; ++u) {
      const std::string key = "big%7Cu" + std::to_string(u) + "%7Cif0";
      ASSERT_EQ((ring.OwnerIndex(key) == 0 ? ca : cb).Get("/acquire?biz=api&key=" + key).status, 200);
    }
  }
  auto distinct_of = [](const std::string& xml) { return Attr(xml, "distinct_user"); };
  // Each shard alone sees part of the users; together they are 60, not the sum.
  const std::string da = Client(a.port()).Get("/stats?biz=api&by=app&value=app1&token=s3cret").body;
  const std::string db = Client(b.port()).Get("/stats?biz=api&by=app&value=app1&token=s3cret").body;
  ASSERT_GT(std::stoull(distinct_of(da)) + std::stoull(distinct_of(db)), 60u) << da << db;
  std::string out;
  ASSERT_EQ(a.Ctl("stat --cluster --by app --value app1 --json", &out), 0) << out;
  EXPECT_NE(out.find("\"requests\":240"), std::string::npos) << out;
  EXPECT_NE(out.find("\"distinct_user\":60"), std::string::npos) << out;
  ASSERT_EQ(a.Ctl("stat --cluster --by app --json", &out), 0) << out.substr(0, 400);
  EXPECT_NE(out.find("\"groups\":1502"), std::string::npos) << out.substr(0, 400);

  // A day file older than B keeps (days="31", the default), as a shard
  // with a longer `days` would hold: B would refuse it, so the handoff
  // skips it, says why, leaves it here, and finishes.
  const std::string table_dir = a.frsd().dir() + "/data/stats/7/app+user";
  std::string today_file;
  for (const auto& e : std::filesystem::directory_iterator(table_dir))
    if (e.path().filename().string().size() == 14) today_file = e.path().string();
  ASSERT_FALSE(today_file.empty());
  uint32_t today = 0;
  ASSERT_TRUE(ParseDayText(std::filesystem::path(today_file).filename().string().substr(0, 10), &today));
  const std::string old_file = table_dir + "/" + DayText(today - 40) + ".frs";
  std::filesystem::copy_file(today_file, old_file);
  // And a link at a day file's name, to a copy outside the store: not this
  // store's counts, neither sent nor deleted, and said (a handoff sent what
  // one led to, then deleted it; found from outside).
  const std::string outside = a.frsd().dir() + "/outside.frs", linked = table_dir + "/" + DayText(today - 2) + ".frs";
  std::filesystem::copy_file(today_file, outside);
  std::filesystem::create_symlink(outside, linked);

  // A leaves: both get a ring of B alone; A's handoff sends its keys and its statistics.
  b.SetCluster({b.port()});
  a.SetCluster({b.port()});
  ASSERT_EQ(a.Handoff(&out), 0) << out;
  EXPECT_NE(out.find("1 statistics day file(s) handed over"), std::string::npos) << out;
  EXPECT_NE(out.find("skipped " + old_file + ": "), std::string::npos) << out;
  EXPECT_NE(out.find("is not one this table keeps"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::exists(old_file));
  EXPECT_NE(out.find("skipped " + linked + ": a symbolic link"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::is_symlink(linked));
  EXPECT_TRUE(std::filesystem::exists(outside));
  const std::string after = Client(b.port()).Get("/stats?biz=api&by=app&value=app1&token=s3cret").body;
  EXPECT_EQ(Attr(after, "requests"), "240") << after;
  EXPECT_EQ(distinct_of(after), "60") << after;
  const std::string big = Client(b.port()).Get("/stats?biz=api&by=app&value=big&token=s3cret").body;
  EXPECT_EQ(Attr(big, "requests"), "600") << big;
  EXPECT_NEAR(std::stod(distinct_of(big)), 600.0, 12.0) << big;
  const std::string all = Client(b.port()).Get("/stats?biz=api&by=app&token=s3cret").body;
  EXPECT_EQ(Attr(all, "groups"), "1502") << all.substr(0, 300);
  // Run again: nothing is counted twice (the old file is skipped again).
  ASSERT_EQ(a.Handoff(&out), 0) << out;
  EXPECT_EQ(out.find("handed over"), std::string::npos) << out;
  EXPECT_NE(out.find("skipped " + old_file + ": "), std::string::npos) << out;
  EXPECT_EQ(Attr(Client(b.port()).Get("/stats?biz=api&by=app&value=app1&token=s3cret").body, "requests"), "240");
  EXPECT_EQ(Attr(Client(b.port()).Get("/stats?biz=api&by=app&value=big&token=s3cret").body, "requests"), "600");
}

}  // namespace
}  // namespace frs::e2e
