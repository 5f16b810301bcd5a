// `frsd -t`: one line ending in "ok" and exit 0 for a configuration frsd
// would start with; one "file:line: what" line per problem and exit 1
// otherwise; nothing created.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/files.h"
#include "common/temp_dir.h"

namespace frs {
namespace {

struct ProcRun {
  int rc = -1;
  std::string out, err;
};

using frs::testing::ReadFile;

class FrsdCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteSrv(2, 64, 8);
    std::ofstream(dir_ / "map.xml")
        << "<map>\n  <biz id=\"1\" name=\"login\"><rule interval=\"60\" max=\"5\"/></biz>\n"
           "  <biz id=\"2\" name=\"ad\">\n    <rule algo=\"sliding\" interval=\"3600\" max=\"20\"/>\n"
           "  </biz>\n</map>\n";
  }
  void WriteSrv(int files, int keynodes, int chain) {
    std::ofstream(dir_ / "srv.xml")
        << "<frs>\n  <listen port=\"1\"/>\n  <map>map.xml</map>\n  <store dir=\"data\" files=\"" << files
        << "\" keynodes=\"" << keynodes << "\" chain=\"" << chain << "\"/>\n</frs>\n";
  }
  ProcRun Frsd(const std::string& args) {
    std::string cmd = std::string(FRSD_PATH) + " " + args + " >" + (dir_ / "out") + " 2>" + (dir_ / "err");
    int st = std::system(cmd.c_str());
    return ProcRun{WIFEXITED(st) ? WEXITSTATUS(st) : -1, ReadFile(dir_ / "out"), ReadFile(dir_ / "err")};
  }
  ProcRun Check() { return Frsd("-t -c " + (dir_ / "srv.xml")); }
  testing::TempDir dir_;
};

// An open-file limit that cannot hold <limits connections> is said (frsd
// still starts, with fewer connections), and the check stays "ok".
TEST_F(FrsdCheckTest, AnOpenFileLimitTooSmallForTheConnectionsIsSaid) {
  const std::string cmd = "ulimit -n 256 && " + std::string(FRSD_PATH) + " -t -c " + (dir_ / "srv.xml") + " >" +
                          (dir_ / "out") + " 2>" + (dir_ / "err");
  const int st = std::system(("sh -c '" + cmd + "'").c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  const std::string err = ReadFile(dir_ / "err");
  EXPECT_NE(err.find("warning: the open file limit (ulimit -n: soft 256, hard 256) cannot hold <limits "
                     "connections=\"10000\">: each worker may need 11316 descriptors"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("lower <limits connections> to at most 168"), std::string::npos) << err;
  EXPECT_EQ(ReadFile(dir_ / "out").substr(ReadFile(dir_ / "out").size() - 3), "ok\n");
}

// The statistics day files (up to three per <stats> table) are in the sum:
// 900 connections fit in 1,100 descriptors, not with 140 bizzes of 8 tables.
TEST_F(FrsdCheckTest, StatisticsDayFilesCountInTheOpenFileLimit) {
  std::ofstream(dir_ / "srv.xml") << "<frs>\n  <listen port=\"1\"/>\n  <map>map.xml</map>\n"
                                     "  <store dir=\"data\" files=\"2\" keynodes=\"64\" chain=\"8\"/>\n"
                                     "  <limits connections=\"900\"/>\n</frs>\n";
  std::string map = "<map>\n";
  for (int b = 1; b <= 140; ++b) {
    map += "<biz id=\"" + std::to_string(b) + "\" name=\"b" + std::to_string(b) +
           "\" fields=\"a,b,c,d\" separator=\":\"><rule interval=\"60\" max=\"5\"/>";
    for (const char* by : {"a", "b", "c", "d", "a,b", "a,c", "a,d", "b,c"})
      map += std::string("<stats by=\"") + by + "\"/>";
    map += "</biz>\n";
  }
  std::ofstream(dir_ / "map.xml") << map << "</map>\n";
  const std::string cmd = "ulimit -n 1100 && " + std::string(FRSD_PATH) + " -t -c " + (dir_ / "srv.xml") + " >" +
                          (dir_ / "out") + " 2>" + (dir_ / "err");
  const int st = std::system(("sh -c '" + cmd + "'").c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << ReadFile(dir_ / "err");
  const std::string err = ReadFile(dir_ / "err");
  EXPECT_NE(err.find("warning: the open file limit (ulimit -n: soft 1100, hard 1100) cannot hold <limits "
                     "connections=\"900\"> and the statistics day files of map.xml's <stats> (3360): each worker "
                     "may need 4438 descriptors"),
            std::string::npos)
      << err;
}

TEST_F(FrsdCheckTest, AGoodConfigurationIsOkAndNothingIsCreated) {
  ProcRun r = Check();
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.substr(r.out.size() - 3), "ok\n") << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "data")) << "-t created the store directory";
}

