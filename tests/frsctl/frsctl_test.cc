// End-to-end tests of the frsctl binary against real stores in a temporary
// directory: every command's output and exit code, verify on a damaged file,
// export -> import into another geometry, and refused imports.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "common/files.h"
#include "common/temp_dir.h"
#include "ctl_runner.h"
#include "frs/admin_engine.h"
#include "frs/clock.h"
#include "frs/ring.h"
#include "frs/service.h"
#include "frs/store.h"
#include "frs/store_admin.h"
#include "json_in.h"
#include "session.h"
#include "store/format.h"

namespace frs::ctl {
namespace {

// Rules of every algorithm, slow enough that counts do not move during a test.
const std::string kMap =
    ctl_test::SlowMap(R"(  <biz id="3" name="api"><rule algo="token_bucket" interval="3600" max="10" burst="20"/></biz>
)");

using ctl_test::CtlRun;
using ctl_test::Quote;
using ctl_test::ReadFile;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

// An export's node and receipt lines: its last line is its end line, which
// counts them (export_end.h).
std::vector<std::string> ExportLines(const std::string& text) {
  std::vector<std::string> lines = Lines(text);
  EXPECT_FALSE(lines.empty());
  if (lines.empty()) return lines;
  EXPECT_EQ(lines.back().rfind("{\"end\":{\"nodes\":", 0), 0u) << lines.back();
  lines.pop_back();
  return lines;
}

struct UniqueFdForTest {
  explicit UniqueFdForTest(int f) : fd(f) {}
  ~UniqueFdForTest() {
    if (fd >= 0) ::close(fd);
  }
  int fd;
};

JsonValue Parse(const std::string& text) {
  Result<JsonValue> v = ParseJson(text);
  EXPECT_TRUE(v.ok()) << v.status().message() << " in: " << text;
  return v.ok() ? v.value() : JsonValue{};
}

class FrsctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    WriteConfig("srv.xml", "data", 2, 256, 8);
    std::ofstream(dir_ / "map.xml") << kMap;
  }

  void WriteConfig(const std::string& name, const std::string& data, uint32_t files, uint32_t keynodes, uint32_t chain,
                   const std::string& map = "map.xml") {
    std::ofstream(dir_ / name) << "<frs>\n  <map>" << map << "</map>\n  <store dir=\"" << data << "\" files=\"" << files
                               << "\" keynodes=\"" << keynodes << "\" chain=\"" << chain
                               << "\"/>\n  <timezone>UTC</timezone>\n</frs>\n";
  }

  // Runs frsctl with `args` and optional standard input text: its command
  // line in this process, or the program when as_program_ says so.
  CtlRun Ctl(const std::vector<std::string>& args, const std::string& config = "srv.xml",
             const std::string& input = "") {
    const std::string c = config.empty() ? "" : dir_ / config;
    return as_program_ ? ctl_test::RunCtlProgram(dir_.path(), c, args, input)
                       : ctl_test::RunCtl(dir_.path(), c, args, input);
  }
  // A test whose frsctl, as root, becomes another user (the store's owner)
  // runs the program: this process must stay root.
  bool as_program_ = false;

  void CreateStore(const std::string& config = "srv.xml") {
    CtlRun r = Ctl({"init"}, config);
    ASSERT_EQ(r.rc, 0) << r.err;
  }

  // A store's lease secret of known bytes (in place of one a first engine
  // made, if one did: CreateStore's import makes none).
  void MakeLeaseKey() {
    const std::string path = dir_ / "data/lease.key";
    std::ofstream(path) << "0123456789abcdef";
    ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  }

  // A store of one concurrency biz, its lease.key of known bytes, and key
  // u42 holding one lease of it.
  void StoreWithALeaseHeld() {
    std::ofstream(dir_ / "map.xml")
        << "<map>\n  <biz id=\"20\" name=\"inflight\">\n    <rule algo=\"concurrency\" max=\"2\" lease=\"600\"/>\n"
           "  </biz>\n</map>\n";
    CreateStore();
    MakeLeaseKey();
    Set("inflight", "u42", 1);
  }

  void Set(const std::string& biz, const std::string& key, int64_t count, const std::string& config = "srv.xml") {
    CtlRun r = Ctl({"set", biz, key, std::to_string(count)}, config);
    ASSERT_EQ(r.rc, 0) << r.err;
  }

  // Fills nodes of every algorithm: the 20 `set`s frsctl would run, in this
  // process through the command's own code (one session, as frsctl opens it),
  // instead of 20 sanitized frsctl starts per TEST; `set` itself runs as a
  // program in the TESTs about it (Set above).
  void Fill(const std::string& config = "srv.xml") {
    Session s;
    Status st = OpenSession(dir_ / config, Needs::kEngine, &s);
    ASSERT_TRUE(st.ok()) << st.message();
    s.json = true;  // one line per node on the test's output, as `set --json` prints it
    for (int i = 0; i < 5; ++i) {
      for (const SetArgs& a :
           {SetArgs{"login", "user:" + std::to_string(i), i + 1}, SetArgs{"ad_user", "u" + std::to_string(i), i % 4},
            SetArgs{"api", "k" + std::to_string(i), 2 * i + 1},
            SetArgs{"partner", "p" + std::to_string(i), 300 * i + 7}}) {
        Result<int> rc = RunSet(s, a);
        ASSERT_TRUE(rc.ok()) << rc.status().message();
        ASSERT_EQ(rc.value(), kExitOk) << a.biz << " " << a.key;
      }
    }
  }

  // biz/key -> every rule's count, from dump --json.
  std::map<std::string, std::vector<int64_t>> Counts(const std::string& config) {
    CtlRun r = Ctl({"dump", "--json"}, config);
    EXPECT_EQ(r.rc, 0) << r.err;
    std::map<std::string, std::vector<int64_t>> out;
    for (const std::string& l : Lines(r.out)) {
      JsonValue v = Parse(l);
      if (v.Find("biz_id") != nullptr && v.Find("biz_id")->number == 0) continue;  // a handoff receipt
      std::vector<int64_t> counts;
      for (const JsonValue& rule : v.Find("rules")->items)
        counts.push_back(static_cast<int64_t>(rule.Find("count")->number));
      out[v.Find("biz")->text + "/" + v.Find("key")->text] = counts;
    }
    return out;
  }

  testing::TempDir dir_;
};

TEST_F(FrsctlTest, HelpDocumentsEveryCommandAndOption) {
  CtlRun r = Ctl({"--help"}, "");
  EXPECT_EQ(r.rc, 0);
  for (const char* c : {"stat", "get", "dump", "set", "del", "reset", "verify", "export", "import", "top", "explain",
                        "init", "owner", "handoff", "grow"})
    EXPECT_NE(r.out.find(std::string("  ") + c + " "), std::string::npos) << c;
  r = Ctl({"dump", "--help"}, "");
  EXPECT_EQ(r.rc, 0);
  for (const char* o : {"--file", "--keynode", "--biz", "--json"}) EXPECT_NE(r.out.find(o), std::string::npos) << o;
  r = Ctl({"handoff", "--help"}, "");
  for (const char* o : {"--token", "--dry-run", "--batch"}) EXPECT_NE(r.out.find(o), std::string::npos) << o;
  r = Ctl({"stat", "--help"}, "");
  EXPECT_NE(r.out.find("--cluster"), std::string::npos);
  r = Ctl({"import", "--help"}, "");
  for (const char* o : {"--map-by-name", "--rename-biz", "--dry-run", "FILE"})
    EXPECT_NE(r.out.find(o), std::string::npos) << o;
}

TEST_F(FrsctlTest, OwnerPrintsTheRingsShard) {
  std::ofstream(dir_ / "c.xml") << "<frs><listen port=\"8302\"/><map>map.xml</map><store dir=\"data\"/>\n"
                                   "<cluster><shard>127.0.0.1:8301</shard><shard>127.0.0.1:8302</shard>"
                                   "<shard weight=\"2\">127.0.0.1:8303</shard></cluster></frs>\n";
  auto ring = Ring::Make({{"127.0.0.1:8301", 1}, {"127.0.0.1:8302", 1}, {"127.0.0.1:8303", 2}});
  ASSERT_TRUE(ring.ok());
  std::set<std::string> owners;
  for (int i = 0; i < 12; ++i) {
    std::string route = "user:" + std::to_string(i);
    CtlRun r = Ctl({"owner", route}, "c.xml");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out, ring->Owner(route) + "\n");
    owners.insert(r.out);
  }
  EXPECT_GT(owners.size(), 1u);
  CtlRun r = Ctl({"owner", "--key", "{app7}|u42", "--json"}, "c.xml");
  ASSERT_EQ(r.rc, 0) << r.err;
  JsonValue v = Parse(r.out);
  EXPECT_EQ(v.Find("route")->text, "app7");
  EXPECT_EQ(v.Find("owner")->text, ring->Owner("app7"));
  EXPECT_EQ(v.Find("self")->boolean, ring->Owner("app7") == "127.0.0.1:8302");
  r = Ctl({"owner", "k"});  // srv.xml without <cluster>
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("no <cluster>"), std::string::npos) << r.err;
}

TEST_F(FrsctlTest, OwnerWithReplicasAlsoPrintsTheSuccessor) {
  std::ofstream(dir_ / "r.xml")
      << "<frs><listen port=\"8302\"/><map>map.xml</map><store dir=\"data\"/><admin token=\"t\"/>\n"
         "<cluster self=\"127.0.0.1:8302\" replicas=\"1\"><shard>127.0.0.1:8301</shard>"
         "<shard>127.0.0.1:8302</shard><shard>127.0.0.1:8303</shard></cluster></frs>\n";
  auto ring = Ring::Make({{"127.0.0.1:8301", 1}, {"127.0.0.1:8302", 1}, {"127.0.0.1:8303", 1}});
  ASSERT_TRUE(ring.ok());
  for (int i = 0; i < 12; ++i) {
    const std::string route = "user:" + std::to_string(i);
    const uint32_t hash = Ring::HashRoute(route);
    const long succ = ring->SuccessorOfHash(hash);
    ASSERT_GE(succ, 0);
    const std::string& successor = ring->shards()[static_cast<size_t>(succ)].name;
    EXPECT_NE(successor, ring->Owner(route));
    CtlRun r = Ctl({"owner", route}, "r.xml");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out, ring->Owner(route) + "\nsuccessor " + successor + "\n");
    r = Ctl({"owner", route, "--json"}, "r.xml");
    ASSERT_EQ(r.rc, 0) << r.err;
    JsonValue v = Parse(r.out);
    EXPECT_EQ(v.Find("owner")->text, ring->Owner(route));
    ASSERT_NE(v.Find("successor"), nullptr) << r.out;
    EXPECT_EQ(v.Find("successor")->text, successor);
  }
  // Without replicas there is no copy to name.
  std::ofstream(dir_ / "c.xml")
      << "<frs><listen port=\"8302\"/><map>map.xml</map><store dir=\"data\"/>\n"
         "<cluster><shard>127.0.0.1:8301</shard><shard>127.0.0.1:8302</shard></cluster></frs>\n";
  CtlRun r = Ctl({"owner", "k", "--json"}, "c.xml");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(Parse(r.out).Find("successor"), nullptr) << r.out;
}

// Found from outside: a program of the library that decided on a shard's
// store with replicas took leases no other holder heard of (5 held of 3
// after a failover). It is refused, saying why, unless it asks to read.
TEST_F(FrsctlTest, TheLibraryRefusesAReplicatedShardsStoreUnlessAskedToRead) {
  std::ofstream(dir_ / "r.xml")
      << "<frs><listen port=\"8302\"/><map>map.xml</map><store dir=\"r-data\"/><admin token=\"t\"/>\n"
         "<cluster self=\"127.0.0.1:8302\" replicas=\"1\"><shard>127.0.0.1:8301</shard>"
         "<shard>127.0.0.1:8302</shard></cluster></frs>\n";
  ServiceOpenOptions o;
  o.create_if_missing = true;
  Result<Service> refused = OpenFromConfig(dir_ / "r.xml", o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("a cluster shard with replicas=\"1\""), std::string::npos)
      << refused.status().ToString();
  // Not made here even to read: frsd's first start makes it, and takes the
  // other shards' snapshots then (a store it found would take none).
  o.unreplicated = true;
  refused = OpenFromConfig(dir_ / "r.xml", o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("create_if_missing is refused"), std::string::npos)
      << refused.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(dir_ / "r-data")) << "refused before the store is made";
  // A store there (frsd's), opened to read.
  std::ofstream(dir_ / "plain.xml") << "<frs><listen port=\"8302\"/><map>map.xml</map><store dir=\"r-data\"/></frs>\n";
  ServiceOpenOptions make;
  make.create_if_missing = true;
  ASSERT_TRUE(OpenFromConfig(dir_ / "plain.xml", make).ok());
  o.create_if_missing = false;
  Result<Service> reader = OpenFromConfig(dir_ / "r.xml", o);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
}

