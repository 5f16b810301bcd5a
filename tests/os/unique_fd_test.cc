// The owned file descriptor (os/unique_fd.h): closed exactly once, by its
// last owner.
#include "os/unique_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include <utility>

namespace frs {
namespace {

int OpenDevNull() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

// Whether `fd` is an open descriptor of this process.
bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

TEST(UniqueFd, ClosesOnDestruction) {
  const int raw = OpenDevNull();
  ASSERT_GE(raw, 0);
  {
    os::UniqueFd fd(raw);
    EXPECT_TRUE(fd.valid());
    EXPECT_EQ(fd.get(), raw);
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFd, DefaultHoldsNothing) {
  os::UniqueFd fd;
  EXPECT_FALSE(fd.valid());
  EXPECT_EQ(fd.get(), -1);
  fd.reset();  // closing nothing is harmless
  EXPECT_FALSE(fd.valid());
}

TEST(UniqueFd, MoveAssignClosesWhatTheTargetHeld) {
  const int first = OpenDevNull(), second = OpenDevNull();
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0);
  os::UniqueFd a(first), b(second);
  a = std::move(b);
  EXPECT_FALSE(IsOpen(first));
  EXPECT_TRUE(IsOpen(second));
  EXPECT_EQ(a.get(), second);
  EXPECT_FALSE(b.valid());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  os::UniqueFd& same = a;
  a = std::move(same);
  EXPECT_EQ(a.get(), second) << "assigned to itself, it keeps its descriptor open";
  EXPECT_TRUE(IsOpen(second));
}

TEST(UniqueFd, MoveConstructionHandsOverWithoutClosing) {
  const int raw = OpenDevNull();
  ASSERT_GE(raw, 0);
  os::UniqueFd a(raw);
  {
    os::UniqueFd b(std::move(a));
    EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(b.get(), raw);
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw)) << "closed once, by the new owner";
}

TEST(UniqueFd, ResetClosesTheOldAndReleaseGivesUpOwnership) {
  const int first = OpenDevNull(), second = OpenDevNull();
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0);
  int released = -1;
  {
    os::UniqueFd fd(first);
    fd.reset(second);
    EXPECT_FALSE(IsOpen(first));
    EXPECT_EQ(fd.get(), second);
    released = fd.release();
    EXPECT_FALSE(fd.valid());
  }
  EXPECT_EQ(released, second);
  EXPECT_TRUE(IsOpen(second)) << "released: the caller closes it";
  ::close(second);
}

}  // namespace
}  // namespace frs