// <cluster lease_key>: the file is read as frsd's start reads it (16 bytes).
TEST_F(FrsdCheckTest, AClusterLeaseKeyFileIsRead) {
  auto write = [&](const std::string& key_attr) {
    std::ofstream(dir_ / "srv.xml") << "<frs>\n  <listen port=\"1\"/>\n  <map>map.xml</map>\n  <store dir=\"data\"/>\n"
                                    << "  <cluster self=\"127.0.0.1:1\"" << key_attr
                                    << "><shard>127.0.0.1:1</shard><shard>127.0.0.1:2</shard></cluster>\n</frs>\n";
  };
  write(" lease_key=\"lease.key\"");
  ProcRun r = Check();
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("<cluster lease_key>: " + (dir_ / "lease.key")), std::string::npos) << r.err;
  std::ofstream(dir_ / "lease.key") << "too short";
  r = Check();
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("a lease secret is 16 bytes"), std::string::npos) << r.err;
  // A FIFO or a directory is refused by name, never waited on.
  std::filesystem::remove(dir_ / "lease.key");
  ASSERT_EQ(::mkfifo((dir_ / "lease.key").c_str(), 0600), 0);
  r = Check();
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("a lease secret is a regular file"), std::string::npos) << r.err;
  std::filesystem::remove(dir_ / "lease.key");
  std::filesystem::create_directory(dir_ / "lease.key");
  r = Check();
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("a lease secret is a regular file"), std::string::npos) << r.err;
  std::filesystem::remove(dir_ / "lease.key");
  std::ofstream(dir_ / "lease.key") << "0123456789abcdef";
  // Readable by group or others: refused as ssh refuses such a private key,
  // naming the file and its mode; the key itself is never shown.
  for (const char* mode : {"0644", "0640", "0604", "0660"}) {
    ::chmod((dir_ / "lease.key").c_str(), static_cast<mode_t>(std::stoi(mode, nullptr, 8)));
    r = Check();
    EXPECT_EQ(r.rc, 1) << mode;
    EXPECT_NE(r.err.find("<cluster lease_key>: " + (dir_ / "lease.key") + " has mode " + mode), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("chmod 600 " + (dir_ / "lease.key")), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("0123456789abcdef"), std::string::npos) << r.err;
  }
  for (const char* mode : {"0600", "0400"}) {
    ::chmod((dir_ / "lease.key").c_str(), static_cast<mode_t>(std::stoi(mode, nullptr, 8)));
    r = Check();
    EXPECT_EQ(r.rc, 0) << mode << ": " << r.err;
  }
}

TEST_F(FrsdCheckTest, BrokenFilesAreFileLineErrors) {
  std::ofstream(dir_ / "map.xml")
      << "<map>\n<biz id=\"1\" name=\"login\">\n<rule interval=\"0\" max=\"5\"/>\n</biz>\n</map>\n";
  ProcRun r = Check();
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.rfind(dir_ / "map.xml:3: ", 0), 0u) << r.err;
  EXPECT_EQ(r.out, "");

  std::ofstream(dir_ / "srv.xml") << "<frs>\n<map>map.xml</map>\n<store dir=\"d\" chain=\"0\"/>\n</frs>\n";
  r = Check();
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.rfind(dir_ / "srv.xml:3: ", 0), 0u) << r.err;
}

