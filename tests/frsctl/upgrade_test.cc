// frsctl upgrade: a store of format 4, made by frsd and frsctl 0.2.0
// (fixtures/format4, make.sh says how), is refused by this build naming the
// command; `frsctl upgrade` moves it to format 6 keeping every node (state,
// expiry, last use, route) and the daily statistics; a writer's unfinished
// write is read as its undo leaves it; and an upgrade killed at any instant
// leaves the old store or the new one whole.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir.h"
#include "ctl_runner.h"
#include "json_in.h"
#include "store/format.h"
#include "store/format4_reader.h"
#include "store/store_file.h"

namespace frs::ctl {
namespace {

namespace fs = std::filesystem;
using ctl_test::CtlRun;
using ctl_test::ReadFile;

const std::string kFixture = std::string(FIXTURES_DIR) + "/format4";

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < s.size()) {
    const size_t nl = s.find('\n', at);
    out.push_back(s.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return out;
}

class UpgradeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::copy_file(kFixture + "/map.xml", dir_ / "map.xml");
    std::ofstream(dir_ / "srv.xml")
        << "<frs>\n  <listen host=\"127.0.0.1\" port=\"0\"/><workers>1</workers>\n"
           "  <map>map.xml</map>\n  <store dir=\"data\" files=\"2\" keynodes=\"64\" "
           "chain=\"8\"/>\n  <timezone>UTC</timezone>\n  <pidfile>frsd.pid</pidfile>\n</frs>\n";
    Unpack(dir_ / "data");
  }

