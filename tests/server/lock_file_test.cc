// The pid file's and the store's lock (server/pidfile.h): what a second
// start is told while another holds it.
#include "server/pidfile.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/temp_dir.h"

namespace frs::server {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A pid an earlier frsd left is blanked as the lock is taken: a second
// start between the lock and WritePid read it and named a process that was
// gone (or, its pid reused, another program). Blanked in place: truncated,
// the file gave its block back, which on a full disk the start's next file
// took, and the pid could not be written (a restart after a clean stop was
// refused).
TEST(LockFile, TakingItBlanksWhatAnEarlierHolderWroteAndKeepsItsBlock) {
  frs::testing::TempDir dir;
  const std::string path = dir.path() + "/frsd.pid";
  for (const char* earlier : {"12345\n", "7\n", ""}) {
    std::ofstream(path) << earlier;
    auto lock = LockFile::Acquire(path, "pid file");
    ASSERT_TRUE(lock.ok()) << lock.status().ToString();
    const std::string blank = ReadAll(path);
    EXPECT_EQ(blank.find_first_not_of(" \n"), std::string::npos) << earlier << ": " << blank;
    EXPECT_EQ(blank.size(), std::string(earlier).size()) << earlier;
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    if (*earlier) {
      EXPECT_GT(st.st_blocks, 0) << earlier << ": its block was given back";
    }
    ASSERT_TRUE(lock->WritePid(getpid()).ok());
    EXPECT_EQ(ReadAll(path), std::to_string(getpid()) + "\n");
  }
}

// The store's lock names frsd's PID namespace after its pid (a frsctl of
// another namespace is refused: frs/lock_holders.h); the next start blanks
// both lines, and a refusal still reads the pid.
TEST(LockFile, TheStoreLockNamesItsPidNamespace) {
  frs::testing::TempDir dir;
  const std::string path = dir.path() + "/frsd.lock";
  {
    auto lock = LockFile::Acquire(path, "store");
    ASSERT_TRUE(lock.ok()) << lock.status().ToString();
    ASSERT_TRUE(lock->WritePid(getpid(), 4026531836u).ok());
    EXPECT_EQ(ReadAll(path), std::to_string(getpid()) + "\npidns 4026531836\n");
    auto second = LockFile::Acquire(path, "store");
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.status().message().find("its lock names pid " + std::to_string(getpid())), std::string::npos)
        << second.status().message();
  }
  auto again = LockFile::Acquire(path, "store");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ReadAll(path).find_first_not_of(" \n"), std::string::npos) << ReadAll(path);
}

// Held: the refusal names a pid only when that process is an frsd.
TEST(LockFile, ARefusalNamesNoPidThatIsNotAnFrsd) {
  frs::testing::TempDir dir;
  const std::string path = dir.path() + "/frsd.pid";
  auto held = LockFile::Acquire(path, "pid file");
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  std::ofstream(path, std::ios::trunc) << "";
  auto second = LockFile::Acquire(path, "pid file");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(),
            "another frsd (its pid is not written yet) is already running with the pid file " + path);
  // A pid that is no frsd here: the holder's in another PID namespace (a
  // container's), or on another machine; not a number to kill here.
  std::ofstream(path, std::ios::trunc) << getpid() << "\n";
  second = LockFile::Acquire(path, "pid file");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(), "another frsd (its lock names pid " + std::to_string(getpid()) +
                                           ", no frsd here: one in another PID namespace, a container's, or on "
                                           "another machine sharing the directory) is already running with the "
                                           "pid file " +
                                           path);
}

// A holder on its way out is waited for: the start a moment after a kill
// -9 takes the lock (it was refused). Here the holder is a zombie whose
// child keeps the lock's file open until the test lets it go, 200 ms into
// the second start's wait (an frsd killed so is a process with SIGKILL
// pending until its files close, a moment too short to test).
TEST(LockFile, ADyingHoldersLockIsWaitedFor) {
  frs::testing::TempDir dir;
  const std::string path = dir.path() + "/frsd.pid";
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    auto held = LockFile::Acquire(path, "pid file");
    if (!held.ok() || !held->WritePid(::getpid()).ok()) ::_exit(1);
    if (::fork() == 0) {  // the lock's file open past its holder's end
      ::close(go[1]);
      char c;
      (void)::read(go[0], &c, 1);  // until the test closes its end
      ::_exit(0);
    }
    ::_exit(0);
  }
  ::close(go[0]);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(holder), &info, WEXITED | WNOWAIT), 0);  // a zombie, not reaped
  EXPECT_EQ(info.si_status, 0);
  std::thread release([&] {
    ::usleep(200000);
    ::close(go[1]);
  });
  auto second = LockFile::Acquire(path, "pid file");
  release.join();
  ::waitpid(holder, nullptr, 0);
  EXPECT_TRUE(second.ok()) << second.status().ToString();
}

// A link at the lock's place (planted by the owner of a store directory
// that an frsd started as root then uses) is refused, its target untouched.
TEST(LockFile, ASymbolicLinkIsRefusedNotFollowed) {
  frs::testing::TempDir dir;
  const std::string target = dir.path() + "/victim", path = dir.path() + "/frsd.lock";
  std::ofstream(target) << "precious\n";
  ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0);
  auto lock = LockFile::Acquire(path, "store");
  ASSERT_FALSE(lock.ok());
  EXPECT_EQ(lock.status().message(),
            "the store lock " + path + " is a symbolic link: frsd does not follow one there (remove it)");
  EXPECT_EQ(ReadAll(target), "precious\n");
  // Dangling: nothing is created where it points.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::symlink((dir.path() + "/created").c_str(), path.c_str()), 0);
  EXPECT_FALSE(LockFile::Acquire(path, "store").ok());
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/created"));
}

}  // namespace
}  // namespace frs::server