// <timezone> is read as frsd would read it: a zone that is not installed, a
// name that is not one, and a file that is no zone are each named.
TEST_F(FrsdCheckTest, ATimeZoneFrsdCannotReadIsNamed) {
  auto with_zone = [&](const std::string& zone) {
    std::ofstream(dir_ / "srv.xml") << "<frs>\n  <listen port=\"1\"/>\n  <map>map.xml</map>\n  <store dir=\"data\" "
                                       "files=\"2\" keynodes=\"64\" chain=\"8\"/>\n  <timezone>"
                                    << zone << "</timezone>\n</frs>\n";
  };
  with_zone("America/New_York");
  ProcRun r = Check();
  EXPECT_EQ(r.rc, 0) << r.err;

  with_zone("Mars/Olympus_Mons");
  r = Check();
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("srv.xml:5: <timezone>: unknown time zone 'Mars/Olympus_Mons' (no "), std::string::npos)
      << r.err;

  with_zone("../../etc/passwd");
  r = Check();
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("<timezone>: time zone '../../etc/passwd' is not an IANA name"), std::string::npos) << r.err;

  std::filesystem::create_directories(dir_ / "zones/Bad");
  std::ofstream(dir_ / "zones/Bad/Zone") << "TZif2, and then nothing a zone is made of";
  with_zone("Bad/Zone");
  const std::string cmd = "TZDIR=" + (dir_ / "zones") + " " + std::string(FRSD_PATH) + " -t -c " + (dir_ / "srv.xml") +
                          " >" + (dir_ / "out") + " 2>" + (dir_ / "err");
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 1);
  const std::string err = ReadFile(dir_ / "err");
  EXPECT_NE(err.find("<timezone>: " + (dir_ / "zones/Bad/Zone") + ": not a TZif file"), std::string::npos) << err;
}

// Files srv.xml names for frsd to write that an open(2) would wait on (a
// FIFO) or that are no file (a directory) are refused, each with its name
// and what it is; one that does not exist yet is fine (frsd creates it).
TEST_F(FrsdCheckTest, OutputFilesThatAreFifosOrDirectoriesAreNamed) {
  ASSERT_EQ(::mkfifo((dir_ / "log.fifo").c_str(), 0600), 0);
  std::filesystem::create_directory(dir_ / "pid.d");
  std::ofstream(dir_ / "srv.xml") << "<frs>\n  <listen port=\"1\"/>\n  <map>map.xml</map>\n"
                                     "  <store dir=\"data\" files=\"2\" keynodes=\"64\" chain=\"8\"/>\n"
                                     "  <log file=\"log.fifo\"/>\n  <pidfile>pid.d</pidfile>\n"
                                     "  <decisions file=\"decisions.log\"/>\n</frs>\n";
  ProcRun r = Check();
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("the log file " + (dir_ / "log.fifo") + " is a FIFO, not a regular file"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("the pid file " + (dir_ / "pid.d") + " is a directory, not a regular file"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("decisions.log"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "decisions.log"));
  // A pid file in a directory that does not exist: the start would fail.
  std::ofstream(dir_ / "srv.xml") << "<frs>\n  <listen port=\"1\"/>\n  <map>map.xml</map>\n"
                                     "  <store dir=\"data\" files=\"2\" keynodes=\"64\" chain=\"8\"/>\n"
                                     "  <pidfile>no/such/dir/frsd.pid</pidfile>\n</frs>\n";
  r = Check();
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("cannot open the pid file " + (dir_ / "no/such/dir/frsd.pid")), std::string::npos) << r.err;
  // One level missing in a directory that is there (/run/frs, which the
  // systemd unit's RuntimeDirectory= makes at each start): a warning that
  // says how to make it, not a failure.
  std::filesystem::create_directories(dir_ / "run");
  std::ofstream(dir_ / "srv.xml") << "<frs>\n  <listen port=\"1\"/>\n  <map>map.xml</map>\n"
                                     "  <store dir=\"data\" files=\"2\" keynodes=\"64\" chain=\"8\"/>\n"
                                     "  <pidfile>run/frs/frsd.pid</pidfile>\n</frs>\n";
  r = Check();
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("warning: the pid file's directory " + (dir_ / "run/frs") + " does not exist now"),
            std::string::npos)
      << r.err;
  // How to make it names the user frsd runs as: root's store, no one; a
  // store its service user owns, that user (it named frs whoever that was).
  if (::geteuid() != 0) return;
  EXPECT_NE(r.err.find("by hand: install -d " + (dir_ / "run/frs") + ")"), std::string::npos) << r.err;
  std::filesystem::create_directories(dir_ / "data");
  ASSERT_EQ(::chown((dir_ / "data").c_str(), 65534, 65534), 0);
  r = Check();
  EXPECT_NE(r.err.find("by hand: install -d -o nobody -g nogroup " + (dir_ / "run/frs") + ")"), std::string::npos)
      << r.err;
}

