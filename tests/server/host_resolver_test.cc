// HostResolver (server/host_resolver.h): literal addresses at once, a name
// on a thread of its own while the caller goes on, a failure said once (and
// not long after, to nobody), a stale address served while it is looked up
// again, a failed refresh waited out, and a name's addresses tried in turn.
// The lookups are the test's (scripted_lookups.h). Threads share the
// resolver's jobs: under ThreadSanitizer too.
#include "server/host_resolver.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "scripted_lookups.h"

namespace frs::server {
namespace {

using frs::testing::Lookups;
using frs::testing::Text;
using frs::testing::V4;
using Address = HostResolver::Address;
using State = HostResolver::State;

// Resolve until the lookup in flight has answered (at most 5 s).
HostResolver::Answer Settled(HostResolver& r, const std::string& name, int64_t now_ns) {
  HostResolver::Answer a = r.Resolve(name, now_ns);
  for (int i = 0; i < 5000 && a.state == State::kPending; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    a = r.Resolve(name, now_ns);
  }
  return a;
}

// Until `done` (at most 5 s).
template <class Done>
void WaitFor(Done done) {
  for (int i = 0; i < 5000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// `name` found by its first lookup, at `addresses`.
void FirstFound(HostResolver& r, Lookups& lookups, const std::string& name, std::vector<Address> addresses) {
  ASSERT_EQ(r.Resolve(name, 0).state, State::kPending);
  lookups.Give(0, std::move(addresses));
  ASSERT_EQ(Settled(r, name, 0).state, State::kReady);
}

// A resolver whose lookups the test answers.
class HostResolverTest : public ::testing::Test {
 protected:
  Lookups lookups;
  HostResolver r{lookups.Fn()};
};

TEST(HostResolver, LiteralAddressesAreReadAtOnceWithoutALookup) {
  Lookups lookups;
  HostResolver r(lookups.Fn());
  HostResolver::Answer a = r.Resolve("127.0.0.1:8300", 0);
  ASSERT_EQ(a.state, State::kReady);
  EXPECT_EQ(Text(a.address), "127.0.0.1:8300");
  a = r.Resolve("[::1]:8301", 0);
  ASSERT_EQ(a.state, State::kReady);
  EXPECT_EQ(Text(a.address), "[::1]:8301");
  r.Stale("127.0.0.1:8300");
  EXPECT_EQ(r.Resolve("127.0.0.1:8300", HostResolver::kRefreshNs * 2).state, State::kReady);
  EXPECT_FALSE(r.Pending());
  EXPECT_EQ(lookups.calls(), 0);
  a = r.Resolve("[shard-a]:8300", 0);
  EXPECT_EQ(a.state, State::kFailed);
  EXPECT_NE(a.error.find("shard-a in brackets is not an IPv6 address"), std::string::npos) << a.error;
}

TEST_F(HostResolverTest, ANameIsLookedUpWhileTheCallerGoesOn) {
  // The lookup waits for the test's answer: a Resolve that waited for it
  // would see the lookup give up, not kPending.
  HostResolver::Answer a = r.Resolve("shard-b.example:8302", 0);
  EXPECT_EQ(a.state, State::kPending);
  EXPECT_TRUE(r.Pending());
  EXPECT_EQ(r.Resolve("shard-b.example:8302", 0).state, State::kPending);
  lookups.Give(0, {V4("10.0.0.2", 8302)});
  a = Settled(r, "shard-b.example:8302", 0);
  ASSERT_EQ(a.state, State::kReady);
  EXPECT_EQ(Text(a.address), "10.0.0.2:8302");
  EXPECT_EQ(lookups.calls(), 1);
  EXPECT_EQ(lookups.asked(0), "shard-b.example:8302");
  EXPECT_FALSE(r.Pending());
  // Kept: no lookup while it is fresh.
  EXPECT_EQ(r.Resolve("shard-b.example:8302", HostResolver::kRefreshNs - 1).state, State::kReady);
  EXPECT_EQ(lookups.calls(), 1);
}

TEST_F(HostResolverTest, AFailureIsSaidOnceAndTheNextTryAsksAgain) {
  ASSERT_EQ(r.Resolve("gone.example:8303", 0).state, State::kPending);
  lookups.Fail(0, "cannot resolve: Name or service not known");
  HostResolver::Answer a = Settled(r, "gone.example:8303", 0);
  ASSERT_EQ(a.state, State::kFailed);
  EXPECT_EQ(a.error, "cannot resolve: Name or service not known");
  EXPECT_EQ(r.Resolve("gone.example:8303", 0).state, State::kPending);
  lookups.Give(1, {V4("10.0.0.3", 8303)});
  a = Settled(r, "gone.example:8303", 0);
  ASSERT_EQ(a.state, State::kReady);
  EXPECT_EQ(Text(a.address), "10.0.0.3:8303");
}

TEST_F(HostResolverTest, AFailureNobodyWaitedOnIsNotSaidLater) {
  ASSERT_EQ(r.Resolve("blip.example:8306", 0).state, State::kPending);
  lookups.Fail(0, "cannot resolve: Temporary failure in name resolution");
  WaitFor([&] { return !r.Pending(); });
  // Asked again long after: DNS may have mended; a fresh lookup, not the
  // old failure.
  EXPECT_EQ(r.Resolve("blip.example:8306", HostResolver::kUnaskedFailureNs + 1).state, State::kPending);
  WaitFor([&] { return lookups.calls() == 2; });
  EXPECT_EQ(lookups.calls(), 2);
}

TEST_F(HostResolverTest, ARefreshThatFailedWaitsBeforeItAsksAgain) {
  const std::string name = "flaky.example:8307";
  FirstFound(r, lookups, name, {V4("10.0.0.8", 8307)});
  r.Stale(name);
  EXPECT_EQ(Text(r.Resolve(name, 1).address), "10.0.0.8:8307");
  WaitFor([&] { return lookups.calls() == 2; });
  lookups.Fail(1, "cannot resolve: Temporary failure in name resolution");
  WaitFor([&] { return !r.Pending(); });
  // Still stale, and served; no lookup per try while DNS is down.
  EXPECT_EQ(Text(r.Resolve(name, 2).address), "10.0.0.8:8307");
  EXPECT_EQ(Text(r.Resolve(name, 3).address), "10.0.0.8:8307");
  EXPECT_FALSE(r.Pending());
  EXPECT_EQ(lookups.calls(), 2);
  EXPECT_EQ(Text(r.Resolve(name, 2 + HostResolver::kFailedRefreshNs).address), "10.0.0.8:8307");
  EXPECT_TRUE(r.Pending());
}

TEST_F(HostResolverTest, AStaleAddressIsServedWhileTheNameIsLookedUpAgain) {
  const std::string name = "moving.example:8304";
  FirstFound(r, lookups, name, {V4("10.0.0.4", 8304)});
  // A connection failed: the address it had goes on being tried, at once,
  // while the name is asked again.
  r.Stale(name);
  HostResolver::Answer a = r.Resolve(name, 1);
  ASSERT_EQ(a.state, State::kReady);
  EXPECT_EQ(Text(a.address), "10.0.0.4:8304");
  EXPECT_TRUE(r.Pending());
  // The peer moved.
  lookups.Give(1, {V4("10.0.0.5", 8304)});
  WaitFor([&] { return !r.Pending(); });
  a = r.Resolve(name, 2);
  ASSERT_EQ(a.state, State::kReady);
  EXPECT_EQ(Text(a.address), "10.0.0.5:8304");
  // Age alone asks again too; a lookup that fails then keeps what it had.
  a = r.Resolve(name, 2 + HostResolver::kRefreshNs);
  EXPECT_EQ(Text(a.address), "10.0.0.5:8304");
  EXPECT_TRUE(r.Pending());
  WaitFor([&] { return lookups.calls() == 3; });
  EXPECT_EQ(lookups.calls(), 3);
  lookups.Fail(2, "cannot resolve: Temporary failure in name resolution");
  WaitFor([&] { return !r.Pending(); });
  a = r.Resolve(name, 3 + HostResolver::kRefreshNs);
  ASSERT_EQ(a.state, State::kReady);
  EXPECT_EQ(Text(a.address), "10.0.0.5:8304");
}

TEST_F(HostResolverTest, ANamesAddressesAreTriedInTurn) {
  const std::string name = "two.example:8305";
  FirstFound(r, lookups, name, {V4("10.0.0.6", 8305), V4("10.0.0.7", 8305)});
  EXPECT_EQ(Text(r.Resolve(name, 0).address), "10.0.0.6:8305");
  r.Stale(name);
  EXPECT_EQ(Text(r.Resolve(name, 1).address), "10.0.0.7:8305");
  // The same two again: the turn stays at the second, which has not failed.
  lookups.Give(1, {V4("10.0.0.6", 8305), V4("10.0.0.7", 8305)});
  WaitFor([&] { return !r.Pending(); });
  EXPECT_EQ(Text(r.Resolve(name, 2).address), "10.0.0.7:8305");
  r.Stale(name);
  EXPECT_EQ(Text(r.Resolve(name, 3).address), "10.0.0.6:8305");
}

}  // namespace
}  // namespace frs::server
