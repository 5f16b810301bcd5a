// The one way to write a file whole (os/whole_file.h).
#include "os/whole_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "common/files.h"
#include "common/temp_dir.h"

namespace frs::os {
namespace {

using testing::TempDir;

size_t Entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

TEST(WholeFile, ReplacesTheFileAndLeavesNoTemporaryBehind) {
  TempDir d;
  const std::string path = d / "ids";
  for (const WholeFileOptions& o : {WholeFileOptions{}, WholeFileOptions{.sync_file = true},
                                    WholeFileOptions{.sync_file = true, .sync_dir = true}}) {
    auto first = WriteFileWhole(path, "one\n", o);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    EXPECT_EQ(first.value(), Placed::kOurs);
    auto second = WriteFileWhole(path, "two\n", o);
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(testing::ReadFile(path), "two\n");
    EXPECT_EQ(Entries(d.path()), 1u);
  }
}

TEST(WholeFile, ExclusiveKeepsTheFileThereAndSaysSo) {
  TempDir d;
  const std::string path = d / "lease.key";
  auto made = WriteFileWhole(path, "first", WholeFileOptions{.exclusive = true, .mode = 0600});
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(made.value(), Placed::kOurs);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u);
  auto again = WriteFileWhole(path, "second", WholeFileOptions{.exclusive = true});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value(), Placed::kExisting);
  EXPECT_EQ(testing::ReadFile(path), "first");
  EXPECT_EQ(Entries(d.path()), 1u);
}

// A maker that fails leaves the old file as it was, and no temporary file.
TEST(WholeFile, AFailedMakeChangesNothing) {
  TempDir d;
  const std::string path = d / "rules.history";
  ASSERT_TRUE(WriteFileWhole(path, "old\n", {}).ok());
  auto r = WriteFileWhole(path, {}, [](const std::string& tmp) {
    std::ofstream(tmp) << "half";
    return Status::IOError("disk full");
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "disk full");
  EXPECT_EQ(testing::ReadFile(path), "old\n");
  EXPECT_EQ(Entries(d.path()), 1u);
}

TEST(WholeFile, AMissingDirectoryIsAnErrorNamingTheFile) {
  TempDir d;
  auto r = WriteFileWhole(d / "no/such/file", "x", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(d / "no/such/file.tmp."), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace frs::os
