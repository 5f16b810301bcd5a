// The journal of the replica changes queued for a link that is down
// (server/replica_journal.h): it reads back as the state its steps leave,
// whatever step a kill cut short, a damaged one is refused naming its line,
// and it is taken as a spool is, but never while its writer lives.
#include "server/replica_journal.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/temp_dir.h"

namespace frs::server {
namespace {

constexpr std::string_view kStream = "127.0.0.1:8301/4242.1764547200000000000";
constexpr std::string_view kDigest = "0a1b2c3d";

Change Use(std::string_view key, int64_t at_ms) { return Change{Change::Kind::kAdd, 1, key, 7u, true, 1, at_ms}; }

std::string Text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Keys(const ReplicaSpoolLink& l) {
  std::vector<std::string> out;
  for (const Change& c : l.changes) out.emplace_back(c.key);
  return out;
}

TEST(ReplicaJournal, ReadsBackAsTheStateItsStepsLeave) {
  frs::testing::TempDir dir("frs-journal");
  ReplicaJournal j;
  ASSERT_TRUE(j.Start(dir.path(), kStream, kDigest).ok());
  ASSERT_TRUE(j.open());
  // Link 0 went down with batch 7 (two changes) in flight and one more
  // queued; link 1 with nothing queued.
  j.Link(0, "127.0.0.1:8302", 8, 2, 7, 400);
  for (const char* k : {"a", "b", "c"}) j.Queued(0, Use(k, 1));
  j.Link(1, "[::1]:8303", 1, 0, 0, 1);
  ASSERT_TRUE(j.Flush().ok());
  // Batch 7 acknowledged; "c" and "d" sent as batch 8; "e" queued; the
  // backlog full, the oldest ("c", in flight) dropped.
  j.Acked(0, 7);
  j.Queued(0, Use("d", 2));
  j.Sent(0, 8, 2);
  j.Queued(0, Use("e", 3));
  j.Dropped(0);
  j.Queued(1, Use("f", 4));
  ASSERT_TRUE(j.Flush().ok());
  const std::string path = j.path();
  Result<ReplicaSpool> s = DecodeReplicaSpool(Text(path));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->stream, kStream);
  EXPECT_EQ(s->digest, kDigest);
  ASSERT_EQ(s->links.size(), 2u);
  const ReplicaSpoolLink& a = s->links[0];
  EXPECT_EQ(a.name, "127.0.0.1:8302");
  EXPECT_EQ(Keys(a), (std::vector<std::string>{"d", "e"}));
  EXPECT_EQ(a.first_no, 403u);  // 400..402 gone: two acknowledged, one dropped
  EXPECT_EQ(a.inflight, 1u);    // batch 8 goes again as it is now: "d"
  EXPECT_EQ(a.inflight_seq, 8u);
  EXPECT_EQ(a.next_seq, 9u);
  EXPECT_EQ(a.changes[1].at_ms, 3);
  // A batch the full backlog emptied is acknowledged with nothing in it.
  EXPECT_TRUE(DecodeReplicaJournal(
                  "frs-replica-spool 2\nstream s\ndigest d\nlink 0 h:1 1 0 0 1\n+0 A 1 7 1 5 k\n>0 1 1\nx0\n<0 1\n")
                  .ok());
  EXPECT_EQ(a.changes[1].route_pos, 7u);
  EXPECT_EQ(s->links[1].name, "[::1]:8303");
  EXPECT_EQ(Keys(s->links[1]), (std::vector<std::string>{"f"}));

  // Link 1 delivered and up again: it ends, and the file reads without it.
  j.Sent(1, 1, 1);
  j.Acked(1, 1);
  j.Ended(1);
  ASSERT_TRUE(j.Flush().ok());
  s = DecodeReplicaSpool(Text(path));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->links.size(), 1u);
  EXPECT_EQ(s->Changes(), 2u);
  // Every link ended: the file goes.
  j.Remove();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(j.open());
}

TEST(ReplicaJournal, ALastLineCutByAKillIsDroppedAndADamagedOneNamed) {
  const std::string head = "frs-replica-spool 2\nstream s\ndigest 0a1b2c3d\nlink 0 h:1 1 0 0 1\n+0 A 1 7 1 5 k\n";
  // Cut anywhere in the last line: the state before it.
  const std::string last = ">0 1 1\n";
  for (size_t cut = 0; cut < last.size(); ++cut) {
    Result<ReplicaSpool> r = DecodeReplicaJournal(head + last.substr(0, cut));
    ASSERT_TRUE(r.ok()) << cut << ": " << r.status().ToString();
    EXPECT_EQ(r->links[0].inflight, 0u) << cut;
  }
  Result<ReplicaSpool> whole = DecodeReplicaJournal(head + last);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->links[0].inflight, 1u);
  // A link's state restated by a write cut short: its batch in flight no
  // more than the changes that made it to the file (a sender would read
  // past its queue).
  Result<ReplicaSpool> restated = DecodeReplicaJournal(
      "frs-replica-spool 2\nstream s\ndigest d\nlink 0 h:1 9 5 8 1\n+0 A 1 7 1 5 a\n+0 A 1 7 1 5 b\n+0 A 1 7");
  ASSERT_TRUE(restated.ok()) << restated.status().ToString();
  EXPECT_EQ(restated->links[0].changes.size(), 2u);
  EXPECT_EQ(restated->links[0].inflight, 2u);
  EXPECT_EQ(restated->links[0].inflight_seq, 8u);
  // A link's journal ended with young changes queued: none of it is read.
  Result<ReplicaSpool> ended = DecodeReplicaJournal(head + last + "-0\n");
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  EXPECT_TRUE(ended->links.empty());
  struct Case {
    std::string text, says;
  };
  const std::vector<Case> cases = {
      {head + "<0 2\n", "line 6: an acknowledgement of no batch in flight"},
      {head + ">0 1 2\n", "line 6: a batch sent that its link's state does not allow"},
      {head + "+1 A 1 7 1 5 k\n", "line 6: link 1 has no \"link\" line before"},
      {head + "-0 1\n", "line 6: expected \"-I\""},
      {head + "?0\n", "line 6: an unknown step"},
      {head + "+0 Q 1 7 1 5 k\n", "in the changes queued for link h:1"},
      {"frs-replica-spool 2\nstream a b\n", "line 2: expected \"stream NAME\""},
      {"frs-replica-spool 2\nstream s\ndigest d\nlink 0 h:1 1 1 1 1\n", "line 4: a link's numbers disagree"},
  };
  for (const Case& c : cases) {
    Result<ReplicaSpool> r = DecodeReplicaSpool(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().ToString();
  }
}

