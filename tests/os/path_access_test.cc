// A store this user may not see is a permission problem, named as one: it
// was reported as "no such store file, run frsctl init" (and frsctl init
// would have tried to create it).
#include "os/path_access.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "common/temp_dir.h"
#include "frs/store.h"

namespace frs {
namespace {

TEST(PathAccess, ThereOrNot) {
  testing::TempDir d;
  std::ofstream(d / "f") << "x";
  EXPECT_TRUE(os::PathExists(d / "f").value());
  EXPECT_FALSE(os::PathExists(d / "none").value());
  EXPECT_FALSE(os::PathExists(d / "f/below").value());  // ENOTDIR: not there either
}

// What an unprivileged user is told about a store under a directory only its
// owner may enter, from a child that drops to nobody (root only: CI runs as
// root; as another user the test itself is that unprivileged user).
TEST(PathAccess, AStoreThisUserMayNotSeeIsNamedAsAPermissionProblem) {
  testing::TempDir d;
  const std::string data = d / "data";
  StoreOptions so;
  so.dir = data;
  so.geometry = StoreGeometry{1, 64, 8};
  ASSERT_TRUE(Store::Open(so).ok());  // created by its owner
  ASSERT_EQ(::chmod(data.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(d.path().c_str(), 0755), 0);
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become another user";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    std::string said;
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) {
      said = "setuid failed";
    } else {
      so.create_if_missing = false;
      auto s = Store::Open(so);
      said = s.ok() ? "opened" : s.status().message();
      said += "\n";
      auto r = os::PathExists(data + "/frs.0.store");
      said += r.ok() ? "seen" : r.status().message();
    }
    [[maybe_unused]] ssize_t w = ::write(fds[1], said.data(), said.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string said;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) said.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(said.find("no such"), std::string::npos) << said;
  EXPECT_EQ(said.find("frsctl init"), std::string::npos) << said;
  EXPECT_NE(said.find(data + "/frs.0.store: permission denied: " + data + " is owned by root:root mode 0700"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("this process runs as nobody:nogroup"), std::string::npos) << said;
  EXPECT_EQ(said.find("seen"), std::string::npos) << said;
}

// The fix the words give: a mode for a file this process owns (running as
// its owner would change nothing), else the owner (or the owner or mode).
TEST(PathAccess, TheFixNamedFitsWhoOwnsThePath) {
  testing::TempDir d;
  const std::string file = d / "frs.0.store";
  std::ofstream(file) << "x";
  ASSERT_EQ(::chmod(file.c_str(), 0400), 0);
  const std::string own = os::PermissionWords(file);
  EXPECT_NE(own.find("mode 0400"), std::string::npos) << own;
  EXPECT_NE(own.find("(its owner: give it u+rw)"), std::string::npos) << own;
  EXPECT_EQ(own.find("run it as that owner"), std::string::npos) << own;
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another user";
  ASSERT_EQ(::chown(file.c_str(), 65534, 65534), 0);
  const std::string other = os::PermissionWords(file);
  EXPECT_NE(other.find("(run it as that owner, or change its owner or mode)"), std::string::npos) << other;
}

}  // namespace
}  // namespace frs
