// Which routes a shard behind another refuses: only the side whose uses the
// other holder answered alone. An owner whose link timed out answers its own
// routes alone; its successor's own routes lack nothing, and a 503 on them
// would make a proxy that counts it a failure take a healthy shard out.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>

#include <memory>
#include <string>

#include "replica_peer.h"
#include "server/clock_util.h"
#include "server/event_loop.h"
#include "server/metrics.h"
#include "server/replicator.h"

namespace frs::server {
namespace {

using Peer = frs::testing::ReplicaPeer;

TEST(ReplicatorAloneIn, ReadsTheTotalAndTheSidesItAccountsFor) {
  auto a = Replicator::AloneIn("applied\nseq 4\nbehind 3\nbehind_routes 3 0\n", "behind");
  EXPECT_EQ(a.n, 3u);
  EXPECT_TRUE(a.theirs);
  EXPECT_FALSE(a.mine);
  a = Replicator::AloneIn("pending 0\nalone 2\nalone_routes 0 2\r\ncatching_up 0\n", "alone");
  EXPECT_EQ(a.n, 2u);
  EXPECT_FALSE(a.theirs);
  EXPECT_TRUE(a.mine);
  // A reset is on both sides: the two add up to more than the total.
  a = Replicator::AloneIn("applied\nbehind 1\nbehind_routes 1 1", "behind");
  EXPECT_TRUE(a.theirs && a.mine);
  a = Replicator::AloneIn("applied\nseq 4\n", "behind");
  EXPECT_EQ(a.n, 0u);
  EXPECT_FALSE(a.theirs || a.mine);
}

TEST(ReplicatorAloneIn, AnAnswerThatDoesNotAccountForEveryChangeLacksBothSides) {
  // An earlier build says no sides.
  auto a = Replicator::AloneIn("applied\nseq 4\nbehind 3\n", "behind");
  EXPECT_EQ(a.n, 3u);
  EXPECT_TRUE(a.theirs && a.mine);
  for (const char* sides : {"behind_routes 1 1", "behind_routes 0 0", "behind_routes 3", "behind_routes 3 0 1",
                            "behind_routes x 0", "behind_routes 3  0", "behind_routes -1 9", "behind_routes 3 0x"}) {
    a = Replicator::AloneIn(std::string("applied\nbehind 3\n") + sides + "\n", "behind");
    EXPECT_TRUE(a.theirs && a.mine) << sides;
  }
  // The word is a whole word: "behindX 3" and "behind_routesX" are not it.
  a = Replicator::AloneIn("applied\nbehindX 3\n", "behind");
  EXPECT_EQ(a.n, 0u);
}

class ReplicatorSides : public frs::testing::ReplicatorFixture {
 protected:
  void SetUp() override {
    ASSERT_TRUE(peer_.ok());
    ASSERT_TRUE(loop_.Init().ok());
    ReplicaOptions o = peer_.TwoShardOptions();
    ASSERT_TRUE(o.ring);
    // A route this shard (0) owns and one the peer (1) owns.
    for (uint32_t pos = 1; own_pos_ == 0 || peer_pos_ == 0; pos += 0x01000193u)
      (o.ring->OwnerOfHash(pos) == 0 ? own_pos_ : peer_pos_) = pos;
    o.shared = &shared_;
    repl_ = std::make_unique<Replicator>(std::move(o), &rc_, &loop_);
  }

  void Use(uint32_t pos, Change::Kind kind = Change::Kind::kAdd) {
    Change c;
    c.kind = kind;
    c.biz_id = 1;
    c.key = "k";
    c.route_pos = pos;
    c.route_known = true;
    c.n = 1;
    c.at_ms = UnixMs();
    repl_->OnChange(c);
  }

  void Turns(int n = 10) {
    for (int i = 0; i < n; ++i) Turn(now_);
  }

