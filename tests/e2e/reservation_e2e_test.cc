// End to end: reservations of a real frsd over loopback: the XML door
// (single and batch), the GET doors, hostile ids, their /metrics series, a
// client that dies holding one, and kill -9 of every frsd process with
// reservations and leases held. One server for the file (restarted in place
// by the kill -9 test); every test uses its own keys.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "frsd_harness.h"

namespace frs::e2e {
namespace {

constexpr const char* kReserveBizzes =
    "  <biz id=\"21\" name=\"llm_tokens\" reservations=\"8\"><rule algo=\"fixed\" interval=\"86400\" "
    "max=\"200000\"/></biz>\n"
    "  <biz id=\"24\" name=\"gateway\">\n"
    "    <rule algo=\"calendar\" interval=\"86400\" max=\"200000\" name=\"tokens\"/>\n"
    "    <rule algo=\"concurrency\" max=\"3\" lease=\"120\" name=\"inflight\"/>\n"
    "  </biz>\n";

class ReservationE2E : public SharedFrsdTest<ReservationE2E> {
 public:
  static constexpr const char* kBizzes = kReserveBizzes;

 protected:
  std::string Reserve(const std::string& biz, const std::string& key, int n, int s = 600) {
    return Req("cmd=\"acquire\" biz=\"" + biz + "\" key=\"" + key + "\" n=\"" + std::to_string(n) + "\" reserve=\"" +
               std::to_string(s) + "\"");
  }
  HttpResponse Settle(const std::string& biz, const std::string& key, const std::string& id, const std::string& n) {
    return c_.Post("<request cmd=\"settle\" biz=\"" + biz + "\" key=\"" + key + "\" reservation=\"" + id + "\" n=\"" +
                   n + "\"/>");
  }
};

TEST_F(ReservationE2E, ReserveAndSettleOverXml) {
  const std::string r = Reserve("llm_tokens", "u42", 4000);
  EXPECT_EQ(Attr(r, "allowed"), "1") << r;
  EXPECT_EQ(Attr(r, "count"), "4000") << r;
  const std::string id = Attr(r, "reservation");
  ASSERT_EQ(id.size(), 24u) << r;
  EXPECT_FALSE(Attr(r, "expires").empty()) << r;
  HttpResponse s = Settle("llm_tokens", "u42", id, "1730");
  EXPECT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(Attr(s.body, "settled"), "1") << s.body;
  EXPECT_EQ(Attr(s.body, "returned"), "2270") << s.body;
  EXPECT_EQ(Attr(s.body, "count"), "1730") << s.body;
  // Applied once.
  s = Settle("llm_tokens", "u42", id, "1730");
  EXPECT_EQ(s.status, 410) << s.body;
  EXPECT_EQ(Count("llm_tokens", "u42"), "1730");
}

TEST_F(ReservationE2E, HostileIdsAndAmountsAreRefusedAndChangeNothing) {
  const std::string id = Attr(Reserve("llm_tokens", "h1", 100), "reservation");
  const std::string other = Attr(Reserve("llm_tokens", "h2", 100), "reservation");
  ASSERT_EQ(id.size(), 24u);
  for (const std::string& bad : {id.substr(1), id + "0", std::string(24, 'G'), std::string("")}) {
    HttpResponse r = Settle("llm_tokens", "h1", bad, "5");
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
  }
  EXPECT_EQ(Settle("llm_tokens", "h1", other, "5").status, 409);  // another key's id
  for (const char* n : {"9223372036854775808", "-1", "2147483648", "x"}) {
    HttpResponse r = Settle("llm_tokens", "h1", id, n);
    EXPECT_EQ(r.status, 400) << n << ": " << r.body;
  }
  // A lease's id is not a reservation's.
  const std::string both = Reserve("gateway", "h1", 10);
  ASSERT_EQ(Attr(both, "lease").size(), 24u) << both;
  ASSERT_EQ(Attr(both, "reservation").size(), 24u) << both;
  EXPECT_FALSE(Attr(both, "reservation_expires").empty()) << both;
  EXPECT_EQ(Settle("gateway", "h1", Attr(both, "lease"), "1").status, 409);
  EXPECT_EQ(Count("llm_tokens", "h1"), "100");
  EXPECT_EQ(Attr(Settle("llm_tokens", "h1", id, "0").body, "settled"), "1");
  EXPECT_EQ(Count("llm_tokens", "h1"), "0");
  EXPECT_EQ(Attr(Settle("gateway", "h1", Attr(both, "reservation"), "3").body, "settled"), "1");
}

TEST_F(ReservationE2E, ABatchTakesAndSettles) {
  const std::string b =
      c_.Post(
            "<batch><request cmd=\"acquire\" biz=\"llm_tokens\" key=\"b1\" n=\"50\" reserve=\"60\"/>"
            "<request cmd=\"acquire\" biz=\"llm_tokens\" key=\"b2\" n=\"70\" reserve=\"60\"/></batch>")
          .body;
  EXPECT_EQ(Attr(b, "allowed"), "1") << b;
  const size_t second = b.find("<response", b.find("<response") + 1);
  const std::string id1 = Attr(b, "reservation"), id2 = Attr(b.substr(second), "reservation");
  ASSERT_EQ(id1.size(), 24u) << b;
  ASSERT_EQ(id2.size(), 24u) << b;
  const std::string s = c_.Post("<batch><request cmd=\"settle\" biz=\"llm_tokens\" key=\"b1\" reservation=\"" + id1 +
                                "\" n=\"5\"/><request cmd=\"settle\" biz=\"llm_tokens\" key=\"b2\" reservation=\"" +
                                id2 + "\" n=\"7\"/></batch>")
                            .body;
  EXPECT_NE(s.find("settled=\"1\""), std::string::npos) << s;
  EXPECT_EQ(Count("llm_tokens", "b1"), "5");
  EXPECT_EQ(Count("llm_tokens", "b2"), "7");
}

TEST_F(ReservationE2E, GetFormsAndMetrics) {
  const double taken = Metric(c_, "frs_reservations_taken_total{biz=\"llm_tokens\",id=\"21\"}");
  HttpResponse a = c_.Get("/acquire?biz=llm_tokens&key=g1&n=4000&reserve=600");
  EXPECT_EQ(a.status, 200) << a.body;
  const std::string id = Attr(a.body, "reservation");
  ASSERT_EQ(id.size(), 24u) << a.body;
  EXPECT_EQ(Metric(c_, "frs_reservations_taken_total{biz=\"llm_tokens\",id=\"21\"}"), std::max(taken, 0.0) + 1);
  EXPECT_GE(Metric(c_, "frs_reservations_held{biz=\"llm_tokens\",id=\"21\"}"), 1);
  const double settled = Metric(c_, "frs_reservations_settled_total{biz=\"llm_tokens\",id=\"21\"}");
  HttpResponse s = c_.Get("/settle?biz=llm_tokens&key=g1&reservation=" + id + "&n=1730");
  EXPECT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(Attr(s.body, "returned"), "2270") << s.body;
  EXPECT_EQ(Metric(c_, "frs_reservations_settled_total{biz=\"llm_tokens\",id=\"21\"}"), settled + 1);
  EXPECT_EQ(c_.Get("/settle?biz=llm_tokens&key=g1&reservation=" + id + "&n=1730").status, 410);
  EXPECT_EQ(c_.Get("/settle?biz=llm_tokens&key=g1&reservation=" + id).status, 400);  // no n
  EXPECT_EQ(c_.Get("/auth?biz=llm_tokens&key=g1&n=5&reserve=60").status, 400);
  EXPECT_EQ(Count("llm_tokens", "g1"), "1730");
}

// A client that takes a reservation and dies: it ends by itself at its
// expiry (reserve + 1 s), charged its estimate, and the key's next write
// counts it in frs_reservations_expired_total.
TEST_F(ReservationE2E, AClientKilledHoldingAReservationIsChargedItsEstimateAtItsExpiry) {
  Client metrics(server_->port());
  const std::string held = "frs_reservations_held{biz=\"llm_tokens\",id=\"21\"}";
  const std::string expired = "frs_reservations_expired_total{biz=\"llm_tokens\",id=\"21\"}";
  const double held_before = std::max(Metric(metrics, held), 0.0);
  const double expired_before = std::max(Metric(metrics, expired), 0.0);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The client: reserves 300 for 1 s, passes its id on, and dies unsettled.
    Client c(server_->port());
    const std::string id = Attr(c.Get("/acquire?biz=llm_tokens&key=dies&n=300&reserve=1").body, "reservation");
    (void)!write(fds[1], id.data(), id.size());
    raise(SIGKILL);
  }
  close(fds[1]);
  char id[24];
  ASSERT_EQ(read(fds[0], id, sizeof id), static_cast<ssize_t>(sizeof id));
  const int64_t taken_ms = NowMs();
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(Metric(metrics, held), held_before + 1);
  // The gauge reads the store: held, then not from its expiry on (within
  // reserve + 1 s = 2 s of the take, a little slack for the poll).
  ASSERT_TRUE(WaitFor([&] { return Metric(metrics, held) == held_before; }, 4000));
  EXPECT_LE(NowMs() - taken_ms, 2100);
  EXPECT_EQ(Count("llm_tokens", "dies"), "300");  // charged its estimate
  // The key's next write finds it expired and counts it, once.
  EXPECT_EQ(Attr(Req("cmd=\"acquire\" biz=\"llm_tokens\" key=\"dies\""), "allowed"), "1");
  EXPECT_EQ(Metric(metrics, expired), expired_before + 1);
  HttpResponse late = Settle("llm_tokens", "dies", std::string(id, sizeof id), "10");
  EXPECT_EQ(late.status, 410) << late.body;
  EXPECT_EQ(Count("llm_tokens", "dies"), "301");
  EXPECT_EQ(Metric(metrics, expired), expired_before + 1);
}

// Last in the file (it restarts the shared server): kill -9 of every frsd
// process with 8 reservations held on one key, and a reservation and a lease
// on another, then a restart: all still held, and the very same ids settle
// and release them.
TEST_F(ReservationE2E, KillNineOfEveryProcessKeepsEveryReservationAndItsId) {
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) {
    const std::string a = Reserve("llm_tokens", "k9", 1000);
    ASSERT_EQ(Attr(a, "allowed"), "1") << i << ": " << a;
    ids.push_back(Attr(a, "reservation"));
  }
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 8u);
  const std::string full = Reserve("llm_tokens", "k9", 1);
  EXPECT_EQ(Attr(full, "reservations_full"), "1") << full;
  const std::string both = Reserve("gateway", "k9", 500);
  const std::string g = Attr(both, "reservation"), lease = Attr(both, "lease");
  ASSERT_EQ(lease.size(), 24u) << both;
  c_.Close();
  server_->KillAll();
  ASSERT_TRUE(server_->Start()) << server_->log();
  ASSERT_TRUE(c_.Connect(server_->port()));
  EXPECT_EQ(Count("llm_tokens", "k9"), "8000");
  EXPECT_EQ(Attr(Reserve("llm_tokens", "k9", 1), "reservations_full"), "1");
  // The gauge is read from the store: right after the restart, down by the
  // ones settled.
  const double held = Metric(c_, "frs_reservations_held{biz=\"llm_tokens\",id=\"21\"}");
  EXPECT_GE(held, 8);
  for (const std::string& id : ids) {
    HttpResponse r = Settle("llm_tokens", "k9", id, "10");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Attr(r.body, "settled"), "1") << r.body;
  }
  EXPECT_EQ(Attr(Settle("gateway", "k9", g, "20").body, "settled"), "1");
  HttpResponse r = c_.Post("<request cmd=\"release\" biz=\"gateway\" key=\"k9\" lease=\"" + lease + "\"/>");
  EXPECT_EQ(Attr(r.body, "released"), "1") << r.body;
  EXPECT_EQ(Count("llm_tokens", "k9"), "80");
  EXPECT_EQ(Metric(c_, "frs_reservations_held{biz=\"llm_tokens\",id=\"21\"}"), held - 8);
}

}  // namespace
}  // namespace frs::e2e
