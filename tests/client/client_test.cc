// frs::Client against real frsd processes: a lone server, a 3-shard cluster
// (requests routed by owner, batches split by route), and the fail policy
// when no answer comes.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <unistd.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/read_request.h"
#include "e2e/frsd_harness.h"
#include "frs/client.h"
#include "frs/http_client.h"

namespace frs {
namespace {

constexpr const char* kMap = R"(<map>
  <biz id="1" name="login"><rule interval="3600" max="3"/></biz>
  <biz id="2" name="once" reservations="1"><rule interval="3600" max="100"/></biz>
</map>
)";

std::string Name(uint16_t p) { return "127.0.0.1:" + std::to_string(p); }

class Cluster {
 public:
  // Each shard binds a port of its own (port 0), then all are told the
  // cluster those ports make and reload it.
  explicit Cluster(size_t n, const std::string& cluster_attrs = "") {
    for (size_t i = 0; i < n && ok_; ++i) {
      e2e::ServerOptions o;
      o.workers = 1;
      o.map = kMap;
      servers_.push_back(std::make_unique<e2e::Frsd>(o));
      ok_ = servers_.back()->Start();
      ports_.push_back(servers_.back()->port());
    }
    for (size_t i = 0; i < servers_.size() && ok_; ++i) {
      e2e::Frsd& s = *servers_[i];
      const std::string before = s.log();
      s.WriteConfig(ports_[i]);
      std::string cluster = "  <cluster self=\"" + Name(ports_[i]) + "\" " + cluster_attrs + ">\n";
      for (uint16_t q : ports_) cluster += "    <shard>" + Name(q) + "</shard>\n";
      std::string cfg = e2e::ReadFile(s.config());
      cfg.insert(cfg.rfind("</frs>"), cluster + "  </cluster>\n");
      e2e::WriteFile(s.config(), cfg);
      ok_ = s.ReloadAndWait();
    }
  }
  bool ok() const { return ok_; }
  ClientOptions Options() const {
    ClientOptions o;
    for (uint16_t p : ports_) o.shards.push_back({Name(p), 1});
    return o;
  }
  const std::vector<uint16_t>& ports() const { return ports_; }
  e2e::Frsd& shard(size_t i) { return *servers_[i]; }

