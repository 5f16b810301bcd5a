// The replica changes kept aside for a biz the map has not yet
// (server/replica_park.h): each biz's changes of a batch are one record,
// taken when the map has that biz and kept otherwise, a refused apply keeps
// its record and every later one, a damaged tail is dropped and said, a
// record kept a day in vain goes, and the file is bounded.
#include "server/replica_park.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/temp_dir.h"

namespace frs::server {
namespace {

constexpr int64_t kParkNow = 1764547200;

std::vector<Change> Batch() {
  std::vector<Change> b;
  b.push_back(Change{Change::Kind::kAdd, 3, "user:1", 11u, true, 1, kParkNow * 1000});
  b.push_back(Change{Change::Kind::kAdd, 4, "user:2", 12u, true, 2, kParkNow * 1000 + 1});
  b.push_back(Change{Change::Kind::kAdd, 3, std::string_view("a b\n%", 6), 13u, true, 4, kParkNow * 1000 + 2});
  b.push_back(Change{Change::Kind::kAdd, 1, "known", 14u, true, 1, kParkNow * 1000 + 3});
  return b;
}

// ParkChanges under the file's lock, as a worker keeps a batch's changes
// aside; its count of what it kept checked by the caller.
Status Park(const std::string& path, uint32_t biz, std::string_view stream, uint64_t seq, const std::vector<Change>& b,
            int64_t now, size_t* kept = nullptr) {
  size_t k = 0;
  auto fd = LockParked(path);
  if (!fd.ok()) return fd.status();
  Status s = ParkChanges(*fd, path, biz, stream, seq, b, now, &k);
  if (kept != nullptr) *kept = k;
  return s;
}

std::string Problems(const ParkTaken& t) {
  std::string all;
  for (const std::string& p : t.problems) all += p + "\n";
  return all;
}

struct Seen {
  uint32_t biz;
  uint64_t seq;
  std::string stream;
  std::vector<std::string> keys;
  std::vector<int64_t> n;
  std::vector<std::string> nodes;
};

struct Taker {
  std::vector<uint32_t> known;
  std::vector<Seen> seen;
  Result<bool> answer = true;
  Result<ParkTaken> Take(const std::string& path, int64_t now = kParkNow) {
    return TakeParked(
        path, [&](uint32_t b) { return std::find(known.begin(), known.end(), b) != known.end(); },
        [&](const ParkedBatch& b) {
      Seen s{b.biz, b.seq, b.stream, {}, {}, b.nodes};
      for (const Change& c : b.changes) {
        s.keys.emplace_back(c.key);
        s.n.push_back(c.n);
      }
      seen.push_back(s);
      return answer;
        },
        now);
  }
};

// A take of records in a text (a snapshot's), what is left appended to the file.
Result<ParkTaken> TakeText(Taker& t, std::string_view text, const std::string& path, std::string_view from = "peer",
                           int64_t now = kParkNow) {
  return TakeParkedRecords(
      text, from, path, [&](uint32_t b) { return std::find(t.known.begin(), t.known.end(), b) != t.known.end(); },
      [&](const ParkedBatch& b) {
    Seen s{b.biz, b.seq, b.stream, {}, {}, b.nodes};
    for (const Change& c : b.changes) s.keys.emplace_back(c.key);
    t.seen.push_back(s);
    return t.answer;
      },
      now);
}

// Each test's file, in a directory of its own.
class ReplicaPark : public ::testing::Test {
 protected:
  frs::testing::TempDir dir;
  const std::string path = dir / "replica-parked";
};

TEST_F(ReplicaPark, EachBizIsTakenOnceTheMapHasIt) {
  const std::vector<Change> b = Batch();
  ASSERT_TRUE(Park(path, 3, "127.0.0.1:8301/77.1", 5, b, kParkNow).ok());
  ASSERT_TRUE(Park(path, 4, "127.0.0.1:8301/77.1", 5, b, kParkNow).ok());
  ASSERT_TRUE(Park(path, 9, "127.0.0.1:8301/77.1", 5, b, kParkNow).ok());  // none of it: nothing written
  Taker t;
  t.known = {3};
  auto taken = t.Take(path);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(taken->applied, 2u);
  EXPECT_EQ(taken->kept, 1u);
  EXPECT_EQ(taken->bizzes, std::vector<uint32_t>{3});
  ASSERT_EQ(t.seen.size(), 1u);
  EXPECT_EQ(t.seen[0].biz, 3u);
  EXPECT_EQ(t.seen[0].seq, 5u);
  EXPECT_EQ(t.seen[0].stream, "127.0.0.1:8301/77.1");
  EXPECT_EQ(t.seen[0].keys, (std::vector<std::string>{"user:1", std::string("a b\n%", 6)}));
  EXPECT_EQ(t.seen[0].n, (std::vector<int64_t>{1, 4}));
  ASSERT_TRUE(std::filesystem::exists(path));
  // Taken again with the same map: nothing more.
  t.seen.clear();
  taken = t.Take(path);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->applied, 0u);
  EXPECT_TRUE(t.seen.empty());
  // The next reload brings biz 4: its record goes, and the file with it.
  t.known = {3, 4};
  taken = t.Take(path);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->applied, 1u);
  ASSERT_EQ(t.seen.size(), 1u);
  EXPECT_EQ(t.seen[0].keys, std::vector<std::string>{"user:2"});
  EXPECT_FALSE(std::filesystem::exists(path));
  // A record after the file went starts a new one.
  ASSERT_TRUE(Park(path, 4, "s", 6, b, kParkNow).ok());
  t.seen.clear();
  taken = t.Take(path);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->applied, 1u);
}

