// A truncated mapping does not kill its process (os/sigbus_guard.h): a fault
// inside a registered mapping turns it into zero pages and marks it broken;
// a fault anywhere else still kills.
#include "os/sigbus_guard.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "common/temp_dir.h"
#include "common/wait_exit.h"
#include "os/unique_fd.h"

namespace frs {
namespace {

using testing::TempDir;
using testing::WaitExit;

// A shared mapping of a two-page file holding 'x's, and the file's fd.
struct TwoPages {
  explicit TwoPages(const std::string& path) : len(2 * static_cast<size_t>(::sysconf(_SC_PAGESIZE))) {
    fd.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd.valid() || ::ftruncate(fd.get(), static_cast<off_t>(len)) != 0) return;
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED) return;
    base = static_cast<volatile uint8_t*>(p);
    for (size_t i = 0; i < len; ++i) base[i] = 'x';
  }
  ~TwoPages() {
    if (base) ::munmap(const_cast<uint8_t*>(base), len);
  }
  uint8_t* bytes() const { return const_cast<uint8_t*>(base); }

  os::UniqueFd fd;
  size_t len;
  volatile uint8_t* base = nullptr;
};

// How a child that truncates `m`'s file and then reads its first byte ends
// (WaitExit's code): 128 + SIGBUS when the fault killed it, 3 when it read
// on, as only a guarded mapping may.
int TruncateAndTouchInAChild(const TwoPages& m) {
  const pid_t child = ::fork();
  if (child != 0) return child < 0 ? -1 : WaitExit(child);
  const rlimit no_core{0, 0};  // about to die of SIGBUS: leave no core file behind
  ::setrlimit(RLIMIT_CORE, &no_core);
  if (::ftruncate(m.fd.get(), 0) != 0) ::_exit(2);
  ::_exit(m.base[0] == 0 ? 3 : 4);
}

// The guard installed, a directory for the files, and a broken mark.
class SigbusGuardTest : public ::testing::Test {
 protected:
  void SetUp() override { os::InstallSigbusGuard(); }
  TempDir d_;
  std::atomic<bool> broken_{false};
};

TEST_F(SigbusGuardTest, AFaultInARegisteredMappingMarksItBrokenAndReadsZero) {
  os::InstallSigbusGuard();  // a second call changes nothing
  TwoPages m(d_ / "store");
  ASSERT_NE(m.base, nullptr);
  const int handle = os::RegisterGuardedMapping(m.bytes(), m.len, &broken_);
  ASSERT_GE(handle, 0);
  ASSERT_EQ(::ftruncate(m.fd.get(), 0), 0);  // as an operator's truncate(1) would
  EXPECT_EQ(m.base[m.len - 1], 0) << "the faulting read completes, on a zero page";
  EXPECT_TRUE(broken_.load());
  EXPECT_EQ(m.base[0], 0) << "the whole mapping was replaced, not the one page";
  m.base[1] = 'y';  // and stays writable, though nothing written counts
  EXPECT_EQ(m.base[1], 'y');
  os::UnregisterGuardedMapping(handle);
}

TEST_F(SigbusGuardTest, AFaultOutsideEveryRegisteredMappingStillKills) {
  TwoPages guarded(d_ / "guarded"), other(d_ / "other");
  ASSERT_NE(guarded.base, nullptr);
  ASSERT_NE(other.base, nullptr);
  const int handle = os::RegisterGuardedMapping(guarded.bytes(), guarded.len, &broken_);
  ASSERT_GE(handle, 0);
  EXPECT_EQ(TruncateAndTouchInAChild(other), 128 + SIGBUS);
  EXPECT_FALSE(broken_.load());
  os::UnregisterGuardedMapping(handle);
}

TEST_F(SigbusGuardTest, AnUnregisteredMappingIsNoLongerGuarded) {
  TwoPages m(d_ / "store");
  ASSERT_NE(m.base, nullptr);
  os::UnregisterGuardedMapping(os::RegisterGuardedMapping(m.bytes(), m.len, &broken_));
  EXPECT_EQ(TruncateAndTouchInAChild(m), 128 + SIGBUS);
  EXPECT_FALSE(broken_.load());
}

}  // namespace
}  // namespace frs
