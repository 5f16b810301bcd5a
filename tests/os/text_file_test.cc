// Configuration files read whole, and "file:line" for an offset in one
// (os/text_file.h).
#include "os/text_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/files.h"
#include "common/temp_dir.h"

namespace frs {
namespace {

using testing::TempDir;
using testing::WriteFile;

TEST(TextFile, AMissingFileIsNotFoundNamingIt) {
  TempDir d;
  const std::string path = d / "srv.xml";
  auto r = os::ReadTextFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound());
  EXPECT_EQ(r.status().message(), path + ": no such file");
}

// A file this user may not read says whose it is and as whom the process
// runs (the fix is the user or the mode), as an I/O error, not a bad
// argument. Run as an unprivileged user (root reads anything).
TEST(TextFile, AFileThisUserMayNotReadSaysWhoseItIs) {
  TempDir d;
  const std::string path = d / "srv.xml";
  WriteFile(path, "<frs/>");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  EXPECT_EXIT(
      {
        if (::geteuid() == 0 && ::setuid(65534) != 0) std::_Exit(2);
        auto r = os::ReadTextFile(path);
        if (r.ok()) std::_Exit(3);
        if (r.status().code() != Status::Code::kIOError) std::_Exit(4);
        const std::string& m = r.status().message();
        if (m.find("permission denied") == std::string::npos) std::_Exit(5);
        if (m.find("this process runs as") == std::string::npos) std::_Exit(6);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(TextFile, AReadableFileIsReturnedByteForByte) {
  TempDir d;
  const std::string path = d / "map.xml";
  using namespace std::string_literals;
  const std::string text = "<map>\n\0\xff no newline at the end</map>"s;
  WriteFile(path, text);
  auto r = os::ReadTextFile(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), text);
  WriteFile(path, "");
  auto empty = os::ReadTextFile(path);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty.value(), "");
}

TEST(TextFile, AFileOverTheLimitIsRefused) {
  TempDir d;
  const std::string path = d / "big.xml";
  constexpr size_t kLimit = 1u << 20;
  WriteFile(path, std::string(kLimit, 'x'));
  auto at = os::ReadTextFile(path, kLimit);
  ASSERT_TRUE(at.ok()) << "exactly the limit is allowed";
  EXPECT_EQ(at->size(), kLimit);
  WriteFile(path, std::string(kLimit + 1, 'x'));
  auto over = os::ReadTextFile(path, kLimit);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(over.status().message(), path + ":0: larger than 1 MiB");
}

TEST(TextFile, WhatCannotBeReadSaysWhyAtLineZero) {
  TempDir d;
  auto r = os::ReadTextFile(d.path());  // a directory opens, but does not read
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kIOError);
  EXPECT_EQ(r.status().message(), d.path() + ":0: this is a directory, not a regular file");
}

TEST(LineIndex, OffsetsAreOneBasedLines) {
  // Lines: "ab" at 0, "cd" at 3, "" at 6, "ef" at 7.
  const os::LineIndex idx("conf/map.xml", "ab\ncd\n\nef");
  EXPECT_EQ(idx.path(), "conf/map.xml");
  EXPECT_EQ(idx.LineOf(0), 1u);
  EXPECT_EQ(idx.LineOf(1), 1u);
  EXPECT_EQ(idx.LineOf(2), 1u) << "a newline belongs to the line it ends";
  EXPECT_EQ(idx.LineOf(3), 2u);
  EXPECT_EQ(idx.LineOf(5), 2u);
  EXPECT_EQ(idx.LineOf(6), 3u);
  EXPECT_EQ(idx.LineOf(7), 4u);
  EXPECT_EQ(idx.LineOf(8), 4u);
  EXPECT_EQ(idx.LineOf(1000), 4u) << "past the end: the last line";
  EXPECT_EQ(idx.LineOf(-1), 0u) << "no place: the file as a whole";
  const os::LineIndex ends_in_newline("p", "a\n");
  EXPECT_EQ(ends_in_newline.LineOf(2), 2u) << "after the last newline: the next line";
  const os::LineIndex empty("p", "");
  EXPECT_EQ(empty.LineOf(0), 1u);
}

TEST(LineIndex, AtNamesFileAndLine) {
  const os::LineIndex idx("/etc/frs/srv.xml", "<srv>\n  <bad/>\n</srv>\n");
  EXPECT_EQ(idx.At(8, "unknown element"), "/etc/frs/srv.xml:2: unknown element");
  EXPECT_EQ(idx.At(0, "x"), "/etc/frs/srv.xml:1: x");
  EXPECT_EQ(idx.At(-1, "cannot parse"), "/etc/frs/srv.xml:0: cannot parse");
}

}  // namespace
}  // namespace frs
