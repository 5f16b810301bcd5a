// A file mapped shared (os/mapped_file.h): created whole and private, opened
// by others only once its creator is done, and told deleted or truncated.
#include "os/mapped_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "common/files.h"
#include "common/temp_dir.h"
#include "os/unique_fd.h"

namespace frs {
namespace {

using Mode = os::MappedFile::Mode;
using testing::TempDir;

constexpr uint64_t kSize = 1 << 20;

std::unique_ptr<os::MappedFile> MustMap(const std::string& path, Mode mode) {
  auto r = os::MappedFile::Open(path, mode, kSize);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

// A store file's place in a directory of its own.
class MappedFileTest : public ::testing::Test {
 protected:
  TempDir d_;
  const std::string path_ = d_ / "frs.0.store";
};

TEST_F(MappedFileTest, AMissingFileIsNotFoundUnlessCreated) {
  for (Mode mode : {Mode::kOpenOnly, Mode::kReadOnly}) {
    auto r = os::MappedFile::Open(path_, mode, kSize);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsNotFound());
    EXPECT_EQ(r.status().message(), path_ + ": no such file");
  }
  EXPECT_FALSE(std::filesystem::exists(path_)) << "only kCreateIfMissing creates";
}

// A link at a mapped file's name (a day file's, stats.frs's, a store
// file's) is never written through: a root frsd counted into, or marked as
// damaged, the file it led to (found from outside). Read-only, it is
// followed: nothing is written.
TEST_F(MappedFileTest, ALinkAtItsNameIsNeverWrittenThrough) {
  const std::string outside = d_ / "outside";
  { auto made = MustMap(outside, Mode::kCreateIfMissing); }
  const std::string before = testing::ReadFile(outside);
  ASSERT_EQ(::symlink(outside.c_str(), path_.c_str()), 0);
  for (Mode mode : {Mode::kOpenOnly, Mode::kCreateIfMissing}) {
    auto r = os::MappedFile::Open(path_, mode, kSize);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("is a symbolic link"), std::string::npos) << r.status().ToString();
  }
  EXPECT_TRUE(os::MappedFile::Open(path_, Mode::kReadOnly, kSize).ok());
  EXPECT_EQ(testing::ReadFile(outside), before);
  // A dangling one makes nothing where it leads.
  std::filesystem::remove(path_);
  ASSERT_EQ(::symlink((d_ / "made").c_str(), path_.c_str()), 0);
  EXPECT_FALSE(os::MappedFile::Open(path_, Mode::kCreateIfMissing, kSize).ok());
  EXPECT_FALSE(std::filesystem::exists(d_ / "made"));
}

TEST_F(MappedFileTest, CreatedZeroedSparseAndPrivateThenOpenedAsIs) {
  {
    auto f = MustMap(path_, Mode::kCreateIfMissing);
    ASSERT_NE(f, nullptr);
    EXPECT_TRUE(f->created());
    EXPECT_FALSE(f->read_only());
    EXPECT_EQ(f->path(), path_);
    ASSERT_EQ(f->size(), kSize);
    EXPECT_EQ(f->data()[0], 0);
    EXPECT_EQ(f->data()[kSize - 1], 0);
    struct stat st;
    ASSERT_EQ(::stat(path_.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, kSize / 4) << "sparse";
    std::memcpy(f->data(), "header", 6);
    f->data()[kSize - 1] = 7;
    ASSERT_TRUE(f->FinishCreate().ok());
    ASSERT_TRUE(f->Sync(true).ok());
  }
  auto again = MustMap(path_, Mode::kCreateIfMissing);
  ASSERT_NE(again, nullptr);
  EXPECT_FALSE(again->created()) << "there already: opened, not made again";
  EXPECT_EQ(std::memcmp(again->data(), "header", 6), 0);
  EXPECT_EQ(again->data()[kSize - 1], 7);
  ASSERT_TRUE(again->FinishCreate().ok()) << "nothing to finish for an opener";
  auto ro = MustMap(path_, Mode::kReadOnly);
  ASSERT_NE(ro, nullptr);
  EXPECT_TRUE(ro->read_only());
  EXPECT_EQ(ro->data()[kSize - 1], 7);
  again->data()[0] = 'H';
  EXPECT_EQ(ro->data()[0], 'H') << "one shared mapping of the file";
  const Status reserve = ro->Reserve();
  EXPECT_EQ(reserve.code(), Status::Code::kUnavailable);
  EXPECT_EQ(reserve.message(), path_ + " is open read-only");
}

TEST_F(MappedFileTest, AnOpenerWaitsForTheCreatorToFinish) {
  auto creator = MustMap(path_, Mode::kCreateIfMissing);
  ASSERT_NE(creator, nullptr);
  ASSERT_TRUE(creator->created());
  std::atomic<bool> opened{false};
  uint8_t seen = 0;
  std::thread opener([&] {
    auto f = MustMap(path_, Mode::kOpenOnly);
    if (f) seen = f->data()[0];
    opened.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(opened.load()) << "opened a file whose header was not written yet";
  creator->data()[0] = 42;
  ASSERT_TRUE(creator->FinishCreate().ok());
  opener.join();
  EXPECT_TRUE(opened.load());
  EXPECT_EQ(seen, 42) << "the opener sees the header written before FinishCreate";
}

// frsctl grow swaps a store for a new one while it holds the old files
// exclusively. An opener blocked on that lock meanwhile mapped the new file
// (the mapping opens the path again) but held its lock on the old one: the
// file it used was unlocked, and a later grow's exclusive lock of it did
// not see it. Once it has its lock, an opener whose path names another file
// opens that one, and holds its lock there.
TEST_F(MappedFileTest, AnOpenerBlockedWhileTheFileIsReplacedLocksTheNewOne) {
  {
    auto old_file = MustMap(path_, Mode::kCreateIfMissing);
    ASSERT_NE(old_file, nullptr);
    old_file->data()[0] = 1;
    ASSERT_TRUE(old_file->FinishCreate().ok());
  }
  UniqueFd hold(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(hold.valid());
  ASSERT_EQ(::flock(hold.get(), LOCK_EX), 0);
  struct stat old_st;
  ASSERT_EQ(::fstat(hold.get(), &old_st), 0);
  std::unique_ptr<os::MappedFile> opened;
  std::thread opener([&] { opened = MustMap(path_, Mode::kOpenOnly); });
  // Until the opener waits for the lock (its request is in /proc/locks).
  const std::string waiting = ":" + std::to_string(old_st.st_ino) + " ";
  bool blocked = false;
  for (int i = 0; i < 500 && !blocked; ++i) {
    std::istringstream locks(testing::ReadFile("/proc/locks"));
    for (std::string line; std::getline(locks, line);)
      blocked = blocked || (line.find("->") != std::string::npos && line.find(waiting) != std::string::npos);
    if (!blocked) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    const std::string fresh = d_ / "frs.0.store.new";
    auto f = MustMap(fresh, Mode::kCreateIfMissing);
    ASSERT_NE(f, nullptr);
    f->data()[0] = 2;
    ASSERT_TRUE(f->FinishCreate().ok());
    ASSERT_EQ(std::rename(fresh.c_str(), path_.c_str()), 0);
  }
  hold.reset();  // the lock goes: the opener proceeds
  opener.join();
  EXPECT_TRUE(blocked) << "the opener never waited for the lock: the test proves nothing";
  ASSERT_NE(opened, nullptr);
  EXPECT_EQ(opened->data()[0], 2);
  // The file it maps is locked: an exclusive lock of it is refused.
  UniqueFd probe(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(probe.valid());
  EXPECT_NE(::flock(probe.get(), LOCK_EX | LOCK_NB), 0) << "the opener holds its lock on the file the grow removed";
}

TEST_F(MappedFileTest, AnEmptyFileIsCorrupt) {
  testing::WriteFile(path_, "");
  auto r = os::MappedFile::Open(path_, Mode::kOpenOnly, kSize);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption);
  EXPECT_EQ(r.status().message(), path_ + ": file is empty");
}

TEST_F(MappedFileTest, ADeletedOrTruncatedFileIsMarkedBroken) {
  auto deleted = MustMap(d_ / "a.store", Mode::kCreateIfMissing);
  auto truncated = MustMap(d_ / "b.store", Mode::kCreateIfMissing);
  ASSERT_NE(deleted, nullptr);
  ASSERT_NE(truncated, nullptr);
  EXPECT_TRUE(deleted->CheckStillThere().ok());
  EXPECT_FALSE(deleted->broken());

  ASSERT_EQ(::unlink((d_ / "a.store").c_str()), 0);
  const Status gone = deleted->CheckStillThere();
  EXPECT_EQ(gone.code(), Status::Code::kUnavailable);
  EXPECT_EQ(gone.message(), (d_ / "a.store") + " was deleted while in use; counts written to it since are not kept");
  EXPECT_TRUE(deleted->broken());

  ASSERT_EQ(::truncate((d_ / "b.store").c_str(), 4096), 0);
  const Status cut = truncated->CheckStillThere();
  EXPECT_EQ(cut.code(), Status::Code::kUnavailable);
  EXPECT_EQ(cut.message(), (d_ / "b.store") + " was truncated while in use (4096 of 1048576 bytes)");
  EXPECT_TRUE(truncated->broken());
}

TEST_F(MappedFileTest, ReserveBacksEveryByte) {
  auto f = MustMap(path_, Mode::kCreateIfMissing);
  ASSERT_NE(f, nullptr);
  auto before = f->BytesToReserve();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_GT(before.value(), 0u);
  f->data()[100] = 9;
  ASSERT_TRUE(f->Reserve().ok());
  auto after = f->BytesToReserve();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after.value(), 0u);
  EXPECT_EQ(f->data()[100], 9) << "reserving keeps what was written";
  EXPECT_TRUE(f->Sync(false).ok());
}

}  // namespace
}  // namespace frs
