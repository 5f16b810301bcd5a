// Files an operator names, opened without waiting on them (os/output_file.h),
// and a configuration file that is a FIFO (os/text_file.h).
#include "os/output_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/temp_dir.h"
#include "os/text_file.h"

namespace frs {
namespace {

using testing::TempDir;

TEST(OutputFile, AFifoIsRefusedNamingItWhetherOrNotSomeoneReads) {
  TempDir d;
  const std::string fifo = d / "log.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = os::OpenForAppend(fifo, "decision log");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "the decision log " + fifo + " is a FIFO, not a regular file");
  EXPECT_EQ(os::CheckOutputPath(fifo, "decision log").message(), r.status().message());
  // A reader present: the open succeeds, fstat refuses.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  r = os::OpenForAppend(fifo, "decision log");
  ::close(reader);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is a FIFO"), std::string::npos);
}

TEST(OutputFile, ADirectoryIsRefusedAndAFileIsCreatedBlocking) {
  TempDir d;
  auto dir = os::OpenForAppend(d.path(), "log file");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find(d.path()), std::string::npos);
  EXPECT_FALSE(os::CheckOutputPath(d.path(), "log file").ok());

  const std::string file = d / "a.log";
  EXPECT_TRUE(os::CheckOutputPath(file, "log file").ok());  // absent: created by the open
  // In a directory that does not exist: what the open (so the start) says.
  const std::string lost = d / "nodir/x.log";
  EXPECT_EQ(os::CheckOutputPath(lost, "decision log").message(),
            os::OpenForAppend(lost, "decision log").status().message());
  EXPECT_NE(os::CheckOutputPath(lost, "decision log").message().find("No such file or directory"), std::string::npos);
  auto f = os::OpenForAppend(file, "log file");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(::fcntl(f->get(), F_GETFL) & (O_NONBLOCK | O_APPEND), O_APPEND);
  // A character device takes writes without a reader: allowed.
  EXPECT_TRUE(os::OpenForAppend("/dev/null", "log file").ok());
}

// As root, a link in a directory another user may write (a service user's
// log directory) is refused, its target untouched; in a directory only
// root writes it is followed (a container's /dev/stdout). Any other user
// follows it: it writes nothing it could not write itself.
TEST(OutputFile, RootFollowsNoLinkInADirectoryAnotherUserMayWrite) {
  TempDir dir;
  const std::string target = dir.path() + "/target", link = dir.path() + "/frsd.log";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0700), 0);
  EXPECT_TRUE(frs::os::OpenForAppend(link, "log file").ok());  // root's own directory, or not root
  ASSERT_TRUE(std::filesystem::exists(target));
  std::filesystem::remove(target);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0777), 0);
  auto opened = frs::os::OpenForAppend(link, "log file");
  if (::geteuid() == 0) {
    ASSERT_FALSE(opened.ok());
    EXPECT_NE(opened.status().message().find("the log file " + link +
                                             " is a symbolic link in a directory another user than root may write"),
              std::string::npos)
        << opened.status().message();
    EXPECT_FALSE(std::filesystem::exists(target));
  } else {
    EXPECT_TRUE(opened.ok());
  }
  ASSERT_EQ(::chmod(dir.path().c_str(), 0700), 0);
}

TEST(OutputFile, AConfigurationFileThatIsAFifoIsRefusedNotWaitedOn) {
  TempDir d;
  const std::string fifo = d / "map.xml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = os::ReadTextFile(fifo);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), fifo + ":0: this is a FIFO, not a regular file");
}

}  // namespace
}  // namespace frs