TEST_F(ReplicaPark, ARefusedApplyHoldsBackItsStreamOnlyAndANeverApplyingOneGoes) {
  const std::vector<Change> b = Batch();
  ASSERT_TRUE(Park(path, 3, "s", 1, b, kParkNow).ok());
  ASSERT_TRUE(Park(path, 4, "t", 1, b, kParkNow).ok());
  ASSERT_TRUE(Park(path, 3, "s", 2, b, kParkNow).ok());
  Taker t;
  t.known = {3, 4};
  t.answer = Status::Unavailable("the store is full");
  auto taken = t.Take(path);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->applied, 0u);
  EXPECT_EQ(taken->held, 5u);  // their bizzes known: held back, not waiting for them
  EXPECT_EQ(taken->kept, 0u);
  // Stream s's seq 2 not tried (its receipt would pass seq 1's); t's was.
  ASSERT_EQ(t.seen.size(), 2u);
  EXPECT_EQ(t.seen[1].biz, 4u);
  EXPECT_NE(Problems(*taken).find("the store is full"), std::string::npos) << Problems(*taken);
  t.answer = true;
  t.seen.clear();
  taken = t.Take(path);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->applied, 5u);
  ASSERT_EQ(t.seen.size(), 3u);
  EXPECT_EQ(t.seen[0].seq, 1u);
  EXPECT_EQ(t.seen[2].seq, 2u);
  EXPECT_FALSE(std::filesystem::exists(path));
  // One its store refuses as never to be applied goes, and is said; one
  // applied before counts as such.
  ASSERT_TRUE(Park(path, 3, "s", 3, b, kParkNow).ok());
  ASSERT_TRUE(Park(path, 4, "t", 2, b, kParkNow).ok());
  t.answer = Status::InvalidArgument("change 1: bad key");
  taken = t.Take(path);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->dropped, 3u);
  EXPECT_NE(Problems(*taken).find("never applies"), std::string::npos) << Problems(*taken);
  EXPECT_FALSE(std::filesystem::exists(path));
  ASSERT_TRUE(Park(path, 4, "t", 2, b, kParkNow).ok());
  t.answer = false;
  taken = t.Take(path);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->applied, 0u);
  EXPECT_EQ(taken->duplicates, 1u);
}