 private:
  std::vector<uint16_t> ports_;
  std::vector<std::unique_ptr<e2e::Frsd>> servers_;
  bool ok_ = true;
};

TEST(Client, ExactLimitsOnEveryShardOfACluster) {
  Cluster c(3);
  ASSERT_TRUE(c.ok());
  auto client = Client::Make(c.Options());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  std::set<std::string> owners;
  for (int k = 0; k < 60; ++k) {
    const std::string key = "user:" + std::to_string(k);
    owners.insert(client.value()->OwnerOf(key));
    for (int i = 0; i < 3; ++i) {
      ClientDecision d = client.value()->Acquire("login", key);
      ASSERT_TRUE(d.error.ok()) << d.error.ToString();
      EXPECT_TRUE(d.allowed) << key;
      EXPECT_EQ(d.remaining, 2 - i);
    }
    ClientDecision d = client.value()->Acquire("login", key);
    EXPECT_FALSE(d.allowed);
    EXPECT_TRUE(d.error.ok());
    EXPECT_GT(d.retry_after, 0);
    EXPECT_EQ(client.value()->Acquire("login", key, 4).retry_after, kNeverCurable);
  }
  EXPECT_EQ(owners.size(), 3u);  // every shard answered some
  // A malformed request is the caller's error, whatever the fail policy.
  ClientDecision bad = client.value()->Acquire("nope", "k");
  EXPECT_FALSE(bad.allowed);
  EXPECT_TRUE(bad.error.IsNotFound()) << bad.error.ToString();
}

TEST(Client, ReserveAndSettle) {
  Cluster c(1);
  ASSERT_TRUE(c.ok());
  auto client = Client::Make(c.Options());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  Client& cl = *client.value();
  ClientDecision r = cl.Reserve("login", "res", 2, 600);
  ASSERT_TRUE(r.error.ok()) << r.error.ToString();
  ASSERT_TRUE(r.allowed);
  ASSERT_EQ(r.reservation.size(), 24u);
  EXPECT_GT(r.reservation_expires, 0);
  EXPECT_EQ(r.lease_expires, 0);
  EXPECT_EQ(r.count, 2);
  ClientDecision s = cl.Settle("login", "res", r.reservation, 1);
  ASSERT_TRUE(s.error.ok()) << s.error.ToString();
  EXPECT_TRUE(s.settled);
  EXPECT_EQ(s.returned, 1);
  EXPECT_EQ(s.count, 1);
  EXPECT_EQ(cl.Settle("login", "res", r.reservation, 1).error.code(), Status::Code::kGone);
  EXPECT_EQ(cl.Settle("login", "other", r.reservation, 1).error.code(), Status::Code::kConflict);
  EXPECT_EQ(cl.Acquire("login", "res").remaining, 1);
  EXPECT_FALSE(r.reservations_full);
  // A key that holds all the reservations its biz allows is denied for that
  // reason, which the decision names (the rate rule has room).
  ClientDecision held = cl.Reserve("once", "res", 1, 600);
  ASSERT_TRUE(held.allowed && held.error.ok()) << held.error.ToString();
  ClientDecision full = cl.Reserve("once", "res", 1, 600);
  ASSERT_TRUE(full.error.ok()) << full.error.ToString();
  EXPECT_FALSE(full.allowed);
  EXPECT_TRUE(full.reservations_full);
  EXPECT_GT(full.retry_after, 0);
  EXPECT_EQ(full.remaining, 99);
}

TEST(Client, ABatchIsSplitByRoute) {
  Cluster c(3);
  ASSERT_TRUE(c.ok());
  auto client = Client::Make(c.Options());
  ASSERT_TRUE(client.ok());
  std::vector<ClientRequest> reqs;
  std::set<std::string> owners;
  for (int k = 0; k < 12; ++k) {
    reqs.push_back({Cmd::kAcquire, "login", "b" + std::to_string(k), 2});
    owners.insert(client.value()->OwnerOf(reqs.back().key));
  }
  ASSERT_GT(owners.size(), 1u);
  std::vector<ClientDecision> out;
  EXPECT_TRUE(client.value()->Batch(reqs, &out));
  for (const ClientDecision& d : out) {
    EXPECT_TRUE(d.error.ok()) << d.error.ToString();
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.count, 2);
  }
  // Each key has one use left: n=2 again is denied everywhere, and nothing
  // was recorded.
  EXPECT_FALSE(client.value()->Batch(reqs, &out));
  for (const ClientRequest& r : reqs) EXPECT_TRUE(client.value()->Query(r.biz, r.key, 1).allowed) << r.key;
  // With one route the whole batch goes to one shard, which owns it.
  std::vector<ClientRequest> tagged{{Cmd::kAcquire, "login", "x1", 1}, {Cmd::kAcquire, "login", "x2", 1}};
  EXPECT_TRUE(client.value()->Batch(tagged, &out, "session-9"));
  EXPECT_EQ(client.value()->Query("login", "x1", 1, "session-9").count, 1);
}

