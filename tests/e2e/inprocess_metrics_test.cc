// A program linking libfrs decides on the same store as a running frsd, and
// a scrape of that frsd shows its decisions (frs_biz_today_*).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/temp_dir.h"
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

// A program run as root on a store its service user owns is refused before
// it makes anything there: the statistics days it made were root's, and
// frsd, run as that user, stopped counting them (a permission error in its
// log, frs_stats_unstored_total rising).
TEST(InProcessMetrics, ARootProgramOnAnotherUsersStoreIsRefusedAndMakesNothing) {
  if (::geteuid() != 0) return;  // only root can be root on another's store
  testing::TempDir dir("frs-root-lib");
  std::ofstream(dir / "srv.xml") << "<frs><map>map.xml</map><store dir=\"data\" files=\"1\" keynodes=\"64\" "
                                    "chain=\"8\"/></frs>\n";
  std::ofstream(dir / "map.xml") << "<map><biz id=\"1\" name=\"api\" fields=\"app,user\" separator=\"|\">"
                                    "<rule interval=\"60\" max=\"5\"/><stats by=\"app\"/></biz></map>\n";
  ServiceOpenOptions create;
  create.create_if_missing = true;
  {
    auto made = OpenFromConfig(dir / "srv.xml", create);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
  }
  const uid_t nobody = 65534;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  for (const auto& e : std::filesystem::directory_iterator(dir / "data"))
    ASSERT_EQ(::chown(e.path().c_str(), nobody, nobody), 0) << e.path();
  ASSERT_EQ(::chown((dir / "data").c_str(), nobody, nobody), 0);
  for (const char* f : {"stats.frs", "denials.frs", "rules.history"}) std::filesystem::remove(dir / "data/" + f);

  auto svc = OpenFromConfig(dir / "srv.xml");
  ASSERT_FALSE(svc.ok());
  EXPECT_NE(svc.status().message().find("this process runs as root, and the store directory " + dir / "data" +
                                        " is nobody's"),
            std::string::npos)
      << svc.status().ToString();
  EXPECT_NE(svc.status().message().find("run this program as nobody"), std::string::npos);
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir / "data")) {
    struct stat st {};
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, nobody) << e.path() << " was made root's";
  }
}

}  // namespace
}  // namespace frs::e2e
