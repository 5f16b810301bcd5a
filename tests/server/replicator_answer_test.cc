// What a Replicator takes for the answer to a batch, against a peer the test
// plays: only the receiver's own acknowledgement of that batch's seq counts.
// A proxy's 200 page, an answer of another seq, an answer sent twice and
// bytes no request asked for acknowledge nothing; an interim 100 is skipped.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "replica_peer.h"
#include "server/clock_util.h"
#include "server/event_loop.h"
#include "server/replica_auth.h"
#include "server/replicator.h"

namespace frs::server {
namespace {

using Peer = frs::testing::ReplicaPeer;

class ReplicatorAnswer : public frs::testing::ReplicatorFixture {
 protected:
  void SetUp() override { Open(); }

  void Use() {
    repl_->OnChange(Change{Change::Kind::kAdd, 1, "key:" + std::to_string(uses_++), 0, false, 1, UnixMs()});
  }

  void Turns(int n = 10) {
    for (int i = 0; i < n; ++i) Turn(now_);
  }

  // The batch in flight, sent again a second after its link went down, on
  // a new connection `c_`; the request's text.
  std::string SentAgain() {
    now_ += Replicator::kRetryNs;
    Turns(2);
    c_ = peer_.Accept();
    EXPECT_TRUE(c_.valid());
    return c_.valid() ? Peer::ReadRequest(c_.get()) : std::string();
  }

  // One use, its batch sent on connection `c_`; the request's text.
  std::string Sent() {
    Use();
    Turns(2);
    c_ = peer_.Accept();
    EXPECT_TRUE(c_.valid());
    return c_.valid() ? Peer::ReadRequest(c_.get()) : std::string();
  }

  void Raw(const std::string& bytes) {
    ASSERT_EQ(::send(c_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }

  bool Down() const { return repl_->Links().at(0).down; }

  int64_t now_ = MonoNs();
  os::UniqueFd c_;
  int uses_ = 0;
};

// A probe's answer says catching_up 0 or 1; a batch's says it only while
// the receiver catches up (its advice on a snapshot it missed waits for the
// end, and under traffic no probe goes to tell it).
TEST(ReplicatorAcknowledges, CatchingUpIsHeardFromProbesAndBatches) {
  EXPECT_TRUE(Replicator::SaysCatchingUp("pending 0\nalone 0\ncatching_up 1\nhandoff_pending 0\n"));
  EXPECT_FALSE(Replicator::SaysCatchingUp("pending 0\nalone 0\ncatching_up 0\nhandoff_pending 0\n"));
  EXPECT_TRUE(Replicator::SaysCatchingUp("applied\nseq 7\ncatching_up 1\n"));
  EXPECT_TRUE(Replicator::SaysCatchingUp("applied\nseq 7\nbehind 2\nbehind_routes 1 1\ncatching_up 1\n"));
  EXPECT_FALSE(Replicator::SaysCatchingUp("applied\nseq 7"));
  EXPECT_FALSE(Replicator::SaysCatchingUp("applied\nseq 7\ncatching_up 10\n"));
}

TEST(ReplicatorAcknowledges, OnlyTheReceiversWordsForThisSeq) {
  EXPECT_TRUE(Replicator::AcknowledgesBatch("applied\nseq 7", 7));
  EXPECT_TRUE(Replicator::AcknowledgesBatch("duplicate\nseq 7\nbehind 3\n", 7));
  EXPECT_TRUE(Replicator::AcknowledgesBatch("applied\nbehind 3\nseq 7\n", 7));
  EXPECT_FALSE(Replicator::AcknowledgesBatch("applied\nseq 71", 7));
  EXPECT_FALSE(Replicator::AcknowledgesBatch("applied\nseq 6", 7));
  EXPECT_FALSE(Replicator::AcknowledgesBatch("duplicate\nseq \n", 7));
  // A receiver of an earlier build names no seq: its word is taken.
  EXPECT_TRUE(Replicator::AcknowledgesBatch("applied", 7));
  EXPECT_TRUE(Replicator::AcknowledgesBatch("duplicate\nbehind 2\n", 7));
  EXPECT_FALSE(Replicator::AcknowledgesBatch("OK", 7));
  EXPECT_FALSE(Replicator::AcknowledgesBatch("", 7));
  EXPECT_FALSE(Replicator::AcknowledgesBatch("appliedX\nseq 7", 7));
  EXPECT_FALSE(Replicator::AcknowledgesBatch("<html>applied\nseq 7</html>", 7));
}

TEST_F(ReplicatorAnswer, TheReceiversAcknowledgementTakesTheBatch) {
  ASSERT_NE(Sent().find("seq=1"), std::string::npos);
  Peer::Acknowledge(c_.get(), 1);
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 0u);
  EXPECT_FALSE(Down());
}

TEST_F(ReplicatorAnswer, TheRequestIsSignedAndAnAcknowledgementWithoutItsProofTakesNothing) {
  const std::string req = Sent();
  // Signed under the token, never carrying it (replica_auth.h).
  EXPECT_NE(req.find("\r\nAuthorization: FRS-HMAC-SHA256 t="), std::string::npos) << req;
  EXPECT_EQ(req.find("Bearer"), std::string::npos) << req;
  // Something at the shard's address, without the token, acknowledges the
  // batch word for word: the changes stay queued for the real shard.
  Peer::Answer(c_.get(), 200, "applied\nseq 1\n", /*proven=*/false);
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 1u);
  EXPECT_TRUE(Down());
  EXPECT_NE(repl_->QueuedByShard().find("without proof that it holds this cluster's admin token"), std::string::npos)
      << repl_->QueuedByShard();
  // A proof made under another token is no proof either.
  SentAgain();
  const std::string forged = "HTTP/1.1 200 OK\r\nContent-Length: 14\r\nFRS-Replica-Proof: " +
                             ReplicaAnswerProof("not-t", Peer::LastNonce(), 200, "applied\nseq 1\n") +
                             "\r\n\r\napplied\nseq 1\n";
  Raw(forged);
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 1u);
  EXPECT_NE(repl_->QueuedByShard().find("does not verify under this shard's admin token"), std::string::npos)
      << repl_->QueuedByShard();
  // The shard itself, holding the token, is believed.
  SentAgain();
  Peer::Acknowledge(c_.get(), 1);
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 0u);
  EXPECT_FALSE(Down());
}