// Found by an outside run: a batch went to each owner under its first
// member's route, so frsd kept every member's node under that route (a ring
// change then moved them by it, their counts lost), and a client with a
// stale shard list had members counted on a shard that does not own them
// (only the batch's one route was checked: 8 of a limit of 5). Now each
// route is its own part, sent without ?route=: frsd routes it by its
// members' key, and answers 421 for a key another shard owns.
TEST(Client, ABatchOfAStaleShardListCountsEachMemberAtItsOwner) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  auto full = Client::Make(c.Options());
  ASSERT_TRUE(full.ok());
  // A stale list: the same shards, other weights (a change not yet given
  // to this client), so that some keys it takes for the first shard's are
  // the second's.
  ClientOptions stale_opts = c.Options();
  stale_opts.shards[0].weight = 7;
  auto stale = Client::Make(stale_opts);
  ASSERT_TRUE(stale.ok());
  const std::string a = Name(c.ports()[0]);
  std::string mine, theirs;
  for (int k = 0; k < 2000 && (mine.empty() || theirs.empty()); ++k) {
    const std::string key = "s" + std::to_string(k);
    if (stale.value()->OwnerOf(key) != a) continue;
    (full.value()->OwnerOf(key) == a ? mine : theirs) = key;
  }
  ASSERT_FALSE(mine.empty() || theirs.empty());
  std::vector<ClientRequest> reqs{{Cmd::kAcquire, "login", mine, 1}, {Cmd::kAcquire, "login", theirs, 1}};
  std::vector<ClientDecision> out;
  for (int i = 1; i <= 3; ++i) {
    EXPECT_TRUE(stale.value()->Batch(reqs, &out));
    for (const ClientDecision& d : out) {
      EXPECT_TRUE(d.error.ok()) << d.error.ToString();
      EXPECT_EQ(d.count, i);
    }
  }
  // Each counted at its owner, once: the stale client's part for the other
  // shard's key was answered 421 and followed (a limit of 3 held).
  EXPECT_FALSE(full.value()->Acquire("login", theirs).allowed);
  EXPECT_EQ(full.value()->Query("login", mine, 1).count, 3);
  // A list of one shard takes the server for a lone one and sends the batch
  // whole; a shard of a cluster refuses members that route apart (400), and
  // the client sends it again split by route: the shard counts its own key
  // and answers 421 for the other's, whose owner this list lacks (no answer,
  // the fail policy's: open here), counted nowhere.
  ClientOptions lone_opts = c.Options();
  lone_opts.shards.resize(1);
  auto lone = Client::Make(lone_opts);
  ASSERT_TRUE(lone.ok());
  std::string mine1, theirs1;
  for (int k = 0; k < 200 && (mine1.empty() || theirs1.empty()); ++k) {
    const std::string key = "l" + std::to_string(k);
    (full.value()->OwnerOf(key) == a ? mine1 : theirs1) = key;
  }
  std::vector<ClientRequest> fresh{{Cmd::kAcquire, "login", mine1, 1}, {Cmd::kAcquire, "login", theirs1, 1}};
  lone.value()->Batch(fresh, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].error.ok()) << out[0].error.ToString();
  EXPECT_EQ(out[0].count, 1);
  EXPECT_NE(out[1].error.message().find("misrouted"), std::string::npos) << out[1].error.ToString();
  EXPECT_EQ(full.value()->Query("login", theirs1, 1).count, 0);
  EXPECT_FALSE(stale.value()->Batch(reqs, nullptr));  // no place for answers: nothing sent
}

// A shadow-mode biz's decision says it would have denied (found missing by
// an outside run: the caller saw allowed and shadow only).
TEST(Client, AShadowDecisionSaysItWouldDeny) {
  e2e::Frsd s;  // the harness's map: biz shadowed, mode="shadow", max 1
  ASSERT_TRUE(s.Start()) << s.log();
  ClientOptions o;
  o.shards = {{Name(s.port()), 1}};
  auto client = Client::Make(o);
  ASSERT_TRUE(client.ok());
  ClientDecision first = client.value()->Acquire("shadowed", "k");
  EXPECT_TRUE(first.allowed && first.shadow && !first.would_deny);
  ClientDecision second = client.value()->Acquire("shadowed", "k");
  EXPECT_TRUE(second.allowed && second.shadow && second.would_deny) << second.error.ToString();
}

// An explicit route is hashed as it is sent (%-encoded), as frsd and a
// proxy hash the raw query: "a b" is routed by "a%20b" (the client hashed
// the raw bytes, and every such call took a 421's round trip).
TEST(Client, AnExplicitRouteIsHashedAsSent) {
  Cluster c(3);
  ASSERT_TRUE(c.ok());
  auto client = Client::Make(c.Options());
  ASSERT_TRUE(client.ok());
  const Ring& ring = client.value()->ring();
  int differ = 0;
  for (int i = 0; i < 40; ++i) {
    const std::string route = "a b" + std::to_string(i);
    differ += ring.OwnerIndex(route) != ring.OwnerIndex("a%20b" + std::to_string(i));
    EXPECT_TRUE(client.value()->Acquire("login", "k" + std::to_string(i), 1, route).allowed) << route;
  }
  ASSERT_GT(differ, 0);  // the raw bytes would have sent some elsewhere
  // No shard was asked for a route it does not own.
  for (uint16_t p : c.ports()) {
    const std::string m = e2e::Client(p).Get("/metrics").body;
    EXPECT_NE(m.find("\nfrs_misrouted_total 0\n"), std::string::npos) << p;
  }
}

