// srv.xml: defaults, resolved paths, and one "file:line: what" per error.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/example_conf.h"
#include "common/files.h"
#include "common/temp_dir.h"
#include "config/srv_config.h"
#include "frs/service.h"

namespace frs {
namespace {

using testing::TempDir;

std::string Write(const TempDir& d, const std::string& body) {
  std::string p = d / "srv.xml";
  std::ofstream(p) << body;
  return p;
}

// A short srv.xml: <listen `listen`/>, map.xml, a store in data/, then `more`.
std::string ShortSrv(const std::string& listen, const std::string& more) {
  return "<frs>\n  <listen " + listen + "/>\n  <map>map.xml</map>\n  <store dir=\"data\"/>\n" + more + "</frs>";
}

// `<workers>2&#0;9</workers>` was 2 workers and `<store dir="data&#0;-x">`
// the store data (an outside run): a NUL ends what pugixml reads of a value.
TEST(SrvConfig, ANulOrAReferenceToOneIsRefused) {
  TempDir d;
  auto c = LoadSrvConfig(Write(d, ShortSrv("host=\"127.0.0.1\" port=\"0\"", "  <workers>2&#0;9</workers>\n")));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("srv.xml:5: a character reference to NUL (&#0;)"), std::string::npos)
      << c.status().ToString();
  c = LoadSrvConfig(
      Write(d, ShortSrv("host=\"127.0.0.1\" port=\"0\"", std::string("  <workers>2</workers>\n") + '\0')));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("a NUL byte, which XML does not allow"), std::string::npos)
      << c.status().ToString();
}

// The example srv.xml (conf/), moved to a directory of its own.
TEST(SrvConfig, ContractExampleWithDefaultsAndResolvedPaths) {
  TempDir d;
  auto c = LoadSrvConfig(Write(d, testing::ReadFile(testing::ConfPath("srv.xml"))));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->port, 8300);
  EXPECT_EQ(c->workers, 2u);
  EXPECT_EQ(c->map_path, d / "map.xml");
  EXPECT_EQ(c->store_dir, d / "data");
  EXPECT_EQ(c->pidfile, d / "frsd.pid");
  EXPECT_EQ(c->geometry, (StoreGeometry{2, 65536, 8}));
  EXPECT_FALSE(c->reuseport);
  EXPECT_EQ(c->max_header_bytes, 16384u);
  EXPECT_EQ(c->max_body_bytes, 65536u);
  // Off by default: the kernel's own writeback (docs/store.md).
  EXPECT_EQ(c->flush_interval_ms, 0u);
}

// <flush interval_ms>: 0 leaves writeback to the kernel; a period shorter than
// 10 ms is refused rather than run as a writeback loop.
TEST(SrvConfig, PortZeroIsTheKernelsChoiceAndASelfThatFollowsListenFollowsIt) {
  TempDir d;
  const std::string path =
      Write(d, ShortSrv(R"(host="::1" port="0")", "  <cluster><shard>[::1]:9000</shard></cluster>\n"));
  auto c = LoadSrvConfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->port, 0);
  EXPECT_TRUE(c->cluster_self_derived);
  EXPECT_EQ(c->cluster_self, "[::1]:0");
  EXPECT_EQ(ListenAddressPath(*c), d / "data/frsd.listen");
  SrvConfig bound = *c;
  ApplyBoundPort(&bound, 41234);
  EXPECT_EQ(bound.port, 41234);
  EXPECT_EQ(bound.cluster_self, "[::1]:41234");
  // A program beside the running frsd learns where it answers, host and
  // bound port, from srv.xml alone.
  std::filesystem::create_directories(d / "data");
  std::ofstream(d / "data/frsd.listen") << "[::1]:41234\n";
  Result<ServiceConfig> sc = ReadServiceConfig(path);
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  EXPECT_EQ(sc->host, "::1");
  EXPECT_EQ(sc->port, 41234);
  EXPECT_EQ(sc->cluster_self, "[::1]:41234");
  // A configured port and an explicit self stay what srv.xml says.
  auto e = LoadSrvConfig(Write(d, R"(<frs><listen port="8301"/><map>m</map><store dir="s"/>
  <cluster self="10.0.0.1:8301"><shard>10.0.0.1:8301</shard></cluster></frs>)"));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ApplyBoundPort(&e.value(), 8301);
  EXPECT_EQ(e->port, 8301);
  EXPECT_FALSE(e->cluster_self_derived);
  EXPECT_EQ(e->cluster_self, "10.0.0.1:8301");
  auto bad = LoadSrvConfig(Write(d, R"(<frs><listen port="65536"/><map>m</map><store dir="s"/></frs>)"));
  EXPECT_FALSE(bad.ok());
}

// frsd.running: what frsd writes is what a reader gets back, the map's
// bytes whatever they hold; a file cut short or not frsd's is Corruption,
// none NotFound.
TEST(SrvConfig, TheRunningConfigReadsBackWhatFrsdWrote) {
  TempDir d;
  EXPECT_TRUE(ReadRunningConfig(d.path()).status().IsNotFound());
  const std::string map = "<map>\n\n<!-- a blank line, and bytes 9 -->\n</map>";
  ASSERT_TRUE(
      WriteRunningConfig(d.path(), RunningConfig{4711, "Asia/Kolkata", "/etc/frs/map.xml", MapDigest(map), map}).ok());
  Result<RunningConfig> rc = ReadRunningConfig(d.path());
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(rc->pid, 4711);
  EXPECT_EQ(rc->timezone, "Asia/Kolkata");
  EXPECT_EQ(rc->map_path, "/etc/frs/map.xml");
  EXPECT_EQ(rc->map_digest, MapDigest(map));
  EXPECT_EQ(rc->map_text, map);
  EXPECT_NE(MapDigest(map), MapDigest(map + " "));
  const std::string path = d / "frsd.running";
  const std::string whole = testing::ReadFile(path);
  std::ofstream(path, std::ios::trunc) << whole.substr(0, whole.size() - 1);
  EXPECT_EQ(ReadRunningConfig(d.path()).status().code(), Status::Code::kCorruption);
  std::ofstream(path, std::ios::trunc) << "pid 1\n\n<map/>";
  EXPECT_EQ(ReadRunningConfig(d.path()).status().code(), Status::Code::kCorruption);
  // A map of the largest size frsd reads: its header lines made the file
  // larger than the reader took.
  const std::string largest = "<map>" + std::string((16u << 20) - 11, ' ') + "</map>";
  ASSERT_TRUE(
      WriteRunningConfig(d.path(), RunningConfig{4711, "UTC", "/etc/frs/map.xml", MapDigest(largest), largest}).ok());
  rc = ReadRunningConfig(d.path());
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(rc->map_text.size(), largest.size());
}

