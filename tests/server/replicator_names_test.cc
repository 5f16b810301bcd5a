// A Replicator's link to a shard named by a DNS name (server/host_resolver.h),
// its lookups the test's (scripted_lookups.h): the loop's turns go on while
// the name is looked up, the link fails once the lookup outlasts
// replica_timeout_ms and connects as soon as the name resolves, and during a
// graceful stop a name that does not resolve is the link's last try.
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "replica_peer.h"
#include "scripted_lookups.h"
#include "server/clock_util.h"
#include "server/replicator.h"

namespace frs::server {
namespace {

using frs::testing::Lookups;
using frs::testing::V4;

class ReplicatorNamedShard : public frs::testing::ReplicatorFixture {};

TEST_F(ReplicatorNamedShard, ALookupThatHangsTakesTheLinkDownThenItConnects) {
  Lookups lookups;
  const std::string named = "peer.example:" + peer_.name().substr(peer_.name().rfind(':') + 1);
  Open([&](ReplicaOptions& o) {
    auto ring = Ring::Make({RingShard{"127.0.0.1:1"}, RingShard{named}});
    ASSERT_TRUE(ring.ok()) << ring.status().ToString();
    o.ring = std::make_shared<const Ring>(std::move(ring.value()));
    o.lookup = lookups.Fn();
  });
  int64_t now = MonoNs();
  repl_->OnChange(Change{Change::Kind::kAdd, 1, "key:1", 0, false, 1, UnixMs()});
  Turn(now);
  EXPECT_TRUE(repl_->Busy()) << "the loop must come back for the lookup's answer";
  EXPECT_FALSE(repl_->Links().at(0).down);
  now += 250'000'000;  // past replica_timeout_ms (200)
  Turn(now);
  ASSERT_TRUE(repl_->Links().at(0).down);
  EXPECT_NE(repl_->QueuedByShard().find("cannot resolve: no answer within 200 ms"), std::string::npos)
      << repl_->QueuedByShard();
  EXPECT_EQ(lookups.calls(), 1) << "one lookup in flight at a time";
  EXPECT_TRUE(repl_->Busy()) << "the link waits for the lookup's answer";
  lookups.Give(0,
               {V4("127.0.0.1", static_cast<uint16_t>(std::stoi(peer_.name().substr(peer_.name().rfind(':') + 1))))});
  // Tried again as soon as the name resolves, not a second later: the
  // clock stands still here.
  os::UniqueFd c;
  for (int i = 0; i < 5000 && !c.valid(); ++i) {
    Turn(now, 1);
    c = peer_.Accept(0);
  }
  ASSERT_TRUE(c.valid()) << repl_->QueuedByShard();
  // Its request written on the replicator's turns.
  for (int i = 0; i < 100; ++i) {
    pollfd p{c.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) == 1) break;
    Turn(now);
  }
  EXPECT_NE(frs::testing::ReplicaPeer::ReadRequest(c.get()).find("POST /replicate"), std::string::npos);
  frs::testing::ReplicaPeer::Acknowledge(c.get(), 1);
  for (int j = 0; j < 100 && repl_->QueuedChanges() > 0; ++j) Turn(now);
  EXPECT_EQ(repl_->QueuedChanges(), 0u);
  EXPECT_FALSE(repl_->Links().at(0).down);
  EXPECT_EQ(lookups.asked(0), named);
}

// A graceful stop gives each link that queues changes one more try; a name
// that does not resolve then ends it, as a connection refused does, instead
// of a new try at every 5 ms turn of the stop's 2 s.
TEST_F(ReplicatorNamedShard, ANameThatDoesNotResolveIsAStopsLastTry) {
  Lookups lookups;
  Open([&](ReplicaOptions& o) {
    auto ring = Ring::Make({RingShard{"127.0.0.1:1"}, RingShard{"gone.example:8300"}});
    ASSERT_TRUE(ring.ok()) << ring.status().ToString();
    o.ring = std::make_shared<const Ring>(std::move(ring.value()));
    o.lookup = lookups.Fn();
  });
  int64_t now = MonoNs();
  repl_->OnChange(Change{Change::Kind::kAdd, 1, "key:1", 0, false, 1, UnixMs()});
  repl_->BeginStop(now);
  Turn(now);
  EXPECT_TRUE(repl_->Delivering());
  lookups.Fail(0, "cannot resolve: Name or service not known");
  for (int i = 0; i < 5000 && repl_->Busy() && repl_->Delivering(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    now += 5'000'000;
    Turn(now, 0);
  }
  EXPECT_FALSE(repl_->Delivering()) << repl_->QueuedByShard();
  EXPECT_EQ(lookups.calls(), 1) << "asked again during the stop";
  EXPECT_EQ(repl_->QueuedChanges(), 1u) << "kept for the spool";
}

}  // namespace
}  // namespace frs::server