// With replicas a dead shard's routes are answered by their successors,
// from the copy each holds: the client asks there when the owner cannot
// answer, then goes there first until skip_failed_ms has passed, and back to
// the owner once it serves again. No key is granted past its limit.
TEST(Client, ADeadOwnersRoutesAreAskedOfTheirSuccessor) {
  Cluster c(3, "replicas=\"1\" replica_mode=\"sync\"");
  ASSERT_TRUE(c.ok());
  ClientOptions o = c.Options();
  o.timeout_ms = 2000;
  o.fail = FailPolicy::kOpen;  // a call the successor did not answer would be allowed: seen below
  o.skip_failed_ms = 300;
  auto client = Client::Make(o);
  ASSERT_TRUE(client.ok());
  Client& cl = *client.value();
  std::vector<std::string> dead_keys;  // routes of shard 0
  for (int k = 0; dead_keys.size() < 8; ++k) {
    const std::string key = "fo:" + std::to_string(k);
    if (cl.OwnerOf(key) == Name(c.ports()[0])) dead_keys.push_back(key);
  }
  for (size_t i = 0; i < dead_keys.size(); ++i)
    for (int n = 0; n < (i < 4 ? 3 : 1); ++n) ASSERT_TRUE(cl.Acquire("login", dead_keys[i]).allowed);
  c.shard(0).KillAll();

  o.failover = false;
  auto owner_only = Client::Make(o);
  ASSERT_TRUE(owner_only.ok());
  ClientDecision alone = owner_only.value()->Acquire("login", dead_keys[0]);
  EXPECT_EQ(alone.error.code(), Status::Code::kUnavailable) << alone.error.ToString();
  EXPECT_TRUE(alone.allowed);  // the fail policy's, not a decision

  // Keys used up stay used up; the others get exactly what they had left.
  for (size_t i = 0; i < dead_keys.size(); ++i) {
    int granted = 0;
    for (int n = 0; n < 3; ++n) {
      ClientDecision d = cl.Acquire("login", dead_keys[i]);
      ASSERT_TRUE(d.error.ok()) << dead_keys[i] << ": " << d.error.ToString();
      EXPECT_EQ(d.server, cl.ring().shards()[cl.ring().SuccessorOfHash(Ring::HashRoute(dead_keys[i]))].name);
      granted += d.allowed;
    }
    EXPECT_EQ(granted, i < 4 ? 0 : 2) << dead_keys[i];
  }
  EXPECT_EQ(cl.failovers(), 3 * dead_keys.size());
  std::vector<ClientRequest> batch = {{Cmd::kQuery, "login", dead_keys[0], 1}, {Cmd::kQuery, "login", dead_keys[0], 1}};
  std::vector<ClientDecision> out;
  cl.Batch(batch, &out);
  for (const ClientDecision& d : out) EXPECT_TRUE(d.error.ok() && d.count == 3) << d.error.ToString();

  // The owner back (it takes what the successor served meanwhile before it
  // serves): once skip_failed_ms has passed it answers its routes again.
  ASSERT_GT(c.shard(0).Spawn(), 0);
  ASSERT_TRUE(c.shard(0).WaitHealthy(20000)) << c.shard(0).log();
  std::this_thread::sleep_for(std::chrono::milliseconds(o.skip_failed_ms));
  const uint64_t before = cl.failovers();
  for (const std::string& key : dead_keys) {
    ClientDecision d = cl.Acquire("login", key);
    EXPECT_TRUE(d.error.ok() && !d.allowed && d.count == 3) << key << ": " << d.error.ToString();
    EXPECT_EQ(d.server, Name(c.ports()[0]));
  }
  EXPECT_EQ(cl.failovers(), before);
}

// Without replicas a successor holds no copy and answers 421: the call is
// decided by the fail policy as if no failover were tried.
TEST(Client, ASuccessorWithoutACopyLeavesTheCallToTheFailPolicy) {
  Cluster c(2);
  ASSERT_TRUE(c.ok());
  ClientOptions o = c.Options();
  o.fail = FailPolicy::kClosed;
  auto client = Client::Make(o);
  ASSERT_TRUE(client.ok());
  std::string key;
  for (int k = 0; key.empty(); ++k)
    if (client.value()->OwnerOf("nr:" + std::to_string(k)) == Name(c.ports()[0])) key = "nr:" + std::to_string(k);
  c.shard(0).KillAll();
  for (int i = 0; i < 2; ++i) {  // the owner asked first, then (skipped) second
    ClientDecision d = client.value()->Acquire("login", key);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.error.code(), Status::Code::kUnavailable) << d.error.ToString();
    EXPECT_NE(d.error.message().find("421"), std::string::npos) << d.error.ToString();
  }
  EXPECT_EQ(client.value()->failovers(), 0u);
}