TEST(ReplicaJournal, AnOversizedFileIsWrittenAgainInItsPlaceWithOnlyWhatIsQueued) {
  frs::testing::TempDir dir("frs-journal");
  ReplicaJournal j;
  ASSERT_TRUE(j.Start(dir.path(), kStream, kDigest).ok());
  const std::string path = j.path();
  j.Link(0, "127.0.0.1:8302", 1, 0, 0, 1);
  // A long episode: 1,000 changes queued, sent and acknowledged, 2 left.
  std::vector<std::string> keys;
  for (int i = 0; i < 1002; ++i) keys.push_back("key:" + std::to_string(i));
  for (int i = 0; i < 1002; ++i) j.Queued(0, Use(keys[i], i));
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    j.Sent(0, seq, 100);
    j.Acked(0, seq);
  }
  ASSERT_TRUE(j.Flush().ok());
  const auto before = std::filesystem::file_size(path);
  EXPECT_FALSE(j.Oversized(2));  // under kRestartSlack: kept
  // What the replicator restates: the link's state now, its two changes.
  ASSERT_TRUE(j.Restart([&] {
                 j.Link(0, "127.0.0.1:8302", 11, 0, 0, 1001);
                 j.Queued(0, Use(keys[1000], 1000));
                 j.Queued(0, Use(keys[1001], 1001));
               }).ok());
  EXPECT_EQ(j.path(), path);  // in its own place
  EXPECT_LT(std::filesystem::file_size(path), before / 100);
  j.Queued(0, Use("new", 2000));
  ASSERT_TRUE(j.Flush().ok());
  Result<ReplicaSpool> s = DecodeReplicaSpool(Text(path));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->links.size(), 1u);
  EXPECT_EQ(Keys(s->links[0]), (std::vector<std::string>{"key:1000", "key:1001", "new"}));
  EXPECT_EQ(s->links[0].first_no, 1001u);
  EXPECT_EQ(s->links[0].next_seq, 11u);
  // Still locked by its writer: no taker gets it.
  std::vector<std::string> problems;
  EXPECT_TRUE(TakeReplicaSpools(dir.path(), 8, kDigest, &problems).empty());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(ReplicaJournal, IsTakenOnlyOnceItsWriterIsGoneAndGoesWhenNothingIsLeft) {
  frs::testing::TempDir dir("frs-journal");
  std::vector<std::string> problems;
  auto live = std::make_unique<ReplicaJournal>();
  ASSERT_TRUE(live->Start(dir.path(), kStream, kDigest).ok());
  live->Link(0, "127.0.0.1:8302", 1, 0, 0, 1);
  live->Queued(0, Use("k", 1));
  ASSERT_TRUE(live->Flush().ok());
  EXPECT_TRUE(TakeReplicaSpools(dir.path(), 8, kDigest, &problems).empty());  // its writer holds it
  const std::string path = live->path();
  live.reset();  // the writer killed: its lock goes, the file stays
  std::vector<TakenReplicaSpool> taken = TakeReplicaSpools(dir.path(), 8, kDigest, &problems);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].path, path);
  EXPECT_EQ(taken[0].spool.stream, kStream);  // delivered under its writer's stream
  EXPECT_TRUE(taken[0].spool.journal);
  EXPECT_EQ(taken[0].spool.Changes(), 1u);
  taken.clear();
  // A journal whose every change was delivered before the kill: removed.
  ReplicaJournal done;
  ASSERT_TRUE(done.Start(dir.path(), kStream, kDigest).ok());
  done.Link(0, "127.0.0.1:8302", 1, 0, 0, 1);
  ASSERT_TRUE(done.Flush().ok());
  const std::string empty = done.path();
  done.Close();
  taken = TakeReplicaSpools(dir.path(), 8, kDigest, &problems);
  EXPECT_EQ(taken.size(), 1u);  // the first one, again
  EXPECT_FALSE(std::filesystem::exists(empty));
  EXPECT_TRUE(problems.empty()) << problems[0];
}

}  // namespace
}  // namespace frs::server