TEST(SrvConfig, FlushIsOffOrAtLeastTenMilliseconds) {
  TempDir d;
  auto with = [&](const std::string& flush) { return LoadSrvConfig(Write(d, ShortSrv("port=\"8300\"", flush))); };
  auto off = with("<flush interval_ms=\"0\"/>");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(off->flush_interval_ms, 0u);
  auto ten = with("<flush interval_ms=\"10\"/>");
  ASSERT_TRUE(ten.ok()) << ten.status().ToString();
  EXPECT_EQ(ten->flush_interval_ms, 10u);
  auto five = with("<flush interval_ms=\"5\"/>");
  ASSERT_FALSE(five.ok());
  EXPECT_NE(five.status().message().find("0 (the kernel's writeback) or 10..3600000"), std::string::npos)
      << five.status().message();
}

TEST(SrvConfig, TheWatchOverHungWorkersIsOffOrAtLeastThreeSeconds) {
  TempDir d;
  auto with = [&](const std::string& more) { return LoadSrvConfig(Write(d, ShortSrv("port=\"8300\"", more))); };
  auto dflt = with("");
  ASSERT_TRUE(dflt.ok()) << dflt.status().ToString();
  EXPECT_EQ(dflt->worker_stall_ms, 30000u);
  auto off = with("<limits worker_stall_ms=\"0\"/>");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(off->worker_stall_ms, 0u);
  auto three = with("<limits worker_stall_ms=\"3000\"/>");
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(three->worker_stall_ms, 3000u);
  // An idle loop turns once a second: a shorter watch would kill idle workers.
  for (const char* bad : {"2999", "500", "3600001", "4294967296", "-1", "2s"}) {
    auto r = with(std::string("<limits worker_stall_ms=\"") + bad + "\"/>");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("srv.xml:5: <limits worker_stall_ms>"), std::string::npos)
        << r.status().message();
  }
}

TEST(SrvConfig, Extensions) {
  TempDir d;
  auto c = LoadSrvConfig(Write(d, R"(<frs>
  <listen host="::1" port="9000" reuseport="1"/>
  <map>/etc/frs/map.xml</map>
  <store dir="/var/lib/frs" files="1" keynodes="16" chain="4"/>
  <allow>127.0.0.0/8, ::1</allow>
  <limits header_bytes="8192" batch="8"/>
  <flush interval_ms="250"/>
  <log file="frsd.log"/>
</frs>)"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->reuseport);
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->map_path, "/etc/frs/map.xml");
  EXPECT_EQ(c->allow, (std::vector<std::string>{"127.0.0.0/8", "::1"}));
  EXPECT_EQ(c->max_header_bytes, 8192u);
  EXPECT_EQ(c->max_batch, 8u);
  EXPECT_EQ(c->flush_interval_ms, 250u);
  EXPECT_EQ(c->logfile, d / "frsd.log");
}

void ExpectError(const std::string& body, const std::string& where, const std::string& what) {
  TempDir d;
  std::string p = Write(d, body);
  auto c = LoadSrvConfig(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message().rfind(p + ":" + where + ": ", 0), 0u) << c.status().message();
  EXPECT_NE(c.status().message().find(what), std::string::npos) << c.status().message();
}