TEST_F(ReplicatorAnswer, AProxysOkPageAcknowledgesNothing) {
  Sent();
  Peer::Answer(c_.get(), 200, "OK");
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 1u) << "a 200 that is no shard's took the batch";
  EXPECT_TRUE(Down());
  EXPECT_NE(repl_->QueuedByShard().find("not a shard's acknowledgement of batch 1"), std::string::npos)
      << repl_->QueuedByShard();
}

TEST_F(ReplicatorAnswer, AnEmptyOkOrAnotherSeqsAcknowledgesNothing) {
  Sent();
  Peer::Answer(c_.get(), 200, "");
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 1u);
  EXPECT_TRUE(Down());
  // Sent again a second later; an answer for another seq is no answer.
  ASSERT_NE(SentAgain().find("seq=1"), std::string::npos);
  Peer::Answer(c_.get(), 200, "applied\nseq 9\n");
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 1u);
}

TEST_F(ReplicatorAnswer, AnAnswerSentTwiceAcknowledgesOnlyItsOwnBatch) {
  Sent();
  // Twice in one write: the second is no answer to anything; the
  // connection goes with it.
  const std::string once = Peer::AnswerText(200, "applied\nseq 1\n");
  Raw(once + once);
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 0u);
  EXPECT_FALSE(Down());
  // The next batch goes on a new connection, and the old one's late copy
  // cannot answer it.
  os::UniqueFd old = std::move(c_);
  const std::string second = Sent();
  ASSERT_NE(second.find("seq=2"), std::string::npos) << second;
  ::send(old.get(), once.data(), once.size(), MSG_NOSIGNAL);
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 1u);
  Peer::Acknowledge(c_.get(), 2);
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 0u);
}

