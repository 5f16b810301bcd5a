// The <grpc config> directory watch (server/config_watch.h): which changes
// are one, and which are none of the configuration's.
#include "server/config_watch.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
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
  // A hidden file (an editor's swap file, a sidecar's heartbeat) is no
  // change: the loader reads none. A ConfigMap's ".." entries are.
  Write(dir + "/.edge.yaml.swp", "x");
  Write(dir + "/team/.heartbeat", "x");
  EXPECT_FALSE(Changed(w, 100));
  fs::create_directory(dir + "/..2026_12_07");
  EXPECT_TRUE(Changed(w));
  // A file beside the directory (frsd's log, its pid file) is not a change.
  Write(t / "frsd.log", "x");
  EXPECT_FALSE(Changed(w, 100));
  EXPECT_FALSE(w.Drain());
}

// A link to a directory is watched where it leads (a ConfigMap item
// under a "/"), and links in a loop cost one walk of each directory: three
// links to "." were 3^16 calls of the walk before, in the master.
TEST(ConfigWatch, LinkedDirectoriesAreWatchedOnceAndLoopsEnd) {
  testing::TempDir t;
  const std::string dir = t / "conf";
  fs::create_directories(t / "elsewhere/team");
  fs::create_directories(dir);
  fs::create_directory_symlink(t / "elsewhere/team", dir + "/team");
  for (const char* loop : {"a", "b", "c"}) fs::create_directory_symlink(".", dir + "/" + loop);
  ConfigWatch w;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(w.Rearm(dir).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));  // minutes before
  Write(t / "elsewhere/team/b.yaml", "x");
  EXPECT_TRUE(Changed(w));
}

// `root`/v1 and v2 (each holding `below`), `root`/current -> v1, watched at
// current/`below`: another file or link beside "current" is no change,
// "current" renamed over by a link to v2 is.
void ExpectCurrentSwappedIsAChange(const fs::path& root, const std::string& below, ConfigWatch* w) {
  fs::create_directories(root / "v1" / below);
  fs::create_directories(root / "v2" / below);
  fs::create_directory_symlink("v1", root / "current");
  ASSERT_TRUE(w->Rearm(below.empty() ? root / "current" : root / "current" / below).ok());
  Write(root / "other", "x");
  fs::create_directory_symlink("v2", root / "current.tmp");
  EXPECT_FALSE(Changed(*w, 100));
  fs::rename(root / "current.tmp", root / "current");
  EXPECT_TRUE(Changed(*w));
}

TEST(ConfigWatch, TheDirectorysLinkSwappedIsAChange) {
  testing::TempDir t;
  ConfigWatch w;
  ExpectCurrentSwappedIsAChange(t.path(), "", &w);
  // Re-armed, the new version is the one watched.
  ASSERT_TRUE(w.Rearm(t / "current").ok());
  Write(t / "v1/old.yaml", "x");
  EXPECT_FALSE(Changed(w, 100));
  Write(t / "v2/new.yaml", "x");
  EXPECT_TRUE(Changed(w));
}

// upstream's layout: RUNTIME_ROOT's "current" link two levels above the
// directory of files (found from outside: swapped, nothing reloaded).
TEST(ConfigWatch, ALinkFurtherUpThePathSwappedIsAChange) {
  testing::TempDir t;
  ConfigWatch w;
  ExpectCurrentSwappedIsAChange(t / "rt", "ratelimit", &w);
}

// The directory reached through a link whose own target holds a link:
// /etc/ratelimit -> RT/current/ratelimit, "current" swapped (found by a
// review: only the links of the path as written were watched).
TEST(ConfigWatch, ALinkOnALinksTargetSwappedIsAChange) {
  testing::TempDir t;
  fs::create_directories(t / "etc");
  fs::create_directory_symlink(t / "rt/current/ratelimit", t / "etc/ratelimit");
  ConfigWatch w;
  fs::create_directories(t / "rt/v1/ratelimit");
  fs::create_directories(t / "rt/v2/ratelimit");
  fs::create_directory_symlink("v1", t / "rt/current");
  ASSERT_TRUE(w.Rearm(t / "etc/ratelimit").ok());
  Write(t / "rt/other", "x");
  fs::create_directory_symlink("v2", t / "rt/current.tmp");
  EXPECT_FALSE(Changed(w, 100));
  fs::rename(t / "rt/current.tmp", t / "rt/current");
  EXPECT_TRUE(Changed(w));
  // A loop of links ends.
  fs::create_directory_symlink(t / "loop-b", t / "loop-a");
  fs::create_directory_symlink(t / "loop-a", t / "loop-b");
  EXPECT_FALSE(w.Rearm(t / "loop-a").ok());
}

// A link in the tree to a directory frsd writes in (its log's): never
// watched, or each refused reload's log line reloaded it again, five times
// a second (found from outside).
TEST(ConfigWatch, ADirectoryFrsdWritesInIsNotWatchedThroughALink) {
  testing::TempDir t;
  const std::string dir = t / "conf";
  fs::create_directories(dir);
  fs::create_directories(t / "logs");
  fs::create_directory_symlink(t / "logs", dir + "/l");
  ConfigWatch w;
  ASSERT_TRUE(w.Rearm(dir, {t / "logs"}).ok());
  Write(t / "logs/frsd.log", "a line");
  EXPECT_FALSE(Changed(w, 100));
  ASSERT_TRUE(w.Rearm(dir).ok());  // without it, as before
  Write(t / "logs/frsd.log", "another");
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