TEST(SrvConfig, ErrorsNameFileLineAndWhat) {
  ExpectError("<frs>\n<map>m.xml</map>\n<store dir=\"d\" chain=\"99\"/>\n</frs>", "3", "chain> is 99");
  ExpectError("<frs>\n<map>m.xml</map>\n<store dir=\"d\"/>\n<listen port=\"x\"/>\n</frs>", "4", "whole number");
  ExpectError("<frs>\n<map>m.xml</map>\n<store dir=\"d\"/>\n<listen port=\"99999999999999999999999\"/>\n</frs>", "4",
              "<listen port> is 99999999999999999999999, must be from 0 to 65535");
  ExpectError("<frs>\n<map>m.xml</map>\n<store dir=\"d\"/>\n<bogus/>\n</frs>", "4", "unknown element <bogus>");
  // A file where the store's directory should be, or on its path (srv.xml
  // itself here): its line, not a store file's "Not a directory" later.
  ExpectError("<frs>\n<map>m.xml</map>\n<store dir=\"srv.xml\"/>\n</frs>", "3", "is not a directory");
  ExpectError("<frs>\n<map>m.xml</map>\n\n<store dir=\"srv.xml/data\"/>\n</frs>", "4", "is not a directory");
  {
    TempDir d;
    ASSERT_EQ(::symlink("nowhere/x", (d / "dangling").c_str()), 0);
    const std::string p = Write(d, "<frs>\n<map>m.xml</map>\n<store dir=\"dangling\"/>\n</frs>");
    auto c = LoadSrvConfig(p);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find(p + ":3: <store dir> "), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("is a symbolic link to nothing"), std::string::npos) << c.status().message();
  }
  ExpectError("<frs>\n<store dir=\"d\"/>\n</frs>", "1", "<map> is required");
  ExpectError("<frs>\n<map>m.xml</map>\n<store dir=\"d\" size=\"1\"/>\n</frs>", "3", "no attribute \"size\"");
  ExpectError("<frs>\n<map>m.xml</map>\n<store dir=\"d\"/>\n<allow>10.0.0.0/33</allow>\n</frs>", "4", "10.0.0.0/33");
  ExpectError("<frs>\n<map>m.xml</map>\n<store dir=\"d\"/>\n<listen reuseport=\"2\"/>\n</frs>", "4", "reuseport");
  ExpectError("<frs>\n<map>m.xml</map>\n<workers>1</workers>\n<workers>2</workers>\n</frs>", "4", "twice");
  ExpectError("<frs>\n<map>m.xml<map>\n</frs>", "3", "malformed XML");
  // What pugixml accepts and a typo would make of a setting: a second <frs>
  // (ignored), text after it, an attribute given twice (one value wins).
  ExpectError("<frs>\n<map>m.xml</map>\n<store dir=\"d\"/>\n</frs>\n<frs><workers>9</workers></frs>", "5",
              "<frs> after </frs>: a file holds one <frs> and nothing after it");
  ExpectError("<frs>\n<map>m.xml</map>\n<store dir=\"d\"/>\n</frs>\n\nworkers 9", "6", "text outside <frs>");
  ExpectError("<frs>\n<map>m.xml</map>\n<store dir=\"d\" chain=\"8\" chain=\"16\"/>\n</frs>", "3",
              "<store>: attribute 'chain' is given twice");
  // Entities are not expanded: `&dir;` would have been the store's
  // directory, those five bytes. A bare doctype declares nothing.
  ExpectError(
      "<?xml version=\"1.0\"?>\n<!DOCTYPE frs [\n<!ENTITY dir \"/var/lib/frs\">\n]>\n<frs>\n<map>m.xml</map>\n"
      "<store dir=\"&dir;\"/>\n</frs>",
      "2", "a <!DOCTYPE> that names a DTD or declares entities: neither is read");
  // No path at all: said so (it read ":1: cannot resolve path: Invalid argument").
  auto empty = LoadSrvConfig("");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(empty.status().message(), "srv.xml: an empty path names no file");
}