  static void Unpack(const std::string& to) {
    fs::create_directories(to);
    for (const char* f : {"frs.0.store", "frs.1.store", "stats.frs"}) {
      const std::string cmd = "gzip -dc '" + kFixture + "/" + f + ".gz' > '" + to + "/" + f + "'";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
  }

  CtlRun Ctl(const std::vector<std::string>& args) { return ctl_test::RunCtl(dir_.path(), dir_ / "srv.xml", args); }

  JsonValue Parse(const std::string& text) {
    Result<JsonValue> v = ParseJson(text);
    EXPECT_TRUE(v.ok()) << v.status().message() << " in: " << text;
    return v.ok() ? v.value() : JsonValue{};
  }

  // fp_lo -> the export line's fields an upgrade keeps.
  std::map<std::string, std::string> Export(const std::string& text) {
    std::map<std::string, std::string> out;
    for (const std::string& l : Lines(text)) {
      if (l.empty() || l.starts_with("{\"end\":")) continue;  // an export's last line counts its lines
      JsonValue v = Parse(l);
      std::string rules;
      for (const JsonValue& r : v.Find("rules")->items)
        rules += r.Find("algo")->text + ":" + r.Find("state")->text + " ";
      out[v.Find("fp_lo")->text] = std::to_string(static_cast<int64_t>(v.Find("biz")->number)) + " " +
                                   v.Find("key")->text + " expire " +
                                   std::to_string(static_cast<int64_t>(v.Find("expire_s")->number)) + " last " +
                                   std::to_string(static_cast<int64_t>(v.Find("last_access_s")->number)) + " route " +
                                   std::to_string(static_cast<int64_t>(v.Find("route_pos")->number)) + " " + rules;
    }
    return out;
  }

  // biz -> its days' request, allowed, denied and new-key counts.
  std::map<std::string, std::string> Days(const std::string& stat_json) {
    std::map<std::string, std::string> out;
    JsonValue v = Parse(stat_json);
    for (const JsonValue& b : v.Find("bizzes")->items) {
      std::string days;
      for (const JsonValue& d : b.Find("days")->items)
        for (const char* k : {"date", "requests", "allowed", "denied", "new_keys"}) {
          const JsonValue* f = d.Find(k);
          days += f->text.empty() ? std::to_string(static_cast<int64_t>(f->number)) + " " : f->text + " ";
        }
      out[b.Find("name")->text] = days;
    }
    return out;
  }

  // The upgraded store holds what 0.2.0 exported, node for node, and its
  // daily statistics.
  void ExpectTheFixture() {
    CtlRun r = Ctl({"export"});
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto want = Export(ReadFile(kFixture + "/export.jsonl"));
    ASSERT_EQ(want.size(), 72u);
    EXPECT_EQ(Export(r.out), want);
    // The daily statistics come over byte for byte. stat shows the days of
    // the last week counted back from today: the fixture's (2026-11-25) only
    // until 2026-12-02, then none, which is what it must say from then on.
    const std::string fixture_stats = dir_ / "fixture-stats.frs";
    const std::string unzip = "gzip -dc '" + kFixture + "/stats.frs.gz' > '" + fixture_stats + "'";
    ASSERT_EQ(std::system(unzip.c_str()), 0) << unzip;
    EXPECT_TRUE(ReadFile(dir_ / "data/stats.frs") == ReadFile(fixture_stats)) << "stats.frs changed";
    r = Ctl({"stat", "--json"});
    ASSERT_EQ(r.rc, 0) << r.err;
    constexpr int64_t kFixtureDay = 1795564800;  // 2026-11-25 00:00 UTC
    if (std::time(nullptr) < kFixtureDay + 8 * 86400) {
      EXPECT_EQ(Days(r.out), Days(ReadFile(kFixture + "/stat.json")));
    } else {
      for (const auto& [biz, days] : Days(r.out)) EXPECT_EQ(days, "") << biz;
    }
    r = Ctl({"verify"});
    EXPECT_EQ(r.rc, 0) << r.out << r.err;
  }

  // A node of the unpacked format-4 store's file 0 (a general one when
  // asked), where it starts in that file, and the file opened read-write.
  struct Located {
    NodeInfo node;
    uint64_t at = 0;  // the node's first byte in the file
    store::FileHeader header{};
    int fd = -1;
  };
  Located LocateInFile0(bool general) {
    Located l;
    Result<std::unique_ptr<Store>> old = store::OpenFormat4(dir_ / "data");
    EXPECT_TRUE(old.ok()) << old.status().message();
    if (!old.ok()) return l;
    EXPECT_TRUE(old.value()
                    ->ForEach(
                        Store::Filter{},
                        [&](const NodeInfo& n) {
      if (n.file == 0 && l.node.span == 0 && (!general || !n.compact)) l.node = n;
                        })
                    .ok());
    EXPECT_GT(l.node.span, 0u) << "the fixture has such a node in file 0";
    l.fd = ::open((dir_ / "data/frs.0.store").c_str(), O_RDWR);
    EXPECT_GE(l.fd, 0);
    EXPECT_EQ(::pread(l.fd, &l.header, sizeof l.header, 0), static_cast<ssize_t>(sizeof l.header));
    l.at = l.header.chains_offset + (uint64_t{l.node.keynode} * l.header.chain + l.node.slot) * kSlotBytes;
    return l;
  }

  testing::TempDir dir_;
};

TEST_F(UpgradeTest, AFormat4StoreIsRefusedNamingTheCommandThenUpgradedWhole) {
  CtlRun r = Ctl({"stat"});
  EXPECT_EQ(r.rc, 3);
  EXPECT_NE(r.err.find("format version 4, this build reads versions 5 and 6: run `frsctl upgrade`"), std::string::npos)
      << r.err;

  r = Ctl({"upgrade", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  JsonValue j = Parse(r.out);
  EXPECT_EQ(j.Find("format_from")->number, 4);
  EXPECT_EQ(j.Find("format_to")->number, 6);
  EXPECT_EQ(j.Find("nodes")->number, 72);
  EXPECT_TRUE(j.Find("srv_xml_matches")->boolean) << "the geometry is kept";
  EXPECT_EQ(store::FormatVersionOf(dir_ / "data/frs.0.store").value(), store::kFormatVersion);
  ExpectTheFixture();

  r = Ctl({"upgrade"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("format 6 already"), std::string::npos) << r.err;
}

// A store of format 5 (unkeyed placement: every store before format 6) is
// opened as it is; `frsctl upgrade` makes it a keyed store of format 6.
TEST_F(UpgradeTest, AFormat5StoreIsReadAsItIsAndUpgradedToAKeyedOne) {
  fs::remove_all(dir_ / "data");
  fs::create_directory(dir_ / "data");
  for (uint32_t i = 0; i < 2; ++i) {
    auto f = store::StoreFile::Open(dir_ / "data", i, StoreGeometry{2, 64, 8}, /*create=*/true, /*store_id=*/7,
                                    store::PlaceKey{});  // unkeyed: format 5
    ASSERT_TRUE(f.ok()) << f.status().message();
  }
  ASSERT_EQ(store::FormatVersionOf(dir_ / "data/frs.0.store").value(), 5u);
  CtlRun r = Ctl({"stat"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("placement unkeyed"), std::string::npos) << r.out;
  // Counts set in the unkeyed store (a short key, its own identity, and a
  // long one, its fingerprint's) are found where the keyed store puts them.
  const std::string long_key = "a-key-longer-than-eight-bytes";
  ASSERT_EQ(Ctl({"set", "fixed1", "u7", "3"}).rc, 0);
  ASSERT_EQ(Ctl({"set", "fixed1", long_key, "4"}).rc, 0);
  r = Ctl({"upgrade", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  JsonValue j = Parse(r.out);
  EXPECT_EQ(j.Find("format_from")->number, 5);
  EXPECT_EQ(j.Find("format_to")->number, 6);
  for (const char* f : {"data/frs.0.store", "data/frs.1.store"})
    EXPECT_EQ(store::FormatVersionOf(dir_ / f).value(), 6u);
  r = Ctl({"stat"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("6 (placement keyed)"), std::string::npos) << r.out;
  for (const auto& [key, count] : {std::pair<std::string, int>{"u7", 3}, {long_key, 4}}) {
    r = Ctl({"--json", "get", "fixed1", key});
    ASSERT_EQ(r.rc, 0) << key << ": " << r.err;
    EXPECT_EQ(Parse(r.out).Find("count")->number, count) << key << ": " << r.out;
  }
  r = Ctl({"verify"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
}

// A writer killed in the middle of a write left its journal open: the
// upgrade reads the chain as the writer's next locker would have restored
// it, not as the torn write left it.
TEST_F(UpgradeTest, AnUnfinishedWriteIsReadAsItsUndoLeavesIt) {
  Located v = LocateInFile0(/*general=*/true);
  ASSERT_GE(v.fd, 0);
  const NodeInfo& victim = v.node;
  const int fd = v.fd;
  const store::FileHeader& h = v.header;
  const uint64_t at = v.at;
  store::JournalRecord rec{};
  rec.keynode = victim.keynode;
  rec.slot = victim.slot + 1;  // the node's second slot: its state
  ASSERT_EQ(::pread(fd, rec.image, kSlotBytes, static_cast<off_t>(at + kSlotBytes)), kSlotBytes);
  // The torn write: the state's bytes half overwritten.
  const uint8_t torn[8] = {0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef};
  ASSERT_EQ(::pwrite(fd, torn, sizeof torn, static_cast<off_t>(at + kSlotBytes)), 8);
  // Its journal: writer entry 3, owned by a thread that is gone, active.
  store::WriterEntryHeader w{};
  w.owner = 0x7fff0001;
  w.active = 1;
  w.count = 1;
  const uint64_t entry = h.writers_offset + 3 * uint64_t{h.writer_entry_bytes};
  ASSERT_EQ(::pwrite(fd, &w, sizeof w, static_cast<off_t>(entry)), static_cast<ssize_t>(sizeof w));
  ASSERT_EQ(::pwrite(fd, &rec, sizeof rec, static_cast<off_t>(entry + sizeof w)), static_cast<ssize_t>(sizeof rec));
  ::close(fd);

  CtlRun r = Ctl({"upgrade"});
  ASSERT_EQ(r.rc, 0) << r.err;
  ExpectTheFixture();
}

// A node that format 4 already counted as damaged (its key as absent)
// cannot be repaired by this build: the upgrade leaves it behind and says
// so, and copies everything else.
TEST_F(UpgradeTest, ADamagedNodeIsLeftBehindAndNamed) {
  Located v = LocateInFile0(/*general=*/false);
  ASSERT_GE(v.fd, 0);
  const NodeInfo& victim = v.node;
  const uint8_t span_31 = 0x9F;  // form byte: span 31, out of range
  ASSERT_EQ(::pwrite(v.fd, &span_31, 1, static_cast<off_t>(v.at + offsetof(store::NodeHeader, form))), 1);
  ::close(v.fd);

  CtlRun r = Ctl({"upgrade", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  JsonValue j = Parse(r.out);
  EXPECT_EQ(j.Find("damaged_left")->number, 1);
  EXPECT_EQ(j.Find("nodes")->number, 71);
  r = Ctl({"export"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto want = Export(ReadFile(kFixture + "/export.jsonl"));
  char fp[17];
  std::snprintf(fp, sizeof fp, "%016llx", static_cast<unsigned long long>(victim.fp.lo));
  ASSERT_EQ(want.erase(fp), 1u) << fp;
  EXPECT_EQ(Export(r.out), want);
  EXPECT_EQ(Ctl({"verify"}).rc, 0);
}

TEST_F(UpgradeTest, AKillAtAnyInstantLeavesTheOldOrTheNewStoreWhole) {
  // The command alone, then the program the kills stop (its start included:
  // under the sanitizers most of its run). The kills fall in the program's
  // last stretch, where the command works, but for one at its start and one
  // long after its end.
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(Ctl({"upgrade"}).rc, 0);
  const auto command = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  fs::remove_all(dir_ / "data");
  for (const auto& e : fs::directory_iterator(dir_.path()))
    if (e.path().filename().string().rfind("data.grow", 0) == 0) fs::remove_all(e.path());
  Unpack(dir_ / "data");
  t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(ctl_test::RunCtlProgram(dir_.path(), dir_ / "srv.xml", {"upgrade"}).rc, 0);
  const auto took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  const auto lead = took > command * 2 ? took - command * 2 : std::chrono::microseconds(0);
  int old_whole = 0, new_whole = 0;
  constexpr int kKills = 12;
  for (int k = 0; k <= kKills; ++k) {
    SCOPED_TRACE("kill " + std::to_string(k));
    fs::remove_all(dir_ / "data");
    for (const auto& e : fs::directory_iterator(dir_.path()))
      if (e.path().filename().string().rfind("data.grow", 0) == 0) fs::remove_all(e.path());
    Unpack(dir_ / "data");
    const auto delay = k == 0        ? std::chrono::microseconds(0)
                       : k == kKills ? took * 4
                                     : lead + (took - lead) * k / kKills;
    ctl_test::RunCtlKilledAfter(dir_ / "srv.xml", {"upgrade"}, delay);
    Result<uint32_t> v = store::FormatVersionOf(dir_ / "data/frs.0.store");
    ASSERT_TRUE(v.ok()) << v.status().message();
    if (v.value() == store::kPreviousFormatVersion) {
      ++old_whole;
      // The old store, whole: upgrading it now gives the fixture.
      CtlRun r = Ctl({"upgrade"});
      ASSERT_EQ(r.rc, 0) << r.err;
    } else {
      ASSERT_EQ(v.value(), store::kFormatVersion);
      ++new_whole;
    }
    ExpectTheFixture();
    if (HasFatalFailure()) return;
  }
  std::printf("upgrade took %lld us; of %d kills, %d left the old store, %d the new\n",
              static_cast<long long>(took.count()), kKills + 1, old_whole, new_whole);
  EXPECT_GT(new_whole, 0);
}

}  // namespace
}  // namespace frs::ctl