// frsd's lock and listen files in the store directory: a directory in the
// place of either fails the start ("Is a directory"), so it fails the check.
TEST_F(FrsdCheckTest, ADirectoryWhereFrsdWritesItsLockOrListenFileIsRefused) {
  for (const char* name : {"frsd.lock", "frsd.listen"}) {
    std::filesystem::remove_all(dir_ / "data");
    const std::string path = dir_ / ("data/" + std::string(name));
    std::filesystem::create_directories(path);
    ProcRun r = Check();
    EXPECT_EQ(r.rc, 1) << name << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(path + " is a directory: frsd writes its"), std::string::npos) << r.err;
  }
  std::filesystem::remove_all(dir_ / "data");
  std::filesystem::create_directories(dir_ / "data");
  std::ofstream(dir_ / "data/frsd.listen") << "127.0.0.1:1\n";  // a stopped frsd's: fine
  ProcRun r = Check();
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
}

// A link where frsd writes a file in place: the start refuses it (or keeps
// nothing there), so the check fails, naming it (found from outside: -t
// said ok, and an init container passed a server that then failed; a
// dangling one at a store file was said missing, its counts lost).
TEST_F(FrsdCheckTest, ALinkWhereFrsdWritesAFileInPlaceIsRefused) {
  std::filesystem::remove_all(dir_ / "data");
  std::filesystem::create_directories(dir_ / "data");
  std::ofstream(dir_ / "outside") << "x";
  for (const char* name : {"stats.frs", "denials.frs", "lease.key", "replica-parked", "frs.0.store"}) {
    const std::string path = dir_ / ("data/" + std::string(name));
    std::filesystem::create_symlink(dir_ / "nowhere", path);
    ProcRun r = Check();
    // frsd serves without the recent denials and the parked changes: a
    // warning (a failure would stop every reload that runs frsd -t first).
    const bool serves = std::string(name) == "denials.frs" || std::string(name) == "replica-parked";
    EXPECT_EQ(r.rc, serves ? 0 : 1) << name << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(std::string(serves ? "warning: " : "") + path +
                         " is a symbolic link: frsd writes only files of its own"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("lost"), std::string::npos) << r.err;
    std::filesystem::remove(path);
  }
  // And the statistics' folders, where day files are made and deleted: frsd
  // serves, counting nothing by field there, so a warning (a refusal would
  // stop every reload that runs frsd -t first).
  std::filesystem::create_directories(dir_ / "data/stats/1");
  std::filesystem::create_directories(dir_ / "data/stats/3/app");
  for (const char* name : {"stats/2", "stats/1/app", "stats/3/app/2026-12-01.frs"}) {
    const std::string path = dir_ / ("data/" + std::string(name));
    std::filesystem::create_directory_symlink(dir_.path(), path);
    ProcRun r = Check();
    EXPECT_EQ(r.rc, 0) << name << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("warning: " + path + " is a symbolic link: frsd writes only files of its own"),
              std::string::npos)
        << r.err;
    std::filesystem::remove(path);
  }
  ProcRun r = Check();
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
}