// timeout_ms bounds a call whole: a batch over three shards that do not
// answer costs one time-out, not one per part.
TEST(Client, ABatchOverSilentShardsTakesOneTimeout) {
  e2e::SilentPort a, b, d;
  ClientOptions o;
  o.shards = {{Name(a.port()), 1}, {Name(b.port()), 1}, {Name(d.port()), 1}};
  o.timeout_ms = 300;
  auto client = Client::Make(o);
  ASSERT_TRUE(client.ok());
  std::vector<ClientRequest> reqs;
  std::set<std::string> owners;
  for (int k = 0; k < 30; ++k) {
    reqs.push_back({Cmd::kAcquire, "login", "t" + std::to_string(k), 1});
    owners.insert(client.value()->OwnerOf(reqs.back().key));
  }
  ASSERT_EQ(owners.size(), 3u);
  std::vector<ClientDecision> out;
  const int64_t start = e2e::NowMs();
  client.value()->Batch(reqs, &out);
  EXPECT_LT(e2e::NowMs() - start, 800);  // one time-out of 300 ms, not three
  for (const ClientDecision& dec : out) EXPECT_FALSE(dec.error.ok());
}

TEST(Client, NoAnswerFollowsTheFailPolicy) {
  // A port nobody listens on, and a socket that accepts and never answers.
  e2e::SilentPort silent;
  ASSERT_NE(silent.port(), 0);
  const uint16_t silent_port = silent.port();
  e2e::RefusingPort refusing;
  for (uint16_t port : {refusing.port(), silent_port}) {
    for (FailPolicy fail : {FailPolicy::kOpen, FailPolicy::kClosed}) {
      ClientOptions o;
      o.shards = {{Name(port), 1}};
      o.timeout_ms = 200;
      o.fail = fail;
      auto client = Client::Make(o);
      ASSERT_TRUE(client.ok());
      const int64_t start = e2e::NowMs();
      ClientDecision d = client.value()->Acquire("login", "k");
      EXPECT_LT(e2e::NowMs() - start, 2000);
      EXPECT_FALSE(d.error.ok());
      EXPECT_EQ(d.allowed, fail == FailPolicy::kOpen) << port;
      // Nothing to admit: a release, renew or settle that failed reads as
      // not done, whatever the policy.
      if (port != refusing.port()) continue;  // each costs the time-out on the silent one
      for (ClientDecision done : {client.value()->Release("login", "k", std::string(24, '0')),
                                  client.value()->Renew("login", "k", std::string(24, '0')),
                                  client.value()->Settle("login", "k", std::string(24, '0'), 5)}) {
        EXPECT_FALSE(done.error.ok());
        EXPECT_FALSE(done.allowed);
        EXPECT_FALSE(done.released || done.settled);
      }
    }
  }
  EXPECT_FALSE(Client::Make(ClientOptions{}).ok());
}

// A shard that is not host:port is refused when the client is made: under
// fail open each of its calls would otherwise be allowed, and a port past
// 65535 was taken modulo 65536 (99999 reached 34463).
TEST(Client, AShardThatIsNotHostColonPortIsRefusedUpFront) {
  for (const char* bad : {"nonsense", "127.0.0.1:99999", "127.0.0.1:", ":80", "127.0.0.1:0", "127.0.0.1:http",
                          "127.0.0.1:-1", "[]:80", "127.0.0.1:000080"}) {
    ClientOptions o;
    o.shards = {{bad, 1}};
    auto client = Client::Make(o);
    ASSERT_FALSE(client.ok()) << bad;
    EXPECT_TRUE(client.status().code() == Status::Code::kInvalidArgument) << client.status().ToString();
    EXPECT_NE(client.status().message().find(bad), std::string::npos) << client.status().ToString();
  }
  for (const char* good : {"127.0.0.1:1", "localhost:65535", "[::1]:8300"}) {
    ClientOptions o;
    o.shards = {{good, 1}};
    EXPECT_TRUE(Client::Make(o).ok()) << good;
  }
}

