// The <grpc config> directory watch (server/config_watch.h): which changes
// are one, and which are none of the configuration's.
#include "server/config_watch.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/temp_dir.h"

namespace frs::server {
namespace {

namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Whether the watch reports a change within `ms` (poll, then Drain).
bool Changed(ConfigWatch& w, int ms = 1000) {
  pollfd p{w.fd(), POLLIN, 0};
  if (::poll(&p, 1, ms) <= 0) return false;
  return w.Drain();
}

TEST(ConfigWatch, FilesSubdirectoriesAndDotEntriesAreChangesOthersInTheParentAreNot) {
  testing::TempDir t;
  const std::string dir = t / "conf";
  fs::create_directories(dir + "/team");
  ConfigWatch w;
  ASSERT_TRUE(w.Rearm(dir).ok());
  Write(dir + "/a.yaml", "x");
  EXPECT_TRUE(Changed(w));
  Write(dir + "/team/b", "x");
  EXPECT_TRUE(Changed(w));
  fs::create_directory_symlink("team", dir + "/..data");
  EXPECT_TRUE(Changed(w));
  // A file beside the directory (frsd's log, its pid file) is not a change.
  Write(t / "frsd.log", "x");
  EXPECT_FALSE(Changed(w, 100));
  EXPECT_FALSE(w.Drain());
}

TEST(ConfigWatch, TheDirectorysLinkSwappedIsAChange) {
  testing::TempDir t;
  fs::create_directory(t / "v1");
  fs::create_directory(t / "v2");
  fs::create_directory_symlink("v1", t / "conf");
  ConfigWatch w;
  ASSERT_TRUE(w.Rearm(t / "conf").ok());
  fs::create_directory_symlink("v2", t / "conf.tmp");
  EXPECT_FALSE(Changed(w, 100));  // another name in the parent
  fs::rename(t / "conf.tmp", t / "conf");
  EXPECT_TRUE(Changed(w));
  // Re-armed, the new version is the one watched.
  ASSERT_TRUE(w.Rearm(t / "conf").ok());
  Write(t / "v1/old.yaml", "x");
  EXPECT_FALSE(Changed(w, 100));
  Write(t / "v2/new.yaml", "x");
  EXPECT_TRUE(Changed(w));
}

TEST(ConfigWatch, NothingWatchedWithoutADirectory) {
  ConfigWatch w;
  ASSERT_TRUE(w.Rearm("").ok());
  EXPECT_EQ(w.fd(), -1);
  EXPECT_FALSE(w.Drain());
}

}  // namespace
}  // namespace frs::server
