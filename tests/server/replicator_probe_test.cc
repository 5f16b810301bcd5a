// A Replicator's idle link asking its other shard whether it is there
// (server/replicator.h, kIdleProbeNs), driven turn by turn against a peer
// the test plays: a shard's answer keeps the link up, a proxy's page or a
// silence past a second takes it down, and a change queued while the
// question is out goes at once, acknowledged as a batch, not as an answer.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "replica_peer.h"
#include "server/clock_util.h"
#include "server/event_loop.h"
#include "server/replicator.h"

namespace frs::server {
namespace {

using Peer = frs::testing::ReplicaPeer;

class ReplicatorProbe : public frs::testing::ReplicatorFixture {
 protected:
  void SetUp() override { Open(); }

  void Use() {
    repl_->OnChange(Change{Change::Kind::kAdd, 1, "key:" + std::to_string(uses_++), 0, false, 1, UnixMs()});
  }

  bool Down() const { return repl_->Links().at(0).down; }

  // One use, its batch acknowledged on a connection the test keeps (`c_`):
  // the link is up and idle from `now_`.
  void UpAndIdle() {
    Use();
    Turn(now_);
    Turn(now_);
    c_ = peer_.Accept();
    ASSERT_TRUE(c_.valid());
    ASSERT_NE(Peer::ReadRequest(c_.get()).find("POST /replicate"), std::string::npos);
    Peer::Acknowledge(c_.get(), 1);
    for (int i = 0; i < 20 && repl_->QueuedChanges() > 0; ++i) Turn(now_);
    ASSERT_EQ(repl_->QueuedChanges(), 0u);
    ASSERT_FALSE(Down());
  }

  // Idle past kIdleProbeNs: the question goes on the kept connection.
  void Asked() {
    now_ += Replicator::kIdleProbeNs;
    Turn(now_);
    const std::string q = Peer::ReadRequest(c_.get());
    ASSERT_NE(q.find("GET /replicate?for=127.0.0.1%3A1"), std::string::npos) << q;
  }

  int64_t now_ = MonoNs();
  os::UniqueFd c_;
  int uses_ = 0;
};

TEST_F(ReplicatorProbe, NothingIsAskedBeforeTheLinkIsIdleLong) {
  UpAndIdle();
  now_ += Replicator::kIdleProbeNs - 1'000'000;
  Turn(now_);
  pollfd p{c_.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 100), 0) << "asked before the link was idle " << Replicator::kIdleProbeNs << " ns";
}

TEST_F(ReplicatorProbe, AShardsAnswerKeepsTheLinkUpARefusalToo) {
  UpAndIdle();
  Asked();
  Peer::Answer(c_.get(), 200, "pending 0\n");
  Turn(now_);
  EXPECT_FALSE(Down());
  // A shard mid ring change refuses the question: it is there all the same.
  Asked();
  Peer::Answer(c_.get(), 409, "/replicate: the sender's <cluster> (digest 1) is not this shard's (2)\n");
  Turn(now_);
  EXPECT_FALSE(Down());
  // And the next question comes a whole idle period later, not each turn.
  now_ += Replicator::kIdleProbeNs / 2;
  Turn(now_);
  pollfd p{c_.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 100), 0);
}

TEST_F(ReplicatorProbe, AProxysPageOrASilenceTakesItDown) {
  UpAndIdle();
  Asked();
  Peer::Answer(c_.get(), 502, "<html>502 Bad Gateway</html>\n");
  Turn(now_);
  EXPECT_TRUE(Down());
}

TEST_F(ReplicatorProbe, AnUnansweredQuestionWaitsASecondNotTheTimeout) {
  UpAndIdle();
  Asked();
  now_ += 500'000'000;  // past replica_timeout_ms (200), within a second
  Turn(now_);
  EXPECT_FALSE(Down());
  now_ += 600'000'000;
  Turn(now_);
  EXPECT_TRUE(Down());
}

TEST_F(ReplicatorProbe, AChangeWhileTheQuestionIsOutGoesAtOnceAsABatch) {
  UpAndIdle();
  Asked();
  Use();
  Turn(now_);  // the question's connection closed, a new one for the batch
  Turn(now_);
  os::UniqueFd b = peer_.Accept();
  ASSERT_TRUE(b.valid());
  const std::string batch = Peer::ReadRequest(b.get());
  EXPECT_NE(batch.find("POST /replicate"), std::string::npos) << batch;
  EXPECT_NE(batch.find("seq=2"), std::string::npos) << batch;
  // The question's answer, late, on its closed connection, is no batch's.
  Peer::Answer(c_.get(), 200, "pending 0\n");
  Turn(now_);
  EXPECT_EQ(repl_->QueuedChanges(), 1u);
  Peer::Acknowledge(b.get(), 2);
  for (int i = 0; i < 20 && repl_->QueuedChanges() > 0; ++i) Turn(now_);
  EXPECT_EQ(repl_->QueuedChanges(), 0u);
  EXPECT_FALSE(Down());
}

}  // namespace
}  // namespace frs::server