// get and explain of a key without a node on a shard that holds no copy of
// its route: the answer names the shards that do, not only "never counted";
// a set, del or reset with replicas says it changed this shard only.
TEST_F(FrsctlTest, OnAClusterShardNodeCommandsNameTheKeysHolders) {
  std::ofstream(dir_ / "r.xml")
      << "<frs><listen port=\"8302\"/><map>map.xml</map>"
         "<store dir=\"data\" files=\"2\" keynodes=\"256\" chain=\"8\"/><timezone>UTC</timezone><admin token=\"t\"/>"
         "<cluster self=\"127.0.0.1:8302\" replicas=\"1\"><shard>127.0.0.1:8301</shard>"
         "<shard>127.0.0.1:8302</shard><shard>127.0.0.1:8303</shard><shard>127.0.0.1:8304</shard></cluster></frs>\n";
  CreateStore("r.xml");
  auto ring = Ring::Make({{"127.0.0.1:8301", 1}, {"127.0.0.1:8302", 1}, {"127.0.0.1:8303", 1}, {"127.0.0.1:8304", 1}});
  ASSERT_TRUE(ring.ok());
  int held = 0, not_held = 0;
  for (int i = 0; i < 40 && (held < 2 || not_held < 2); ++i) {
    const std::string key = "user:" + std::to_string(i);
    const uint32_t hash = Ring::HashRoute(key);
    const std::string owner = ring->Owner(key);
    const std::string successor = ring->shards()[static_cast<size_t>(ring->SuccessorOfHash(hash))].name;
    const bool holder = owner == "127.0.0.1:8302" || successor == "127.0.0.1:8302";
    (holder ? held : not_held)++;
    for (const char* cmd : {"get", "explain"}) {
      CtlRun r = Ctl({cmd, "login", key}, "r.xml");
      EXPECT_NE(r.out.find("never counted"), std::string::npos) << cmd << " " << key << ": " << r.out;
      const std::string named = "ask its owner " + owner + " or its successor " + successor;
      if (holder) {
        EXPECT_EQ(r.out.find("holds no copy"), std::string::npos) << cmd << " " << key << ": " << r.out;
      } else {
        EXPECT_NE(r.out.find("(127.0.0.1:8302) holds no copy of the key's route"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find(named), std::string::npos) << cmd << " " << key << ": " << r.out;
      }
      r = Ctl({cmd, "--json", "login", key}, "r.xml");
      JsonValue v = Parse(r.out);
      ASSERT_NE(v.Find("holder"), nullptr) << r.out;
      EXPECT_EQ(v.Find("holder")->boolean, holder) << r.out;
      EXPECT_EQ(v.Find("owner")->text, owner) << r.out;
      EXPECT_EQ(v.Find("successor")->text, successor) << r.out;
    }
  }
  EXPECT_GE(held, 2);
  EXPECT_GE(not_held, 2);
  // A set, a del and a reset here change this store only: each says so on
  // standard error, naming the other holder (the output is unchanged).
  for (int i = 0; i < 40; ++i) {
    const std::string key = "user:" + std::to_string(i);
    const std::string owner = ring->Owner(key);
    const std::string successor = ring->shards()[static_cast<size_t>(ring->SuccessorOfHash(Ring::HashRoute(key)))].name;
    if (owner != "127.0.0.1:8302" && successor != "127.0.0.1:8302") continue;
    const std::string other = owner == "127.0.0.1:8302" ? successor : owner;
    CtlRun r = Ctl({"set", "login", key, "2"}, "r.xml");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("count set to 2"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("note: set changed this shard's store only (127.0.0.1:8302); the key's other holder " + other +
                         " keeps its node as it was"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("admin command over HTTP changes both holders"), std::string::npos) << r.err;
    r = Ctl({"del", "login", key}, "r.xml");
    EXPECT_NE(r.err.find("note: del changed this shard's store only"), std::string::npos) << r.err;
    r = Ctl({"set", "login", key, "1"}, "r.xml");
    r = Ctl({"reset", "login"}, "r.xml");
    EXPECT_NE(r.err.find("note: reset changed this shard's store only (127.0.0.1:8302); the other shards keep theirs"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("admin command over HTTP changes every shard"), std::string::npos) << r.err;
    break;
  }
  EXPECT_EQ(Ctl({"set", "login", "user:1", "1"}).err, "");  // no <cluster>: no note
  // Without replicas, a key's one holder is its owner: a set on another
  // shard said nothing (found by an outside run); it says where the key is.
  std::string plain = ReadFile(dir_ / "r.xml");
  plain.replace(plain.find(" replicas=\"1\""), 13, "");
  std::ofstream(dir_ / "p.xml") << plain;
  for (int i = 0; i < 40; ++i) {
    const std::string key = "user:" + std::to_string(i);
    const std::string owner = ring->shards()[ring->OwnerIndex(key)].name;
    CtlRun set = Ctl({"set", "login", key, "1"}, "p.xml");
    if (owner == "127.0.0.1:8302") {
      EXPECT_EQ(set.err, "") << key;
    } else {
      EXPECT_NE(set.err.find("note: set changed this shard's store (127.0.0.1:8302), which does not own the key's "
                             "route: its owner " +
                             owner),
                std::string::npos)
          << set.err;
    }
  }
  // A lone server (srv.xml without <cluster>, the same store) holds every
  // key: no such fields.
  CtlRun r = Ctl({"get", "--json", "login", "user:1"});
  EXPECT_EQ(Parse(r.out).Find("holder"), nullptr) << r.out;
}

TEST_F(FrsctlTest, VersionAndTheDefaultConfigPath) {
  CtlRun r = Ctl({"--version"}, "");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, std::string("frsctl ") + FRS_VERSION + "\n");
  CreateStore();
  Set("login", "k", 2);
  // Without -c: $FRS_CONF.
  ::setenv("FRS_CONF", (dir_ / "srv.xml").c_str(), 1);
  r = Ctl({"get", "login", "k", "--json"}, "");
  ::unsetenv("FRS_CONF");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(Parse(r.out).Find("count")->number, 2);
  // Without either: the installed default (beside the program: here the
  // test's), named when it is missing, with where that path came from.
  const std::string default_path = DefaultServiceConfigPath();
  if (!std::filesystem::exists(default_path)) {
    r = Ctl({"stat"}, "");
    EXPECT_EQ(r.rc, 2);
    // One line, as every failure (it was two).
    EXPECT_EQ(r.err.rfind("frsctl: " + default_path +
                              ": no such file (the default path (neither -c nor $FRS_CONF given",
                          0),
              0u)
        << r.err;
    EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  }
  // $FRS_CONF naming nothing says so; -c naming nothing needs no word more.
  const std::string missing = dir_ / "absent.xml";
  ::setenv("FRS_CONF", missing.c_str(), 1);
  r = Ctl({"stat"}, "");
  ::unsetenv("FRS_CONF");
  EXPECT_NE(r.err.find("frsctl: " + missing + ": no such file (named by $FRS_CONF; -c FILE names another)"),
            std::string::npos)
      << r.err;
  r = Ctl({"stat"}, "absent.xml");
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.err.find("-c FILE names another"), std::string::npos) << r.err;
}

// init judges map.xml as every other command does: a store made beside a
// map frsd refuses was an exit 0 no start could use (found by an outside
// run). Exit 2 naming the line, and no store made.
TEST_F(FrsctlTest, InitRefusesAMapFrsdWouldRefuse) {
  std::ofstream(dir_ / "map.xml")
      << "<map>\n  <biz id=\"1\" name=\"a\"><rule interval=\"0\" max=\"5\"/></biz>\n</map>\n";
  CtlRun r = Ctl({"init"});
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("map.xml:2: rule interval '0' is out of range"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "data/frs.0.store"));
}

