// The handoff spool's records: whole or not there. A tail a full disk or a
// kill cut is cut away before anything is appended; a damaged record before
// the end stops the run; fields cannot hold a separator.
#include "handoff_spool.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/files.h"
#include "common/small_disk.h"
#include "common/temp_dir.h"

namespace frs::ctl {
namespace {

using frs::testing::ReadFile;

std::vector<std::string> Payloads(const std::vector<SpoolRecord>& recs) {
  std::vector<std::string> out;
  for (const SpoolRecord& r : recs) out.push_back(r.payload);
  return out;
}

void Spill(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::app);
  f << bytes;
}

TEST(HandoffSpool, ATornTailIsCutBeforeAnythingIsAppended) {
  testing::TempDir d;
  const std::string path = d / "handoff.spool";
  {
    HandoffSpool s;
    std::vector<SpoolRecord> recs;
    std::string note;
    ASSERT_TRUE(s.Open(path, &recs, &note).ok());
    EXPECT_TRUE(recs.empty());
    ASSERT_TRUE(s.Append({"N 1 r d {\"a\":1}", "E 1"}).ok());
  }
  const std::string whole = ReadFile(path);
  // A record cut in its JSON (a full disk), and one whose checksum does not
  // match its bytes (a page that did not reach the disk), each at the end.
  for (const std::string& torn : {std::string("N 2 r d {\"b\":"), HandoffSpool::Record("A 1").replace(0, 1, "E")}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << whole;
    Spill(path, torn);
    HandoffSpool s;
    std::vector<SpoolRecord> recs;
    std::string note;
    ASSERT_TRUE(s.Open(path, &recs, &note).ok());
    EXPECT_EQ(Payloads(recs), (std::vector<std::string>{"N 1 r d {\"a\":1}", "E 1"}));
    EXPECT_NE(note.find("cut " + std::to_string(torn.size()) + " byte(s)"), std::string::npos) << note;
    EXPECT_EQ(ReadFile(path), whole);
    // The next mark is a record of its own, not glued to the cut line.
    ASSERT_TRUE(s.Append({"A 1"}).ok());
    HandoffSpool again;
    std::vector<SpoolRecord> more;
    std::string none;
    s = HandoffSpool();
    ASSERT_TRUE(again.Open(path, &more, &none).ok());
    EXPECT_EQ(Payloads(more), (std::vector<std::string>{"N 1 r d {\"a\":1}", "E 1", "A 1"}));
    EXPECT_EQ(none, "");
  }
}

TEST(HandoffSpool, ADamagedRecordBeforeTheEndStopsTheRunAndChangesNothing) {
  testing::TempDir d;
  const std::string path = d / "handoff.spool";
  std::string text = HandoffSpool::Record("N 1 r d {}") + HandoffSpool::Record("E 1");
  text[2] = '7';  // the first record's id, under its checksum
  std::ofstream(path, std::ios::binary) << text;
  HandoffSpool s;
  std::vector<SpoolRecord> recs;
  std::string note;
  Status st = s.Open(path, &recs, &note);
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_NE(st.message().find(path + ":1: a damaged record"), std::string::npos) << st.message();
  EXPECT_EQ(ReadFile(path), text);
}

TEST(HandoffSpool, LinesOfAnOlderFrsctlAreReadAsTheyWere) {
  testing::TempDir d;
  const std::string path = d / "handoff.spool";
  // An older frsctl's run, carried on by this one.
  std::ofstream(path, std::ios::binary) << "N 1 r d {}\nE 1\n" << HandoffSpool::Record("A 1");
  HandoffSpool s;
  std::vector<SpoolRecord> recs;
  std::string note;
  ASSERT_TRUE(s.Open(path, &recs, &note).ok());
  EXPECT_EQ(Payloads(recs), (std::vector<std::string>{"N 1 r d {}", "E 1", "A 1"}));
  EXPECT_FALSE(recs[0].checked);
  EXPECT_TRUE(recs[2].checked);
}

TEST(HandoffSpool, ALineWithoutItsChecksumAfterOneWithIsDamage) {
  // It was read as an older frsctl's line, its payload taken as it stood.
  testing::TempDir d;
  const std::string path = d / "handoff.spool";
  std::string damaged = HandoffSpool::Record("E 1");
  damaged[damaged.size() - 18] = 'x';  // the space before '#'
  const std::string text = HandoffSpool::Record("N 1 r d {}") + damaged + HandoffSpool::Record("A 1");
  std::ofstream(path, std::ios::binary) << text;
  std::vector<SpoolRecord> recs;
  std::string note;
  {
    HandoffSpool s;
    const Status st = s.Open(path, &recs, &note);
    EXPECT_EQ(st.code(), Status::Code::kCorruption);
    EXPECT_NE(st.message().find(path + ":2: a damaged record (its checksum is gone)"), std::string::npos)
        << st.message();
    EXPECT_EQ(ReadFile(path), text);
  }
  // The first record so damaged, before any whole one: it ends as ours
  // but for that byte, which no older frsctl's line does.
  std::string first = HandoffSpool::Record("N 1 r d {}");
  first[first.size() - 5] = 'z';
  std::ofstream(path, std::ios::binary | std::ios::trunc) << first << HandoffSpool::Record("E 1");
  {
    HandoffSpool s;
    const Status st = s.Open(path, &recs, &note);
    EXPECT_EQ(st.code(), Status::Code::kCorruption);
    EXPECT_NE(st.message().find(path + ":1: a damaged record (its checksum is gone)"), std::string::npos)
        << st.message();
  }
  // Or lost a byte of its checksum, or gained one.
  for (const int change : {-1, +1}) {
    std::string shifted = HandoffSpool::Record("N 1 r d {}");
    if (change < 0) shifted.erase(shifted.size() - 6, 1);
    else shifted.insert(shifted.size() - 6, "a");
    std::ofstream(path, std::ios::binary | std::ios::trunc) << shifted << HandoffSpool::Record("E 1");
    HandoffSpool s;
    const Status st = s.Open(path, &recs, &note);
    EXPECT_EQ(st.code(), Status::Code::kCorruption) << change;
    EXPECT_NE(st.message().find(path + ":1: a damaged record (its checksum is gone)"), std::string::npos)
        << st.message();
  }
  // At the end it is a torn tail, cut as one.
  std::ofstream(path, std::ios::binary | std::ios::trunc) << HandoffSpool::Record("N 1 r d {}") << damaged;
  HandoffSpool again;
  ASSERT_TRUE(again.Open(path, &recs, &note).ok());
  EXPECT_EQ(Payloads(recs), (std::vector<std::string>{"N 1 r d {}"}));
  EXPECT_NE(note.find("cut " + std::to_string(damaged.size()) + " byte(s)"), std::string::npos) << note;
}

TEST(HandoffSpool, ALinkInItsPlaceIsNeverFollowed) {
  // frsctl runs as root: a link there would have it append to, or make,
  // the file the link leads to.
  testing::TempDir d;
  const std::string path = d / "handoff.spool", victim = d / "victim";
  std::ofstream(victim) << "mine\n";
  ::symlink(victim.c_str(), path.c_str());
  HandoffSpool s;
  std::vector<SpoolRecord> recs;
  std::string note;
  const Status st = s.Open(path, &recs, &note);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("symbolic link"), std::string::npos) << st.message();
  EXPECT_EQ(ReadFile(victim), "mine\n");
  EXPECT_EQ(ReadFile(victim), "mine\n");
}