  // The next request the replicator sends, on the connection `c_` if it
  // kept it, else on a new one (then `c_`); its text.
  std::string Next() {
    Turns(2);
    pollfd p{c_.get(), POLLIN, 0};
    char b;
    if (!c_.valid() || ::poll(&p, 1, 200) != 1 || ::recv(c_.get(), &b, 1, MSG_PEEK | MSG_DONTWAIT) != 1)
      c_ = peer_.Accept();
    EXPECT_TRUE(c_.valid());
    return c_.valid() ? Peer::ReadRequest(c_.get()) : std::string();
  }

  int64_t now_ = MonoNs();
  os::UniqueFd c_;
  ReplicaCounters rc_{};
  ReplicaShared shared_{};
  uint32_t own_pos_ = 0, peer_pos_ = 0;
};

TEST_F(ReplicatorSides, ABehindAnswerRefusesOnlyTheRoutesItNames) {
  Use(own_pos_);
  ASSERT_NE(Next().find("seq=1"), std::string::npos);
  // The peer answered alone on its own routes (this shard their successor).
  Peer::Answer(c_.get(), 200, "applied\nseq 1\nbehind 2\nbehind_routes 2 0\n");
  Turns();
  EXPECT_TRUE(repl_->IsBehind(1, /*as_successor=*/true));
  EXPECT_TRUE(repl_->Refusing(1, /*as_successor=*/true));
  EXPECT_FALSE(repl_->Refusing(1, /*as_successor=*/false)) << "this shard's own routes lack nothing";
  EXPECT_EQ(rc_.behind, 1u);
  // The answer it held (a use of its own route) was judged on a whole copy.
  EXPECT_EQ(repl_->RefusedThrough(~uint64_t{0}), 0u);
  // One of the peer's routes, served for it: judged on the copy that lacks
  // those uses, refused.
  Use(peer_pos_);
  ASSERT_NE(Next().find("seq=2"), std::string::npos);
  Peer::Answer(c_.get(), 200, "applied\nseq 2\nbehind 2\nbehind_routes 2 0\n");
  Turns();
  EXPECT_EQ(repl_->RefusedThrough(~uint64_t{0}), repl_->noted());
  // Asked again (every 100 ms): now on this shard's routes too.
  now_ += Replicator::kBehindProbeNs;
  EXPECT_NE(Next().find("for="), std::string::npos);
  Peer::Answer(c_.get(), 200, "pending 0\nalone 3\nalone_routes 2 1\ncatching_up 0\n");
  Turns();
  EXPECT_TRUE(repl_->Refusing(1, true));
  EXPECT_TRUE(repl_->Refusing(1, false));
  // A peer of an earlier build names no sides: both.
  now_ += Replicator::kBehindProbeNs;
  EXPECT_NE(Next().find("for="), std::string::npos);
  Peer::Answer(c_.get(), 200, "pending 0\nalone 1\ncatching_up 0\n");
  Turns();
  EXPECT_TRUE(repl_->Refusing(1, true) && repl_->Refusing(1, false));
  // Delivered: both served again.
  now_ += Replicator::kBehindProbeNs;
  EXPECT_NE(Next().find("for="), std::string::npos);
  Peer::Answer(c_.get(), 200, "pending 0\nalone 0\nalone_routes 0 0\ncatching_up 0\n");
  Turns();
  EXPECT_FALSE(repl_->Refusing(1, true) || repl_->Refusing(1, false));
}

TEST_F(ReplicatorSides, WhatADownLinkAnswersAloneIsCountedBySide) {
  Use(own_pos_);
  ASSERT_NE(Next().find("seq=1"), std::string::npos);
  EXPECT_EQ(rc_.alone[1], 0u);
  // No answer within replica_timeout_ms: down, the held answer went out alone.
  now_ += 300LL * 1000 * 1000;
  Turns();
  ASSERT_EQ(rc_.down[1], 1u);
  EXPECT_EQ(rc_.alone[1], 1u);
  EXPECT_EQ(rc_.alone_own[1], 1u);
  EXPECT_EQ(rc_.alone_peer[1], 0u);
  Use(peer_pos_);  // served for the peer, its successor
  Use(own_pos_);
  EXPECT_EQ(rc_.alone[1], 3u);
  EXPECT_EQ(rc_.alone_own[1], 2u);
  EXPECT_EQ(rc_.alone_peer[1], 1u);
  Use(0, Change::Kind::kResetBiz);  // a biz's every node: both sides
  EXPECT_EQ(rc_.alone[1], 4u);
  EXPECT_EQ(rc_.alone_own[1], 3u);
  EXPECT_EQ(rc_.alone_peer[1], 2u);
  // Delivered a second later: none left on either side.
  now_ += Replicator::kRetryNs;
  const std::string again = Next();
  ASSERT_NE(again.find("seq=1"), std::string::npos) << again;
  Peer::Acknowledge(c_.get(), 1);
  Turns();
  for (int i = 0; i < 4 && repl_->QueuedChanges() != 0; ++i) {
    const std::string next = Next();
    ASSERT_NE(next.find("seq="), std::string::npos) << next;
    Peer::Acknowledge(c_.get(), std::stoull(next.substr(next.find("seq=") + 4)));
    Turns();
  }
  EXPECT_EQ(repl_->QueuedChanges(), 0u);
  EXPECT_EQ(rc_.alone[1], 0u);
  EXPECT_EQ(rc_.alone_own[1], 0u);
  EXPECT_EQ(rc_.alone_peer[1], 0u);
}

// A grant or renewal kept while the link was down, whose lease has ended
// on this shard by the time it goes (ReplicaOptions::lease_ended: released
// here, perhaps by another worker whose release reaches the other holder
// first), goes as a grant already over: until = its own second. One that
// is still held, and one sent while the link was up, go as they were.
class ReplicatorKept : public ReplicatorSides {
 protected:
  void SetUp() override {
    ASSERT_TRUE(peer_.ok());
    ASSERT_TRUE(loop_.Init().ok());
    ReplicaOptions o = peer_.TwoShardOptions();
    o.shared = &shared_;
    o.lease_ended = [](const Change& c) { return c.item == 7; };
    repl_ = std::make_unique<Replicator>(std::move(o), &rc_, &loop_);
  }
  // Returns its until.
  int64_t Lease(uint32_t serial, Change::Event e) {
    Change c;
    c.kind = Change::Kind::kEvent;
    c.event = e;
    c.biz_id = 1;
    c.key = "k";
    c.item = serial;
    c.at_ms = UnixMs();
    c.until = c.at_ms / 1000 + 60;
    c.nonce = 9;
    repl_->OnChange(c);
    return c.until;
  }
  // The change lines of a request.
  static std::string Lines(const std::string& request) { return request.substr(request.find("\r\n\r\n") + 4); }
};

TEST_F(ReplicatorKept, AKeptGrantWhoseLeaseEndedHereGoesAsAGrantAlreadyOver) {
  const int64_t until = Lease(7, Change::Event::kLeaseGrant);  // ended here, but sent while up: as it was
  const std::string up = Next();
  ASSERT_NE(up.find("seq=1"), std::string::npos) << up;
  EXPECT_NE(Lines(up).find(" lease-grant 7 " + std::to_string(until) + " "), std::string::npos) << up;
  Peer::Acknowledge(c_.get(), 1);
  Turns();
  Lease(5, Change::Event::kLeaseGrant);
  ASSERT_NE(Next().find("seq=2"), std::string::npos);
  now_ += 300LL * 1000 * 1000;  // no answer within replica_timeout_ms: down
  Turns();
  ASSERT_EQ(rc_.down[1], 1u);
  Lease(7, Change::Event::kLeaseRenew);
  Lease(8, Change::Event::kLeaseGrant);
  std::string lines;
  now_ += Replicator::kRetryNs;
  for (int i = 0; i < 4 && repl_->QueuedChanges() != 0; ++i) {
    const std::string next = Next();
    ASSERT_NE(next.find("seq="), std::string::npos) << next;
    lines += Lines(next);
    Peer::Acknowledge(c_.get(), std::stoull(next.substr(next.find("seq=") + 4)));
    Turns();
  }
  EXPECT_EQ(repl_->QueuedChanges(), 0u);
  const int64_t now_s = UnixMs() / 1000;
  // 7's renewal: a grant over at its own second (within the test's second).
  const size_t seven = lines.find(" lease-grant 7 ");
  ASSERT_NE(seven, std::string::npos) << lines;
  EXPECT_LE(std::stoll(lines.substr(seven + 15)), now_s) << lines;
  EXPECT_EQ(lines.find(" lease-renew 7 "), std::string::npos) << lines;
  // 5 and 8, still held: as they were.
  EXPECT_NE(lines.find(" lease-grant 5 "), std::string::npos) << lines;
  const size_t eight = lines.find(" lease-grant 8 ");
  ASSERT_NE(eight, std::string::npos) << lines;
  EXPECT_GT(std::stoll(lines.substr(eight + 15)), now_s + 50) << lines;
}

// Each worker learns on its own link that its copy is behind; the others
// ask that shard at once (the master's region says one learnt it), not at
// their next idle question 5 s on.
TEST_F(ReplicatorSides, AnotherWorkerLearningItIsBehindMakesAnIdleLinkAskNow) {
  Use(own_pos_);
  ASSERT_NE(Next().find("seq=1"), std::string::npos);
  Peer::Acknowledge(c_.get(), 1);
  Turns();
  ASSERT_EQ(repl_->QueuedChanges(), 0u);
  // Idle: nothing is asked before kIdleProbeNs.
  repl_->NoteAloneApplied(now_);
  Turns(3);
  pollfd p{c_.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 100), 0) << "an idle link asked before its time";
  // Another worker turned behind that shard.
  ++shared_.learnt_behind[1];
  repl_->NoteAloneApplied(now_);
  EXPECT_NE(Next().find("for="), std::string::npos);
  Peer::Answer(c_.get(), 200, "pending 0\nalone 1\nalone_routes 1 0\ncatching_up 0\n");
  Turns();
  EXPECT_TRUE(repl_->IsBehind(1, /*as_successor=*/true));
  // Its own turn is news to the others, not to itself.
  EXPECT_EQ(shared_.learnt_behind[1], 2u);
  repl_->NoteAloneApplied(now_);
  EXPECT_EQ(shared_.learnt_behind[1], 2u);
}

// A worker whose first turn comes after another learnt it (an idle worker
// waits up to a second): it asks all the same.
TEST_F(ReplicatorSides, AWorkerLearningOfItBeforeItsFirstTurnAsksToo) {
  ++shared_.learnt_behind[1];
  repl_->NoteAloneApplied(now_);
  EXPECT_NE(Next().find("for="), std::string::npos);
}

// The other holder's alone uses applied here (by any worker): the answers
// this worker holds on its link to it are refused only when a use they
// counted is on the side those uses change. Before, any refused all: a shard
// whose own routes' answers waited on a new successor (a ring change) turned
// 503 when that shard's alone uses of its own routes arrived, and nginx took
// it out for 10 s, its routes to successors without copies.
TEST_F(ReplicatorSides, AloneUsesAppliedHereRefuseOnlyTheHeldAnswersOfTheirSide) {
  Use(own_pos_);
  ASSERT_NE(Next().find("seq=1"), std::string::npos);  // held: not acknowledged yet
  ++shared_.alone_applied[1][1];                       // the peer's alone uses of its own routes
  repl_->NoteAloneApplied(now_);
  EXPECT_EQ(repl_->RefusedThrough(~uint64_t{0}), 0u) << "an answer on this shard's own route was judged whole";
  ++shared_.alone_applied[1][0];  // and of this shard's routes, which it served for it
  repl_->NoteAloneApplied(now_);
  EXPECT_EQ(repl_->RefusedThrough(~uint64_t{0}), repl_->noted());
}

TEST_F(ReplicatorSides, AloneUsesOfTheOtherHoldersRoutesRefuseAnAnswerOnThem) {
  Use(peer_pos_);  // one of the peer's routes, served for it
  ASSERT_NE(Next().find("seq=1"), std::string::npos);
  ++shared_.alone_applied[1][1];
  repl_->NoteAloneApplied(now_);
  EXPECT_EQ(repl_->RefusedThrough(~uint64_t{0}), repl_->noted());
}

}  // namespace
}  // namespace frs::server