// An frsd of another PID namespace (another container on the volume) names
// its lock owners by thread ids frsctl here reads as other threads: frsctl
// would take over a live worker's lock and undo its write (a review of the
// store's crash safety). Its frsd.lock names its namespace; frsctl refuses
// to open the store under one that is not its own.
TEST_F(FrsctlTest, AStoreServedFromAnotherPidNamespaceIsRefused) {
  CreateStore();
  Set("login", "user:1", 2);
  struct stat ns {};
  ASSERT_EQ(::stat("/proc/self/ns/pid", &ns), 0);
  const std::string lock = dir_ / "data/frsd.lock";
  as_program_ = true;  // another process than the lock's holder, as frsctl is beside frsd
  UniqueFdForTest held(::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_GE(held.fd, 0);
  ASSERT_EQ(::flock(held.fd, LOCK_EX), 0);  // as frsd holds it while it serves
  std::ofstream(lock) << "4242\npidns " << ns.st_ino + 1 << "\n";
  CtlRun r = Ctl({"get", "login", "user:1"});
  EXPECT_EQ(r.rc, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("from another PID namespace (its lock names pidns " + std::to_string(ns.st_ino + 1)),
            std::string::npos)
      << r.err;
  // No process of that namespace is seen here: nsenter's target is named.
  EXPECT_NE(r.err.find("nsenter --target FRSD_PID --pid --mount, FRSD_PID frsd's as the host sees it)"),
            std::string::npos)
      << r.err;
  // One that is seen (a container's frsd beside this frsctl of the host):
  // its pid here, found by its namespace and its pid there (the lock's
  // first line). It said PID; the lock's pid is its namespace's, and
  // /proc/locks names a daemon's lock by the process gone before its fork.
  pid_t unshared = 0;
  const char* argv[] = {"unshare", "--pid", "--fork", "--kill-child", "sleep", "30", nullptr};
  if (::posix_spawnp(&unshared, "unshare", nullptr, nullptr, const_cast<char**>(argv), environ) == 0) {
    std::string inner_pid;
    for (int i = 0; i < 200 && inner_pid.empty(); ++i) {
      std::ifstream(std::filesystem::path("/proc") / std::to_string(unshared) / "task" / std::to_string(unshared) /
                    "children") >>
          inner_pid;
      if (inner_pid.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    struct stat theirs {};
    if (!inner_pid.empty() && ::stat(("/proc/" + inner_pid + "/ns/pid").c_str(), &theirs) == 0 &&
        theirs.st_ino != ns.st_ino) {
      std::ofstream(lock) << "1\npidns " << theirs.st_ino << "\n";
      r = Ctl({"get", "login", "user:1"});
      EXPECT_EQ(r.rc, 3) << r.out << r.err;
      EXPECT_NE(r.err.find("nsenter --target " + inner_pid + " --pid --mount)"), std::string::npos) << r.err;
    }
    ::kill(unshared, SIGKILL);
    ::waitpid(unshared, nullptr, 0);
  }
  std::ofstream(lock) << "4242\npidns " << ns.st_ino << "\n";  // this one's: served as before
  r = Ctl({"get", "login", "user:1"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("count 2"), std::string::npos) << r.out;
}

// The other way round: a frsctl in a PID namespace of its own (a container
// beside the host's frsd) is not shown the lock's holder by /proc/locks at
// all, and read the store as served by none (found from outside).
TEST_F(FrsctlTest, AStoreHeldByAProcessThisNamespaceCannotSeeIsRefused) {
  CreateStore();
  const std::string lock = dir_ / "data/frsd.lock";
  UniqueFdForTest held(::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_GE(held.fd, 0);
  ASSERT_EQ(::flock(held.fd, LOCK_EX), 0);
  std::ofstream(lock) << ::getpid() << "\n";
  const std::string out = dir_ / "unshare.out";
  const std::string cmd = "unshare --pid --fork --mount-proc " + Quote(FRSCTL_PATH) + " -c " + Quote(dir_ / "srv.xml") +
                          " get login user:1 > " + Quote(out) + " 2>&1";
  const int st = std::system(cmd.c_str());
  const std::string said = ReadFile(out);
  if (said.find("unshare: ") == 0) GTEST_SKIP() << "unshare(2) of a PID namespace is refused here: " << said;
  EXPECT_EQ(WEXITSTATUS(st), 3) << said;
  EXPECT_NE(said.find("from another PID namespace (this frsctl cannot see the process that holds its lock"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("nsenter --target FRSD_PID --pid --mount, FRSD_PID frsd's as the host sees it)"),
            std::string::npos)
      << said;
  // A lock that names this frsctl's own namespace is its frsd's, however
  // unseen: a daemonized frsd in a namespace other than the first (its lock
  // credited by /proc/locks to the process that took it, gone after the
  // fork). frsctl was refused there, and in every other namespace too.
  const std::string own =
      "unshare --pid --fork --mount-proc sh -c 'printf \"1\\npidns %s\\n\" "
      "$(stat -L -c %i /proc/self/ns/pid) > " +
      Quote(lock) + " && " + Quote(FRSCTL_PATH) + " -c " + Quote(dir_ / "srv.xml") + " get login user:1' > " +
      Quote(out) + " 2>&1";
  const int own_st = std::system(own.c_str());
  EXPECT_NE(WEXITSTATUS(own_st), 3) << ReadFile(out);
  EXPECT_EQ(ReadFile(out).find("another PID namespace"), std::string::npos) << ReadFile(out);
}

// frsctl runs as root (grow, the package's upgrade) in a store directory
// the service user owns: a link that user plants at frsd.lock must not have
// root create the file it names and give it to that user.
TEST_F(FrsctlTest, ASymbolicLinkAtTheStoreLockIsRefusedNotFollowed) {
  std::filesystem::create_directories(dir_ / "data");
  const std::string target = dir_ / "planted";
  ASSERT_EQ(::symlink(target.c_str(), std::string(dir_ / "data/frsd.lock").c_str()), 0);
  CtlRun r = Ctl({"init"});
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("frsd.lock is a symbolic link: frsctl does not follow one in a store directory (remove it)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(target));
}

// frsctl as root on a store its service user owns creates nothing of
// root's there: the side tables a read opens (stats.frs, denials.frs,
// rules.history) were root's, and frsd, as that user, then refused to start.
TEST_F(FrsctlTest, ARootReadOfAnotherUsersStoreLeavesNothingOfRoots) {
  as_program_ = true;
  CreateStore();
  const uid_t owner = ::geteuid() == 0 ? 65534 : ::geteuid();  // nobody, as root
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);            // its owner may reach it, as /var/lib
  for (const auto& e : std::filesystem::directory_iterator(std::string(dir_ / "data")))
    ASSERT_EQ(::chown(e.path().c_str(), owner, owner), 0) << e.path();
  ASSERT_EQ(::chown(std::string(dir_ / "data").c_str(), owner, owner), 0);
  for (const char* f : {"stats.frs", "denials.frs", "rules.history"}) std::filesystem::remove(dir_ / "data/" + f);
  CtlRun r = Ctl({"get", "login", "user:1"});
  EXPECT_EQ(r.rc, 1) << r.err << r.out;  // no such node: a read
  r = Ctl({"stat"});
  EXPECT_EQ(r.rc, 0) << r.err;
  for (const auto& e : std::filesystem::directory_iterator(std::string(dir_ / "data"))) {
    struct stat st;
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, owner) << e.path() << " is not the store owner's";
  }
  if (::geteuid() != 0) return;
  // verify as root checks as the owner too: a file only root may read is
  // one frsd's start refuses (it said "clean: frsd uses it").
  const std::string stats = dir_ / "data/stats.frs";
  ASSERT_EQ(::chown(stats.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(stats.c_str(), 0600), 0);
  r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("unreadable"), std::string::npos) << r.out;
  ASSERT_EQ(::chown(stats.c_str(), owner, owner), 0);
  r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  // import opens its file as root (a directory only root may enter), then
  // makes what it makes as the owner.
  std::filesystem::create_directory(dir_ / "private");
  ASSERT_EQ(::chmod((dir_ / "private").c_str(), 0700), 0);
  std::ofstream(dir_ / "private/one.jsonl") << Ctl({"export"}).out;
  std::filesystem::remove(dir_ / "data/stats.frs");
  r = Ctl({"import", dir_ / "private/one.jsonl"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  for (const auto& e : std::filesystem::directory_iterator(std::string(dir_ / "data"))) {
    struct stat st;
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, owner) << e.path() << " is not the store owner's after import";
  }
  // grow stays root (its new copy is made beside the store directory, in a
  // directory root owns, as /var/lib is) and gives what it makes the owner.
  r = Ctl({"grow", "--keynodes", "512"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(dir_ / "data"))) {
    struct stat st;
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, owner) << e.path() << " is not the store owner's after grow";
  }
}

TEST_F(FrsctlTest, InitCreatesAndRecreatesMissingFilesOnlyWhenAsked) {
  CtlRun r = Ctl({"init"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("created a store"), std::string::npos) << r.out;
  Fill();
  std::filesystem::remove(dir_ / "data/frs.1.store");
  r = Ctl({"get", "login", "user:1"});
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_NE(r.err.find("frs.1.store is missing"), std::string::npos) << r.err;
  r = Ctl({"init"});
  EXPECT_EQ(r.rc, 3);  // a missing file, as get says
  EXPECT_NE(r.err.find("--recreate-missing"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "data/frs.1.store"));
  r = Ctl({"init", "--recreate-missing"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("frs.1.store: created empty"), std::string::npos) << r.out;
  r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  // --json: one object, as every command prints.
  r = Ctl({"init", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  JsonValue v = Parse(r.out);
  ASSERT_NE(v.Find("done"), nullptr) << r.out;
  EXPECT_EQ(v.Find("done")->text, "nothing");
  EXPECT_EQ(v.Find("geometry")->Find("files")->number, 2);
  // Every file there, one truncated: not "complete, nothing to do".
  const auto size = std::filesystem::file_size(dir_ / "data/frs.1.store");
  std::filesystem::resize_file(dir_ / "data/frs.1.store", 4096);
  r = Ctl({"init"});
  EXPECT_EQ(r.rc, 3) << r.out;
  EXPECT_NE(r.err.find("frs.1.store"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("init makes missing ones only; `frsctl verify` says"), std::string::npos) << r.err;
  std::filesystem::resize_file(dir_ / "data/frs.1.store", size);
  // Or with a side file frsd's start refuses.
  const auto stats_size = std::filesystem::file_size(dir_ / "data/stats.frs");
  std::filesystem::resize_file(dir_ / "data/stats.frs", stats_size / 2);
  r = Ctl({"init"});
  EXPECT_EQ(r.rc, 3) << r.out;
  EXPECT_NE(r.err.find("stats.frs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("frsd will not start on it"), std::string::npos) << r.err;
  std::filesystem::resize_file(dir_ / "data/stats.frs", stats_size);
  // Or a store file that is a link to a whole one, which frsd refuses.
  std::filesystem::rename(dir_ / "data/frs.1.store", dir_ / "frs.1.elsewhere");
  std::filesystem::create_symlink(dir_ / "frs.1.elsewhere", dir_ / "data/frs.1.store");
  r = Ctl({"init"});
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.err.find(dir_ / "data/frs.1.store is a symbolic link"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("frsd will not start on this store"), std::string::npos) << r.err;
  std::filesystem::remove(dir_ / "data/frs.1.store");
  std::filesystem::rename(dir_ / "frs.1.elsewhere", dir_ / "data/frs.1.store");
  ASSERT_EQ(Ctl({"init"}).rc, 0);

  // Every file gone but the store's stats.frs: a store deleted or moved,
  // not one never made. frsd's start, frsd -t, frsctl init made it anew
  // and empty, unsaid; now only --recreate-missing does.
  std::filesystem::remove(dir_ / "data/frs.0.store");
  std::filesystem::remove(dir_ / "data/frs.1.store");
  ASSERT_TRUE(std::filesystem::exists(dir_ / "data/stats.frs"));
  r = Ctl({"init"});
  EXPECT_EQ(r.rc, 3) << r.out;
  EXPECT_NE(r.err.find("is gone: none of its files"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "data/frs.0.store"));
  r = Ctl({"get", "login", "user:1"});
  EXPECT_EQ(r.rc, 3);
  EXPECT_NE(r.err.find("start it empty with `frsctl init --recreate-missing`"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("start frsd, or create"), std::string::npos) << r.err;
  r = Ctl({"init", "--recreate-missing"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "data/frs.1.store"));
}

// frsctl could not read a store on a read-only file system, not even `get`.
// Reading commands now open such a store read-only (without locks); writing
// commands are refused with a sentence saying why.
TEST_F(FrsctlTest, ReadsAStoreItCannotWrite) {
  CreateStore();
  Fill();
  const auto before = Counts("srv.xml");
  std::string ro = dir_ / "ro";
  bool bind = false;
  if (::geteuid() == 0) {
    // Root writes through permissions: a read-only bind mount is the real case.
    std::filesystem::create_directories(ro);
    bind =
        std::system(
            ("mount --bind '" + (dir_ / "data") + "' '" + ro + "' && mount -o remount,bind,ro '" + ro + "'").c_str()) ==
        0;
    if (!bind) GTEST_SKIP() << "cannot make a read-only bind mount here";
  } else {
    ro = dir_ / "data";
    for (const auto& e : std::filesystem::directory_iterator(ro)) ::chmod(e.path().c_str(), 0400);
    ::chmod(ro.c_str(), 0500);
  }
  WriteConfig("ro.xml", bind ? "ro" : "data", 2, 256, 8);
  CtlRun r = Ctl({"get", "login", "user:3", "--json"}, "ro.xml");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(Parse(r.out).Find("count")->number, 4);
  EXPECT_NE(r.err.find("reading it without locks"), std::string::npos) << r.err;
  EXPECT_EQ(Counts("ro.xml"), before);
  for (const char* cmd : {"stat", "export", "verify"}) {
    r = Ctl({cmd}, "ro.xml");
    EXPECT_EQ(r.rc, 0) << cmd << ": " << r.err;
  }
  // Repairing writes: could not do it (3), not "the store has a problem" (1).
  r = Ctl({"verify", "--repair"}, "ro.xml");
  EXPECT_EQ(r.rc, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("verify --repair writes the store, and "), std::string::npos) << r.err;
  r = Ctl({"set", "login", "user:3", "9"}, "ro.xml");
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(Ctl({"get", "login", "user:3", "--json"}, "ro.xml").out.find("\"count\":9"), std::string::npos);
  if (bind) {
    std::system(("umount '" + ro + "'").c_str());
  } else {
    ::chmod(ro.c_str(), 0700);
    for (const auto& e : std::filesystem::directory_iterator(ro)) ::chmod(e.path().c_str(), 0600);
  }
}

TEST_F(FrsctlTest, AnUnknownCommandNamesItselfAndTheCommands) {
  CtlRun r = Ctl({"frobnicate"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown command \"frobnicate\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stat, get, dump"), std::string::npos) << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u);
  // The parser's own words for the commonest mistakes, said as frsctl says
  // the rest: the command, what is wrong, where its help is.
  r = Ctl({"set", "login", "k", "abc"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("frsctl: set: COUNT: 'abc' is not a whole number in decimal digits (frsctl set --help)"),
            std::string::npos)
      << r.err;
  r = Ctl({"verify", "--repairr"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("verify: unknown option or one argument too many: --repairr (frsctl verify --help)"),
            std::string::npos)
      << r.err;
}

TEST_F(FrsctlTest, BadArgumentsAnswerOneLineAndExit2) {
  CreateStore();
  for (const auto& args : std::vector<std::vector<std::string>>{{"get", "nosuch", "k"},
                                                                {"set", "login", "k", "-1"},
                                                                {"set", "login", "k", "x"},
                                                                {"get", "login", ""},
                                                                {"dump", "--file", "7"},
                                                                {"dump", "--file", "-1"},
                                                                {"top", "login", "0"},
                                                                // two ways of saying one thing that disagree,
                                                                // and --denied's options without it
                                                                {"top", "login", "--biz", "api"},
                                                                {"top", "login", "3", "-n", "2"},
                                                                {"top", "login", "--minutes", "3"},
                                                                {"frobnicate"}}) {
    CtlRun r = Ctl(args);
    EXPECT_EQ(r.rc, 2) << args[0] << ": " << r.err;
    EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
    EXPECT_EQ(r.out, "");
  }
  CtlRun r = Ctl({"get", "nosuch", "k"});
  EXPECT_NE(r.err.find("unknown biz \"nosuch\""), std::string::npos) << r.err;
  // Numbers are decimal: CLI11 read 010 as 8 and 0x10 as 16, took '' and
  // ' 5', and named a number past int64 by its clamped value. Nothing set.
  for (const char* count : {"010", "0x10", "", " 5", "18446744073709551615"}) {
    r = Ctl({"set", "login", "k", count});
    EXPECT_EQ(r.rc, 2) << count << ": " << r.out;
    EXPECT_NE(r.err.find(std::string("COUNT: '") + count + "'"), std::string::npos) << r.err;
  }
  EXPECT_EQ(Ctl({"get", "login", "k"}).rc, 1);  // no such node
  EXPECT_EQ(Ctl({"top", "login", "05"}).rc, 2);
  EXPECT_EQ(Ctl({"set", "login", "k", "0"}).rc, 0);
}

TEST_F(FrsctlTest, MissingStoreIsAnErrorAndIsNotCreated) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"stat"},
                                                                {"get", "login", "k"},
                                                                {"set", "login", "k", "1"},
                                                                {"dump"},
                                                                {"verify"},
                                                                {"export"}}) {
    CtlRun r = Ctl(args);
    EXPECT_EQ(r.rc, 3) << args[0];
    EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find("frsctl init"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "data/frs.0.store"));
}

TEST_F(FrsctlTest, StoreOfAnotherGeometryIsRefused) {
  CreateStore();
  WriteConfig("other.xml", "data", 2, 512, 8);
  CtlRun r = Ctl({"stat"}, "other.xml");
  EXPECT_EQ(r.rc, 3);
  EXPECT_NE(r.err.find("keynodes"), std::string::npos) << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u);
  // init called such a store complete, nothing to do (exit 0), srv.xml's
  // geometry in its --json: frsd refuses it.
  for (const auto& args : {std::vector<std::string>{"init"}, {"init", "--json"}, {"init", "--recreate-missing"}}) {
    r = Ctl(args, "other.xml");
    EXPECT_EQ(r.rc, 3) << r.out;
    EXPECT_NE(r.err.find("files=2 keynodes=256 chain=8, and srv.xml says files=2 keynodes=512 chain=8"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(FrsctlTest, SetGetDelAndAbsentKeyExitsOne) {
  CreateStore();
  Set("login", "user:42", 3);
  CtlRun r = Ctl({"get", "login", "user:42"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("count 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("key-node"), std::string::npos) << r.out;

  r = Ctl({"get", "--json", "login", "user:42"});
  ASSERT_EQ(r.rc, 0);
  JsonValue v = Parse(r.out);
  EXPECT_EQ(v.Find("biz")->text, "login");
  EXPECT_EQ(v.Find("count")->number, 3);
  ASSERT_EQ(v.Find("rules")->items.size(), 1u);
  EXPECT_EQ(v.Find("rules")->items[0].Find("count")->number, 3);
  // set --json names its rules as get --json does.
  r = Ctl({"set", "--json", "login", "user:42", "3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  JsonValue set = Parse(r.out);
  ASSERT_EQ(set.Find("rules")->items.size(), 1u);
  ASSERT_NE(set.Find("rules")->items[0].Find("name"), nullptr) << r.out;
  EXPECT_EQ(set.Find("rules")->items[0].Find("name")->text, v.Find("rules")->items[0].Find("name")->text);

  // A sliding window of max 1 keeps one use: set 2 says what it holds,
  // not "count set to 1" of a count the operator did not ask for.
  r = Ctl({"set", "ad_user", "u2", "2"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("count set to 2; the most restrictive rule holds 1 of 1"), std::string::npos) << r.out;

  r = Ctl({"get", "1", "user:43"});  // biz by id
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("no such node"), std::string::npos);
  r = Ctl({"get", "--json", "login", "user:43"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_FALSE(Parse(r.out).Find("found")->boolean);

  r = Ctl({"del", "login", "user:42"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("deleted"), std::string::npos);
  EXPECT_EQ(Ctl({"get", "login", "user:42"}).rc, 1);
  // A key refused for its length is named by its start (70,000 bytes came
  // back whole in the message).
  for (const char* cmd : {"get", "explain"}) {
    r = Ctl({cmd, "login", std::string(70000, 'a')});
    EXPECT_EQ(r.rc, 2) << cmd;
    EXPECT_NE(r.err.find("bad key \"" + std::string(64, 'a') + "...\": key is 70000 bytes"), std::string::npos)
        << cmd << ": " << r.err.substr(0, 200);
    EXPECT_LT(r.err.size(), 300u) << cmd;
  }
}

TEST_F(FrsctlTest, ResetErasesEveryNodeOfOneBiz) {
  CreateStore();
  Fill();
  CtlRun r = Ctl({"reset", "--json", "partner"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(Parse(r.out).Find("erased")->number, 5);
  auto counts = Counts("srv.xml");
  EXPECT_EQ(counts.size(), 15u);
  for (const auto& [k, c] : counts) EXPECT_EQ(k.rfind("partner/", 0), std::string::npos) << k;
}

// A store without denials.frs (frsd found no room for it at its start)
// shows no denial: said on stderr, not only "no key was denied".
TEST_F(FrsctlTest, TopDeniedSaysWhenTheStoreHasNoTableOfDenials) {
  CreateStore();
  Set("login", "u1", 1);
  const std::string table = dir_ / "data/denials.frs";
  const bool made = std::filesystem::exists(table);
  CtlRun r = Ctl({"top", "--denied"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("no key was denied in the last 5 minute(s)"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("denials.frs does not exist"), std::string::npos) << r.err;
  ASSERT_TRUE(made) << "an engine that wrote the store made its table";
  std::filesystem::remove(table);
  r = Ctl({"top", "--denied"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("frsctl: warning: " + table + " does not exist: frsd keeps no recent denials"),
            std::string::npos)
      << r.err;
  // A link in its place: frsd keeps nothing there, and what it leads to
  // is not this store's (it was read as the store's denials).
  Set("login", "u2", 1);  // an engine that writes makes the table again
  ASSERT_TRUE(std::filesystem::exists(table));
  std::filesystem::rename(table, dir_ / "elsewhere.frs");
  std::filesystem::create_symlink(dir_ / "elsewhere.frs", table);
  r = Ctl({"top", "--denied"});
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.err.find(table + " is a symbolic link"), std::string::npos) << r.err;
}

TEST_F(FrsctlTest, StatShowsGeometryHistogramAndCounters) {
  CreateStore();
  Fill();
  CtlRun r = Ctl({"stat", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  JsonValue v = Parse(r.out);
  for (const char* f : {"slots", "nodes_used", "evictions_stale", "evictions_live"}) {
    ASSERT_NE(v.Find(f), nullptr) << f;
    EXPECT_TRUE(v.Find(f)->IsNumber() && v.Find(f)->text.find_first_of(".eE") == std::string::npos) << f;
  }
  EXPECT_EQ(v.Find("slots")->number, 2 * 256 * 8);
  EXPECT_EQ(v.Find("nodes_used")->number, 20);
  const JsonValue* hist = v.Find("chain_histogram");
  ASSERT_EQ(hist->items.size(), 9u);
  double keynodes = 0, slots = 0;
  for (size_t i = 0; i < hist->items.size(); ++i) {
    keynodes += hist->items[i].number;
    slots += hist->items[i].number * static_cast<double>(i);
  }
  EXPECT_EQ(keynodes, 2 * 256);
  EXPECT_EQ(slots, v.Find("slots_used")->number);
  EXPECT_EQ(v.Find("per_file")->items.size(), 2u);
  EXPECT_EQ(v.Find("bizzes")->items.size(), 4u);

  // Every node live: the live occupancy is the occupancy.
  EXPECT_EQ(v.Find("stale_nodes")->number, 0);
  EXPECT_EQ(v.Find("live_occupancy")->number, v.Find("occupancy")->number);

  r = Ctl({"stat"});
  ASSERT_EQ(r.rc, 0);
  for (const char* s : {"geometry", "2 files x 256 key-nodes x 8 slots", "occupancy", "evictions", "chain length",
                        "per biz", "partner", "live slots"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;

  // A map without partner: its 5 nodes are stale (the next keys take their
  // slots first), counted in slots used but not in the live slots.
  std::string map = kMap;
  const size_t at = map.find("  <biz id=\"4\" name=\"partner\"");
  map.erase(at, map.find('\n', at) + 1 - at);
  ASSERT_EQ(map.find("partner"), std::string::npos) << map;
  std::ofstream(dir_ / "map.xml") << map;
  r = Ctl({"stat"});
  EXPECT_NE(r.out.find(" more held by 5 stale node(s), which new keys take first"), std::string::npos) << r.out;
  v = Parse(Ctl({"stat", "--json"}).out);
  EXPECT_EQ(v.Find("stale_nodes")->number, 5);
  EXPECT_GE(v.Find("stale_slots")->number, 5);
  EXPECT_DOUBLE_EQ(v.Find("live_occupancy")->number,
                   (v.Find("slots_used")->number - v.Find("stale_slots")->number) / v.Find("slots")->number);
}

TEST_F(FrsctlTest, DumpListsNodesWithTheirPositionAndFilters) {
  CreateStore();
  Fill();
  CtlRun r = Ctl({"dump", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 20u);
  JsonValue first = Parse(lines[0]);
  for (const char* f : {"file", "keynode", "slot", "span", "alternate", "biz", "key", "count"})
    EXPECT_NE(first.Find(f), nullptr) << f;

  r = Ctl({"dump", "--biz", "api", "--json"});
  EXPECT_EQ(Lines(r.out).size(), 5u);
  r = Ctl({"dump", "--file", "1", "--json"});
  for (const std::string& l : Lines(r.out)) EXPECT_EQ(Parse(l).Find("file")->number, 1);
  const std::string keynode = std::to_string(static_cast<int>(first.Find("keynode")->number));
  const std::string file = std::to_string(static_cast<int>(first.Find("file")->number));
  r = Ctl({"dump", "--file", file, "--keynode", keynode, "--json"});
  ASSERT_FALSE(Lines(r.out).empty());
  for (const std::string& l : Lines(r.out))
    EXPECT_EQ(std::to_string(static_cast<int>(Parse(l).Find("keynode")->number)), keynode);

  r = Ctl({"dump", "--biz", "login"});
  ASSERT_EQ(r.rc, 0);
  lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 7u);  // header, 5 nodes, total
  EXPECT_EQ(lines[0].rfind("file", 0), 0u);
  EXPECT_NE(lines[6].find("5 nodes"), std::string::npos);
  // Aligned: the key column starts at the same offset on every line.
  size_t key_col = lines[0].rfind("key");
  for (size_t i = 1; i < 6; ++i) EXPECT_EQ(lines[i].find("user:"), key_col) << lines[i];
}

TEST_F(FrsctlTest, TopListsHighestCountsFirst) {
  CreateStore();
  Fill();
  CtlRun r = Ctl({"top", "--json", "partner", "3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(Parse(lines[0]).Find("key")->text, "p4");
  EXPECT_EQ(Parse(lines[0]).Find("count")->number, 1207);
  EXPECT_EQ(Parse(lines[1]).Find("key")->text, "p3");
  EXPECT_EQ(Parse(lines[2]).Find("key")->text, "p2");
  r = Ctl({"top", "login"});
  ASSERT_EQ(r.rc, 0);
  EXPECT_LT(r.out.find("user:4"), r.out.find("user:0")) << r.out;
}

// dump's and top's count and limit are one rule's, the pair an answer
// gives: with both rules at or past their limits (set 3: 3 of 3 a minute,
// 3 of 1 an hour), the hour denies longest and decides, 3 of 1; the limit
// came from the first rule with least room instead: "3 of 3, denied", a
// key that looks merely full.
TEST_F(FrsctlTest, DumpAndTopShowTheCountAndLimitOfOneRule) {
  std::ofstream(dir_ / "capped.xml")
      << "<map>\n  <biz id=\"1\" name=\"ad\"><rule interval=\"60\" max=\"3\"/><rule interval=\"3600\" "
         "max=\"1\"/></biz>\n</map>\n";
  WriteConfig("capped-srv.xml", "capped-data", 1, 256, 8, "capped.xml");
  CreateStore("capped-srv.xml");
  Set("ad", "u", 3, "capped-srv.xml");
  CtlRun r = Ctl({"dump", "--biz", "ad"}, "capped-srv.xml");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("ad            3           1  "), std::string::npos) << r.out;
  r = Ctl({"top", "ad"}, "capped-srv.xml");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("  1      3      1  denied"), std::string::npos) << r.out;
}

// top --rule ranks by one rule's count: a key with most of its day's uses
// two hours ago (its hour now empty) leads by the day and trails by the
// hour. Without it, each key's most restrictive rule ranks it.
TEST_F(FrsctlTest, TopRanksByTheRuleNamed) {
  std::ofstream(dir_ / "two.xml") << "<map>\n  <biz id=\"1\" name=\"ad\"><rule interval=\"86400\" max=\"100\" "
                                     "name=\"day\"/><rule interval=\"3600\" max=\"100\" name=\"hour\"/></biz>\n"
                                     "</map>\n";
  WriteConfig("two-srv.xml", "two-data", 1, 256, 8, "two.xml");
  const int64_t now = SystemClock::Default()->NowMs();
  FakeClock clock(now - 2 * 3600 * 1000);
  {
    ServiceOpenOptions o;
    o.create_if_missing = true;
    o.clock = &clock;
    Result<Service> svc = OpenFromConfig(dir_ / "two-srv.xml", o);
    ASSERT_TRUE(svc.ok()) << svc.status().ToString();
    Request req;
    req.cmd = Cmd::kAcquire;
    req.biz = "ad";
    req.key = "early";
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(svc->engine->Execute(req).allowed);
    clock.Set(now);
    req.key = "late";
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(svc->engine->Execute(req).allowed);
  }
  CtlRun r = Ctl({"top", "--json", "ad"}, "two-srv.xml");
  ASSERT_EQ(r.rc, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(Parse(lines[0]).Find("key")->text, "early");
  r = Ctl({"top", "--json", "ad", "--rule", "hour"}, "two-srv.xml");
  ASSERT_EQ(r.rc, 0) << r.err;
  lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(Parse(lines[0]).Find("key")->text, "late");
  EXPECT_EQ(Parse(lines[0]).Find("rank_count")->number, 2);
  EXPECT_EQ(Parse(lines[1]).Find("rank_count")->number, 0);
  r = Ctl({"top", "ad", "--rule", "day"}, "two-srv.xml");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("by count of rule day"), std::string::npos) << r.out;
  EXPECT_LT(r.out.find("early"), r.out.find("late")) << r.out;
  // explain names each rule as --rule takes it.
  r = Ctl({"explain", "ad", "late"}, "two-srv.xml");
  EXPECT_NE(r.out.find("rule 1  day   fixed 86400 s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rule 2  hour  fixed 3600 s"), std::string::npos) << r.out;
  r = Ctl({"top", "ad", "--rule", "week"}, "two-srv.xml");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.err.find("biz 'ad' has no rule 'week' (its rules: day, hour)"), std::string::npos) << r.err;
}

TEST_F(FrsctlTest, ExplainSaysWhichRuleDeniesAndUntilWhen) {
  CreateStore();
  Set("ad_user", "u", 1);
  CtlRun r = Ctl({"explain", "ad_user", "u"});
  ASSERT_EQ(r.rc, 1) << "denied now is the \"no\" exit code\n" << r.err;
  EXPECT_NE(r.out.find("denied by rule 2 (sliding 3600 s, max 1): next allowed at "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(in 1 h)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("count 1 of 3"), std::string::npos) << r.out;

  r = Ctl({"explain", "--json", "ad_user", "u"});
  EXPECT_EQ(r.rc, 1);
  JsonValue v = Parse(r.out);
  EXPECT_FALSE(v.Find("allowed")->boolean);
  ASSERT_EQ(v.Find("denied_by")->items.size(), 1u);
  EXPECT_EQ(v.Find("denied_by")->items[0].number, 2);
  EXPECT_EQ(v.Find("rules")->items.size(), 2u);

  Set("partner", "p", 1200);
  r = Ctl({"explain", "partner", "p"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("borrowed 200 beyond max 1000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("allowed now"), std::string::npos) << r.out;
  // What may still be taken is frsd's remaining, borrow included (max 1000,
  // borrow 300: 100 more), in explain's words and get's JSON alike.
  EXPECT_NE(r.out.find("allows (100 more)"), std::string::npos) << r.out;
  r = Ctl({"get", "--json", "partner", "p"});
  EXPECT_EQ(Parse(r.out).Find("rules")->items[0].Find("remaining")->number, 100) << r.out;
  Set("partner", "p", 40);
  r = Ctl({"get", "--json", "partner", "p"});
  EXPECT_EQ(Parse(r.out).Find("rules")->items[0].Find("remaining")->number, 1260) << r.out;

  r = Ctl({"explain", "login", "never-seen"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("never counted"), std::string::npos) << r.out;
}

// Each rule by the name top --rule and the answers use, and a calendar
// rule by the zone whose days it counts: a Kolkata day's window ends at
// 18:30 UTC, which get's UTC times alone left the reader to work out.
TEST_F(FrsctlTest, GetAndExplainNameEachRuleAndACalendarRulesZone) {
  std::ofstream(dir_ / "map.xml") << ctl_test::SlowMap(
      R"(  <biz id="3" name="adv"><rule name="day" algo="calendar" interval="86400" max="3" zone="Asia/Kolkata"/>)"
      R"(<rule algo="fixed" interval="3600" max="2"/></biz>
  <biz id="77" name="offb" mode="off"><rule interval="60" max="1"/></biz>
)");
  CreateStore();
  // A biz in mode off never makes a node: explain said only "no node" of
  // it, where shadow and off are said as such (found by an outside run).
  CtlRun off = Ctl({"explain", "offb", "u"});
  EXPECT_EQ(off.rc, 0) << off.err;
  EXPECT_EQ(off.out, "offb \"u\": allowed: mode off, every request is allowed and nothing is counted (no node)\n");
  Set("adv", "u", 1);
  CtlRun r = Ctl({"get", "adv", "u"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("day    calendar 86400 s in Asia/Kolkata, max 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("adv_2  fixed 3600 s, max 2"), std::string::npos) << r.out;
  r = Ctl({"get", "--json", "adv", "u"});
  ASSERT_EQ(r.rc, 0) << r.err;
  JsonValue v = Parse(r.out);
  ASSERT_EQ(v.Find("rules")->items.size(), 2u) << r.out;
  const JsonValue& day = v.Find("rules")->items[0];
  EXPECT_EQ(day.Find("name")->text, "day");
  EXPECT_EQ(day.Find("zone")->text, "Asia/Kolkata");
  // Kolkata's midnight (UTC+5:30) is 18:30 UTC.
  EXPECT_EQ(static_cast<int64_t>(day.Find("window_start_ms")->number) % 86'400'000, 66'600'000) << r.out;
  EXPECT_EQ(v.Find("rules")->items[1].Find("name")->text, "adv_2");
  EXPECT_EQ(v.Find("rules")->items[1].Find("zone"), nullptr) << "only a calendar rule has a zone: " << r.out;

  // A calendar rule without zone= counts the server's <timezone> days.
  Set("ad_user", "u", 1);
  r = Ctl({"explain", "ad_user", "u"});
  EXPECT_NE(r.out.find("ad_user_1  calendar 86400 s in UTC, max 3:"), std::string::npos) << r.out;
  r = Ctl({"explain", "--json", "ad_user", "u"});
  v = Parse(r.out);
  EXPECT_EQ(v.Find("rules")->items[0].Find("zone")->text, "UTC") << r.out;
  EXPECT_EQ(v.Find("rules")->items[1].Find("name")->text, "ad_user_2") << r.out;
}

// A key missing from a store that evicted live nodes may have been one of
// them: get and explain say so, with the count, since its limit started
// again from zero (an on-call engineer read "never counted" and looked no
// further).
TEST_F(FrsctlTest, AMissingKeyOfAStoreThatEvictedLiveNodesSaysItMayBeOne) {
  WriteConfig("tiny-srv.xml", "tiny", 1, 16, 2);
  CreateStore("tiny-srv.xml");
  CtlRun r = Ctl({"get", "login", "user:0"}, "tiny-srv.xml");
  EXPECT_EQ(r.rc, kExitNo);
  EXPECT_EQ(r.out.find("evicted"), std::string::npos) << r.out;  // none yet: not said
  std::string gone;                                              // a key set, then evicted by later ones
  {
    Session s;
    Status st = OpenSession(dir_ / "tiny-srv.xml", Needs::kEngine, &s);
    ASSERT_TRUE(st.ok()) << st.message();
    for (int i = 0; i < 200; ++i) {
      Result<int> rc = RunSet(s, SetArgs{"login", "user:" + std::to_string(i), 1});
      ASSERT_TRUE(rc.ok()) << rc.status().message();
    }
    for (int i = 0; i < 200 && gone.empty(); ++i)
      if (s.engine->Inspect("login", "user:" + std::to_string(i)).status().IsNotFound())
        gone = "user:" + std::to_string(i);
  }
  ASSERT_FALSE(gone.empty()) << "200 keys in 32 slots evicted none";
  r = Ctl({"get", "login", gone}, "tiny-srv.xml");
  EXPECT_EQ(r.rc, kExitNo) << r.out;
  EXPECT_NE(r.out.find("or evicted to make room: this store evicted "), std::string::npos) << r.out;
  r = Ctl({"explain", "login", gone}, "tiny-srv.xml");
  EXPECT_EQ(r.rc, kExitOk) << r.out;
  EXPECT_NE(r.out.find("or evicted to make room"), std::string::npos) << r.out;
}

// A store file whose header took a few damaged bytes kept every node: verify
// --repair rebuilds the header from the geometry and the other file's id,
// and every count is back. A header too unlike this store's is left alone.
TEST_F(FrsctlTest, VerifyRepairRebuildsADamagedHeaderAndKeepsEveryCount) {
  CreateStore();
  Fill();
  const auto before = Counts("srv.xml");
  ASSERT_EQ(before.size(), 20u);
  const std::string file0 = dir_ / "data/frs.0.store";
  auto poke = [&](std::streamoff at, const std::string& bytes) {
    std::fstream f(file0, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(at);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  // A checksum's bytes are as good as random: a fixed value written there is
  // the one already there once in 256 runs, and damages nothing. Flipped,
  // each byte surely changes.
  auto flip = [](const std::string& file, std::streamoff at, int n) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    for (int i = 0; i < n; ++i) {
      char c = 0;
      f.seekg(at + i);
      f.get(c);
      f.seekp(at + i);
      f.put(static_cast<char>(c ^ 0xff));
    }
  };
  auto read_head = [&] {
    std::ifstream f(file0, std::ios::binary);
    std::string h(264, '\0');
    f.read(h.data(), static_cast<std::streamsize>(h.size()));
    return h;
  };
  poke(40, "\x77");  // keynodes' neighbour: a byte of the geometry
  CtlRun r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("header checksum mismatch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("frsctl verify --repair"), std::string::npos) << r.out;
  r = Ctl({"verify", "--repair"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("frs.0.store: header rebuilt from the store's geometry and id (1 byte(s)"), std::string::npos)
      << r.out;
  EXPECT_EQ(Counts("srv.xml"), before);
  EXPECT_EQ(Ctl({"verify"}).rc, 0);

  // srv.xml of another geometry: the intact file says what the store is,
  // and nothing is rebuilt from srv.xml.
  poke(40, "\x77");
  std::string damaged = read_head();
  WriteConfig("other-geometry.xml", "data", 2, 512, 4);
  r = Ctl({"verify", "--repair"}, "other-geometry.xml");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_EQ(r.out.find("header rebuilt"), std::string::npos) << r.out;
  EXPECT_EQ(read_head(), damaged);

  // Both files damaged: no intact header, so each must say srv.xml's
  // geometry and the same store id itself; then both are rebuilt.
  {
    std::fstream f(dir_ / "data/frs.1.store", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(44);
    f.put('\x66');
  }
  r = Ctl({"verify", "--repair"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("frs.1.store: header rebuilt"), std::string::npos) << r.out;
  EXPECT_EQ(Counts("srv.xml"), before);

  // A file lost and the other's header damaged: init --recreate-missing
  // cannot open the damaged file, so --repair rebuilds it first (the store
  // stays incomplete), then the lost file is made empty; the other file's
  // counts are all there.
  std::filesystem::remove(dir_ / "data/frs.1.store");
  poke(40, "\x77");
  r = Ctl({"verify", "--repair"});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("frs.0.store: header rebuilt"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("is incomplete"), std::string::npos) << r.out;
  r = Ctl({"init", "--recreate-missing"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  const auto after_loss = Counts("srv.xml");
  EXPECT_FALSE(after_loss.empty());
  for (const auto& [key, counts] : after_loss) EXPECT_EQ(counts, before.at(key)) << key;

  // Bytes of the placement key itself damaged in both files' headers: no
  // intact header holds the key, and each takes it from its own copies' vote
  // (a key taken as the damage left it placed every lookup wrongly).
  for (const char* f : {"data/frs.0.store", "data/frs.1.store"}) flip(dir_ / f, 120 + 3, 2);
  r = Ctl({"verify"});
  EXPECT_NE(r.out.find("header checksum mismatch"), std::string::npos) << r.out;
  r = Ctl({"verify", "--repair"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("frs.0.store: header rebuilt"), std::string::npos) << r.out;
  EXPECT_EQ(Counts("srv.xml"), after_loss);

  // The version byte turned to 4: damage (the checksum fails), not a store
  // of the previous format to upgrade.
  poke(8, "\x04");
  r = Ctl({"verify"});
  EXPECT_NE(r.out.find("header checksum mismatch"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("frsctl upgrade"), std::string::npos) << r.out;
  r = Ctl({"verify", "--repair"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_EQ(Counts("srv.xml"), after_loss);

  // The checksum itself damaged: the rest is rewritten as it was.
  flip(file0, 258, 2);
  r = Ctl({"verify", "--repair"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("the damage was in its checksum"), std::string::npos) << r.out;
  EXPECT_EQ(Counts("srv.xml"), after_loss);

  // The two files swapped, each header damaged in its checksum: rebuilt by
  // their names, every node would be out of place and cleared. The nodes
  // say so, and every header is put back as it was.
  const std::string file1 = dir_ / "data/frs.1.store", swap = dir_ / "data/swap";
  std::filesystem::rename(file0, swap);
  std::filesystem::rename(file1, file0);
  std::filesystem::rename(swap, file1);
  flip(file0, 258, 1);
  flip(file1, 258, 1);
  damaged = read_head();
  r = Ctl({"verify", "--repair"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("belong to another file"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("the store is clean now"), std::string::npos) << r.out;
  EXPECT_EQ(read_head(), damaged);
  std::filesystem::rename(file0, swap);  // back in their places: rebuilt, every count there
  std::filesystem::rename(file1, file0);
  std::filesystem::rename(swap, file1);
  r = Ctl({"verify", "--repair"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_EQ(Counts("srv.xml"), after_loss);

  // Forty bytes unlike this store's: not a damaged byte or two. Nothing is
  // written, and the refusal says why.
  poke(8, std::string(40, '\x5a'));
  damaged = read_head();
  r = Ctl({"verify", "--repair"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("more than damage to a few: not rebuilt"), std::string::npos) << r.out;
  EXPECT_EQ(read_head(), damaged);
}

TEST_F(FrsctlTest, VerifyReportsADamagedNodeAndRepairFixesIt) {
  CreateStore();
  Fill();
  CtlRun r = Ctl({"verify"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("clean"), std::string::npos);

  r = Ctl({"get", "--json", "partner", "p2"});
  JsonValue v = Parse(r.out);
  const int file = static_cast<int>(v.Find("file")->number);
  const uint64_t keynode = static_cast<uint64_t>(v.Find("keynode")->number);
  const uint64_t slot = static_cast<uint64_t>(v.Find("slot")->number);
  const uint64_t off = store::LayoutFor(StoreGeometry{2, 256, 8}).chains_offset + (keynode * 8 + slot) * kSlotBytes +
                       offsetof(store::NodeHeader, form);
  {
    std::fstream f(dir_ / ("data/frs." + std::to_string(file) + ".store"),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(off));
    f.put(9);  // span 9: out of range
  }
  const std::string where = "keynode " + std::to_string(keynode) + " slot " + std::to_string(slot);
  r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("frs." + std::to_string(file) + ".store: " + where + ": span 9"), std::string::npos) << r.out;
  r = Ctl({"verify", "--json"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_FALSE(Parse(r.out).Find("clean")->boolean);
  // A backup made now lacks the node (it counts as absent), and says so.
  r = Ctl({"export"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find("\"p2\""), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("frsctl: store: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(where + ": damaged node ignored"), std::string::npos) << r.err;

  r = Ctl({"verify", "--repair"});
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find(where + ": cleared the damaged node"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("clean now"), std::string::npos) << r.out;
  r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(Ctl({"get", "partner", "p2"}).rc, 1);
}

// A read of frsctl's applies map.xml as it is on disk, which frsd may never
// have installed: it rewrote rules.history with it (on a full disk every
// `frsctl get` warned of a failed write). A read leaves the file as it is; a
// write of frsctl's records the map, as frsd's start would.
TEST_F(FrsctlTest, AReadLeavesTheRuleHistoryAsItIs) {
  CreateStore();
  Fill();
  const std::string history = ReadFile(dir_ / "data/rules.history");
  ASSERT_FALSE(history.empty());
  std::string map = kMap;
  map.replace(map.find("interval=\"3600\""), 15, "interval=\"7200\"");
  std::ofstream(dir_ / "map.xml", std::ios::trunc) << map;
  for (const std::vector<std::string>& read : {std::vector<std::string>{"get", "api", "k"}, {"dump"}, {"stat"}}) {
    CtlRun r = Ctl(read);
    EXPECT_LE(r.rc, 1) << read[0] << ": " << r.err;  // get: 1 for a key with no node
  }
  EXPECT_EQ(ReadFile(dir_ / "data/rules.history"), history) << "a read rewrote the history";
  ASSERT_EQ(Ctl({"set", "api", "k", "1"}).rc, 0);
  EXPECT_NE(ReadFile(dir_ / "data/rules.history"), history) << "a write did not record the map";
}

// verify covers every file of the store directory, each by the check frsd's
// start makes, and says what frsd will do with it: frsd -t and frsd's start
// agree. (verify said "clean" for all four damaged files below; frsd then
// refused to start on stats.frs, and took the others without a word.)
TEST_F(FrsctlTest, VerifyChecksEveryFileOfTheStoreDirectoryAsFrsdWill) {
  CreateStore();
  Fill();  // makes stats.frs, denials.frs and rules.history
  CtlRun r = Ctl({"verify"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  for (const char* f : {"stats.frs", "denials.frs", "rules.history"})
    EXPECT_NE(r.out.find(dir_ / ("data/" + std::string(f)) + ": clean: frsd uses it"), std::string::npos) << f << "\n"
                                                                                                          << r.out;

  auto smash = [&](const std::string& file, const std::string& bytes) {
    std::fstream f(dir_ / ("data/" + file), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  auto frsd_test = [&]() { return ctl_test::RunCtl(dir_.path(), "", {"-t", "-c", dir_ / "srv.xml"}, "", FRSD_PATH); };
  // A read of frsctl's leaves a damaged rules.history as it is: its engine
  // rewrote it whole, and verify then called it clean, the damage and what
  // its other lines held gone unsaid (found by an outside run).
  std::ofstream(dir_ / "data/rules.history", std::ios::trunc) << "1 login_1 60 5\nxx\n";
  const std::string history = ReadFile(dir_ / "data/rules.history");
  EXPECT_EQ(Ctl({"dump"}).rc, 0);
  EXPECT_EQ(ReadFile(dir_ / "data/rules.history"), history);
  const std::string stats = ReadFile(dir_ / "data/stats.frs");
  smash("stats.frs", "XXXXXXXX");
  smash("denials.frs", "YYYYYYYY");
  smash("rules.history", "\x01\x02 garbage\n");
  std::filesystem::create_directories(dir_ / "data/stats/7/app");
  std::ofstream(dir_ / "data/stats/7/app/2026-11-25.frs") << std::string(4096, 'z');

  r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 1) << r.out;
  const struct {
    std::string file, what, at_start;
  } want[] = {
      {"stats.frs", "bad magic", "frsd refuses to start"},
      {"denials.frs", "denials.frs: bad magic", "frsd moves it aside at start"},
      {"rules.history", "line 1 is not", "frsd moves it aside at start"},
      {"stats/7/app/2026-11-25.frs", "2026-11-25.frs: bad magic", "frsd moves it aside when it next counts that day"},
  };
  for (const auto& w : want) {
    const size_t at = r.out.find("  " + (dir_ / ("data/" + w.file)) + ": damaged");
    EXPECT_NE(at, std::string::npos) << w.file << "\n" << r.out;
    EXPECT_NE(r.out.find(w.at_start, at), std::string::npos) << w.file << "\n" << r.out;
    EXPECT_NE(r.out.find(w.what), std::string::npos) << w.file << "\n" << r.out;
  }
  r = Ctl({"verify", "--json"});
  EXPECT_EQ(r.rc, 1);
  JsonValue v = Parse(r.out);
  EXPECT_FALSE(v.Find("clean")->boolean);
  ASSERT_NE(v.Find("files"), nullptr) << r.out;
  size_t damaged = 0;
  for (const JsonValue& f : v.Find("files")->items) damaged += f.Find("state")->text == "damaged";
  EXPECT_EQ(damaged, 4u) << r.out;

  // frsd -t says the same: stats.frs refused, the others moved aside.
  CtlRun t = frsd_test();
  EXPECT_EQ(t.rc, 1) << t.out << t.err;
  EXPECT_NE(t.err.find("stats.frs: bad magic: frsd refuses to start"), std::string::npos) << t.err;
  // And frsd's start refuses it, naming the file and the fix.
  CtlRun start = ctl_test::RunCtl(dir_.path(), "", {"-c", dir_ / "srv.xml", "--foreground"}, "", FRSD_PATH);
  EXPECT_EQ(start.rc, 1) << start.err;
  EXPECT_NE(start.err.find("stats.frs: bad magic: frsd will not start on a damaged"), std::string::npos) << start.err;
  EXPECT_NE(start.err.find("restore it from a backup, or move it aside"), std::string::npos) << start.err;

  // A damaged body behind a good header (its checksum covers the layout
  // only): verify called it clean and frsd served it as counts. Slot 5's
  // biz id made 0x12345678, past any id.
  std::string body_smashed = stats;
  const uint32_t bad_biz = 0x12345678;
  std::memcpy(body_smashed.data() + 64 + 5 * 264, &bad_biz, 4);
  std::ofstream(dir_ / "data/stats.frs", std::ios::binary | std::ios::trunc) << body_smashed;
  r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("stats.frs: damaged counters: slot 5: biz id 305419896 is not one"), std::string::npos) << r.out;
  t = frsd_test();
  EXPECT_EQ(t.rc, 1) << t.out << t.err;
  EXPECT_NE(t.err.find("stats.frs: damaged counters: slot 5"), std::string::npos) << t.err;

  std::ofstream(dir_ / "data/stats.frs", std::ios::binary | std::ios::trunc) << stats;
  t = frsd_test();
  EXPECT_EQ(t.rc, 0) << t.out << t.err;
  EXPECT_NE(t.err.find("denials.frs: bad magic"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find("rules.history: line 1 is not"), std::string::npos) << t.err;

  // A file where the statistics directory should be: unreadable, not damage,
  // and no day file (verify said "clean" of it).
  std::filesystem::remove_all(dir_ / "data/stats");
  std::ofstream(dir_ / "data/stats") << "x";
  r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("  " + (dir_ / "data/stats") + ": unreadable (below): frsd starts, but counts no statistics"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("statistics day file(s)"), std::string::npos) << r.out;
}

// A header fault of stats.frs and of denials.frs: verify names each file and
// its fault in the words frsd's start uses when it refuses stats.frs and when
// it moves denials.frs aside. (denials.frs had one sentence for any damage.)
TEST_F(FrsctlTest, VerifyNamesEachHeaderFaultInTheWordsOfFrsdsStart) {
  // Port 0: frsd binds one of its own; data/frsd.listen says it is up.
  std::ofstream(dir_ / "live.xml")
      << "<frs>\n  <listen host=\"127.0.0.1\" port=\"0\"/>\n  <workers>1</workers>\n"
         "  <map>map.xml</map>\n  <store dir=\"data\" files=\"2\" keynodes=\"256\" chain=\"8\"/>\n"
         "  <timezone>UTC</timezone>\n</frs>\n";
  CreateStore();
  Fill();
  const std::string stats = dir_ / "data/stats.frs", denials = dir_ / "data/denials.frs";
  const std::string good_stats = ReadFile(stats);
  auto put = [](const std::string& path, std::streamoff at, uint32_t v) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(at);
    f.write(reinterpret_cast<const char*>(&v), sizeof v);
  };
  put(stats, 16, 5);   // a geometry word, its checksum left as it was
  put(denials, 8, 7);  // the format version
  const std::string stats_fault = stats + ": header checksum";
  const std::string denials_fault = denials + ": format version 7, this build reads 2";

  CtlRun r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(stats_fault + " (frsd refuses to start"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(denials_fault + " (frsd moves it aside at start"), std::string::npos) << r.out;
  // A command that only reads nodes reads them without the statistics, and
  // says where the way out is.
  r = Ctl({"get", "login", "user:3"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("user:3"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("frsctl: warning: " + stats_fault + ": read without the statistics"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("`frsctl verify` names each damaged file"), std::string::npos) << r.err;
  // One whose output is the statistics fails on them, as before.
  r = Ctl({"stat"});
  EXPECT_EQ(r.rc, 3) << r.out;
  EXPECT_NE(r.err.find(stats_fault), std::string::npos) << r.err;
  // One that writes still cannot open the engine on it.
  r = Ctl({"set", "login", "user:3", "1"});
  EXPECT_EQ(r.rc, 3) << r.out;
  EXPECT_NE(r.err.find(stats_fault + " (`frsctl verify` names each damaged file"), std::string::npos) << r.err;

  CtlRun start = ctl_test::RunCtl(dir_.path(), "", {"-c", dir_ / "live.xml", "--foreground"}, "", FRSD_PATH);
  EXPECT_EQ(start.rc, 1) << start.err;
  EXPECT_NE(start.err.find(stats_fault + ": frsd will not start on a damaged"), std::string::npos) << start.err;
  // A refused start changes nothing: denials.frs is moved aside only by a
  // start that goes on.
  EXPECT_TRUE(std::filesystem::exists(denials));

  // stats.frs restored: frsd starts, moving denials.frs aside in verify's words.
  std::ofstream(stats, std::ios::binary | std::ios::trunc) << good_stats;
  std::string frsd = FRSD_PATH, config = dir_ / "live.xml", err = dir_ / "frsd.err";
  char* argv[] = {frsd.data(), const_cast<char*>("-c"), config.data(), const_cast<char*>("--foreground"), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  ASSERT_EQ(::posix_spawn(&pid, frsd.c_str(), &fa, nullptr, argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  // frsd.listen is written after the start has dealt with the side files.
  for (int i = 0; i < 400 && !std::filesystem::exists(dir_ / "data/frsd.listen"); ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pid = 0;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string log = ReadFile(err);
  if (pid > 0) {
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  EXPECT_NE(log.find(denials_fault + ": moved aside to " + denials + ".damaged-"), std::string::npos) << log;
  r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 0) << r.out;
}

// An operator upgrades with export (the old build), install, import (this
// one): an export made by store format 3 (fixtures/format3-export.jsonl,
// written by frsctl of 4cd5ec4 with the map of this file) imports whole. Each
// node comes back with its biz, identity, route and rule states; keys that
// were whole come back whole, and a node whose key text format 3 had cut is
// imported by its fingerprint.
// The uses an exact sliding block keeps, oldest first, from its hex:
// [tag][used][u32 ts...] or, with tag bit 31, [tag][base][u16 offset...]
// (0xffff: none); limit/sliding_window.h.
std::vector<uint32_t> SlidingUses(const std::string& hex) {
  std::vector<uint8_t> b;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    b.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  auto u32 = [&](size_t o) {
    return uint32_t{b[o]} | uint32_t{b[o + 1]} << 8 | uint32_t{b[o + 2]} << 16 | uint32_t{b[o + 3]} << 24;
  };
  std::vector<uint32_t> uses;
  if (b.size() < 8) return uses;
  if (u32(0) >> 31) {
    for (size_t o = 8; o + 1 < b.size(); o += 2) {
      const uint32_t off = b[o] | b[o + 1] << 8;
      if (off == 0xffff) break;
      uses.push_back(u32(4) + off);
    }
  } else {
    for (uint32_t k = 0; k < u32(4) && 8 + 4 * k + 3 < b.size(); ++k) uses.push_back(u32(8 + 4 * k));
  }
  return uses;
}

TEST_F(FrsctlTest, ImportsAnExportOfTheStoreFormatBefore) {
  EXPECT_EQ(ReadFile(std::string(FIXTURES_DIR) + "/format3-map.xml"), kMap) << "the fixture's map is this file's";
  // An export of frsctl 0.3.0 or before has no end line (export_end.h):
  // refused, as one cut short at a line's end reads the same, unless the
  // operator says it is one.
  CtlRun r = Ctl({"import", std::string(FIXTURES_DIR) + "/format3-export.jsonl"});
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("it has no end line"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--without-end-line"), std::string::npos) << r.err;
  r = Ctl({"import", "--without-end-line", std::string(FIXTURES_DIR) + "/format3-export.jsonl"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("taken with --without-end-line"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("imported 5 nodes"), std::string::npos) << r.out;
  r = Ctl({"export"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::map<std::string, JsonValue> now;
  for (const std::string& l : ExportLines(r.out)) {
    JsonValue v = Parse(l);
    now[v.Find("fp_lo")->text] = v;
  }
  const std::vector<std::string> before = Lines(ReadFile(std::string(FIXTURES_DIR) + "/format3-export.jsonl"));
  ASSERT_EQ(before.size(), 5u);
  ASSERT_EQ(now.size(), 5u) << r.out;
  int whole = 0;
  for (const std::string& l : before) {
    JsonValue old = Parse(l);
    SCOPED_TRACE(l);
    auto it = now.find(old.Find("fp_lo")->text);
    ASSERT_NE(it, now.end()) << "the node did not come back under its fingerprint";
    const JsonValue& n = it->second;
    EXPECT_EQ(n.Find("biz")->number, old.Find("biz")->number);
    EXPECT_EQ(n.Find("route_pos")->number, old.Find("route_pos")->number);
    const JsonValue* old_rules = old.Find("rules");
    const JsonValue* rules = n.Find("rules");
    ASSERT_EQ(rules->items.size(), old_rules->items.size());
    for (size_t i = 0; i < rules->items.size(); ++i) {
      const std::string& was = old_rules->items[i].Find("state")->text;
      const std::string& is = rules->items[i].Find("state")->text;
      if (old_rules->items[i].Find("algo")->text == "sliding" && old_rules->items[i].Find("interval")->number < 65536) {
        // A sliding window of a short interval is kept in the narrow form
        // now (16-bit offsets): the same uses, to the second.
        EXPECT_EQ(SlidingUses(is), SlidingUses(was)) << "rule " << i << ": " << is << " was " << was;
        EXPECT_NE(is, was) << "rule " << i << " was not rewritten in the narrow form";
      } else {
        EXPECT_EQ(is, was) << "rule " << i;
      }
    }
    if (old.Find("key")->text.size() == static_cast<size_t>(old.Find("key_len")->number)) {
      ++whole;
      EXPECT_EQ(n.Find("key")->text, old.Find("key")->text);
      EXPECT_EQ(n.Find("fp_hi")->text, old.Find("fp_hi")->text) << "a whole key has its whole fingerprint";
    }
  }
  EXPECT_EQ(whole, 2);  // "42" and "10.1.2.3"; format 3 kept 8 bytes of the others
  r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 0) << r.out;
}

// A biz that keeps its keys: every node holds its whole key text, at the
// cost of slots; by default a long key's compact node holds none, and the
// tools show its fingerprint.
TEST_F(FrsctlTest, KeysAreKeptWhereTheBizSaysAndShownByFingerprintElsewhere) {
  std::ofstream(dir_ / "map.xml") << R"(<map>
  <biz id="1" name="login"><rule interval="600" max="5"/></biz>
  <biz id="2" name="kept" keys="keep"><rule interval="600" max="5"/></biz>
</map>
)";
  CreateStore();
  const std::string long_key = "user:alice@example.com";
  for (const char* biz : {"login", "kept"}) {
    for (const std::string& k : {std::string("10.1.2.3"), std::string("1234567890123"), long_key}) {
      CtlRun r = Ctl({"set", biz, k, "2"});
      ASSERT_EQ(r.rc, 0) << r.err;
    }
  }
  CtlRun r = Ctl({"dump", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  int not_kept = 0;
  for (const std::string& l : Lines(r.out)) {
    JsonValue v = Parse(l);
    const std::string biz = v.Find("biz")->text, key = v.Find("key")->text;
    SCOPED_TRACE(l);
    if (biz == "kept") {
      EXPECT_TRUE(v.Find("key_kept")->boolean);
      EXPECT_FALSE(v.Find("compact")->boolean);
      EXPECT_TRUE(key == "10.1.2.3" || key == "1234567890123" || key == long_key);
      if (key == long_key) {
        EXPECT_EQ(v.Find("span")->number, 3);  // 28 + 16 + 22 bytes
      }
    } else {
      EXPECT_TRUE(v.Find("compact")->boolean);
      EXPECT_EQ(v.Find("span")->number, 1);
      if (!v.Find("key_kept")->boolean) {
        ++not_kept;
        EXPECT_EQ(key, "");
      } else {
        EXPECT_TRUE(key == "10.1.2.3" || key == "1234567890123") << "short keys are their node's identity";
      }
    }
  }
  EXPECT_EQ(not_kept, 1);
  r = Ctl({"dump"});
  EXPECT_NE(r.out.find("(key not kept)"), std::string::npos) << r.out;
  // Looked up by its key, the node shows the key it did not keep.
  r = Ctl({"get", "login", long_key});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find(long_key), std::string::npos) << r.out;
}

TEST_F(FrsctlTest, AnExportCutShortAtALinesEndIsRefused) {
  // Found from outside: an export cut at a line's end (head -n 3) imported
  // its first lines, exit 0, and the store lost the rest without a word.
  CreateStore();
  Fill();
  ASSERT_EQ(Ctl({"export", dir_ / "backup.jsonl"}).rc, 0);
  const std::vector<std::string> lines = Lines(ReadFile(dir_ / "backup.jsonl"));
  ASSERT_EQ(lines.size(), 21u);
  std::string cut, edited, joined;
  for (size_t i = 0; i < 3; ++i) cut += lines[i] + "\n";
  for (size_t i = 1; i < lines.size(); ++i) edited += lines[i] + "\n";  // a node line taken out
  for (int twice = 0; twice < 2; ++twice)
    for (const std::string& l : lines) joined += l + "\n";  // two exports joined: each end counts its own
  WriteConfig("new.xml", "new", 1, 1024, 8);
  CtlRun r = Ctl({"import"}, "new.xml", "");  // a failed export piped in: nothing, not an empty store
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("it holds no line, not even an export's end line"), std::string::npos) << r.err;
  r = Ctl({"import"}, "new.xml", cut);
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("import refused, nothing changed: the input: it has no end line"), std::string::npos) << r.err;
  r = Ctl({"import"}, "new.xml", edited);
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("line 20: the export's end line says 20 node(s) and 0 receipt(s), and the lines before it "
                       "hold 19 and 0: the file was cut short or edited"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "new"));  // nothing made
  r = Ctl({"import"}, "new.xml", joined);
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("imported 40 nodes"), std::string::npos) << r.out;
  EXPECT_EQ(Counts("new.xml"), Counts("srv.xml"));
}

TEST_F(FrsctlTest, ExportImportIntoAnotherGeometryKeepsEveryCount) {
  CreateStore();
  Fill();
  CtlRun r = Ctl({"export", dir_ / "backup.jsonl"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(ExportLines(ReadFile(dir_ / "backup.jsonl")).size(), 20u);
  CtlRun to_stdout = Ctl({"export"});
  EXPECT_EQ(ExportLines(to_stdout.out).size(), 20u);
  // Into a directory: said so, not as a rename of a file it never named.
  r = Ctl({"export", dir_.path()});
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find(dir_.path() + " is a directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(".tmp."), std::string::npos) << r.err;

  WriteConfig("big.xml", "big", 3, 1024, 4);
  r = Ctl({"import", dir_ / "backup.jsonl"}, "big.xml");  // creates the store
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("imported 20 nodes"), std::string::npos) << r.out;
  auto before = Counts("srv.xml");
  auto after = Counts("big.xml");
  EXPECT_EQ(before.size(), 20u);
  EXPECT_EQ(before, after);
  // Through standard input, into an existing store.
  WriteConfig("small.xml", "small", 1, 64, 8);
  CreateStore("small.xml");
  r = Ctl({"import", "--json"}, "small.xml", to_stdout.out);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(Parse(r.out).Find("imported")->number, 20);
  EXPECT_EQ(Counts("small.xml"), before);
  // Into a store too small for it: live nodes evicted, counts lost, so not
  // the exit of an import that went in whole.
  WriteConfig("tiny.xml", "tiny", 1, 1, 8);
  CreateStore("tiny.xml");
  r = Ctl({"import", dir_ / "backup.jsonl"}, "tiny.xml");
  EXPECT_EQ(r.rc, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("live nodes were evicted to make room"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("live nodes were evicted during the import"), std::string::npos) << r.err;
  // Its first line does not read as an import that went in whole.
  EXPECT_EQ(r.out.find("imported "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("but not all are kept"), std::string::npos) << r.out;
  // Into a store that lost a file, the dry run refuses what the import
  // would: it is no store to make anew.
  std::filesystem::remove(dir_ / "big/frs.2.store");
  for (bool dry : {true, false}) {
    r = dry ? Ctl({"import", "--dry-run", dir_ / "backup.jsonl"}, "big.xml")
            : Ctl({"import", dir_ / "backup.jsonl"}, "big.xml");
    EXPECT_EQ(r.rc, 3) << r.out << r.err;
    EXPECT_NE(r.err.find("is incomplete"), std::string::npos) << r.err;
  }
}

// A dry run writes nothing of the store directory's: on a store that
// never served it made stats.frs and lease.key (its engine opened to
// write). The import itself makes neither: the nodes' ids are the
// exporting store's (a new secret voided them with no one told); it says to
// copy that one, and verify warns until it is there.
TEST_F(FrsctlTest, AnImportDryRunMakesNoSideFile) {
  CreateStore();
  Fill();
  CtlRun r = Ctl({"export", dir_ / "backup.jsonl"});
  ASSERT_EQ(r.rc, 0) << r.err;
  WriteConfig("fresh.xml", "fresh", 1, 64, 8);
  ASSERT_EQ(Ctl({"init"}, "fresh.xml").rc, 0);
  r = Ctl({"import", "--dry-run", dir_ / "backup.jsonl"}, "fresh.xml");
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* f : {"stats.frs", "lease.key", "denials.frs", "rules.history"})
    EXPECT_FALSE(std::filesystem::exists(dir_ / ("fresh/" + std::string(f)))) << f;
  r = Ctl({"import", dir_ / "backup.jsonl"}, "fresh.xml");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "fresh/stats.frs"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "fresh/lease.key"));
  EXPECT_NE(r.err.find("has no lease.key: copy the exporting store's into it (cp -p OLD_STORE_DIR/lease.key"),
            std::string::npos)
      << r.err;
  r = Ctl({"verify"}, "fresh.xml");
  EXPECT_NE(r.out.find("lease.key is missing"), std::string::npos) << r.out;
  std::filesystem::copy_file(dir_ / "data/lease.key", dir_ / "fresh/lease.key");
  r = Ctl({"verify"}, "fresh.xml");
  EXPECT_EQ(r.out.find("lease.key is missing"), std::string::npos) << r.out;
  // A new store given a secret of its own before the import (init, then a
  // command): said too, since those ids answer 409 under it (found in
  // review).
  WriteConfig("other.xml", "other", 1, 64, 8);
  ASSERT_EQ(Ctl({"init"}, "other.xml").rc, 0);
  ASSERT_EQ(Ctl({"stat"}, "other.xml").rc, 0);
  ASSERT_TRUE(std::filesystem::exists(dir_ / "other/lease.key"));
  r = Ctl({"import", dir_ / "backup.jsonl"}, "other.xml");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("/lease.key was there before these nodes: unless it is a copy of the exporting store's"),
            std::string::npos)
      << r.err;
  // Into a store that served (a restore in place): nothing to say.
  r = Ctl({"import", dir_ / "backup.jsonl"}, "other.xml");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err.find("lease.key"), std::string::npos) << r.err;
}

// Blocks written under a rule's earlier interval are read through the
// store's rules.history until the key's next use converts them; a new store
// has no such history. Export writes them converted, so the moved store
// answers what the old one answered (it answered 0 for every changed rule).
TEST_F(FrsctlTest, ExportImportKeepsCountsWrittenBeforeARuleChanged) {
  CreateStore();
  Fill();
  std::string changed = kMap;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"interval=\"600\"", "interval=\"1200\""},
                                 {"algo=\"sliding\" interval=\"3600\"", "algo=\"sliding\" interval=\"7200\""},
                                 {"algo=\"fixed\" interval=\"3600\"", "algo=\"fixed\" interval=\"7200\""}}) {
    const size_t at = changed.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    changed.replace(at, from.size(), to);
  }
  std::ofstream(dir_ / "map.xml") << changed;
  const auto before = Counts("srv.xml");
  ASSERT_EQ(before.size(), 20u);
  EXPECT_EQ(before.at("login/user:4"), std::vector<int64_t>{5});
  EXPECT_EQ(before.at("partner/p3"), std::vector<int64_t>{907});
  CtlRun r = Ctl({"export", dir_ / "backup.jsonl"});
  ASSERT_EQ(r.rc, 0) << r.err;
  WriteConfig("big.xml", "big", 3, 1024, 4);
  r = Ctl({"import", dir_ / "backup.jsonl"}, "big.xml");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(Counts("big.xml"), before);
}

// A handoff receipt travels with export and import: a destination moved by
// export/import between an interrupted handoff and its re-run must still
// know the batch it merged (it merged it again: 300 units became 396).
TEST_F(FrsctlTest, HandoffReceiptsSurviveExportAndImport) {
  CreateStore();
  Set("partner", "moved", 300);
  const std::vector<std::string> exported = ExportLines(Ctl({"export"}).out);
  ASSERT_EQ(exported.size(), 1u);
  const std::string node = exported[0];
  const std::string receipt = "127.0.0.1:8301/0123456789abcdef/1";
  // The destination merges the batch (its receipt kept), as frsd does.
  WriteConfig("dest.xml", "dest", 1, 256, 8);
  CreateStore("dest.xml");
  auto merge = [&](const std::string& data, uint32_t keynodes) -> Result<bool> {
    StoreOptions so;
    so.dir = dir_ / data;
    so.geometry = StoreGeometry{1, keynodes, 8};
    so.create_if_missing = false;
    auto store = Store::Open(so);
    if (!store.ok()) return store.status();
    EngineOptions eo;
    eo.map_path = dir_ / "map.xml";
    eo.store = store.value().get();
    eo.stats_dir = so.dir;
    auto engine = AdminEngine::Open(eo);
    if (!engine.ok()) return engine.status();
    const std::string_view lines[] = {node};
    return engine.value()->MergeNodes(lines, receipt);
  };
  auto first = merge("dest", 256);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(first.value());
  EXPECT_EQ(Counts("dest.xml")["partner/moved"], std::vector<int64_t>{300});
  // Moved by export/import into another store.
  CtlRun r = Ctl({"export", dir_ / "dest.jsonl", "--json"}, "dest.xml");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(Parse(r.out).Find("receipts")->number, 1);
  const std::vector<std::string> lines = ExportLines(ReadFile(dir_ / "dest.jsonl"));
  ASSERT_EQ(lines.size(), 2u);
  const std::string& rl = lines[0].rfind("{\"receipt\":", 0) == 0 ? lines[0] : lines[1];
  JsonValue v = Parse(rl);
  ASSERT_NE(v.Find("receipt"), nullptr) << rl;
  EXPECT_GT(v.Find("expire")->number, v.Find("at")->number);
  WriteConfig("moved.xml", "moved", 1, 512, 8);
  r = Ctl({"import", dir_ / "dest.jsonl", "--json"}, "moved.xml");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(Parse(r.out).Find("imported")->number, 1);
  EXPECT_EQ(Parse(r.out).Find("receipts")->number, 1);
  // The re-run of the handoff sends the same batch again: merged once.
  auto again = merge("moved", 512);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_FALSE(again.value());
  EXPECT_EQ(Counts("moved.xml")["partner/moved"], std::vector<int64_t>{300});
  EXPECT_EQ(Ctl({"verify"}, "moved.xml").rc, 0);
  // A receipt line that is not one is refused, naming what it needs.
  WriteConfig("bad.xml", "bad", 1, 64, 8);
  r = Ctl({"import"}, "bad.xml", "{\"receipt\":{\"fp_lo\":\"zz\"},\"at\":1,\"expire\":2}\n");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("line 1: a receipt line needs"), std::string::npos) << r.err;
}

TEST_F(FrsctlTest, ImportOfABizMissingFromTheMapIsRefusedAndChangesNothing) {
  CreateStore();
  Fill();
  ASSERT_EQ(Ctl({"export", dir_ / "backup.jsonl"}).rc, 0);
  std::string map = kMap;
  map.replace(map.find("<biz id=\"4\""), map.find("</map>") - map.find("<biz id=\"4\""), "");
  std::ofstream(dir_ / "map3.xml") << map;

  WriteConfig("new.xml", "new", 1, 512, 8, "map3.xml");
  CtlRun r = Ctl({"import", dir_ / "backup.jsonl"}, "new.xml");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("biz 'partner' (id 4) is not in"), std::string::npos) << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "new/frs.0.store"));  // not even created

  CreateStore("new.xml");
  r = Ctl({"import", dir_ / "backup.jsonl"}, "new.xml");
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Counts("new.xml").empty());  // no line applied

  // A directory for the file: named (it read "reading the import input
  // failed"), nothing changed.
  r = Ctl({"import", dir_.path()}, "new.xml");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find(dir_.path() + ": is a directory, not an export file"), std::string::npos) << r.err;

  // A bad line anywhere refuses the whole file.
  std::string text = ReadFile(dir_ / "backup.jsonl");
  r = Ctl({"import"}, "srv.xml", "{\"biz\":1}\n" + text);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("line 1"), std::string::npos) << r.err;
  // A biz_name that is no string is a damaged line, not a nameless biz to
  // rename: the message says so, not --rename-biz.
  r = Ctl({"import"}, "srv.xml", "{\"biz\":1,\"biz_name\":5,\"key\":\"k\"}\n");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("line 1: \"biz_name\" is not a string"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--rename-biz"), std::string::npos) << r.err;

  // Asked to, partner's nodes go to another biz; login's rule (fixed, 600 s)
  // takes no block of partner's (fixed, 3600 s), so they are not written
  // (nodes of empty blocks that never expire), and the summary says so.
  r = Ctl({"import", "--json", "--rename-biz", "partner=login", dir_ / "backup.jsonl"}, "new.xml");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(Parse(r.out).Find("imported")->number, 15) << r.out;
  EXPECT_EQ(Parse(r.out).Find("no_rule")->number, 5) << r.out;
  auto counts = Counts("new.xml");
  EXPECT_EQ(counts.size(), 15u);
  EXPECT_FALSE(counts.count("login/p3"));
  // Into a biz whose rule takes them, they are written.
  std::string same = map;
  same.replace(same.find("</map>"), 0,
               "  <biz id=\"7\" name=\"partner2\"><rule algo=\"fixed\" interval=\"3600\" max=\"1000\"/></biz>\n");
  std::ofstream(dir_ / "map3.xml") << same;
  r = Ctl({"import", "--rename-biz", "partner=partner2", dir_ / "backup.jsonl"}, "new.xml");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find("not imported"), std::string::npos) << r.out;
  EXPECT_EQ(Counts("new.xml").at("partner2/p3"), std::vector<int64_t>{907});
}

// The nodes of a biz taken out of map.xml are erased by its id: they are
// orphans, and an export holding them cannot be imported without a name.
TEST_F(FrsctlTest, ResetByIdErasesTheNodesOfABizTheMapNoLongerHas) {
  CreateStore();
  Fill();
  std::string map = kMap;
  map.replace(map.find("<biz id=\"4\""), map.find("</map>") - map.find("<biz id=\"4\""), "");
  std::ofstream(dir_ / "map.xml") << map;
  // stat's per-biz rows add up to its nodes: the 5 of no biz of the map too.
  CtlRun r = Ctl({"stat"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const size_t orphans = r.out.find("(not in map.xml)");
  ASSERT_NE(orphans, std::string::npos) << r.out;
  std::istringstream row(r.out.substr(orphans + 16, r.out.find('\n', orphans) - orphans - 16));
  std::string id, nodes;
  row >> id >> nodes;
  EXPECT_EQ(id, "4") << r.out;
  EXPECT_EQ(nodes, "5") << r.out;
  r = Ctl({"--json", "reset", "4"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(Parse(r.out).Find("erased")->number, 5) << r.out;
  EXPECT_EQ(Counts("srv.xml").size(), 15u);
  r = Ctl({"reset", "partner"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown biz \"partner\""), std::string::npos) << r.err;
}

TEST_F(FrsctlTest, ImportMapsByNameOnlyWhenAsked) {
  CreateStore();
  Fill();
  ASSERT_EQ(Ctl({"export", dir_ / "backup.jsonl"}).rc, 0);
  std::string map = kMap;
  map.replace(map.find("id=\"3\""), 6, "id=\"9\"");
  std::ofstream(dir_ / "map9.xml") << map;
  WriteConfig("renum.xml", "renum", 2, 256, 8, "map9.xml");
  CtlRun r = Ctl({"import", dir_ / "backup.jsonl"}, "renum.xml");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--map-by-name"), std::string::npos) << r.err;
  r = Ctl({"import", "--map-by-name", dir_ / "backup.jsonl"}, "renum.xml");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(Counts("renum.xml"), Counts("srv.xml"));
  // A biz id no map can have is named as such, with or without the flag
  // (it was sent to --map-by-name, then refused as a bad integer; -1 and
  // 70000 were taken under it).
  std::ifstream in(dir_ / "backup.jsonl");
  std::string first;
  ASSERT_TRUE(std::getline(in, first));
  const size_t at = first.find("\"biz\":");
  ASSERT_NE(at, std::string::npos) << first;
  const size_t end = first.find(',', at);
  for (const char* bad : {"99999999999999999999", "-1", "70000", "0"}) {
    std::ofstream(dir_ / "bad.jsonl") << first.substr(0, at) << "\"biz\":" << bad << first.substr(end) << "\n";
    for (bool by_name : {false, true}) {
      std::vector<std::string> args = {"import", "--dry-run"};
      if (by_name) args.push_back("--map-by-name");
      args.push_back(dir_ / "bad.jsonl");
      r = Ctl(args, "renum.xml");
      EXPECT_EQ(r.rc, 2) << bad << " " << by_name << ": " << r.err;
      EXPECT_NE(r.err.find(std::string("\"biz\" is ") + bad + ": a biz id is 1..65535"), std::string::npos)
          << bad << " " << by_name << ": " << r.err;
    }
  }
}

}  // namespace
}  // namespace frs::ctl

namespace frs::ctl {
namespace {

TEST_F(FrsctlTest, GetAndExplainShowHeldLeasesWithTheirIds) {
  std::ofstream(dir_ / "map.xml")
      << "<map>\n  <biz id=\"20\" name=\"inflight\">\n    <rule algo=\"concurrency\" max=\"2\" lease=\"600\"/>\n"
         "  </biz>\n</map>\n";
  CreateStore();
  MakeLeaseKey();
  Set("inflight", "u42", 2);  // an operator's set: two leases (their ids are the store's)
  CtlRun r = Ctl({"get", "--json", "inflight", "u42"});
  ASSERT_EQ(r.rc, 0) << r.err;
  JsonValue v = Parse(r.out);
  ASSERT_NE(v.Find("leases"), nullptr) << r.out;
  ASSERT_EQ(v.Find("leases")->items.size(), 2u) << r.out;
  for (const JsonValue& l : v.Find("leases")->items) {
    EXPECT_EQ(l.Find("id")->text.size(), 24u) << r.out;
    EXPECT_GT(l.Find("expires_s")->number, 0) << r.out;
  }
  EXPECT_NE(v.Find("leases")->items[0].Find("id")->text, v.Find("leases")->items[1].Find("id")->text);
  EXPECT_EQ(v.Find("count")->number, 2);

  r = Ctl({"get", "inflight", "u42"});
  EXPECT_NE(r.out.find("concurrency, max 2 leases of 600 s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lease " + v.Find("leases")->items[0].Find("id")->text + " held, expires"), std::string::npos)
      << r.out;

  r = Ctl({"explain", "inflight", "u42"});
  EXPECT_EQ(r.rc, 1) << r.out;  // both places held: denied now
  EXPECT_NE(r.out.find("2 of 2 leases held, the first ends"), std::string::npos) << r.out;
  // Each by its id, as get names them (explain named none before).
  for (const JsonValue& l : v.Find("leases")->items)
    EXPECT_NE(r.out.find("lease " + l.Find("id")->text + " held, expires"), std::string::npos) << r.out;

  // max lowered to 1 (the same block of 2 places: both stay held): both
  // must end before a place is free.
  std::ofstream(dir_ / "map.xml")
      << "<map>\n  <biz id=\"20\" name=\"inflight\">\n    <rule algo=\"concurrency\" max=\"1\" lease=\"600\"/>\n"
         "  </biz>\n</map>\n";
  r = Ctl({"explain", "inflight", "u42"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("2 of 1 leases held, over its max: a place is free once 2 of them have ended, in "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("concurrency, max 1 lease of 600 s"), std::string::npos) << r.out;
}

// A store without its lease.key (removed while frsd ran, which keeps the
// secret in memory): frsctl get made a new one, printed ids frsd would not
// take, and the next start then voided every id the running frsd had given
// out. Now frsctl makes none, shows the leases by serial and says why;
// verify warns; the ids are the store's again once the file is restored.
TEST_F(FrsctlTest, AMissingLeaseKeyIsNeverMadeByFrsctl) {
  StoreWithALeaseHeld();
  const std::string key = dir_ / "data/lease.key";
  ASSERT_TRUE(std::filesystem::exists(key));
  CtlRun before = Ctl({"get", "--json", "inflight", "u42"});
  ASSERT_EQ(before.rc, 0) << before.err;
  const std::string id = Parse(before.out).Find("leases")->items.at(0).Find("id")->text;
  ASSERT_EQ(id.size(), 24u) << before.out;
  std::filesystem::rename(key, dir_ / "lease.key.saved");

  CtlRun r = Ctl({"get", "inflight", "u42"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(key)) << "frsctl get made a lease.key";
  EXPECT_EQ(r.out.find(id), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lease #1 held"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("no lease.key could be read for this store (missing, or what the line above says): lease and "
                       "reservation ids are shown by serial"),
            std::string::npos)
      << r.err;
  r = Ctl({"explain", "inflight", "u42"});
  EXPECT_FALSE(std::filesystem::exists(key)) << "frsctl explain made a lease.key";
  r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;  // a warning, not damage
  EXPECT_NE(r.out.find("lease.key is missing: frsd makes a new secret at its next start"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(key));

  // A lease.key that does not read (a directory in its place, a wrong
  // length): a command that only reads nodes reads around it, saying so;
  // one that writes is refused as a fault of the store (exit 3, it was 2,
  // "bad arguments"), without advice to move aside what verify says to keep.
  for (const bool directory : {true, false}) {
    if (directory) std::filesystem::create_directory(key);
    else std::ofstream(key) << std::string(15, 'k');
    r = Ctl({"get", "inflight", "u42"});
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("lease #1 held"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("lease.key: a lease secret is"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("read without it"), std::string::npos) << r.err;
    r = Ctl({"set", "inflight", "u42", "1"});
    EXPECT_EQ(r.rc, 3) << r.err;
    EXPECT_EQ(r.err.find("moved aside"), std::string::npos) << r.err;
    std::filesystem::remove_all(key);
  }

  std::filesystem::rename(dir_ / "lease.key.saved", key);
  r = Ctl({"get", "inflight", "u42"});
  EXPECT_NE(r.out.find("lease " + id + " held"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("lease.key"), std::string::npos) << r.err;
}

// A store that never served: frsctl init, then stat, made stats.frs without
// lease.key, and frsd -t and verify then warned of a lost secret and of ids
// voided that were never given out. The first engine of such a store makes
// the secret with stats.frs, as frsd's start would (0600); one of a store
// that served never does (AMissingLeaseKeyIsNeverMadeByFrsctl).
TEST_F(FrsctlTest, TheFirstEngineOfANewStoreMakesItsLeaseKey) {
  const std::filesystem::path key = dir_ / "data/lease.key";
  CtlRun r = Ctl({"init"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(key)) << "init opens no engine";
  r = Ctl({"stat"});
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_TRUE(std::filesystem::exists(dir_ / "data/stats.frs"));
  ASSERT_TRUE(std::filesystem::exists(key)) << "stat made stats.frs without lease.key";
  EXPECT_EQ(std::filesystem::file_size(key), 16u);
  struct stat st {};
  ASSERT_EQ(::stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("lease.key is missing"), std::string::npos) << r.out;
  // Made once: the next command reads the same secret.
  const std::string first = frs::testing::ReadFile(key);
  r = Ctl({"stat"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(frs::testing::ReadFile(key), first);
}

// A store that served and lost both its lease.key and its stats.frs (a
// restore that missed the side files): its nodes say it served, so frsctl
// makes no secret and frsd -t and verify warn. (Judged by stats.frs alone,
// frsctl get made a new secret and printed ids frsd would not take, and
// every check then looked clean: found by an outside run.) And verify
// warns, as frsd -t does, of a secret its group or others may read.
TEST_F(FrsctlTest, AStoreThatLostItsSideFilesIsStillOneThatServed) {
  StoreWithALeaseHeld();
  const std::filesystem::path key = dir_ / "data/lease.key";
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  CtlRun r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("lease.key has mode 0644: its group or others may read it"), std::string::npos) << r.out;

  std::filesystem::remove(key);
  std::filesystem::remove(dir_ / "data/stats.frs");
  r = Ctl({"get", "inflight", "u42"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(key)) << "frsctl get made a lease.key";
  EXPECT_NE(r.out.find("lease #1 held"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("no lease.key could be read for this store"), std::string::npos) << r.err;
  r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("lease.key is missing: frsd makes a new secret at its next start"), std::string::npos) << r.out;
  CtlRun t = ctl_test::RunCtl(dir_.path(), "", {"-t", "-c", dir_ / "srv.xml"}, "", FRSD_PATH);
  EXPECT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.err.find("lease.key is missing beside an existing store"), std::string::npos) << t.err;
  EXPECT_FALSE(frs::StoreNeverServed(dir_ / "data"));
  // Every store file is asked, and one that does not read as one may hold
  // nodes: judged from frs.0.store on until the first that did not read,
  // a store whose frs.0.store header is damaged had never served, and
  // frsctl made a new secret beside the nodes of the others.
  {
    std::fstream f(dir_ / "data/frs.0.store", std::ios::in | std::ios::out | std::ios::binary);
    f.write("XXXXXXXX", 8);
  }
  EXPECT_FALSE(frs::StoreNeverServed(dir_ / "data"));
}

// stat --by for a table no biz keeps, or for an unknown biz: the message
// says what there is to ask for.
TEST_F(FrsctlTest, StatByNamesTheTablesTheMapKeeps) {
  std::ofstream(dir_ / "map.xml") << "<map>\n  <biz id=\"7\" name=\"api\" fields=\"app,user,iface\" separator=\"|\">\n"
                                     "    <rule interval=\"3600\" max=\"10\"/>\n    <stats by=\"app\"/>\n"
                                     "    <stats by=\"app,iface\"/>\n  </biz>\n"
                                     "  <biz id=\"1\" name=\"login\"><rule interval=\"60\" max=\"5\"/></biz>\n</map>\n";
  CreateStore();
  CtlRun r = Ctl({"stat", "--by", "user"});
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("keeps <stats by=\"user\">; it keeps: api by app and app,iface"), std::string::npos) << r.err;
  r = Ctl({"stat", "--by", "app", "--biz", "nope"});
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("unknown biz \"nope\" ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("has api, login)"), std::string::npos) << r.err;
  // An empty --value read as no filter (every group printed, exit 0); GET
  // /stats refuses it, and so does frsctl now.
  r = Ctl({"stat", "--by", "app", "--value", ""});
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.err.find("--value: empty: leave it out for every group"), std::string::npos) << r.err;
  // Options of the other form were ignored unsaid; an empty --by ran plain stat.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"stat", "--by", "app", "--days", "2"},
                                             {"stat", "--by", ""},
                                             {"stat", "--value", "a"},
                                             {"stat", "--top", "2"}}) {
    r = Ctl(args);
    EXPECT_EQ(r.rc, 2) << args[1] << " " << args[2] << ": " << r.out;
  }
}

// The rules allow one more, but the key holds every reservation its biz
// allows: explain says that an acquire with reserve is denied until the
// first of them ends (a 429 whose problem names no policy).
TEST_F(FrsctlTest, ExplainSaysWhenEveryReservationTheBizAllowsIsHeld) {
  std::ofstream(dir_ / "map.xml") << "<map>\n  <biz id=\"21\" name=\"tok\" reservations=\"2\">\n"
                                     "    <rule interval=\"3600\" max=\"1000\"/>\n  </biz>\n</map>\n";
  CreateStore();
  MakeLeaseKey();  // as frsd's start would: frsctl's own engine grants no reservation without it
  {
    Session s;
    Status st = OpenSession(dir_ / "srv.xml", Needs::kEngine, &s);
    ASSERT_TRUE(st.ok()) << st.message();
    for (int i = 0; i < 2; ++i) {
      Decision d = s.engine->Execute(Request{.cmd = Cmd::kAcquire, .biz = "tok", .key = "k", .n = 5, .reserve = 600});
      ASSERT_TRUE(d.ok() && d.allowed && d.res_serial != 0) << d.status.ToString();
    }
  }
  CtlRun r = Ctl({"explain", "tok", "k"});
  EXPECT_EQ(r.rc, 0) << r.out;  // the rule allows a plain acquire
  EXPECT_NE(r.out.find("with reserve, denied until the first reservation ends"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("holds all 2 reservations its biz allows"), std::string::npos) << r.out;
  r = Ctl({"explain", "--json", "tok", "k"});
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_NE(Parse(r.out).Find("reservations_full"), nullptr) << r.out;
  EXPECT_TRUE(Parse(r.out).Find("reservations_full")->boolean) << r.out;
}

}  // namespace
}  // namespace frs::ctl