TEST_F(ReplicatorAnswer, BytesBetweenRequestsAreDroppedWithTheConnection) {
  Sent();
  Peer::Acknowledge(c_.get(), 1);
  Turns();
  ASSERT_EQ(repl_->QueuedChanges(), 0u);
  // Unasked, while nothing is in flight: not kept for the next batch.
  Peer::Acknowledge(c_.get(), 2);
  Turns();
  char b;
  pollfd p{c_.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 1000), 1);
  EXPECT_EQ(::recv(c_.get(), &b, 1, 0), 0) << "the connection was kept";
  const std::string second = Sent();
  ASSERT_NE(second.find("seq=2"), std::string::npos) << second;
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 1u) << "the unasked answer took batch 2";
  Peer::Acknowledge(c_.get(), 2);
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 0u);
}

TEST_F(ReplicatorAnswer, AnInterimAnswerIsSkipped) {
  Sent();
  Raw("HTTP/1.1 100 Continue\r\n\r\n");
  Turns(2);
  EXPECT_FALSE(Down());
  Peer::Acknowledge(c_.get(), 1);
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 0u);
  EXPECT_FALSE(Down());
}

TEST_F(ReplicatorAnswer, AStatusOfFourDigitsOrAContentLengthNotANumberIsMalformed) {
  Sent();
  Raw("HTTP/1.1 2000 OK\r\nContent-Length: 14\r\n\r\napplied\nseq 1\n");
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 1u);
  EXPECT_TRUE(Down());
  ASSERT_NE(SentAgain().find("seq=1"), std::string::npos);
  Raw("HTTP/1.1 200 OK\r\nContent-Length: 14x\r\n\r\napplied\nseq 1\n");
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 1u);
}

// A shard that changed its <cluster> by SIGHUP names the list it ran before
// (previous=, docs/protocol.md): a shard that still runs that list takes its
// changes. One of a build before the parameter refuses it (400 naming it):
// the link sends the batch again at once without it, and names it no more.
class ReplicatorPrevious : public ReplicatorAnswer {
 protected:
  void SetUp() override {
    Open([](ReplicaOptions& o) { o.previous_digest = "0badc0de"; });
  }
};

TEST_F(ReplicatorPrevious, AnEarlierBuildsRefusalOfTheParameterSendsTheBatchAgainWithout) {
  const std::string first = Sent();
  ASSERT_NE(first.find("&previous=0badc0de"), std::string::npos) << first;
  Peer::Answer(c_.get(), 400,
               "/replicate: unknown or bad parameter 'previous' (from, stream, seq, first, digest, lease_key; for, "
               "snapshot, file; state; handed_off)\n");
  Turns(2);
  os::UniqueFd again = peer_.Accept();
  ASSERT_TRUE(again.valid());
  const std::string second = Peer::ReadRequest(again.get());
  EXPECT_NE(second.find("POST /replicate"), std::string::npos) << second;
  EXPECT_NE(second.find("seq=1"), std::string::npos) << second;  // the same batch
  EXPECT_EQ(second.find("previous="), std::string::npos) << second;
  EXPECT_FALSE(Down());
  Peer::Acknowledge(again.get(), 1);
  Turns();
  EXPECT_EQ(repl_->QueuedChanges(), 0u);
  EXPECT_FALSE(Down());
  Use();
  Turns(2);
  c_ = std::move(again);  // kept alive: the next batch comes on it
  const std::string third = Peer::ReadRequest(c_.get());
  EXPECT_NE(third.find("seq=2"), std::string::npos) << third;
  EXPECT_EQ(third.find("previous="), std::string::npos) << third;
  // Any other 400 is a refusal as before: the link is down.
  Peer::Answer(c_.get(), 400, "/replicate: change 1: bad key\n");
  Turns();
  EXPECT_TRUE(Down());
}

// A link whose backlog is full drops its oldest change (serve). One not
// answered alone may have a sync answer held for it: SafeThrough then
// passes its ticket, which read as the other holder's acknowledgement, and
// under refuse that answer went out as a 200 for a change the other holder
// never gets. Under refuse the link goes down instead, at the turn's end
// (FailOverfull). 4 changes make the backlog full here
// (ReplicaOptions::max_backlog).
class ReplicatorFullBacklog : public frs::testing::ReplicatorFixture {
 protected:
  uint64_t Use() {
    repl_->OnChange(Change{Change::Kind::kAdd, 1, "key:" + std::to_string(uses_++), 0, false, 1, UnixMs()});
    return repl_->noted();
  }
  int uses_ = 0;
};