// What the caller set reaches the server, which judges it: a field that
// does not fit the command is its 400, not a request answered as if the
// field had not been asked; nothing is counted.
TEST(Client, AFieldThatDoesNotFitItsCommandIsRefusedNotDropped) {
  Cluster c(1);
  ASSERT_TRUE(c.ok());
  auto client = Client::Make(c.Options());
  ASSERT_TRUE(client.ok());
  Client& cl = *client.value();
  ClientDecision zero = cl.Reserve("login", "f", 1, 0);
  EXPECT_FALSE(zero.allowed);
  EXPECT_TRUE(zero.error.code() == Status::Code::kInvalidArgument) << zero.error.ToString();
  ClientRequest query_reserving{Cmd::kQuery, "login", "f", 1};
  query_reserving.reserve = 10;
  ClientRequest acquire_with_lease{Cmd::kAcquire, "login", "f", 1};
  acquire_with_lease.lease = "0123456789abcdef01234567";
  ClientRequest release_with_n{Cmd::kRelease, "login", "f", 5};
  release_with_n.lease = "0123456789abcdef01234567";
  for (const ClientRequest& r : {query_reserving, acquire_with_lease, release_with_n}) {
    ClientDecision d = cl.Execute(r);
    EXPECT_FALSE(d.allowed);
    EXPECT_TRUE(d.error.code() == Status::Code::kInvalidArgument) << d.error.ToString();
  }
  std::vector<ClientDecision> out;
  std::vector<ClientRequest> batch{{Cmd::kAcquire, "login", "f", 1}, {Cmd::kGet, "login", "f", 1}};
  EXPECT_FALSE(cl.Batch(batch, &out));
  ASSERT_EQ(out.size(), 2u);
  for (const ClientDecision& d : out)
    EXPECT_TRUE(d.error.code() == Status::Code::kInvalidArgument) << d.error.ToString();
  EXPECT_EQ(cl.Query("login", "f").count, 0);
}

// Answers every request with one canned status and body, then closes: a
// proxy's page, a wrong port, a body cut short.
class CannedServer {
 public:
  CannedServer(int status, std::string body) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    const std::string answer = "HTTP/1.1 " + std::to_string(status) +
                               " X\r\nContent-Length: " + std::to_string(body.size()) +
                               "\r\nConnection: close\r\n\r\n" + body;
    thread_ = std::thread([this, answer] {
      for (;;) {
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;
        std::string request = frs::testing::ReadRequest(c);
        {
          std::lock_guard<std::mutex> lk(mu_);
          requests_.push_back(std::move(request));
        }
        (void)!::write(c, answer.data(), answer.size());
        ::close(c);
      }
    });
  }
  ~CannedServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lk(mu_);
    return requests_;
  }

 private:
  int fd_;
  uint16_t port_ = 0;
  std::mutex mu_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

// The admin token that frsd's catch-up and frsctl's handoff and stat
// --cluster send goes in a header, never in the target, which a proxy's
// access log writes (they sent ?token=T).
TEST(HttpClient, TheBearerGoesInAHeaderOfEveryRequest) {
  CannedServer canned(200, "ok");
  frs::HttpClient http("127.0.0.1:" + std::to_string(canned.port()), 2000);
  http.SetBearer("s3cret");
  ASSERT_TRUE(http.Get("/replicate?state=1").ok());
  ASSERT_TRUE(http.Post("/stats?receipt=r", "<x/>").ok());
  const std::vector<std::string> seen = canned.requests();
  ASSERT_EQ(seen.size(), 2u);
  for (const std::string& r : seen) {
    EXPECT_NE(r.find("\r\nAuthorization: Bearer s3cret\r\n"), std::string::npos) << r;
    EXPECT_EQ(r.find("token"), std::string::npos) << r;
  }
  EXPECT_EQ(seen[0].rfind("GET /replicate?state=1 HTTP/1.1\r\n", 0), 0u) << seen[0];
  EXPECT_EQ(seen[1].rfind("POST /stats?receipt=r HTTP/1.1\r\n", 0), 0u) << seen[1];
  frs::HttpClient plain("127.0.0.1:" + std::to_string(canned.port()), 2000);
  ASSERT_TRUE(plain.Get("/health").ok());
  EXPECT_EQ(canned.requests().back().find("Authorization"), std::string::npos);
}

// An answer past the client's bound fails the call naming it; frsd's
// catch-up raises it for a snapshot (at the default 64 MiB, a store of
// about 250,000 nodes had its snapshot refused whole). A moved client
// keeps it.
TEST(HttpClient, AnAnswerPastTheBodyLimitFailsNamingIt) {
  CannedServer canned(200, std::string(1000, 'n'));
  frs::HttpClient small("127.0.0.1:" + std::to_string(canned.port()), 2000);
  small.SetBodyLimit(999);
  auto r = small.Get("/replicate?snapshot=1");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("an answer of more than 999 bytes"), std::string::npos) << r.status().ToString();
  frs::HttpClient moved(std::move(small));
  EXPECT_FALSE(moved.Get("/replicate?snapshot=1").ok());
  moved.SetBodyLimit(1000);
  auto whole = moved.Get("/replicate?snapshot=1");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->body.size(), 1000u);
  EXPECT_EQ(frs::HttpClient::kDefaultBodyLimit, uint64_t{64} << 20);
}