// A keynodes that is no multiple of 64 / chain groups key-nodes in smaller
// groups: frsd -t accepts it and warns, naming what to choose.
TEST_F(FrsdCheckTest, AKeynodesThatGroupsPoorlyIsWarnedOf) {
  WriteSrv(2, 65536, 8);
  ProcRun r = Check();
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err.find("groups key-nodes"), std::string::npos) << r.err;
  WriteSrv(2, 65537, 8);  // a prime: groups of one
  r = Check();
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("ok"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("warning: <store keynodes=\"65537\" chain=\"8\"> groups key-nodes 1 by 1 (8 slots)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("a keynodes divisible by 8 makes groups of 64 slots"), std::string::npos) << r.err;
  WriteSrv(2, 1020, 8);  // 6 by 6: 48 slots
  r = Check();
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("groups key-nodes 6 by 6 (48 slots)"), std::string::npos) << r.err;
}

TEST_F(FrsdCheckTest, ABizWhoseNodeDoesNotFitTheChainIsNamed) {
  WriteSrv(2, 1, 1);  // one key-node of one slot: a sliding rule of max 20 needs more
  ProcRun r = Check();
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(dir_ / "map.xml:3: biz \"ad\" needs "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("<store chain=\"1\" keynodes=\"1\">"), std::string::npos) << r.err;
}

TEST_F(FrsdCheckTest, AStoreOfAnotherGeometryOrWithAMissingFileIsRefused) {
  // frsctl import of an empty export creates the store with srv.xml's
  // geometry, and the engine's files beside it, as a store that served.
  std::string create = "echo '{\"end\":{\"nodes\":0,\"receipts\":0}}' | " + std::string(FRSCTL_PATH) + " -c " +
                       (dir_ / "srv.xml") + " import >/dev/null 2>&1";
  ASSERT_EQ(std::system(create.c_str()), 0);
  ASSERT_TRUE(std::filesystem::exists(dir_ / "data/frs.1.store"));
  ProcRun r = Check();
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("matches"), std::string::npos) << r.out;

  WriteSrv(2, 128, 8);
  r = Check();
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("frs.0.store"), std::string::npos) << r.err;

  WriteSrv(2, 64, 8);
  std::filesystem::remove(dir_ / "data/frs.1.store");
  r = Check();
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("missing " + (dir_ / "data/frs.1.store")), std::string::npos) << r.err;
}

// -c at the end of the line: said as a missing file, not as an unknown
// argument "-c".
TEST_F(FrsdCheckTest, AConfigOptionWithoutItsFileIsNamed) {
  ProcRun r = Frsd("-t -c");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("frsd: -c needs a file: -c PATH/srv.xml"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("unknown argument"), std::string::npos) << r.err;
  // An empty one alike (it fell back to the default srv.xml).
  r = Frsd("-t -c ''");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("frsd: -c needs a file"), std::string::npos) << r.err;
  r = Frsd("-t --config=");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("frsd: --config needs a file"), std::string::npos) << r.err;
}

// A srv.xml that is not there, when no -c named it: where its path came
// from is said ($FRS_CONF, set in a container's environment and forgotten).
TEST_F(FrsdCheckTest, AMissingConfigurationSaysWhereItsPathCameFrom) {
  const std::string missing = dir_ / "nowhere/srv.xml";
  std::string cmd = "FRS_CONF='" + missing + "' " + FRSD_PATH + " -t >" + (dir_ / "out") + " 2>" + (dir_ / "err");
  int st = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << st;
  std::string err = ReadFile(dir_ / "err");
  EXPECT_NE(err.find("frsd: " + missing + ": named by $FRS_CONF; -c FILE names another"), std::string::npos) << err;
  // The start says the same; -c names its file itself.
  cmd = "FRS_CONF='" + missing + "' " + FRSD_PATH + " --foreground >" + (dir_ / "out") + " 2>" + (dir_ / "err");
  st = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << st;
  err = ReadFile(dir_ / "err");
  EXPECT_NE(err.find("named by $FRS_CONF"), std::string::npos) << err;
  ProcRun r = Frsd("-t -c " + missing);
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.find("FRS_CONF"), std::string::npos) << r.err;
}

