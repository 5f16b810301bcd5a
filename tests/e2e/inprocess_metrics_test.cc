// A program linking libfrs decides on the same store as a running frsd, and
// a scrape of that frsd shows its decisions (frs_biz_today_*).
#include <gtest/gtest.h>

#include "frs/service.h"
#include "frsd_harness.h"

namespace frs::e2e {
namespace {

uint64_t Metric(const std::string& text, const std::string& series) {
  size_t p = text.find("\n" + series + " ");
  if (p == std::string::npos) return UINT64_MAX;
  return std::stoull(text.substr(p + series.size() + 2));
}

TEST(InProcessMetrics, DecisionsOfALinkedProgramShowInFrsdsScrape) {
  Frsd srv;
  ASSERT_TRUE(srv.Start()) << srv.log();
  Client c(srv.port());
  for (int i = 0; i < 2; ++i) ASSERT_EQ(c.Get("/acquire?biz=login&key=served").status, 200);

  auto svc = OpenFromConfig(srv.config());
  ASSERT_TRUE(svc.ok()) << svc.status().ToString();
  Request req;
  req.cmd = Cmd::kAcquire;
  req.biz = "login";
  req.key = "in-process";
  for (int i = 0; i < 7; ++i) svc->engine->Execute(req);  // 5 allowed, 2 denied

  const std::string m = c.Get("/metrics").body;
  EXPECT_EQ(Metric(m, "frs_biz_today_requests{biz=\"login\",id=\"1\"}"), 9u) << m;
  EXPECT_EQ(Metric(m, "frs_biz_today_allowed{biz=\"login\",id=\"1\"}"), 7u);
  EXPECT_EQ(Metric(m, "frs_biz_today_denied{biz=\"login\",id=\"1\"}"), 2u);
  // frsd's own counters count frsd's own decisions only.
  EXPECT_EQ(Metric(m, "frs_biz_allowed_total{biz=\"login\",id=\"1\"}"), 2u);
}

}  // namespace
}  // namespace frs::e2e