// A server that took the request and sent nothing is Unanswered (alive,
// stuck: frsd's catch-up asks it again); a refused connection or one closed
// with a canned answer is not. A moved client keeps its bearer.
TEST(HttpClient, UnansweredTellsASilentServerFromAGoneOne) {
  {
    e2e::SilentPort silent;
    ASSERT_NE(silent.port(), 0);
    frs::HttpClient quiet("127.0.0.1:" + std::to_string(silent.port()), 200);
    EXPECT_FALSE(quiet.Get("/replicate?snapshot=1").ok());
    EXPECT_TRUE(quiet.Unanswered());
  }
  e2e::RefusingPort refusing;
  frs::HttpClient gone("127.0.0.1:" + std::to_string(refusing.port()), 200);
  EXPECT_FALSE(gone.Get("/replicate?snapshot=1").ok());
  EXPECT_FALSE(gone.Unanswered());

  CannedServer canned(200, "ok");
  frs::HttpClient first("127.0.0.1:" + std::to_string(canned.port()), 2000);
  first.SetBearer("s3cret");
  frs::HttpClient moved(std::move(first));
  ASSERT_TRUE(moved.Get("/health").ok());
  EXPECT_FALSE(moved.Unanswered());
  frs::HttpClient assigned("127.0.0.1:1", 2000);
  assigned = std::move(moved);
  ASSERT_TRUE(assigned.Get("/health").ok());
  const std::vector<std::string> seen = canned.requests();
  ASSERT_EQ(seen.size(), 2u);
  for (const std::string& r : seen) EXPECT_NE(r.find("\r\nAuthorization: Bearer s3cret\r\n"), std::string::npos) << r;
}

// A stop asked while a call waits ends it there, not at its deadline
// (frsd's catch-up waits 15 s for a snapshot and must still stop on
// SIGTERM at once); the call is not called unanswered, and the next call
// waits again.
TEST(HttpClient, AStopEndsACallThatWaits) {
  e2e::SilentPort silent;
  ASSERT_NE(silent.port(), 0);
  frs::HttpClient http("127.0.0.1:" + std::to_string(silent.port()), 60000);
  int asked = 0;
  http.SetStop([&] { return ++asked > 3; });
  auto r = http.Get("/replicate?snapshot=1");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("a stop was asked"), std::string::npos) << r.status().message();
  EXPECT_FALSE(http.Unanswered());
  EXPECT_EQ(asked, 4);  // asked at each poll of at most 100 ms, ended at the first "yes"
  // Unset, the deadline alone ends a call again.
  frs::HttpClient quiet("127.0.0.1:" + std::to_string(silent.port()), 200);
  quiet.SetStop(nullptr);
  EXPECT_FALSE(quiet.Get("/health").ok());
  EXPECT_TRUE(quiet.Unanswered());
}