// A new store: frsd -t said "is new; ok" where the start then failed, on a
// directory this user may not write (a volume left root's) or a disk too
// small for the files.
TEST_F(FrsdCheckTest, ANewStoreItsStartCouldNotMakeIsRefused) {
  // 256 files of 64 Mi key-nodes of 64 slots: 35 TB, on no test machine's disk.
  std::ofstream(dir_ / "srv.xml")
      << "<frs>\n  <listen port=\"1\"/>\n  <map>map.xml</map>\n"
         "  <store dir=\"new/data\" files=\"256\" keynodes=\"67108864\" chain=\"64\"/>\n</frs>\n";
  ProcRun r = Check();
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.err.find("store " + (dir_ / "new/data") + " is new: its 256 file(s) need "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(free space, or a smaller <store> geometry)"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "new")) << "frsd -t makes nothing";

  // A directory this user may not write: as nobody when root (root may
  // write any).
  WriteSrv(2, 64, 8);
  std::string conf = ReadFile(dir_ / "srv.xml");
  conf.replace(conf.find("dir=\"data\""), 10, "dir=\"ro/data\"");
  std::ofstream(dir_ / "srv.xml") << conf;
  std::filesystem::create_directory(dir_ / "ro");
  ASSERT_EQ(::chmod((dir_ / "ro").c_str(), 0555), 0);
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
  const std::string as = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  const std::string cmd =
      as + FRSD_PATH + " -t -c " + (dir_ / "srv.xml") + " >" + (dir_ / "out") + " 2>" + (dir_ / "err");
  const int st = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << ReadFile(dir_ / "out");
  const std::string err = ReadFile(dir_ / "err");
  EXPECT_NE(err.find("store " + (dir_ / "ro/data") + " is new: " + (dir_ / "ro") + ": permission denied"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("; frsd makes the store directory in it"), std::string::npos) << err;
  ASSERT_EQ(::chmod((dir_ / "ro").c_str(), 0755), 0);
}

// A store file frsd may read but not write: frsd -t said ok (it reads the
// headers) and the start refused it. Checked as another user (root may
// write any file): CI runs as root.
TEST_F(FrsdCheckTest, AStoreFileFrsdCannotWriteIsRefused) {
  // The store, then its first engine's files (an import makes none of them).
  const std::string ctl = std::string(FRSCTL_PATH) + " -c " + (dir_ / "srv.xml");
  std::string create = ctl + " init >/dev/null 2>&1 && " + ctl + " stat >/dev/null 2>&1";
  ASSERT_EQ(std::system(create.c_str()), 0);
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to check as another user";
  const std::string give = "chown -R 65534:65534 " + dir_.path() + " && chmod 0755 " + dir_.path() + " && chmod 0400 " +
                           (dir_ / "data/frs.0.store");
  ASSERT_EQ(std::system(give.c_str()), 0);
  const std::string cmd = "setpriv --reuid=65534 --regid=65534 --clear-groups " + std::string(FRSD_PATH) + " -t -c " +
                          (dir_ / "srv.xml") + " >" + (dir_ / "out") + " 2>" + (dir_ / "err");
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 1) << ReadFile(dir_ / "out");
  const std::string err = ReadFile(dir_ / "err");
  EXPECT_NE(err.find((dir_ / "data/frs.0.store") + ": permission denied"), std::string::npos) << err;
  EXPECT_NE(err.find("(its owner: give it u+rw): frsd opens it to read and write"), std::string::npos) << err;

  // stats.frs the same (the start refuses it); denials.frs only warned of
  // (the start serves without recent denials).
  ASSERT_EQ(::chmod((dir_ / "data/frs.0.store").c_str(), 0600), 0);
  ASSERT_EQ(::chmod((dir_ / "data/stats.frs").c_str(), 0400), 0);
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 1);
  EXPECT_NE(ReadFile(dir_ / "err").find("stats.frs: permission denied"), std::string::npos) << ReadFile(dir_ / "err");
  EXPECT_NE(ReadFile(dir_ / "err").find("will not start"), std::string::npos) << ReadFile(dir_ / "err");
  ASSERT_EQ(::chmod((dir_ / "data/stats.frs").c_str(), 0600), 0);
  ASSERT_EQ(::chmod((dir_ / "data/denials.frs").c_str(), 0400), 0);
  rc = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 0) << ReadFile(dir_ / "err");
  EXPECT_NE(ReadFile(dir_ / "err").find("denials.frs: permission denied"), std::string::npos) << ReadFile(dir_ / "err");
  EXPECT_NE(ReadFile(dir_ / "err").find("keeps no recent denials"), std::string::npos) << ReadFile(dir_ / "err");
  EXPECT_NE(ReadFile(dir_ / "out").find("; ok"), std::string::npos) << ReadFile(dir_ / "out");
}

