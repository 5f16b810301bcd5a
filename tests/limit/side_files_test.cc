// The engine's files beside the store's (limit/side_files.h): each checked
// as its reader checks it, and frsd's start acting on the verdicts.
#include "limit/side_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/files.h"
#include "common/temp_dir.h"
#include "frs/store_admin.h"
#include "limit/lease_id.h"
#include "limit/map_config.h"
#include "limit/rule_block.h"
#include "limit/rule_history.h"
#include "stats/daily_stats.h"
#include "stats/group_table.h"
#include "stats/recent_denials.h"

namespace frs::limit {
namespace {

void Smash(const std::string& path, uint64_t at, const std::string& bytes) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Makes stats.frs, denials.frs and rules.history as frsd's engine would.
void MakeFiles(const std::string& dir) {
  ASSERT_TRUE(stats::DailyStats::Open(dir).ok());
  ASSERT_TRUE(stats::RecentDenials::Open(dir, /*read_only=*/false).ok());
  std::ofstream(dir + "/rules.history") << "# biz-id rule-name identity max\n1 login_1 60 5\n";
}

TEST(SideFiles, CleanFilesAreCleanAndMissingOnesAreCreatedByFrsd) {
  frs::testing::TempDir d;
  const std::string dir = d.path();
  for (const SideFileReport& r : CheckSideFiles(dir)) {
    EXPECT_FALSE(r.exists) << r.path;
    EXPECT_TRUE(r.status.ok()) << r.path;
    EXPECT_EQ(r.AtStartText(), "frsd creates it");
  }
  MakeFiles(dir);
  const auto reports = CheckSideFiles(dir);
  ASSERT_EQ(reports.size(), 4u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(reports[i].exists && reports[i].status.ok()) << reports[i].path;
  EXPECT_FALSE(reports[3].exists);  // lease.key: made at the first lease, or frsd's start
  EXPECT_TRUE(reports[3].status.ok());
  auto said = PrepareSideFiles(dir);
  ASSERT_TRUE(said.ok());
  EXPECT_TRUE(said->empty());
}

// A link where frsd writes in place: the checks read through it and said
// "clean: frsd uses it" of a denials.frs frsd refuses (found from outside).
// What each is, and what frsd does: serves without the denials, refuses to
// start on stats.frs, counts nothing by field below a link; a link at
// rules.history or lease.key, replaced whole by a rename, is read as theirs.
TEST(SideFiles, ALinkWhereFrsdWritesInPlaceIsSaidAsOne) {
  frs::testing::TempDir d, other;
  const std::string dir = d.path();
  MakeFiles(dir);
  MakeFiles(other.path());
  ASSERT_TRUE(LoadLeaseSecret(other.path(), /*create=*/true).ok());
  for (const char* name : {"stats.frs", "denials.frs", "rules.history", "lease.key"}) {
    std::filesystem::remove(dir + "/" + name);
    std::filesystem::create_symlink(other / name, dir + "/" + name);
  }
  std::filesystem::create_directories(dir + "/stats");
  std::filesystem::create_directory_symlink(other.path(), dir + "/stats/7");
  const auto reports = CheckSideFiles(dir);
  ASSERT_EQ(reports.size(), 5u);
  for (size_t i : {0, 1}) {
    EXPECT_TRUE(reports[i].link) << reports[i].path;
    EXPECT_NE(reports[i].status.message().find(reports[i].path + " is a symbolic link"), std::string::npos);
  }
  EXPECT_TRUE(reports[0].RefusesStart());
  EXPECT_EQ(reports[0].AtStartText(), "frsd refuses to start while it is a link");
  EXPECT_FALSE(reports[1].RefusesStart());
  EXPECT_EQ(reports[1].AtStartText(),
            "frsd serves, but keeps no recent denials (frsctl top --denied) while it is a link");
  for (size_t i : {2, 3}) EXPECT_TRUE(reports[i].status.ok() && !reports[i].link) << reports[i].path;
  EXPECT_EQ(reports[4].path, dir + "/stats/7");
  EXPECT_TRUE(reports[4].link);
  EXPECT_FALSE(reports[4].RefusesStart());
  EXPECT_EQ(reports[4].AtStartText(), "frsd serves, but counts no statistics by key field there while it is a link");
}

// A store directory this user may not search hides whether its files are
// there: verify called them "absent: frsd creates it". They are unreadable,
// with the directory's owner and mode. (A child as nobody: root searches
// any directory.)
TEST(SideFiles, AFileInADirectoryThisUserMayNotSearchIsNotAbsent) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become another user (CI runs as root)";
  frs::testing::TempDir d;
  const std::string dir = d / "store";
  std::filesystem::create_directory(dir);
  MakeFiles(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) ::_exit(10);
    int bad = 0;
    for (const SideFileReport& r : CheckSideFiles(dir)) {
      if (!r.exists || r.status.ok() || r.status.message().find("permission denied") == std::string::npos) ++bad;
      if (r.AtStartText() == "frsd creates it") ++bad;
    }
    ::_exit(bad == 0 ? 0 : 20 + bad);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "10: could not become nobody; 20+N: N reports called absent or clean";
}

// A rules.history line of the right form whose fields are out of range is
// named for what is wrong, not as a line of another form.
TEST(SideFiles, ARuleHistoryLineOutOfRangeIsNamedForIt) {
  const struct {
    const char* line;
    const char* says;
  } cases[] = {
      {"99999 foo 1 1", "line 3 names biz id 99999, out of range (1..65535) (the file is damaged)"},
      {"0 foo 1 1", "line 3 names biz id 0, out of range (1..65535)"},
      {"7 foo 1 0", "line 3 gives max 0, not above 0"},
      {"7 foo 1 1 extra", "line 3 is not \"biz-id rule-name identity max\""},
      {"7 foo", "line 3 is not \"biz-id rule-name identity max\""},
  };
  for (const auto& c : cases) {
    frs::testing::TempDir d;
    const std::string dir = d.path();
    MakeFiles(dir);
    std::ofstream(dir + "/rules.history", std::ios::app) << c.line << "\n";
    const auto reports = CheckSideFiles(dir);
    EXPECT_NE(reports[2].status.message().find("rules.history: " + std::string(c.says)), std::string::npos)
        << c.line << ": " << reports[2].status.ToString();
  }
}

// A FIFO at rules.history held a SIGHUP's master, a respawned worker and
// every frsctl command waiting for a writer, and a link to /dev/zero was
// read without end; a read command then replaced either with a new file
// (an outside run). Neither is waited on, read or replaced now: frsd's start
// and frsctl verify say what it is (CheckSideFiles).
TEST(SideFiles, ARuleHistoryThatIsNoFileIsNeitherWaitedOnNorReplaced) {
  auto map = ParseMap("<map><biz id=\"1\" name=\"a\"><rule interval=\"60\" max=\"5\"/></biz></map>", "map.xml");
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  for (const bool fifo : {true, false}) {
    frs::testing::TempDir d;
    const std::string path = d.path() + "/rules.history";
    if (fifo) ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    else ASSERT_EQ(::symlink("/dev/zero", path.c_str()), 0);
    RuleHistory history(d.path(), /*read_only=*/false);
    MapConfig config = *map;
    history.Apply(&config);  // returns: it waited on, or read, nothing
    struct stat st {};
    ASSERT_EQ(::lstat(path.c_str(), &st), 0);
    EXPECT_TRUE(fifo ? S_ISFIFO(st.st_mode) : S_ISLNK(st.st_mode)) << "replaced: mode " << std::oct << st.st_mode;
    EXPECT_EQ(config.bizzes[0].rules[0].npast, 0u);
  }
}

// A token bucket's maxes of one interval, kept by two processes that apply
// each map in turn (a reload's workers): both files end the same, the last
// RuleHistory::kTokenMaxes newest last, each earlier one given to the rule.
// One process's memory put back a max the other had dropped, as the newest,
// and two holders of a key read its tokens in use 37,000 apart (found from
// outside).
TEST(SideFiles, ATokenBucketsMaxesAreTheSameInEveryProcessThatAppliesTheMaps) {
  frs::testing::TempDir d;
  RuleHistory first(d.path(), /*read_only=*/false), second(d.path(), /*read_only=*/false);
  MapConfig last;
  for (const int max : {200000, 190000, 180000, 170000, 160000, 150000}) {
    auto map = ParseMap("<map><biz id=\"1\" name=\"a\"><rule algo=\"token_bucket\" interval=\"3600\" max=\"" +
                            std::to_string(max) + "\"/></biz></map>",
                        "map.xml");
    ASSERT_TRUE(map.ok()) << map.status().ToString();
    for (RuleHistory* h : {&first, &second}) {
      MapConfig config = *map;
      h->Apply(&config);
      last = config;
    }
  }
  std::ifstream in(d.path() + "/rules.history");
  std::string line, maxes;
  while (std::getline(in, line))
    if (!line.starts_with("#")) maxes += line.substr(line.rfind(' ') + 1) + " ";
  EXPECT_EQ(maxes, "180000 170000 160000 150000 ");
  const RuleSpec& spec = last.bizzes[0].rules[0];
  ASSERT_EQ(spec.npast, RuleHistory::kTokenMaxes - 1);
  EXPECT_EQ(spec.past[0].max, 160000);  // newest first
  EXPECT_EQ(spec.past[1].max, 170000);
  EXPECT_EQ(spec.past[2].max, 180000);
}

// frsd refuses to start or reload on a rules.history it cannot read, and
// frsctl says it; a damaged line is not that (the rest is read).
TEST(SideFiles, ARuleHistoryThatCannotBeReadIsSaidADamagedLineIsNot) {
  frs::testing::TempDir d;
  const std::string path = d.path() + "/rules.history";
  EXPECT_EQ(RuleHistoryUnreadableWarning(d.path()), "");  // none yet
  std::ofstream(path) << "1 a 60 5\nnot a line\n";
  EXPECT_EQ(RuleHistoryUnreadableWarning(d.path()), "");
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_NE(RuleHistoryUnreadableWarning(d.path()).find("rules.history is a FIFO"), std::string::npos)
      << RuleHistoryUnreadableWarning(d.path());
}

// A history that could not be written was dropped unsaid, and a later
// interval change started its keys' counts afresh (an outside run, under
// RLIMIT_FSIZE): the engine's on_problem hears of it.
TEST(SideFiles, ARuleHistoryThatCannotBeWrittenIsSaid) {
  auto map = ParseMap("<map><biz id=\"1\" name=\"a\"><rule interval=\"60\" max=\"5\"/></biz></map>", "map.xml");
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  frs::testing::TempDir d;
  std::vector<std::string> said;
  RuleHistory history(d.path() + "/gone", /*read_only=*/false, [&](const std::string& w) { said.push_back(w); });
  MapConfig config = *map;
  history.Apply(&config);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("rules.history was not rewritten: a rule whose interval changes"), std::string::npos)
      << said[0];
}

// The history is kept between reloads (a file of 195,000 lines was read
// whole at each one, 0.3-0.6 s a worker); one another process rewrote since
// (another worker, frsctl, an earlier frsd) is read again, its pasts kept.
TEST(SideFiles, ARuleHistoryRewrittenByAnotherProcessIsReadAtTheNextReload) {
  auto map_of = [](int interval) {
    auto m = ParseMap("<map><biz id=\"1\" name=\"a\"><rule name=\"r\" interval=\"" + std::to_string(interval) +
                          "\" max=\"5\"/></biz></map>",
                      "map.xml");
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return *m;
  };
  auto identity = [](const MapConfig& m) { return TagIdentity(m.bizzes[0].rules[0].tag); };
  frs::testing::TempDir d;
  RuleHistory mine(d.path(), /*read_only=*/false), other(d.path(), /*read_only=*/false);
  MapConfig m60 = map_of(60), m120 = map_of(120), m30 = map_of(30);
  mine.Apply(&m60);
  other.Apply(&m120);  // reads 60's line, writes 120's after it
  MapConfig now = m30;
  mine.Apply(&now);
  ASSERT_EQ(now.bizzes[0].rules[0].npast, 2u);
  EXPECT_EQ(now.bizzes[0].rules[0].past[0].identity, identity(m120)) << "another process's line was not read";
  EXPECT_EQ(now.bizzes[0].rules[0].past[1].identity, identity(m60));
  // The same map again: the pasts as before, the file left as it is.
  struct stat before {
  }, after{};
  ASSERT_EQ(::stat((d / "rules.history").c_str(), &before), 0);
  now = m30;
  mine.Apply(&now);
  ASSERT_EQ(now.bizzes[0].rules[0].npast, 2u);
  EXPECT_EQ(now.bizzes[0].rules[0].past[0].identity, identity(m120));
  ASSERT_EQ(::stat((d / "rules.history").c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino) << "a reload that adds nothing rewrote the history";
  // Not read again while its stamp holds: bytes changed in place, its size
  // and time put back (no writer does that), are not seen; the next change
  // writes the history it holds over them.
  {
    std::fstream f(d / "rules.history", std::ios::in | std::ios::out | std::ios::binary);
    f.write("xx", 2);
  }
  const struct timespec times[2] = {after.st_atim, after.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, (d / "rules.history").c_str(), times, 0), 0);
  now = m60;
  mine.Apply(&now);
  EXPECT_EQ(frs::testing::ReadFile(d / "rules.history").substr(0, 2), "# ") << "the file was read again";
  // Removed under it: what it held in memory is written again at the next
  // change, not forgotten.
  ASSERT_TRUE(std::filesystem::remove(d / "rules.history"));
  now = m120;
  mine.Apply(&now);
  ASSERT_EQ(now.bizzes[0].rules[0].npast, 2u);
  EXPECT_EQ(now.bizzes[0].rules[0].past[0].identity, identity(m60));
  EXPECT_EQ(now.bizzes[0].rules[0].past[1].identity, identity(m30));
  EXPECT_TRUE(std::filesystem::exists(d / "rules.history"));
}

// Biz 1's `rules` as a map, recorded in `h` with their pasts filled.
MapConfig ApplyRules(RuleHistory* h, const std::string& rules) {
  auto m = ParseMap("<map><biz id=\"1\" name=\"a\">" + rules + "</biz></map>", "map.xml");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  MapConfig c = *m;
  h->Apply(&c);
  return c;
}

// A name the map no longer holds whose newest identity a rule's lineage had
// was renamed to it: its older identities are that rule's past too, unless
// two rules could descend from it (then neither).
TEST(SideFiles, ARenamedRulesPastHoldsItsOldNamesAndNoOneInheritsAnAmbiguousOne) {
  frs::testing::TempDir d;
  RuleHistory h(d.path(), /*read_only=*/false);
  auto apply = [&h](const std::string& rules) { return ApplyRules(&h, rules); };
  auto id = [](const MapConfig& c, int rule) { return TagIdentity(c.bizzes[0].rules[rule].tag); };
  const MapConfig r600 = apply(R"(<rule name="r1" interval="600" max="5"/>)");
  const MapConfig r1200 = apply(R"(<rule name="r1" interval="1200" max="5"/>)");
  MapConfig rx = apply(R"(<rule name="rx" interval="1200" max="5"/>)");
  ASSERT_EQ(rx.bizzes[0].rules[0].npast, 1u);
  EXPECT_EQ(rx.bizzes[0].rules[0].past[0].identity, id(r600, 0));
  MapConfig rx1800 = apply(R"(<rule name="rx" interval="1800" max="5"/>)");
  ASSERT_EQ(rx1800.bizzes[0].rules[0].npast, 2u);
  EXPECT_EQ(rx1800.bizzes[0].rules[0].past[0].identity, id(r1200, 0));
  EXPECT_EQ(rx1800.bizzes[0].rules[0].past[1].identity, id(r600, 0));

  // Two rules that could each descend from "old" (900 s its newest): "p"
  // had 900 s once, "q" has it now. Neither takes old's 300 s.
  frs::testing::TempDir d2;
  RuleHistory h2(d2.path(), /*read_only=*/false);
  auto apply2 = [&h2](const std::string& rules) { return ApplyRules(&h2, rules); };
  apply2(R"(<rule name="old" interval="300" max="5"/><rule name="p" interval="900" max="5"/>)");
  apply2(R"(<rule name="old" interval="900" max="5"/><rule name="p" interval="60" max="5"/>)");
  MapConfig both = apply2(R"(<rule name="p" interval="60" max="5"/><rule name="q" interval="900" max="5"/>)");
  const uint32_t i300 =
      TagIdentity(ParseMap(R"(<map><biz id="1" name="a"><rule interval="300" max="5"/></biz></map>)", "m")
                      .value()
                      .bizzes[0]
                      .rules[0]
                      .tag);
  for (int r = 0; r < 2; ++r)
    for (uint32_t k = 0; k < both.bizzes[0].rules[r].npast; ++k)
      EXPECT_NE(both.bizzes[0].rules[r].past[k].identity, i300) << "rule " << r << " took an ambiguous name's past";
}

// A damaged denials.frs or rules.history was taken without a word (the
// table of denials silently left out, the history's lines skipped): frsd's
// start now moves each aside, says so, and starts a new one.
TEST(SideFiles, ADamagedDenialsTableOrRuleHistoryIsMovedAsideAndSaid) {
  frs::testing::TempDir d;
  const std::string dir = d.path();
  MakeFiles(dir);
  Smash(dir + "/denials.frs", 0, "YYYYYYYY");
  std::ofstream(dir + "/rules.history", std::ios::app) << "\x01\x02 not a line of history\n";
  const auto reports = CheckSideFiles(dir);
  ASSERT_EQ(reports.size(), 4u);
  EXPECT_TRUE(reports[0].status.ok());
  EXPECT_FALSE(reports[1].status.ok());
  EXPECT_NE(reports[2].status.message().find("rules.history: line 3 is not"), std::string::npos)
      << reports[2].status.ToString();
  EXPECT_EQ(reports[1].AtStartText(), "frsd moves it aside at start and starts a new one");

  auto said = PrepareSideFiles(dir);
  ASSERT_TRUE(said.ok()) << said.status().ToString();
  ASSERT_EQ(said->size(), 2u);
  EXPECT_NE((*said)[0].find("denials.frs: bad magic"), std::string::npos) << (*said)[0];
  EXPECT_NE((*said)[0].find("moved aside to " + dir + "/denials.frs.damaged-"), std::string::npos) << (*said)[0];
  EXPECT_NE((*said)[1].find("moved aside to " + dir + "/rules.history.damaged-"), std::string::npos) << (*said)[1];
  size_t aside = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    aside += e.path().filename().string().find(".damaged-") != std::string::npos;
  EXPECT_EQ(aside, 2u);
  for (const SideFileReport& r : CheckSideFiles(dir)) EXPECT_TRUE(r.status.ok()) << r.status.ToString();
}

// A damaged stats.frs holds today's counters: frsd refuses, naming the file
// and the fix, and changes nothing.
TEST(SideFiles, ADamagedDailyStatsFileRefusesTheStartNamingTheFix) {
  frs::testing::TempDir d;
  const std::string dir = d.path();
  MakeFiles(dir);
  Smash(dir + "/stats.frs", 0, "XXXXXXXX");
  const auto reports = CheckSideFiles(dir);
  EXPECT_NE(reports[0].status.message().find("stats.frs: bad magic"), std::string::npos);
  EXPECT_EQ(reports[0].AtStartText(), "frsd refuses to start until it is moved aside or restored");
  auto said = PrepareSideFiles(dir);
  ASSERT_FALSE(said.ok());
  EXPECT_NE(said.status().message().find(dir + "/stats.frs: bad magic: frsd will not start on a damaged"),
            std::string::npos)
      << said.status().message();
  EXPECT_NE(said.status().message().find("restore it from a backup, or move it aside"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir + "/stats.frs"));
}

// A stats.frs of zeros only, or empty: a creation cut short (a kill before
// its header, a power loss before the header reached the disk) holds no
// count; the start refused it all the same, so a machine that lost power
// in its first minute did not start again. Moved aside, started anew. One
// with a count in it still refuses.
TEST(SideFiles, ADailyStatsFileOfZerosIsACreationCutShortAndIsStartedAnew) {
  frs::testing::TempDir d;
  const std::string dir = d.path();
  MakeFiles(dir);
  const uint64_t size = std::filesystem::file_size(dir + "/stats.frs");
  for (const uint64_t bytes : {uint64_t{0}, size}) {
    std::filesystem::resize_file(dir + "/stats.frs", 0);
    std::filesystem::resize_file(dir + "/stats.frs", bytes);
    const auto reports = CheckSideFiles(dir);
    EXPECT_NE(reports[0].status.message().find("every byte is zero: a creation cut short"), std::string::npos)
        << reports[0].status.message();
    EXPECT_EQ(reports[0].AtStartText(), "frsd moves it aside at start and starts a new one");
    auto said = PrepareSideFiles(dir);
    ASSERT_TRUE(said.ok()) << said.status().message();
    ASSERT_EQ(said->size(), 1u);
    EXPECT_NE((*said)[0].find("moved aside to"), std::string::npos) << (*said)[0];
    EXPECT_FALSE(std::filesystem::exists(dir + "/stats.frs"));
    ASSERT_TRUE(stats::DailyStats::Open(dir).ok());
  }
  std::filesystem::resize_file(dir + "/stats.frs", 0);
  std::filesystem::resize_file(dir + "/stats.frs", size);
  Smash(dir + "/stats.frs", size / 2, "x");
  EXPECT_EQ(CheckSideFiles(dir)[0].AtStartText(), "frsd refuses to start until it is moved aside or restored");
  EXPECT_FALSE(PrepareSideFiles(dir).ok());
}

// A side file that cannot be read is not damage: moving it aside would not
// help, and for lease.key it would unmake every id given out. frsd -t and
// verify said "until it is moved aside or restored" of an unreadable one.
TEST(SideFiles, AFileThatCannotBeReadIsNotToBeMovedAside) {
  frs::testing::TempDir d;
  const std::string dir = d.path();
  MakeFiles(dir);
  std::filesystem::create_directory(dir + "/lease.key");
  const auto reports = CheckSideFiles(dir);
  ASSERT_EQ(reports.size(), 4u);
  EXPECT_EQ(reports[3].path, dir + "/lease.key");
  ASSERT_FALSE(reports[3].status.ok());
  EXPECT_NE(reports[3].status.code(), Status::Code::kCorruption) << reports[3].status.ToString();
  EXPECT_NE(reports[3].AtStartText().find("until it can read it"), std::string::npos) << reports[3].AtStartText();
  EXPECT_NE(reports[3].AtStartText().find("do not move it aside"), std::string::npos);
  // The start's refusal says the same (it named only the fault: found by an
  // outside run).
  auto said = PrepareSideFiles(dir);
  ASSERT_FALSE(said.ok());
  EXPECT_EQ(said.status().message(), reports[3].status.message() + ": " + reports[3].AtStartText());
}

// A directory in the place of denials.frs or rules.history: named as one,
// with its fix (remove it), not as a map failing with "No such device";
// rules.history read as empty and never written before, so an interval
// changed since started its keys afresh at the next start, unsaid.
TEST(SideFiles, ADirectoryInAFilesPlaceIsNamedAsOne) {
  frs::testing::TempDir d;
  const std::string dir = d.path();
  MakeFiles(dir);
  std::filesystem::remove(dir + "/denials.frs");
  std::filesystem::create_directory(dir + "/denials.frs");
  std::filesystem::remove(dir + "/rules.history");
  std::filesystem::create_directory(dir + "/rules.history");
  const auto reports = CheckSideFiles(dir);
  ASSERT_EQ(reports.size(), 4u);
  EXPECT_EQ(reports[1].path, dir + "/denials.frs");
  EXPECT_EQ(reports[1].status.message(), dir + "/denials.frs is a directory, not a regular file");
  EXPECT_TRUE(reports[1].RefusesStart());
  EXPECT_NE(reports[1].AtStartText().find("owner, mode or type"), std::string::npos) << reports[1].AtStartText();
  EXPECT_EQ(reports[2].path, dir + "/rules.history");
  EXPECT_EQ(reports[2].status.message().rfind(dir + "/rules.history is a directory, not a regular file: ", 0), 0u)
      << reports[2].status.message();
  EXPECT_TRUE(reports[2].RefusesStart());
  EXPECT_FALSE(PrepareSideFiles(dir).ok());
}

// What frsd -t reports as a refusal is what the start refuses: a file read
// at start that cannot be read is one, whatever its row for damage says
// (denials.frs or rules.history unreadable was only warned of, then the
// start refused it); a damaged one whose row moves it aside is not.
TEST(SideFiles, RefusesStartIsWhatTheStartRefuses) {
  frs::testing::TempDir d;
  const std::string dir = d.path();
  MakeFiles(dir);
  std::filesystem::remove(dir + "/denials.frs");
  std::filesystem::create_directory(dir + "/denials.frs");  // unreadable as root too
  auto reports = CheckSideFiles(dir);
  ASSERT_EQ(reports[1].path, dir + "/denials.frs");
  ASSERT_FALSE(reports[1].status.ok());
  EXPECT_NE(reports[1].status.code(), Status::Code::kCorruption) << reports[1].status.ToString();
  EXPECT_TRUE(reports[1].RefusesStart()) << reports[1].status.ToString();
  EXPECT_FALSE(PrepareSideFiles(dir).ok());
  std::filesystem::remove(dir + "/denials.frs");
  ASSERT_TRUE(stats::RecentDenials::Open(dir, /*read_only=*/false).ok());
  std::ofstream(dir + "/rules.history", std::ios::app) << "not an entry\n";
  reports = CheckSideFiles(dir);
  ASSERT_FALSE(reports[2].status.ok());
  EXPECT_FALSE(reports[2].RefusesStart()) << reports[2].status.ToString();  // moved aside
  EXPECT_TRUE(PrepareSideFiles(dir).ok());
  for (const SideFileReport& r : CheckSideFiles(dir)) EXPECT_FALSE(r.RefusesStart()) << r.path;
}

// A statistics directory that cannot be walked was reported as no day
// files at all (verify "clean"), while frsd counted nothing by field: it is
// reported, as what the start does not refuse.
TEST(SideFiles, AStatisticsDirectoryThatCannotBeReadIsReported) {
  frs::testing::TempDir d;
  const std::string dir = d.path();
  MakeFiles(dir);
  std::filesystem::remove_all(dir + "/stats");
  std::ofstream(dir + "/stats") << "x";
  const auto reports = CheckSideFiles(dir);
  ASSERT_EQ(reports.size(), 5u);
  EXPECT_EQ(reports[4].path, dir + "/stats");
  ASSERT_FALSE(reports[4].status.ok());
  EXPECT_NE(reports[4].status.message().find("cannot read the statistics by key field"), std::string::npos)
      << reports[4].status.ToString();
  EXPECT_NE(reports[4].AtStartText().find("frsd starts, but counts no statistics by key field here"), std::string::npos)
      << reports[4].AtStartText();
  EXPECT_FALSE(reports[4].RefusesStart());
}

// lease.key readable by others was accepted silently (a reader can forge
// every id), where <cluster lease_key> at that mode is refused: warned of,
// by frsd -t and in the start's log.
TEST(SideFiles, ALeaseKeyOthersMayReadIsWarnedOf) {
  frs::testing::TempDir d;
  const std::string dir = d.path();
  MakeFiles(dir);
  ASSERT_TRUE(limit::LoadLeaseSecret(dir, /*create=*/true).ok());
  EXPECT_EQ(LeaseKeyModeWarning(dir), "");  // made 0600
  ASSERT_EQ(::chmod((dir + "/lease.key").c_str(), 0644), 0);
  const std::string w = LeaseKeyModeWarning(dir);
  EXPECT_NE(w.find(dir + "/lease.key has mode 0644"), std::string::npos) << w;
  EXPECT_NE(w.find("chmod 600"), std::string::npos) << w;
  auto said = PrepareSideFiles(dir);
  ASSERT_TRUE(said.ok()) << said.status().ToString();
  ASSERT_EQ(said->size(), 1u);
  EXPECT_EQ((*said)[0], "warning: " + w);
}

// A store whose lease.key went missing: frsd -t and the start say that a
// new secret voids every id given out (they check that the store existed).
TEST(SideFiles, AMissingLeaseKeyIsWarnedOf) {
  frs::testing::TempDir d;
  const std::string dir = d.path();
  MakeFiles(dir);
  const std::string w = LeaseKeyMissingWarning(dir);
  EXPECT_NE(w.find(dir + "/lease.key is missing beside an existing store"), std::string::npos) << w;
  EXPECT_NE(w.find("answers 409"), std::string::npos) << w;
  EXPECT_TRUE(limit::LoadLeaseSecret(dir, /*create=*/false).status().IsNotFound());
  ASSERT_TRUE(limit::LoadLeaseSecret(dir, /*create=*/true).ok());
  EXPECT_EQ(LeaseKeyMissingWarning(dir), "");
}

// lease.key of another length than 16 bytes passed verify and frsd -t, then
// the start refused it: the three agree now, and the start names the fix.
TEST(SideFiles, ALeaseKeyOfAnotherLengthIsDamageTheStartRefuses) {
  frs::testing::TempDir d;
  const std::string dir = d.path();
  MakeFiles(dir);
  ASSERT_TRUE(limit::LoadLeaseSecret(dir, /*create=*/true).ok());
  std::filesystem::resize_file(dir + "/lease.key", 5);
  const auto reports = CheckSideFiles(dir);
  ASSERT_EQ(reports.size(), 4u);
  EXPECT_EQ(reports[3].path, dir + "/lease.key");
  EXPECT_NE(reports[3].status.message().find("a lease secret is 16 bytes; this file holds 5"), std::string::npos)
      << reports[3].status.ToString();
  EXPECT_EQ(reports[3].AtStartText(), "frsd refuses to start until it is moved aside or restored");
  auto said = PrepareSideFiles(dir);
  ASSERT_FALSE(said.ok());
  EXPECT_NE(said.status().message().find("or remove it (a new secret is made"), std::string::npos)
      << said.status().message();
  EXPECT_EQ(std::filesystem::file_size(dir + "/lease.key"), 5u);  // nothing changed
}

// Each fault of stats.frs's and denials.frs's headers: verify's report
// (CheckSideFiles) and frsd's start (PrepareSideFiles) name the file and the
// same fault in the same words, and the start acts on it as the report says.
// (denials.frs had one sentence for every fault, and stats.frs's truncation
// gave no sizes.)
TEST(SideFiles, VerifyAndTheStartNameTheSameFaultOfEachHeader) {
  struct Fault {
    uint64_t at;  // where bytes go; or, with resize, the new size
    std::string bytes;
    bool resize;
    std::string words;  // after "PATH: "
  };
  for (const std::string file : {"stats.frs", "denials.frs"}) {
    const bool stats = file == "stats.frs";
    const uint64_t table_bytes = stats ? 64 + 1024 * (8 + 8 * 8 * 4) : 64 + 8192 * 384;
    const Fault faults[] = {
        {0, "XXXXXXXX", false, "bad magic"},
        {8, std::string("\x07\0\0\0", 4), false, std::string("format version 7, this build reads 2")},
        {16, std::string("\x05\0\0\0", 4), false, "header checksum"},
        {1000, "", true, "truncated (1000 bytes of " + std::to_string(table_bytes) + ")"},
        {table_bytes + 4096, "", true,
         "extended (" + std::to_string(table_bytes + 4096) + " bytes of " + std::to_string(table_bytes) +
             "): with frsd stopped, truncate -s " + std::to_string(table_bytes) + " %PATH%" +
             " gives it its size back; then frsctl verify checks what it holds"},
        {40, "", true, "shorter than its header"},
    };
    for (const Fault& f : faults) {
      frs::testing::TempDir d;
      const std::string dir = d.path();
      MakeFiles(dir);
      const std::string path = dir + "/" + file;
      if (f.resize) std::filesystem::resize_file(path, f.at);
      else Smash(path, f.at, f.bytes);
      std::string words = f.words;
      if (const size_t at = words.find("%PATH%"); at != std::string::npos) words.replace(at, 6, path);
      const std::string fault = path + ": " + words;
      const auto reports = CheckSideFiles(dir);
      const SideFileReport& r = reports[stats ? 0 : 1];
      ASSERT_EQ(r.path, path);
      EXPECT_EQ(r.status.message(), fault);
      for (const SideFileReport& other : reports) {
        if (other.path != path) {
          EXPECT_TRUE(other.status.ok()) << other.status.ToString();
        }
      }
      auto said = PrepareSideFiles(dir);
      if (stats) {
        ASSERT_FALSE(said.ok()) << fault;
        EXPECT_TRUE(said.status().message().starts_with(fault + ": frsd will not start on a damaged"))
            << said.status().message();
        EXPECT_TRUE(std::filesystem::exists(path));
      } else {
        ASSERT_TRUE(said.ok()) << said.status().ToString();
        ASSERT_EQ(said->size(), 1u);
        EXPECT_TRUE((*said)[0].starts_with(fault + ": moved aside to " + path + ".damaged-")) << (*said)[0];
        EXPECT_FALSE(std::filesystem::exists(path));
      }
    }
  }
}

// Day files: header, size and every index offset; a damaged one is listed
// with what frsd does with it (moved aside at its next count).
TEST(SideFiles, DayFilesAreCheckedHeaderIndexAndSize) {
  frs::testing::TempDir d;
  const std::string dir = d.path();
  const std::string day = dir + "/stats/7/app/2026-11-25.frs";
  {
    auto t = stats::GroupTable::Open(day, stats::GroupTableShape{100, 1}, stats::GroupTable::Mode::kWrite);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    const uint32_t codes[1] = {stats::sketch::CodeOf("u1")};
    for (const char* v : {"app1", "app2", "app3"})
      ASSERT_TRUE(t.value()->Add(v, stats::GroupCounts{1, 1, 0, 1}, codes));
  }
  EXPECT_TRUE(stats::CheckDayFile(day).ok()) << stats::CheckDayFile(day).ToString();
  auto reports = CheckSideFiles(dir);
  ASSERT_EQ(reports.size(), 5u);
  EXPECT_EQ(reports[4].path, day);
  EXPECT_TRUE(reports[4].status.ok());

  // An index entry pointing past the file.
  const std::string copy = dir + "/copy.frs";
  std::filesystem::copy_file(day, copy);
  {
    std::ifstream in(copy, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint32_t slots = 0;
    std::memcpy(&slots, bytes.data() + 16, 4);
    for (uint32_t i = 0; i < slots; ++i) {
      uint32_t off = 0;
      std::memcpy(&off, bytes.data() + 256 + 4 * i, 4);
      if (off == 0) continue;
      Smash(copy, 256 + 4 * i, std::string("\xff\xff\xff\x7f", 4));
      break;
    }
  }
  Status s = stats::CheckDayFile(copy);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("points outside"), std::string::npos) << s.ToString();

  // A header smashed, and a file cut short.
  Smash(day, 0, "ZZZZ");
  EXPECT_FALSE(stats::CheckDayFile(day).ok());
  reports = CheckSideFiles(dir);
  EXPECT_FALSE(reports[4].status.ok());
  EXPECT_EQ(reports[4].AtStartText(), "frsd moves it aside when it next counts that day, and starts the day anew");
  std::filesystem::copy_file(copy, day, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(day, 300);
  EXPECT_FALSE(stats::CheckDayFile(day).ok());

  // A handoff's received file is never written, so never moved: said so.
  const std::string received =
      std::filesystem::path(day).replace_filename(std::filesystem::path(day).stem().string() + ".from-00ab.frs");
  std::filesystem::rename(day, received);
  reports = CheckSideFiles(dir);
  ASSERT_EQ(reports.size(), 5u);
  EXPECT_EQ(reports[4].path, received);
  EXPECT_FALSE(reports[4].status.ok());
  EXPECT_EQ(reports[4].AtStartText().rfind("frsd never writes it: GET /stats sums what of it is readable and counts it "
                                           "in lost",
                                           0),
            0u)
      << reports[4].AtStartText();
}

}  // namespace
}  // namespace frs::limit