TEST_F(ReplicaPark, ASetAnEraseOrAResetIsNotKept) {
  std::vector<Change> b = Batch();
  b.push_back(Change{Change::Kind::kSet, 3, "user:1", 11u, true, 0, kParkNow * 1000 + 4});
  b.push_back(Change{Change::Kind::kErase, 3, "user:2", 12u, true, 0, kParkNow * 1000 + 5});
  b.push_back(Change{Change::Kind::kResetBiz, 3, {}, 0, false, 0, kParkNow * 1000 + 6});
  size_t kept = 0;
  ASSERT_TRUE(Park(path, 3, "s", 1, b, kParkNow, &kept).ok());
  EXPECT_EQ(kept, 2u);
  Taker t;
  t.known = {3};
  auto taken = t.Take(path);
  ASSERT_TRUE(taken.ok());
  ASSERT_EQ(t.seen.size(), 1u);
  EXPECT_EQ(t.seen[0].keys, (std::vector<std::string>{"user:1", std::string("a b\n%", 6)}));
}

TEST_F(ReplicaPark, ARecordCutShortByItsWritersDeathLosesNoOther) {
  ASSERT_TRUE(Park(path, 3, "s", 1, Batch(), kParkNow).ok());
  {
    // Cut after a whole line: one of its two.
    std::ofstream f(path, std::ios::app);
    f << "batch 3 2 " << kParkNow << " 2 s\nA 3 - 1 1764547200000 cut\n";
  }
  ASSERT_TRUE(Park(path, 3, "s", 3, Batch(), kParkNow).ok());
  {
    // Cut within a line.
    std::ofstream f(path, std::ios::app);
    f << "batch 3 4 " << kParkNow << " 1 s\nA 3 - 1 17645";
  }
  ASSERT_TRUE(Park(path, 3, "s", 5, Batch(), kParkNow).ok());
  {
    // Cut within its last line's key, which the next writer's separating
    // line end completes: "user:1" of "user:11" read whole was applied as
    // another key (found from outside); its end line is missing.
    std::ofstream f(path, std::ios::app);
    f << "batch 3 6 " << kParkNow << " 1 s\nA 3 11 1 1764547200000 user:1";
  }
  ASSERT_TRUE(Park(path, 3, "s", 7, Batch(), kParkNow).ok());
  Taker t;
  t.known = {3};
  auto taken = t.Take(path);
  ASSERT_TRUE(taken.ok());
  ASSERT_EQ(t.seen.size(), 4u);
  EXPECT_EQ(t.seen[0].seq, 1u);
  EXPECT_EQ(t.seen[1].seq, 3u);
  EXPECT_EQ(t.seen[2].seq, 5u);
  EXPECT_EQ(t.seen[3].seq, 7u);
  EXPECT_NE(Problems(*taken).find("no whole record"), std::string::npos) << Problems(*taken);
  EXPECT_FALSE(std::filesystem::exists(path));
  // A file that is not one is read for records all the same, and said.
  {
    std::ofstream f(path);
    f << "something else\n";
  }
  taken = t.Take(path);
  ASSERT_TRUE(taken.ok());
  EXPECT_NE(Problems(*taken).find("does not start with"), std::string::npos) << Problems(*taken);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(ReplicaPark, ARecordHoldingAnotherBizsChangeOrASetIsDropped) {
  // Found from outside: a record of biz 3 whose line named biz 1 counted
  // on biz 1's node once biz 3 came, beside biz 1's own uses. Written by
  // hand, as such a record can only be.
  ASSERT_TRUE(Park(path, 3, "s", 1, Batch(), kParkNow).ok());
  {
    std::ofstream f(path, std::ios::app);
    f << "batch 3 2 " << kParkNow << " 1 s\nA 1 - 1 1764547200000 other\nend\n";
    f << "batch 3 3 " << kParkNow << " 1 s\nS 3 - 1 1764547200000 set\nend\n";
  }
  ASSERT_TRUE(Park(path, 3, "s", 4, Batch(), kParkNow).ok());
  Taker t;
  t.known = {1, 3};
  auto taken = t.Take(path);
  ASSERT_TRUE(taken.ok());
  ASSERT_EQ(t.seen.size(), 2u);
  EXPECT_EQ(t.seen[0].seq, 1u);
  EXPECT_EQ(t.seen[1].seq, 4u);
  EXPECT_EQ(taken->applied, 4u);
  EXPECT_NE(Problems(*taken).find("no whole record frsd wrote"), std::string::npos) << Problems(*taken);
}

TEST_F(ReplicaPark, ARecordADayOldWhoseBizNeverCameIsDropped) {
  ASSERT_TRUE(Park(path, 3, "s", 1, Batch(), kParkNow - kMaxParkedSeconds - 1).ok());
  ASSERT_TRUE(Park(path, 4, "s", 1, Batch(), kParkNow - 10).ok());
  Taker t;
  auto taken = t.Take(path);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->dropped, 2u);
  EXPECT_EQ(taken->kept, 1u);
  EXPECT_TRUE(t.seen.empty());
  t.known = {4};
  taken = t.Take(path);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->applied, 1u);
}