TEST(SrvConfig, ClusterAsInTheContract) {
  TempDir d;
  auto c = LoadSrvConfig(Write(d, ShortSrv(R"(host="127.0.0.1" port="8302")", R"(  <cluster>
    <shard>127.0.0.1:8301</shard>
    <shard> 127.0.0.1:8302 </shard>
    <shard weight="2">127.0.0.1:8303</shard>
  </cluster>
)")));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->cluster_shards.size(), 3u);
  EXPECT_EQ(c->cluster_shards[1].name, "127.0.0.1:8302");
  EXPECT_EQ(c->cluster_shards[2].weight, 2u);
  EXPECT_EQ(c->cluster_self, "127.0.0.1:8302");  // from <listen>
  EXPECT_TRUE(c->cluster_enforce);

  auto lone = LoadSrvConfig(Write(d, "<frs><map>m.xml</map><store dir=\"d\"/></frs>"));
  ASSERT_TRUE(lone.ok());
  EXPECT_TRUE(lone->cluster_shards.empty());
  EXPECT_TRUE(lone->cluster_self.empty());

  auto leaving = LoadSrvConfig(Write(d, R"(<frs><map>m.xml</map><store dir="d"/>
<cluster self="10.0.0.9:8300" enforce="0"><shard>10.0.0.1:8300</shard></cluster></frs>)"));
  ASSERT_TRUE(leaving.ok()) << leaving.status().ToString();
  EXPECT_EQ(leaving->cluster_self, "10.0.0.9:8300");
  EXPECT_FALSE(leaving->cluster_enforce);
}

TEST(SrvConfig, ClusterErrors) {
  const std::string head = "<frs>\n<map>m.xml</map>\n<store dir=\"d\"/>\n";
  ExpectError(head + "<cluster>\n</cluster>\n</frs>", "4", "at least one <shard>");
  ExpectError(head + "<cluster>\n<shard>a:1</shard>\n<shard>a:1</shard>\n</cluster>\n</frs>", "6", "listed twice");
  ExpectError(head + "<cluster>\n<shard weight=\"0\">a:1</shard>\n</cluster>\n</frs>", "5", "weight");
  ExpectError(head + "<cluster>\n<node>a:1</node>\n</cluster>\n</frs>", "5", "only <shard>");
  ExpectError(head + "<cluster enforce=\"2\">\n<shard>a:1</shard>\n</cluster>\n</frs>", "4", "enforce");
  ExpectError(head + "<cluster>\n<shard>a b:1</shard>\n</cluster>\n</frs>", "5", "host:port");
  // A self with a space passed: the shard then owned nothing (421 naming
  // itself) and a handoff's receipts split on the space.
  ExpectError(head + "<cluster self=\"127.0.0.1:8301 \">\n<shard>127.0.0.1:8301</shard>\n</cluster>\n</frs>", "4",
              "<cluster self> must be host:port exactly as in the proxy's server line, not \"127.0.0.1:8301 \"");
  ExpectError(head + "<cluster self=\"\">\n<shard>a:1</shard>\n</cluster>\n</frs>", "4", "<cluster self> must be");
  ExpectError(head + "<ratelimit legacy=\"2\"/>\n</frs>", "4", "<ratelimit legacy> is 1 (both forms), 0");
}

// <cluster replicas="1">: sync and serve by default, each attribute checked
// with its allowed values, and refused where it cannot work.
TEST(SrvConfig, ClusterReplicas) {
  TempDir d;
  auto c = LoadSrvConfig(Write(d, R"(<frs><map>m.xml</map><store dir="d"/><admin token="t"/>
<cluster self="10.0.0.1:8301" replicas="1"><shard>10.0.0.1:8301</shard><shard>10.0.0.2:8301</shard></cluster></frs>)"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->cluster_replicas, 1u);
  EXPECT_TRUE(c->replica_sync);
  EXPECT_FALSE(c->replica_refuse);
  EXPECT_EQ(c->replica_timeout_ms, 200u);
  EXPECT_EQ(c->catchup_timeout_ms, 60000u);
  auto a = LoadSrvConfig(Write(d, R"(<frs><map>m.xml</map><store dir="d"/><admin token="t"/>
<cluster replicas="1" replica_mode="async" replica_timeout_ms="50" on_replica_down="refuse" catchup_timeout_ms="5000">
<shard>10.0.0.1:8301</shard><shard>10.0.0.2:8301</shard></cluster></frs>)"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_FALSE(a->replica_sync);
  EXPECT_TRUE(a->replica_refuse);
  EXPECT_EQ(a->replica_timeout_ms, 50u);
  EXPECT_EQ(a->catchup_timeout_ms, 5000u);
  EXPECT_EQ(a->cluster_lease_key, "");
  auto off = LoadSrvConfig(Write(d, R"(<frs><map>m.xml</map><store dir="d"/>
<cluster><shard>10.0.0.1:8301</shard></cluster></frs>)"));
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->cluster_replicas, 0u);
  // lease_key: a file, relative to srv.xml's directory (read at start).
  auto keyed = LoadSrvConfig(Write(d, R"(<frs><map>m.xml</map><store dir="d"/><admin token="t"/>
<cluster replicas="1" lease_key="keys/lease.key"><shard>a:1</shard><shard>b:1</shard></cluster></frs>)"));
  ASSERT_TRUE(keyed.ok()) << keyed.status().ToString();
  EXPECT_EQ(keyed->cluster_lease_key, d.path() + "/keys/lease.key");
  EXPECT_EQ(keyed->cluster_lease_key_also, "");
  // lease_key_also: a rotation's second key, the same way.
  auto rotating = LoadSrvConfig(Write(d, R"(<frs><map>m.xml</map><store dir="d"/><admin token="t"/>
<cluster replicas="1" lease_key="new.key" lease_key_also="old.key"><shard>a:1</shard><shard>b:1</shard></cluster></frs>)"));
  ASSERT_TRUE(rotating.ok()) << rotating.status().ToString();
  EXPECT_EQ(rotating->cluster_lease_key_also, d.path() + "/old.key");

  const std::string head = "<frs>\n<map>m.xml</map>\n<store dir=\"d\"/>\n<admin token=\"t\"/>\n";
  const std::string two = "<shard>a:1</shard><shard>b:1</shard>\n</cluster>\n</frs>";
  ExpectError(head + "<cluster replicas=\"2\">\n" + two, "5", "<cluster replicas> is 2, must be from 0 to 1");
  ExpectError(head + "<cluster replicas=\"1\" replica_mode=\"quorum\">\n" + two, "5",
              "<cluster replica_mode> is sync (the default) or async, not \"quorum\"");
  ExpectError(head + "<cluster replicas=\"1\" on_replica_down=\"fail\">\n" + two, "5",
              "<cluster on_replica_down> is serve (the default) or refuse");
  ExpectError(head + "<cluster replicas=\"1\" replica_timeout_ms=\"5\">\n" + two, "5", "replica_timeout_ms");
  ExpectError(head + "<cluster replicas=\"1\" catchup_timeout_ms=\"999\">\n" + two, "5",
              "<cluster catchup_timeout_ms> is 999, must be from 1000 to 3600000");
  ExpectError(head + "<cluster replicas=\"1\" lease_key=\"\">\n" + two, "5", "<cluster lease_key> names a file");
  ExpectError(head + "<cluster replicas=\"1\" lease_key_also=\"old.key\">\n" + two, "5",
              "<cluster lease_key_also> needs lease_key");
  ExpectError(head + "<cluster replicas=\"1\" lease_key=\"k\" lease_key_also=\"\">\n" + two, "5",
              "<cluster lease_key_also> names a file");
  ExpectError(head + "<cluster replicas=\"1\" lease_key=\"k\" lease_key_also=\"./k\">\n" + two, "5",
              "names the file lease_key names");
  ExpectError(head + "<cluster replicas=\"1\">\n<shard>a:1</shard>\n</cluster>\n</frs>", "5",
              "needs at least two <shard>s");
  // Named at the <cluster> element's line (it said line 1, the root's).
  ExpectError("<frs>\n<map>m.xml</map>\n<store dir=\"d\"/>\n<cluster replicas=\"1\">\n" + two, "4",
              "needs <admin token");
  // A token a Bearer header cannot carry as it is: every batch was refused.
  for (const char* token : {" ", " t", "t ", "t&#9;", "a&#10;b"})
    ExpectError("<frs>\n<map>m.xml</map>\n<store dir=\"d\"/>\n<admin token=\"" + std::string(token) +
                    "\"/>\n<cluster replicas=\"1\">\n" + two,
                "4", "<admin token> begins or ends with a blank, or holds a control character");
  EXPECT_TRUE(LoadSrvConfig(Write(d, R"(<frs><map>m.xml</map><store dir="d"/><admin token="two words"/>
<cluster replicas="1"><shard>a:1</shard><shard>b:1</shard></cluster></frs>)"))
                  .ok());
  // A wildcard listen address names no shard: self is required then (taken
  // as this shard's name, every route was another's, and the 421s pointed
  // clients back here).
  ExpectError("<frs>\n<listen host=\"0.0.0.0\" port=\"8300\"/>\n<map>m.xml</map>\n<store dir=\"d\"/>\n<cluster>\n" +
                  two,
              "5", "<cluster> needs self=\"HOST:PORT\", this shard's name as the <shard> list spells it");
}

// Typos that srv.xml took silently (map.xml refuses them alike): an
// attribute on an element whose value is its text, text or an element
// inside one whose settings are attributes.
TEST(SrvConfig, StrayAttributesTextAndElementsAreRefused) {
  const std::string head = "<frs>\n<map>m.xml</map>\n";
  const std::string store = "<store dir=\"d\"/>\n";
  ExpectError(head + store + "<workers bogus=\"1\">2</workers>\n</frs>", "4", "<workers> has no attribute \"bogus\"");
  ExpectError("<frs>\n<map file=\"x\">m.xml</map>\n" + store + "</frs>", "2", "<map> has no attribute \"file\"");
  ExpectError(head + store + "<admin>tok</admin>\n</frs>", "4", "<admin> takes no text: its settings are attributes");
  ExpectError(head + "<store dir=\"d\">\n<keynodes>5</keynodes>\n</store>\n</frs>", "4",
              "<store> holds no element (<keynodes>): its settings are attributes");
  ExpectError(head + store + "<pidfile>p<x/></pidfile>\n</frs>", "4", "<pidfile> holds no element (<x>)");
  // Text between <frs>'s own elements, before a comment or in CDATA, at the
  // line of the text itself; and between <cluster>'s.
  ExpectError(head + store + "\n  hello\n</frs>", "5", "stray text in <frs> (\"hello\"): it holds only elements");
  ExpectError(head + store + "hello<!-- c -->\n</frs>", "4", "stray text in <frs> (\"hello\")");
  ExpectError(head + store + "<![CDATA[x]]>\n</frs>", "4", "stray text in <frs> (\"x\")");
  ExpectError(head + store + "<admin token=\"t\"/>\n<cluster self=\"127.0.0.1:1\">\n<shard>127.0.0.1:1</shard> x\n" +
                  "</cluster>\n</frs>",
              "5", "<cluster> takes no text");
  // Whitespace and comments are no text; a shard's address is.
  TempDir d;
  auto ok = LoadSrvConfig(Write(d, head + "<store dir=\"d\">\n  <!-- here -->\n</store>\n"
                                          "<cluster>\n  <shard weight=\"2\">a:1</shard>\n  <shard>b:1</shard>\n"
                                          "</cluster>\n</frs>"));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->cluster_shards.size(), 2u);
}

// A self that is not among the shards is a leaving shard's, or a name
// spelled otherwise than the list does: said by frsd -t and the start.
TEST(SrvConfig, ASelfNotAmongTheShardsIsWarnedOf) {
  TempDir d;
  auto listed = LoadSrvConfig(Write(d, R"(<frs><map>m.xml</map><store dir="d"/>
<cluster self="a:1"><shard>a:1</shard><shard>b:1</shard></cluster></frs>)"));
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(ClusterSelfNotListed(listed.value()), "");
  auto other = LoadSrvConfig(Write(d, R"(<frs><map>m.xml</map><store dir="d"/>
<cluster self="localhost:1"><shard>127.0.0.1:1</shard><shard>b:1</shard></cluster></frs>)"));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  const std::string w = ClusterSelfNotListed(other.value());
  EXPECT_NE(w.find("<cluster self> localhost:1 is not among its <shard>s"), std::string::npos) << w;
  // No self and <listen port="0">: the name is the port bound at start,
  // which no list names beforehand: said so (it warned of "127.0.0.1:0",
  // then of nothing: an operator's shard joined no ring, found from outside).
  auto unbound = LoadSrvConfig(Write(d, R"(<frs><listen host="127.0.0.1" port="0"/><map>m.xml</map><store dir="d"/>
<cluster><shard>127.0.0.1:1</shard><shard>b:1</shard></cluster></frs>)"));
  ASSERT_TRUE(unbound.ok()) << unbound.status().ToString();
  EXPECT_NE(ClusterSelfNotListed(unbound.value()).find("no <shard> list can name beforehand"), std::string::npos);
  EXPECT_EQ(ClusterSelfNotListed(unbound.value()).find("127.0.0.1:0"), std::string::npos);
  ApplyBoundPort(&unbound.value(), 4242);
  EXPECT_NE(ClusterSelfNotListed(unbound.value()).find("127.0.0.1:4242 is not among"), std::string::npos);
}

// A self the list lacks while the list names this frsd's own <listen> is a
// typo, not a leaving shard: refused, so that a reload cannot make the shard
// answer 421 to every route (it was applied with a warning).
TEST(SrvConfig, ASelfNotListedBesideThisShardsOwnListenIsRefused) {
  TempDir d;
  auto typo = LoadSrvConfig(Write(d, R"(<frs><listen host="127.0.0.1" port="21638"/><map>m.xml</map><store dir="d"/>
<cluster self="127.0.0.1:29999"><shard>127.0.0.1:21638</shard><shard>127.0.0.1:21040</shard></cluster></frs>)"));
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("<cluster self> 127.0.0.1:29999 is not among its <shard>s, but "
                                         "127.0.0.1:21638, this frsd's own <listen>, is"),
            std::string::npos)
      << typo.status().message();
  EXPECT_NE(typo.status().message().find(":2:"), std::string::npos) << typo.status().message();
  // The same name spelled otherwise (localhost for 127.0.0.1) alike.
  auto spelled = LoadSrvConfig(Write(d, R"(<frs><listen host="127.0.0.1" port="21638"/><map>m.xml</map><store dir="d"/>
<cluster self="localhost:21638"><shard>127.0.0.1:21638</shard><shard>127.0.0.1:21040</shard></cluster></frs>)"));
  EXPECT_FALSE(spelled.ok());
  // A leaving shard's list no longer has it: warned of, not refused.
  auto leaving = LoadSrvConfig(Write(d, R"(<frs><listen host="127.0.0.1" port="21638"/><map>m.xml</map><store dir="d"/>
<cluster self="127.0.0.1:21638"><shard>127.0.0.1:21040</shard><shard>127.0.0.1:27021</shard></cluster></frs>)"));
  ASSERT_TRUE(leaving.ok()) << leaving.status().ToString();
  EXPECT_NE(ClusterSelfNotListed(leaving.value()), "");
  // Behind a relay, self is the relay's name: a list that also names this
  // frsd's own address lists it twice (found by an outside run: it sent its
  // changes to itself).
  auto twice = LoadSrvConfig(Write(d, R"(<frs><listen host="127.0.0.1" port="21638"/><map>m.xml</map><store dir="d"/>
<cluster self="relay:9001"><shard>relay:9001</shard><shard>127.0.0.1:21638</shard></cluster></frs>)"));
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("<cluster> names this shard twice: as its self relay:9001 and as "
                                          "127.0.0.1:21638, this frsd's own <listen>"),
            std::string::npos)
      << twice.status().message();
  // With port="0" the bound port is checked once known (the start, a
  // reload): the parse cannot.
  auto unbound = LoadSrvConfig(Write(d, R"(<frs><listen host="127.0.0.1" port="0"/><map>m.xml</map><store dir="d"/>
<cluster self="127.0.0.1:29999"><shard>127.0.0.1:21638</shard><shard>127.0.0.1:21040</shard></cluster></frs>)"));
  ASSERT_TRUE(unbound.ok()) << unbound.status().ToString();
  EXPECT_EQ(OwnListenListedUnderAnotherSelf(unbound.value()), "");
  ApplyBoundPort(&unbound.value(), 21638);
  EXPECT_NE(OwnListenListedUnderAnotherSelf(unbound.value()).find("this frsd's own <listen>, is"), std::string::npos);
}

// With replicas, self names every change stream, whose receipt key must fit:
// a longer self was refused at each batch (400), not at the start.
TEST(SrvConfig, ASelfTooLongToNameAChangeStreamIsRefusedWithReplicas) {
  TempDir d;
  const std::string host(146, 'h');  // "host:8301": 151 bytes
  const std::string cluster =
      "<cluster self=\"" + host + ":8301\" replicas=\"1\"><shard>" + host + ":8301</shard><shard>b:1</shard></cluster>";
  auto r = LoadSrvConfig(Write(d, "<frs><map>m.xml</map><store dir=\"d\"/><admin token=\"t\"/>" + cluster + "</frs>"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("<cluster self> is 151 bytes; with replicas it is at most 150"),
            std::string::npos)
      << r.status().message();
  const std::string fits = "<cluster self=\"" + host.substr(1) + ":8301\" replicas=\"1\"><shard>" + host.substr(1) +
                           ":8301</shard><shard>b:1</shard></cluster>";
  EXPECT_TRUE(
      LoadSrvConfig(Write(d, "<frs><map>m.xml</map><store dir=\"d\"/><admin token=\"t\"/>" + fits + "</frs>")).ok());
}

// <cluster self> and every <shard> are host:port a peer can dial: one check
// for both, naming the attribute and the bad value.
TEST(SrvConfig, ClusterSelfAndShardsAreHostPortExactly) {
  const std::string head = "<frs>\n<map>m.xml</map>\n<store dir=\"d\"/>\n";
  const std::string shard = "\n<shard>127.0.0.1:8301</shard>\n</cluster>\n</frs>";
  const std::string nbsp = "\xC2\xA0";
  const struct {
    std::string value, why;
  } bad[] = {
      {"127.0.0.1:99999", "port 99999 is outside 1..65535"},
      {"127.0.0.1:0", "port 0 is outside 1..65535"},
      {"127.0.0.1", "no :port"},
      {"127.0.0.1:", "is not a number"},
      {"a:1,b:2", "is not a DNS name or IP address"},
      {"host:8300/x", "is not a number"},
      {"127.0.0.1:8301" + nbsp, "is not a number"},
      {"h" + nbsp + ":8301", "is not a DNS name or IP address"},
      {"::1:8301", "is not a DNS name or IP address"},
      {"[::1:8301", "not an IPv6 address in brackets"},
      {"[1.2.3.4]:8301", "not an IPv6 address in brackets"},
      {":8301", "host is empty"},
  };
  for (const auto& b : bad) {
    ExpectError(head + "<cluster self=\"" + b.value + "\">" + shard, "4",
                "<cluster self> must be host:port exactly as in the proxy's server line, not \"" + b.value + "\"");
    ExpectError(head + "<cluster self=\"" + b.value + "\">" + shard, "4", b.why);
    ExpectError(head + "<cluster self=\"127.0.0.1:8301\">\n<shard>" + b.value + "</shard>\n</cluster>\n</frs>", "5",
                "<shard> must be host:port exactly as in the proxy's server line, not \"" + b.value + "\"");
  }
  TempDir d;
  for (const std::string good : {"127.0.0.1:1", "[::1]:65535", "shard-7.example.com:8300", "localhost:8300"}) {
    auto c =
        LoadSrvConfig(Write(d, head + "<cluster self=\"" + good + "\"><shard>" + good + "</shard></cluster></frs>"));
    EXPECT_TRUE(c.ok()) << good << ": " << c.status().ToString();
  }
}

TEST(SrvConfig, TheRateLimitFieldsAreBothTheDraftsOrTheOlderTrio) {
  TempDir d;
  const std::string head = "<frs><map>m.xml</map><store dir=\"d\"/>";
  using F = SrvConfig::RateLimitFields;
  EXPECT_EQ(LoadSrvConfig(Write(d, head + "</frs>"))->ratelimit_fields, F::kDraftAndLegacy);
  EXPECT_EQ(LoadSrvConfig(Write(d, head + "<ratelimit legacy=\"1\"/></frs>"))->ratelimit_fields, F::kDraftAndLegacy);
  EXPECT_EQ(LoadSrvConfig(Write(d, head + "<ratelimit legacy=\"0\"/></frs>"))->ratelimit_fields, F::kDraft);
  EXPECT_EQ(LoadSrvConfig(Write(d, head + "<ratelimit legacy=\"only\"/></frs>"))->ratelimit_fields, F::kLegacy);
}

TEST(SrvConfig, TheDecisionLogIsOffByDefaultAndDeniedAtFullSampleWhenNamed) {
  TempDir d;
  const std::string head = "<frs><map>m.xml</map><store dir=\"d\"/>";
  auto none = LoadSrvConfig(Write(d, head + "</frs>"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->decisions_file, "");
  auto plain = LoadSrvConfig(Write(d, head + "<decisions file=\"log/decisions.log\"/></frs>"));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->decisions_file, d.path() + "/log/decisions.log");
  EXPECT_FALSE(plain->decisions_all);
  EXPECT_EQ(plain->decisions_sample, 1.0);
  auto all = LoadSrvConfig(Write(d, head + "<decisions file=\"/x.log\" record=\"all\" sample=\"0.25\"/></frs>"));
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_TRUE(all->decisions_all);
  EXPECT_EQ(all->decisions_sample, 0.25);
  for (const char* ok : {"0", "1", ".5", "0.001", "1.0"})
    EXPECT_TRUE(LoadSrvConfig(Write(d, head + "<decisions file=\"/x\" sample=\"" + ok + "\"/></frs>")).ok()) << ok;
}

TEST(SrvConfig, DecisionLogErrorsNameTheAttribute) {
  const std::string head = "<frs>\n<map>m.xml</map>\n<store dir=\"d\"/>\n";
  ExpectError(head + "<decisions/>\n</frs>", "4", "<decisions file> is required");
  ExpectError(head + "<decisions file=\"/x\" record=\"allowed\"/>\n</frs>", "4",
              "<decisions record> is denied (the default) or all, not \"allowed\"");
  for (const char* bad : {"2", "-0.5", "1.5", "abc", "", "1e-3", "0.5x", "nan"})
    ExpectError(head + "<decisions file=\"/x\" sample=\"" + bad + "\"/>\n</frs>", "4",
                std::string("<decisions sample> is the share of decisions written, from 0 to 1 (0.01 is one in a "
                            "hundred), not \"") +
                    bad + "\"");
  ExpectError(head + "<decisions file=\"/x\" level=\"1\"/>\n</frs>", "4", "<decisions> has no attribute \"level\"");
}

TEST(SrvConfig, GrpcTransportsUnixSocketAndTls) {
  TempDir d;
  auto c = LoadSrvConfig(Write(d, ShortSrv("port=\"0\"",
                                           "<grpc unix=\"g.sock\" mode=\"0600\" config=\"envoy\" cert=\"tls/s.pem\" "
                                           "key=\"tls/s.key\" client_ca=\"tls/ca.pem\" "
                                           "client_names=\"spiffe://a/b, envoy.example\tc\"/>\n")));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->grpc);
  EXPECT_EQ(c->grpc_unix, d / "g.sock");
  EXPECT_EQ(c->grpc_unix_mode, 0600u);
  EXPECT_EQ(c->grpc_tls_cert, d / "tls/s.pem");
  EXPECT_EQ(c->grpc_tls_key, d / "tls/s.key");
  EXPECT_EQ(c->grpc_tls_client_ca, d / "tls/ca.pem");
  EXPECT_EQ(c->grpc_tls_client_names, (std::vector<std::string>{"spiffe://a/b", "envoy.example", "c"}));
  // Defaults: cleartext TCP, mode 0660 for a socket.
  c = LoadSrvConfig(Write(d, ShortSrv("port=\"0\"", "<grpc unix=\"g.sock\" config=\"envoy\"/>\n")));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->grpc_unix_mode, 0660u);
  EXPECT_TRUE(c->grpc_tls_cert.empty());
}

TEST(SrvConfig, GrpcTransportErrorsNameTheAttribute) {
  const std::string head = "<frs>\n<map>m.xml</map>\n<store dir=\"d\"/>\n";
  ExpectError(head + "<grpc listen=\"127.0.0.1:1\" unix=\"/s\" config=\"e\"/>\n</frs>", "4",
              "<grpc> takes listen=\"host:port\" or unix=\"PATH\", not both");
  ExpectError(head + "<grpc unix=\"/s\" mode=\"0999\" config=\"e\"/>\n</frs>", "4",
              "<grpc mode> is the Unix socket's permissions in octal (0660), with unix=\"PATH\", not \"0999\"");
  ExpectError(head + "<grpc listen=\"127.0.0.1:1\" mode=\"0600\" config=\"e\"/>\n</frs>", "4",
              "<grpc mode> is the Unix socket's permissions in octal");
  ExpectError(head + "<grpc unix=\"/" + std::string(120, 'x') + "\" config=\"e\"/>\n</frs>", "4",
              "<grpc unix> must be the socket's path (at most 107 bytes)");
  ExpectError(head + "<grpc listen=\"127.0.0.1:1\" cert=\"/c\" config=\"e\"/>\n</frs>", "4",
              "<grpc cert> and <grpc key> go together");
  ExpectError(head + "<grpc listen=\"127.0.0.1:1\" client_ca=\"/ca\" config=\"e\"/>\n</frs>", "4",
              "<grpc client_ca> (a required client certificate) needs TLS");
  ExpectError(head + "<grpc listen=\"127.0.0.1:1\" cert=\"/c\" key=\"/k\" client_names=\"a\" config=\"e\"/>\n</frs>",
              "4", "<grpc client_names> lists the client certificate names allowed, and needs client_ca");
}

// A file frsd writes inside <grpc config> would be read as rate limit
// configuration, and each write of it would reload it (the watch): refused,
// naming the element; beside it (a sibling directory) is fine.
TEST(SrvConfig, NothingFrsdWritesLiesInsideTheGrpcConfigDirectory) {
  const std::string head = "<frs>\n<map>m.xml</map>\n";
  const std::string grpc = "<grpc listen=\"127.0.0.1:0\" config=\"rl\"/>\n";
  ExpectError(head + "<store dir=\"d\"/>\n<log file=\"rl/.frsd.log\"/>\n" + grpc + "</frs>", "4", "<log file> ");
  ExpectError(head + "<store dir=\"d\"/>\n<decisions file=\"./rl/sub/../dec.log\"/>\n" + grpc + "</frs>", "4",
              "<decisions file> ");
  ExpectError(head + "<store dir=\"rl\"/>\n" + grpc + "</frs>", "3", "<store dir> ");
  ExpectError(head + "<store dir=\"d\"/>\n<pidfile>rl/frsd.pid</pidfile>\n" + grpc + "</frs>", "4",
              "lies inside <grpc config>");
  ExpectError(head + "<store dir=\"d\"/>\n<grpc unix=\"rl/g.sock\" config=\"rl\"/>\n</frs>", "4", "<grpc unix> ");
  TempDir d;
  auto c = LoadSrvConfig(Write(d, head + "<store dir=\"rl2\"/>\n<log file=\"rl-logs/frsd.log\"/>\n" + grpc + "</frs>"));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  // Inside the store: frsd writes the store's files in its root, beside
  // the directory, and its statistics under stats/, refused there only.
  c = LoadSrvConfig(
      Write(d, head + "<store dir=\"data\"/>\n<grpc listen=\"127.0.0.1:0\" config=\"data/envoy\"/>\n</frs>"));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  c = LoadSrvConfig(
      Write(d, head + "<store dir=\"data\"/>\n<grpc listen=\"127.0.0.1:0\" config=\"data/stats/rl\"/>\n</frs>"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("data/stats/rl lies inside "), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("where frsd writes its statistics"), std::string::npos) << c.status().message();
  // Through a symbolic link to the directory, either way round.
  TempDir l;
  std::filesystem::create_directory(l / "rl");
  std::filesystem::create_directory_symlink("rl", l / "rl-link");
  c = LoadSrvConfig(Write(l, head + "<store dir=\"d\"/>\n<log file=\"rl-link/frsd.log\"/>\n" + grpc + "</frs>"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("lies inside <grpc config>"), std::string::npos) << c.status().message();
  c = LoadSrvConfig(Write(l, head + "<store dir=\"d\"/>\n<log file=\"rl/frsd.log\"/>\n" +
                                 "<grpc listen=\"127.0.0.1:0\" config=\"rl-link\"/>\n</frs>"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("lies inside <grpc config>"), std::string::npos) << c.status().message();
  // Reached from the directory through a link in it, as the loader reads
  // it (found from outside: a link to the log's directory reloaded five
  // times a second, each refused; one to the store read its files as YAML).
  TempDir r;
  std::filesystem::create_directories(r / "rl/team");
  std::filesystem::create_directories(r / "logs");
  std::filesystem::create_directories(r / "data");
  std::ofstream(r / "logs/frsd.log") << "";
  const std::string store_and_log = "<store dir=\"data\"/>\n<log file=\"logs/frsd.log\"/>\n";
  const struct {
    const char* target;  // relative to the link's directory
    const char* link;    // in <grpc config>
    bool dir;
    std::string elements;
    const char* said;
  } links[] = {
      // to the log's directory, down the tree
      {"../../logs", "team/l", true, store_and_log, "<log file> "},
      // to the store
      {"../data", "st", true, store_and_log, "<store dir> "},
      // to the log file itself
      {"../logs/frsd.log", "log.yaml", false, store_and_log, "is read as a file of <grpc config>"},
      // to a file frsd makes after this check (its pid file)
      {"../run/frsd.pid", "pid.yaml", false, "<store dir=\"data\"/>\n<pidfile>run/frsd.pid</pidfile>\n", "<pidfile> "},
      // to a file in the store
      {"../data/replica-parked", "parked.yaml", false, "<store dir=\"data\"/>\n",
       "holds replica-parked, which is read as a file"},
  };
  for (const auto& l : links) {
    const std::filesystem::path at = std::filesystem::path(r / "rl") / l.link;
    if (l.dir) std::filesystem::create_directory_symlink(l.target, at);
    else std::filesystem::create_symlink(l.target, at);
    c = LoadSrvConfig(Write(r, head + l.elements + grpc + "</frs>"));
    ASSERT_FALSE(c.ok()) << l.link;
    EXPECT_NE(c.status().message().find(l.said), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("(through "), std::string::npos) << c.status().message();
    std::filesystem::remove(at);
  }
  std::filesystem::create_directory_symlink("../logs-elsewhere", r / "rl/dangling");
  c = LoadSrvConfig(Write(r, head + "<store dir=\"data\"/>\n<log file=\"logs/frsd.log\"/>\n" + grpc + "</frs>"));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
}

TEST(SrvConfig, MissingFileIsAnError) {
  auto c = LoadSrvConfig("/nonexistent/srv.xml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("/nonexistent/srv.xml"), std::string::npos);
}

}  // namespace
}  // namespace frs