TEST_F(ReplicatorFullBacklog, UnderRefuseTheLinkGoesDownAndItsHeldAnswersAreRefused) {
  Open([](ReplicaOptions& o) {
    o.refuse = true;
    o.max_backlog = 4;
  });
  for (int i = 0; i < 5; ++i) Use();
  EXPECT_EQ(repl_->QueuedChanges(), 5u);  // nothing dropped
  EXPECT_EQ(repl_->SafeThrough(), 0u);
  EXPECT_EQ(repl_->RefusedThrough(~uint64_t{0}), 0u);  // not before the turn's released answers went
  repl_->FailOverfull(MonoNs());
  ASSERT_TRUE(repl_->Links().at(0).down);
  EXPECT_EQ(repl_->RefusedThrough(~uint64_t{0}), repl_->noted());
  EXPECT_TRUE(repl_->RefusedForDown(~uint64_t{0}));
  EXPECT_NE(repl_->QueuedByShard().find("the most a link keeps: it does not keep up"), std::string::npos)
      << repl_->QueuedByShard();
  EXPECT_EQ(repl_->QueuedChanges(), 5u);  // kept for its return
}

TEST_F(ReplicatorFullBacklog, UnderRefuseItsRoutesRefuseUntilHalfItsBacklogIsTaken) {
  // Back at its first acknowledgement with the queue still at the bound,
  // the link was made full again in the same turn and went down each
  // second (found in review): its routes now refuse until fewer than half
  // the bound are queued, so the backlog drains.
  Open([](ReplicaOptions& o) {
    o.refuse = true;
    o.max_backlog = 200;
  });
  for (int i = 0; i < 201; ++i) Use();
  int64_t now = MonoNs();
  repl_->FailOverfull(now);
  ASSERT_TRUE(repl_->Links().at(0).down);
  EXPECT_TRUE(repl_->Refusing(1, false));
  auto ack_next = [&](os::UniqueFd& c) {
    const std::string req = frs::testing::ReplicaPeer::ReadRequest(c.get());
    const size_t at = req.find("seq=");
    ASSERT_NE(at, std::string::npos) << req;
    frs::testing::ReplicaPeer::Acknowledge(c.get(), std::stoull(req.substr(at + 4)));
  };
  now += Replicator::kRetryNs;
  for (int i = 0; i < 3; ++i) Turn(now);
  os::UniqueFd c = peer_.Accept();
  ASSERT_TRUE(c.valid());
  ack_next(c);  // 63 of 201 taken: back, still catching up
  for (int i = 0; i < 3 && repl_->QueuedChanges() == 201; ++i) Turn(now);
  EXPECT_EQ(repl_->QueuedChanges(), 138u);
  EXPECT_FALSE(repl_->Links().at(0).down);
  EXPECT_TRUE(repl_->Refusing(1, false));
  ack_next(c);  // the next batch, sent at once: 75 left, under half of 200
  for (int i = 0; i < 3 && repl_->QueuedChanges() == 138; ++i) Turn(now);
  EXPECT_EQ(repl_->QueuedChanges(), 75u);
  EXPECT_FALSE(repl_->Refusing(1, false));
}

TEST_F(ReplicatorFullBacklog, UnderServeTheOldestIsDroppedAndTheLinkStaysUp) {
  Open([](ReplicaOptions& o) { o.max_backlog = 4; });
  for (int i = 0; i < 5; ++i) Use();
  repl_->FailOverfull(MonoNs());
  EXPECT_EQ(repl_->QueuedChanges(), 4u);
  EXPECT_FALSE(repl_->Links().at(0).down);
  EXPECT_EQ(repl_->RefusedThrough(~uint64_t{0}), 0u);
}

}  // namespace
}  // namespace frs::server