TEST_F(ReplicaPark, TheFileIsBoundedAndAStreamWithASpaceIsRefused) {
  EXPECT_EQ(Park(path, 3, "a b", 1, Batch(), kParkNow).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(std::filesystem::file_size(path), 0u);  // made by its lock, nothing written
  ASSERT_TRUE(Park(path, 3, "s", 1, Batch(), kParkNow).ok());
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(kMaxParkedBytes)), 0);
  const Status full = Park(path, 3, "s", 2, Batch(), kParkNow);
  EXPECT_EQ(full.code(), Status::Code::kIOError);
  EXPECT_NE(full.message().find("at most"), std::string::npos) << full.message();
  EXPECT_EQ(std::filesystem::file_size(path), kMaxParkedBytes);
}

TEST_F(ReplicaPark, ALinkInItsPlaceIsNeverFollowed) {
  // Found from outside: a root frsd appended the records (keys its clients
  // chose) to the file a link there led to, and made one for a dangling
  // link.
  const std::string victim = dir / "victim", made = dir / "made";
  {
    std::ofstream f(victim);
    f << "mine\n";
  }
  for (const std::string& target : {victim, made}) {
    std::filesystem::remove(path);
    std::filesystem::create_symlink(target, path);
    const Status s = Park(path, 3, "s", 1, Batch(), kParkNow);
    EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
    EXPECT_NE(s.message().find("symbolic link"), std::string::npos) << s.message();
    Taker t;
    t.known = {3};
    EXPECT_FALSE(t.Take(path).ok());
  }
  EXPECT_EQ(std::filesystem::file_size(victim), 5u);
  EXPECT_FALSE(std::filesystem::exists(made));
  // Nor a file frsd did not write, under a second name of another file or
  // not (found from outside: records were appended to a file that was not
  // one, through a hard link).
  std::filesystem::remove(path);
  std::filesystem::create_hard_link(victim, path);
  Status s = Park(path, 3, "s", 1, Batch(), kParkNow);
  EXPECT_NE(s.message().find("not a file frsd wrote"), std::string::npos) << s.ToString();
  EXPECT_EQ(std::filesystem::file_size(victim), 5u);
  std::filesystem::remove(path);
  std::filesystem::copy_file(victim, path);
  s = Park(path, 3, "s", 1, Batch(), kParkNow);
  EXPECT_NE(s.message().find("not a file frsd wrote"), std::string::npos) << s.ToString();
  EXPECT_EQ(std::filesystem::file_size(path), 5u);
  EXPECT_EQ(std::filesystem::file_size(victim), 5u);
}