// An answer that is not a decision frsd wrote is no answer: the fail policy
// decides and the error says what came, for a call and for each member of a
// batch. A proxy's 404 page denied every call under fail open with an empty
// message, and a batch's members read as plain denials with no error.
TEST(Client, AnAnswerThatIsNotADecisionFollowsTheFailPolicy) {
  struct Case {
    int status;
    const char* body;
    const char* says;  // in the single call's error
  };
  const Case cases[] = {
      {404, "<html>nope</html>", "answered 404: unexpected <html> answer"},
      {429, "<html><body>slow down</body></html>", "answered 429: unexpected <html> answer"},
      {200, "plain text", "answered 200 without XML"},
      {200, "<response code=\"0\"/>", "answered <response> without a decision"},
      {200, "<response code=\"0\" allowed=\"2\"/>", "answered <response> without a decision"},
      {200, "<batch><response code=\"0\" allowed=\"1\"/></batch>", "answered <batch> without a decision"},
  };
  for (const Case& k : cases) {
    CannedServer canned(k.status, k.body);
    for (FailPolicy fail : {FailPolicy::kOpen, FailPolicy::kClosed}) {
      ClientOptions o;
      o.shards = {{Name(canned.port()), 1}};
      o.timeout_ms = 2000;
      o.fail = fail;
      auto client = Client::Make(o);
      ASSERT_TRUE(client.ok());
      ClientDecision d = client.value()->Acquire("login", "k");
      EXPECT_EQ(d.error.code(), Status::Code::kUnavailable) << k.body;
      EXPECT_NE(d.error.message().find(k.says), std::string::npos) << d.error.ToString();
      EXPECT_EQ(d.allowed, fail == FailPolicy::kOpen) << k.body;
      std::vector<ClientRequest> two{{Cmd::kAcquire, "login", "a", 1}, {Cmd::kAcquire, "login", "b", 1}};
      std::vector<ClientDecision> out;
      EXPECT_EQ(client.value()->Batch(two, &out), fail == FailPolicy::kOpen) << k.body;
      ASSERT_EQ(out.size(), 2u);
      for (const ClientDecision& m : out) {
        EXPECT_EQ(m.error.code(), Status::Code::kUnavailable) << k.body << ": " << m.error.ToString();
        EXPECT_EQ(m.allowed, fail == FailPolicy::kOpen) << k.body;
      }
    }
  }
  // A batch answered with fewer decisions than it has members, and frsd's
  // own error answer, which is its verdict and not the policy's.
  CannedServer short_batch(200, "<batch><response code=\"0\" allowed=\"1\"/></batch>");
  ClientOptions o;
  o.shards = {{Name(short_batch.port()), 1}};
  auto client = Client::Make(o);
  ASSERT_TRUE(client.ok());
  std::vector<ClientRequest> two{{Cmd::kAcquire, "login", "a", 1}, {Cmd::kAcquire, "login", "b", 1}};
  std::vector<ClientDecision> out;
  client.value()->Batch(two, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NE(out[1].error.message().find("1 decisions for a batch of 2"), std::string::npos) << out[1].error.ToString();
  // frsd could not decide one member (its store failed: 503) or the whole
  // request (408): no answer for it, as a 5xx of a lone call is, decided by
  // the policy; a member it refused stays refused.
  CannedServer half(200,
                    "<batch><response code=\"0\" allowed=\"1\"/><response code=\"503\" msg=\"store busy\"/>"
                    "<response code=\"404\" msg=\"no biz x\"/></batch>");
  o.shards = {{Name(half.port()), 1}};
  o.fail = FailPolicy::kOpen;
  auto open = Client::Make(o);
  ASSERT_TRUE(open.ok());
  std::vector<ClientRequest> three{{Cmd::kAcquire, "login", "a", 1},
                                   {Cmd::kAcquire, "login", "b", 1},
                                   {Cmd::kAcquire, "x", "c", 1}};
  out.clear();
  EXPECT_FALSE(open.value()->Batch(three, &out));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].allowed && out[0].error.ok());
  EXPECT_TRUE(out[1].allowed) << "a member frsd could not decide denied under fail open";
  EXPECT_EQ(out[1].error.code(), Status::Code::kUnavailable);
  EXPECT_FALSE(out[2].allowed);
  EXPECT_EQ(out[2].error.code(), Status::Code::kNotFound);
  CannedServer slow(408, "<response code=\"408\" msg=\"the request came too slowly\"/>");
  o.shards = {{Name(slow.port()), 1}};
  auto timed_out = Client::Make(o);
  ASSERT_TRUE(timed_out.ok());
  EXPECT_TRUE(timed_out.value()->Acquire("login", "k").allowed);
  CannedServer too_big(413, "<response code=\"413\" msg=\"the body is larger than 65536 bytes\"/>");
  o.shards = {{Name(too_big.port()), 1}};
  auto big = Client::Make(o);
  ASSERT_TRUE(big.ok());
  ClientDecision refused_big = big.value()->Acquire("login", "k");
  EXPECT_FALSE(refused_big.allowed);
  EXPECT_EQ(refused_big.error.code(), Status::Code::kInvalidArgument);
  o.fail = FailPolicy::kClosed;
  CannedServer refusal(400, "<response code=\"400\" msg=\"no biz nope\"/>");
  o.shards = {{Name(refusal.port()), 1}};
  auto refused = Client::Make(o);
  ASSERT_TRUE(refused.ok());
  ClientDecision d = refused.value()->Acquire("nope", "k");
  EXPECT_EQ(d.error.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(d.error.message(), "no biz nope");
  EXPECT_FALSE(d.allowed);
}

}  // namespace
}  // namespace frs
