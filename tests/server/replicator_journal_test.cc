// A Replicator's journal against its memory (server/replicator.h,
// server/replica_journal.h): driven through a link's going down, changes
// answered alone, its return with changes queued while its first batch was
// in flight, and its end, the journal on disk reads back after each step as
// the spool the replicator would write, and goes once nothing is left.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/temp_dir.h"
#include "replica_peer.h"
#include "server/clock_util.h"
#include "server/event_loop.h"
#include "server/replica_journal.h"
#include "server/replicator.h"

namespace frs::server {
namespace {

using Peer = frs::testing::ReplicaPeer;

class ReplicatorJournal : public frs::testing::ReplicatorFixture {
 protected:
  void SetUp() override {
    Open([this](ReplicaOptions& o) { o.journal_dir = dir_.path(); });
  }

  // A use of a new key: every route's other holder is the peer.
  void Use() {
    keys_.push_back("key:" + std::to_string(keys_.size()));
    repl_->OnChange(Change{Change::Kind::kAdd, 1, keys_.back(), 0, false, 1, UnixMs()});
    repl_->FlushJournal();  // as the worker does before it answers
  }

  void Turn(int64_t now_ns) { ReplicatorFixture::Turn(now_ns, 50); }

  std::vector<std::string> Journals() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_.path()))
      if (e.path().filename().string().starts_with("replica-spool.")) out.push_back(e.path());
    return out;
  }

  // The journal on disk reads back as the replicator's own spool.
  void ExpectJournalIsMemory(const char* when) {
    SCOPED_TRACE(when);
    const std::vector<std::string> files = Journals();
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(files[0], repl_->journal_path());
    std::ifstream in(files[0]);
    std::stringstream ss;
    ss << in.rdbuf();
    Result<ReplicaSpool> disk = DecodeReplicaSpool(ss.str());
    ASSERT_TRUE(disk.ok()) << disk.status().ToString();
    const ReplicaSpool mem = repl_->Spool();
    EXPECT_EQ(disk->stream, mem.stream);
    ASSERT_EQ(disk->links.size(), mem.links.size());
    for (size_t i = 0; i < mem.links.size(); ++i) {
      const ReplicaSpoolLink &d = disk->links[i], &m = mem.links[i];
      EXPECT_EQ(d.name, m.name);
      EXPECT_EQ(d.next_seq, m.next_seq);
      EXPECT_EQ(d.inflight, m.inflight);
      EXPECT_EQ(d.inflight_seq, m.inflight_seq);
      EXPECT_EQ(d.first_no, m.first_no);
      ASSERT_EQ(d.changes.size(), m.changes.size());
      for (size_t j = 0; j < m.changes.size(); ++j) EXPECT_EQ(d.changes[j].key, m.changes[j].key) << j;
    }
  }

  frs::testing::TempDir dir_{"frs-repl-journal"};
  std::vector<std::string> keys_;
};

TEST_F(ReplicatorJournal, ItsFileIsItsMemoryThroughALinksFallAndReturn) {
  int64_t now = MonoNs();
  // Three uses; the link's first connection is closed unanswered: down.
  for (int i = 0; i < 3; ++i) Use();
  EXPECT_TRUE(Journals().empty());  // up: nothing on file
  Turn(now);
  Turn(now);  // connected: batch 1 (3 changes) sent
  {
    os::UniqueFd c = peer_.Accept();
    ASSERT_TRUE(c.valid());
    EXPECT_NE(Peer::ReadRequest(c.get()).find("seq=1"), std::string::npos);
  }  // closed unanswered
  for (int i = 0; i < 20 && repl_->journal_path().empty(); ++i) Turn(now);
  ExpectJournalIsMemory("the link down, batch 1 in flight");
  // Answered alone while it is down.
  Use();
  Use();
  ExpectJournalIsMemory("two more, answered alone");
  // Retried a second later: batch 1 goes again as it was; two more uses
  // answered alone while it is in flight; then it is acknowledged.
  now += Replicator::kRetryNs;
  Turn(now);
  Turn(now);
  os::UniqueFd c = peer_.Accept();
  ASSERT_TRUE(c.valid());
  EXPECT_NE(Peer::ReadRequest(c.get()).find("seq=1"), std::string::npos);
  Use();
  Use();
  Peer::Acknowledge(c.get(), 1);
  for (int i = 0; i < 20 && repl_->QueuedChanges() > 4; ++i) Turn(now);
  ASSERT_EQ(repl_->QueuedChanges(), 4u);
  // Back, with 4 changes queued while it was down: young, but answered
  // alone, so still on file (before, the journal ended here).
  ExpectJournalIsMemory("back, batch 2 on its way");
  // Batch 2 (the 4) acknowledged: nothing left, and the file goes.
  EXPECT_NE(Peer::ReadRequest(c.get()).find("seq=2"), std::string::npos);
  Peer::Acknowledge(c.get(), 2);
  for (int i = 0; i < 20 && repl_->QueuedChanges() > 0; ++i) Turn(now);
  EXPECT_EQ(repl_->QueuedChanges(), 0u);
  EXPECT_TRUE(Journals().empty());
  EXPECT_TRUE(repl_->journal_path().empty());
}

}  // namespace
}  // namespace frs::server