TEST_F(ReplicaPark, AnEmptyFileIsNoRecordAndGoesUnsaid) {
  // Its first writer stopped before the first byte (a full disk): said as
  // damaged at every take, it would never go.
  { std::ofstream(path.c_str()); }
  ASSERT_TRUE(std::filesystem::exists(path));
  Taker t;
  auto taken = t.Take(path);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_TRUE(taken->problems.empty()) << Problems(*taken);
  EXPECT_EQ(taken->applied + taken->dropped + taken->kept + taken->held, 0u);
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace frs::server

namespace frs::server {
namespace {

// A snapshot's nodes of a biz the map lacks are one record, merged under
// its receipt once the biz comes; a snapshot carries the change records of
// the asker's routes only, and what the asker cannot apply yet is kept
// aside in its own file, in order, for its later takes.
TEST_F(ReplicaPark, NodesAreKeptForTheirBizAndChangeRecordsCarriedByRoute) {
  const std::string n1 = "{\"biz\":5,\"key\":\"a\"}", n2 = "{\"biz\":5,\"key\":\"b\"}";
  {
    auto fd = LockParked(path);
    ASSERT_TRUE(fd.ok());
    const std::string_view lines[] = {n1, n2};
    ASSERT_TRUE(ParkNodes(*fd, path, 5, "snap/x/y/1/0/left/5", lines, kParkNow).ok());
    const std::string_view bad[] = {"not json"};
    EXPECT_FALSE(ParkNodes(*fd, path, 5, "snap/x/y/1/1/left/5", bad, kParkNow).ok());
    EXPECT_FALSE(ParkNodes(*fd, path, 5, "a receipt", lines, kParkNow).ok());
  }
  ASSERT_TRUE(Park(path, 3, "s1", 4, Batch(), kParkNow).ok());
  ASSERT_TRUE(Park(path, 4, "s1", 4, Batch(), kParkNow).ok());

  // Carried: the change records, each with the changes wanted (not the
  // nodes: the asker's snapshot is this store's nodes already).
  auto carried = ParkedRecordsFor(path, [](const Change& c) { return c.key != "user:2"; });
  ASSERT_TRUE(carried.ok()) << carried.status().ToString();
  EXPECT_EQ(carried->find("nodes "), std::string::npos) << *carried;
  EXPECT_EQ(carried->find("batch 4 "), std::string::npos) << *carried;  // its one change not wanted
  EXPECT_NE(carried->find("batch 3 4 "), std::string::npos) << *carried;

  // An asker whose map has neither biz keeps them in its own file, and
  // applies them at the take after the reload that brings biz 3.
  const std::string theirs = dir / "asker-parked";
  Taker asker;
  auto taken = TakeText(asker, *carried, theirs);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(taken->kept, 2u);
  EXPECT_TRUE(asker.seen.empty());
  asker.known = {3};
  taken = asker.Take(theirs);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->applied, 2u);
  ASSERT_EQ(asker.seen.size(), 1u);
  EXPECT_EQ(asker.seen[0].seq, 4u);
  // Named by the shard that carried it: another shard's records of the
  // same sender's stream have seqs of their own link, and are applied
  // under a receipt of their own.
  EXPECT_EQ(asker.seen[0].stream, "peer>s1");
  EXPECT_EQ(asker.seen[0].keys, (std::vector<std::string>{"user:1", std::string("a b\n%", 6)}));
  EXPECT_FALSE(std::filesystem::exists(theirs));

  // Here, the node record waits for biz 5, then goes to the merge whole.
  Taker t;
  t.known = {3, 4};
  taken = t.Take(path);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->kept, 2u);  // the two nodes
  t.seen.clear();
  t.known = {5};
  taken = t.Take(path);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(taken->applied, 2u);
  ASSERT_EQ(t.seen.size(), 1u);
  EXPECT_EQ(t.seen[0].stream, "snap/x/y/1/0/left/5");
  EXPECT_EQ(t.seen[0].nodes, (std::vector<std::string>{n1, n2}));
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace frs::server
