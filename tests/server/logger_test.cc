// frsd's own log on a full disk (server/logger.h): no two events on one line,
// and the lines that could not be written are said once writing works again.
#include "server/logger.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/small_disk.h"
#include "common/temp_dir.h"

namespace frs::server {
namespace {

TEST(Logger, AFullDiskCutsNoTwoEventsIntoOneLineAndSaysWhatItLost) {
  frs::testing::TempDir dir;
  const std::string mount = dir / "small";
  frs::testing::SmallDisk disk(mount, "16k");
  if (!disk.mounted()) GTEST_SKIP() << "needs root to mount a small tmpfs";
  // Most of the disk taken by another file: the log fills the rest.
  const std::string filler = mount + "/filler";
  std::ofstream(filler) << std::string(8192, 'x');
  const std::string path = mount + "/frsd.log";
  ASSERT_TRUE(Logger::Get().Configure(path, "master").ok());
  // Lines of 100-odd bytes: one falls across the last page's end and is cut
  // there, and those after it are not written at all.
  for (int i = 0; i < 200; ++i) FRS_LOG("event %03d %s", i, std::string(60, 'a' + i % 26).c_str());
  std::filesystem::remove(filler);
  FRS_LOG("after the disk had room again");
  ASSERT_TRUE(Logger::Get().Configure("", "frsd").ok());

  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  ASSERT_NE(text.find("after the disk had room again"), std::string::npos) << text;
  // Every line is one event: one header each (a cut line ends with no
  // newline of its own; the next write began at its end before).
  std::istringstream lines(text);
  std::string line;
  size_t events = 0, cut = 0;
  while (std::getline(lines, line)) {
    size_t headers = 0;
    for (size_t at = line.find("frsd["); at != std::string::npos; at = line.find("frsd[", at + 1)) ++headers;
    EXPECT_LE(headers, 1u) << line;
    const size_t e = line.find("event ");
    if (e != std::string::npos) {
      ++events;
      // Whole: "event NNN " and its 60 letters to the line's end.
      const bool whole = line.size() == e + 10 + 60 && line.find_first_not_of(line.back(), e + 10) == std::string::npos;
      if (!whole) ++cut;
    }
  }
  EXPECT_GT(events, 10u);
  EXPECT_LT(events, 200u);
  // How many went unwritten: said, with the count, before the line after.
  const std::string said = " log line(s) before this one could not be written whole (a full disk?)";
  const size_t at = text.find(said);
  ASSERT_NE(at, std::string::npos) << text;
  const size_t number = text.rfind(' ', at - 1) + 1;
  const uint64_t lost = std::stoull(text.substr(number, at - number));
  EXPECT_EQ(lost + events - cut, 200u) << text.substr(number, at - number);
}

}  // namespace
}  // namespace frs::server
