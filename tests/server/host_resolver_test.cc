// HostResolver (server/host_resolver.h): literal addresses at once, a name
// on a thread of its own while the caller goes on, a failure said once, a
// stale address served while it is looked up again, and a name's addresses
// tried in turn. The lookups are the test's, so that one can be held for as
// long as the test chooses; and a Replicator whose other shard is named by a
// name that does not resolve in time takes the link for down, then connects
// once the name resolves.
#include "server/host_resolver.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "replica_peer.h"
#include "server/clock_util.h"
#include "server/replicator.h"

namespace frs::server {
namespace {

using Address = HostResolver::Address;
using State = HostResolver::State;

Address V4(const char* ip, uint16_t port) {
  Address a;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.addr);
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  EXPECT_EQ(::inet_pton(AF_INET, ip, &in->sin_addr), 1);
  a.len = sizeof(sockaddr_in);
  return a;
}

std::string Text(const Address& a) {
  char buf[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (a.addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a.addr);
    ::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    port = ntohs(in->sin_port);
  } else if (a.addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    port = ntohs(in6->sin6_port);
    return std::string("[") + buf + "]:" + std::to_string(port);
  }
  return std::string(buf) + ":" + std::to_string(port);
}

// Lookups the test answers: each call takes the next answer it is given
// (Give), waiting for it, and counts itself.
class Lookups {
 public:
  HostResolver::LookupFn Fn() {
    return [s = state_](const std::string& host, const std::string& port, std::vector<Address>* out, std::string* err) {
      const int i = s->calls.fetch_add(1);
      if (i >= kMax) {
        *err = "more lookups than the test answers";
        return EAI_FAIL;
      }
      s->asked[i] = host + ":" + port;
      // A caller that waited here would never get to Give: after 10 s the
      // lookup gives up, and its caller sees a failure, not kPending.
      if (s->answers[i].get_future().wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
        *err = "the test gave no answer";
        return EAI_AGAIN;
      }
      const Answer& a = s->given[i];
      if (a.rc != 0) {
        *err = a.error;
        return a.rc;
      }
      *out = a.addresses;
      return 0;
    };
  }
  // The answer of the i-th lookup (from 0).
  void Give(int i, std::vector<Address> addresses) {
    state_->given[i].addresses = std::move(addresses);
    Answered(i);
  }
  void Fail(int i, const std::string& error) {
    state_->given[i].rc = EAI_NONAME;
    state_->given[i].error = error;
    Answered(i);
  }
  int calls() const { return state_->calls.load(); }
  std::string asked(int i) const { return state_->asked[i]; }
  ~Lookups() {
    // A lookup still waiting ends now, its thread with it.
    for (int i = 0; i < kMax; ++i) Answered(i);
  }

 private:
  void Answered(int i) {
    if (!answered_[i]) state_->answers[i].set_value();
    answered_[i] = true;
  }

  static constexpr int kMax = 8;
  struct Answer {
    int rc = 0;
    std::vector<Address> addresses;
    std::string error;
  };
  struct State {
    std::atomic<int> calls{0};
    std::promise<void> answers[kMax];
    Answer given[kMax];
    std::string asked[kMax];
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
  bool answered_[kMax] = {};
};

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

// The worker's link to a shard named by a name: the loop's turns go on
// while the name is looked up, the link is down once the lookup outlasts
// replica_timeout_ms, and it connects as soon as the name resolves.
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