TEST(HandoffSpool, FieldsCannotHoldASeparator) {
  for (const std::string& f :
       std::vector<std::string>{"127.0.0.1:8301 /ab/1", "a#b%c\td\ne", std::string("x\x7fy\x01", 4), "plain:1/2"}) {
    const std::string enc = EncodeField(f);
    EXPECT_EQ(enc.find_first_of(" #\t\n"), std::string::npos) << enc;
    std::string back;
    ASSERT_TRUE(DecodeField(enc, &back)) << enc;
    EXPECT_EQ(back, f);
  }
  EXPECT_EQ(EncodeField("127.0.0.1:8301 "), "127.0.0.1:8301%20");
  std::string out;
  EXPECT_FALSE(DecodeField("a%2", &out));
  EXPECT_FALSE(DecodeField("a%zz", &out));
}

// A spool opened on a 64 KB tmpfs (root only: CI runs as root).
class SmallDiskSpool : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!disk_.mounted()) GTEST_SKIP() << "needs root to mount a small tmpfs (CI runs as root)";
    std::vector<SpoolRecord> recs;
    std::string note;
    ASSERT_TRUE(s.Open(path, &recs, &note).ok());
  }
  void Fill(size_t bytes) { std::ofstream(d / "disk/filler", std::ios::binary) << std::string(bytes, 'x'); }

  testing::TempDir d;
  testing::SmallDisk disk_{d / "disk", "64k"};
  const std::string path = d / "disk/handoff.spool";
  HandoffSpool s;
};

// Reservations add up: room set aside for a later step is not handed out
// again to the next one (each used to start at the end of the file).
TEST_F(SmallDiskSpool, ReservationsAddUpUntilAppendsUseThem) {
  ASSERT_TRUE(s.Reserve(40 * 1024).ok());
  EXPECT_FALSE(s.Reserve(40 * 1024).ok()) << "two reservations of 40 KB fit in 64 KB";
  // What the first set aside is there for its appends, whatever fills the disk.
  Fill(64 * 1024);
  EXPECT_TRUE(s.Append({std::string(30 * 1024, 'n')}).ok());
}

// On a disk with no room left, Reserve says so before anything is written,
// and a write that fails leaves no torn record behind.
TEST_F(SmallDiskSpool, AFullDiskRefusesTheReservationAndLeavesNoTornRecord) {
  ASSERT_TRUE(s.Append({"N 1 r d {}"}).ok());
  const std::string before = ReadFile(path);
  Fill(60 * 1024);
  Status st = s.Reserve(64 * 1024);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no room for 65536 bytes of handoff records in " + path), std::string::npos)
      << st.message();
  st = s.Append({std::string(32 * 1024, 'z')});
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(ReadFile(path), before);
}

}  // namespace
}  // namespace frs::ctl