// frsd started by hand as root on the service user's store made root's
// files there (rules.history, statistics days), and the service's next
// start, as that user, failed on them: the start refuses, frsd -t warns.
TEST_F(FrsdCheckTest, RootRefusesToStartOnAnotherUsersStore) {
  std::string create = "echo '{\"end\":{\"nodes\":0,\"receipts\":0}}' | " + std::string(FRSCTL_PATH) + " -c " +
                       (dir_ / "srv.xml") + " import >/dev/null 2>" + (dir_ / "import.err");
  ASSERT_EQ(std::system(create.c_str()), 0) << ReadFile(dir_ / "import.err");
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  ASSERT_EQ(std::system(("chown -R 65534:65534 " + (dir_ / "data")).c_str()), 0);
  const std::string quiet = " >" + (dir_ / "out") + " 2>" + (dir_ / "err");
  // Refused at once; `timeout` ends a start that was not.
  int st =
      std::system(("timeout 20 " + std::string(FRSD_PATH) + " --foreground -c " + (dir_ / "srv.xml") + quiet).c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 1) << ReadFile(dir_ / "err");
  const std::string err = ReadFile(dir_ / "err");
  EXPECT_NE(err.find("this frsd runs as root, and the store directory " + (dir_ / "data") + " is nobody's"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("runuser -u nobody -- frsd -c "), std::string::npos) << err;
  for (const auto& e : std::filesystem::directory_iterator(std::string(dir_ / "data"))) {
    struct stat s;
    ASSERT_EQ(::stat(e.path().c_str(), &s), 0);
    EXPECT_EQ(s.st_uid, 65534u) << e.path() << " was made by the refused start";
  }
  st = std::system((std::string(FRSD_PATH) + " -t -c " + (dir_ / "srv.xml") + quiet).c_str());
  EXPECT_EQ(WEXITSTATUS(st), 0) << ReadFile(dir_ / "err");
  EXPECT_NE(ReadFile(dir_ / "err").find("warning: a start as root refuses: this frsd runs as root"), std::string::npos)
      << ReadFile(dir_ / "err");

  // A store directory not made yet, in one the service user owns: it would
  // be made root's. Refused, and not made.
  std::filesystem::remove_all(dir_ / "data");
  std::filesystem::create_directory(dir_ / "lib");
  ASSERT_EQ(::chown((dir_ / "lib").c_str(), 65534, 65534), 0);
  std::ofstream(dir_ / "nested.xml")
      << "<frs>\n  <listen host=\"127.0.0.1\" port=\"0\"/>\n  <map>map.xml</map>\n  <store dir=\"lib/frs\"/>\n</frs>\n";
  st = std::system(
      ("timeout 20 " + std::string(FRSD_PATH) + " --foreground -c " + (dir_ / "nested.xml") + quiet).c_str());
  EXPECT_EQ(WEXITSTATUS(st), 1) << ReadFile(dir_ / "err");
  EXPECT_NE(ReadFile(dir_ / "err")
                .find("and the directory " + (dir_ / "lib") + " of the store directory " + (dir_ / "lib/frs") +
                      " is nobody's"),
            std::string::npos)
      << ReadFile(dir_ / "err");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "lib/frs"));
}

}  // namespace
}  // namespace frs
