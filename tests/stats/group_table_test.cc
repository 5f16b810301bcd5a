#include "stats/group_table.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/small_disk.h"
#include "common/temp_dir.h"
#include "stats/day_files.h"
#include "stats/field_stats.h"

namespace frs::stats {
namespace group_table_test {

using Mode = GroupTable::Mode;

std::unique_ptr<GroupTable> OpenOrDie(const std::string& path, GroupTableShape shape, Mode mode = Mode::kWrite) {
  auto t = GroupTable::Open(path, shape, mode);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t.value()) : nullptr;
}

std::map<std::string, GroupRow> ByValue(const GroupTable& t) {
  std::map<std::string, GroupRow> m;
  for (GroupRow& r : t.Rows()) {
    EXPECT_EQ(m.count(r.value), 0u) << "'" << r.value << "' twice";
    m[r.value] = std::move(r);
  }
  return m;
}

void ExpectCounts(const GroupCounts& got, const GroupCounts& want, const std::string& what) {
  EXPECT_EQ(got.requests, want.requests) << what;
  EXPECT_EQ(got.allowed, want.allowed) << what;
  EXPECT_EQ(got.denied, want.denied) << what;
  EXPECT_EQ(got.units, want.units) << what;
}

void AddTo(GroupCounts* sum, const GroupCounts& d) {
  sum->requests += d.requests;
  sum->allowed += d.allowed;
  sum->denied += d.denied;
  sum->units += d.units;
}

// One decision: allowed unless i % 4 == 3; units i % 5 when allowed.
GroupCounts DecisionOf(uint64_t i) {
  const bool allowed = i % 4 != 3;
  return GroupCounts{1, allowed ? 1u : 0u, allowed ? 0u : 1u, allowed ? i % 5 : 0};
}

TEST(GroupTable, ALinkAtADayFilesNameIsNeverWrittenThrough) {
  // Found from outside: a root frsd counted into the file a link at a day
  // file's name led to, or wrote its damaged mark into it.
  frs::testing::TempDir dir;
  const std::string outside = dir / "outside.frs", path = dir / "stats/1/app/2026-11-22.frs";
  { auto t = OpenOrDie(outside, GroupTableShape{1000, 1}); }
  std::filesystem::create_directories(dir / "stats/1/app");
  ASSERT_EQ(::symlink(outside.c_str(), path.c_str()), 0);
  const auto size = std::filesystem::file_size(outside);
  const auto mtime = std::filesystem::last_write_time(outside);
  auto t = GroupTable::Open(path, GroupTableShape{1000, 1}, Mode::kWrite);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("is a symbolic link"), std::string::npos) << t.status().ToString();
  EXPECT_EQ(std::filesystem::file_size(outside), size);
  EXPECT_EQ(std::filesystem::last_write_time(outside), mtime);
}

TEST(GroupTable, NoDayFileIsMadeOrDeletedWhereALinkBelowTheStoreDirectoryLeads) {
  // Found from outside: a link at stats/<biz> had the day's file made, and
  // the days past `days` deleted, in the directory it led to.
  frs::testing::TempDir dir;
  std::filesystem::create_directories(dir / "elsewhere/app");
  std::filesystem::create_directories(dir / "stats");
  ASSERT_EQ(::symlink((dir / "elsewhere").c_str(), (dir / "stats/1").c_str()), 0);
  uint32_t today = 0;
  ASSERT_TRUE(ParseDayText("2026-11-22", &today));
  // Yesterday's file, kept 7 days; and one of 30 days ago, past them.
  const std::string yesterday = DayText(today - 1) + ".frs", old = DayText(today - 30) + ".frs";
  for (const std::string& name : {yesterday, old}) auto t = OpenOrDie(dir / ("elsewhere/app/" + name), {1000, 0});
  auto files_in = [](const std::string& d) {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(d)) names.insert(e.path().filename());
    return names;
  };
  StatsSpec spec;
  spec.groups = 1000;
  spec.days = 7;
  std::vector<std::string> said;
  auto report = [&](const std::string& what) { said.push_back(what); };
  {
    StatsTable table(dir / "stats/1/app", spec, report, nullptr, dir.path());
    EXPECT_EQ(table.Day(today), nullptr);
    ASSERT_EQ(said.size(), 1u);
    EXPECT_NE(said[0].find(dir / "stats/1 is a symbolic link"), std::string::npos) << said[0];
    bool duplicate = false;
    const Status received = table.WriteReceived(today, "receipt", {}, 0, &duplicate);
    EXPECT_NE(received.message().find("is a symbolic link"), std::string::npos) << received.ToString();
    EXPECT_EQ(files_in(dir / "elsewhere/app"), (std::set<std::string>{yesterday, old}));
    // Nor read there: they are not this store's counts.
    uint64_t damaged = 0;
    auto read = table.ReadDay(today - 1, &damaged);
    ASSERT_FALSE(read.ok());
    EXPECT_NE(read.status().message().find("is a symbolic link"), std::string::npos) << read.status().ToString();
    // Nor listed for a handoff, which sends and then deletes what it lists.
    EXPECT_TRUE(ListDayFiles(dir.path()).value().empty());
  }
  // The same table under a real directory counts, and deletes the old day.
  ASSERT_EQ(::unlink((dir / "stats/1").c_str()), 0);
  ASSERT_EQ(::rename((dir / "elsewhere").c_str(), (dir / "stats/1").c_str()), 0);
  StatsTable table(dir / "stats/1/app", spec, report, nullptr, dir.path());
  EXPECT_NE(table.Day(today), nullptr);
  EXPECT_EQ(files_in(dir / "stats/1/app"), (std::set<std::string>{yesterday, "2026-11-22.frs"}));
  // A link at a table's folder or at a day file's name is not listed; the
  // real files are.
  std::filesystem::create_directories(dir / "other");
  ASSERT_EQ(::symlink((dir / "other").c_str(), (dir / "stats/1/user").c_str()), 0);
  ASSERT_EQ(::symlink((dir / ("stats/1/app/" + yesterday)).c_str(), (dir / "stats/1/app/2026-11-20.frs").c_str()), 0);
  // Nor is a day read through one (GET /stats, frsctl stat).
  uint32_t linked_day = 0;
  ASSERT_TRUE(ParseDayText("2026-11-20", &linked_day));
  uint64_t damaged = 0;
  auto read = table.ReadDay(linked_day, &damaged);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("is a symbolic link"), std::string::npos) << read.status().ToString();
  std::set<std::string> listed;
  const auto files = ListDayFiles(dir.path());
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  for (const StatsDayFile& f : files.value()) listed.insert(f.path);
  EXPECT_EQ(listed, (std::set<std::string>{dir / ("stats/1/app/" + yesterday), dir / "stats/1/app/2026-11-22.frs"}));
}

TEST(GroupTable, CountsAddUpPerGroupAndSurviveAReopen) {
  frs::testing::TempDir dir;
  const std::string path = dir / "stats/1/app+user/2026-11-22.frs";
  // kRead of a file that does not exist: NotFound, and nothing is made.
  auto missing = GroupTable::Open(path, GroupTableShape{1000, 1}, Mode::kRead);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().IsNotFound()) << missing.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(path));

  std::map<std::string, GroupCounts> truth;
  std::map<std::string, std::set<std::string>> users;
  {
    auto t = OpenOrDie(path, GroupTableShape{1000, 1});
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->groups(), 0u);
    EXPECT_TRUE(t->Rows().empty());
    for (uint64_t i = 0; i < 20000; ++i) {
      const std::string value = "app" + std::to_string(i * 7 % 50);
      const std::string user = "user" + std::to_string(i % (i * 7 % 50 + 1) * 3);
      const GroupCounts d = DecisionOf(i);
      const uint32_t code = sketch::CodeOf(user);
      ASSERT_TRUE(t->Add(value, d, &code));
      AddTo(&truth[value], d);
      users[value].insert(user);
    }
    t->AddFieldError();
    t->AddFieldErrors(4);
    EXPECT_EQ(t->field_errors(), 5u);
    EXPECT_EQ(t->groups(), 50u);
    EXPECT_EQ(t->lost(), 0u);
  }
  for (Mode mode : {Mode::kWrite, Mode::kRead}) {
    auto t = OpenOrDie(path, GroupTableShape{1000, 1}, mode);
    ASSERT_NE(t, nullptr);
    const auto rows = ByValue(*t);
    ASSERT_EQ(rows.size(), truth.size());  // every group, no "~other"
    for (const auto& [value, want] : truth) {
      auto it = rows.find(value);
      ASSERT_NE(it, rows.end()) << value;
      ExpectCounts(it->second.counts, want, value);
      ASSERT_EQ(it->second.distinct.size(), 1u);
      EXPECT_TRUE(it->second.distinct[0].exact());
      EXPECT_EQ(it->second.distinct[0].Count(), users[value].size()) << value;
    }
    GroupRow one;
    ASSERT_TRUE(t->Row("app17", &one));
    EXPECT_EQ(one.value, "app17");
    ExpectCounts(one.counts, truth["app17"], "Row(app17)");
    EXPECT_FALSE(t->Row("app50", &one));
    EXPECT_FALSE(t->Row("app1x", &one));
    EXPECT_FALSE(t->Row("", &one));
    EXPECT_EQ(t->field_errors(), 5u);
    EXPECT_EQ(t->groups(), 50u);
    EXPECT_EQ(t->shape().groups, 1000u);
    EXPECT_EQ(t->shape().distinct, 1u);
  }
  // A reader cannot write.
  auto r = OpenOrDie(path, GroupTableShape{1000, 1}, Mode::kRead);
  ASSERT_NE(r, nullptr);
  const uint32_t code = sketch::CodeOf("x");
  EXPECT_FALSE(r->Add("app1", GroupCounts{1, 1, 0, 1}, &code));
  GroupRow after;
  ASSERT_TRUE(r->Row("app1", &after));
  ExpectCounts(after.counts, truth["app1"], "after a refused Add");
}

TEST(GroupTable, ValuesBeyondTheBoundCountInOther) {
  frs::testing::TempDir dir;
  auto t = OpenOrDie(dir / "t.frs", GroupTableShape{10, 1});
  ASSERT_NE(t, nullptr);
  GroupCounts total, other;
  std::map<std::string, GroupCounts> own;
  std::set<std::string> other_users;
  for (int round = 0; round < 3; ++round) {
    for (int v = 0; v < 25; ++v) {
      const std::string value = "v" + std::to_string(v);
      const GroupCounts d{static_cast<uint64_t>(v + 1), static_cast<uint64_t>(v), 1, static_cast<uint64_t>(2 * v)};
      const std::string user = "u" + std::to_string(v) + "." + std::to_string(round);
      const uint32_t code = sketch::CodeOf(user);
      ASSERT_TRUE(t->Add(value, d, &code));
      AddTo(&total, d);
      if (v < 10) {
        AddTo(&own[value], d);
      } else {
        AddTo(&other, d);
        other_users.insert(user);
      }
    }
  }
  EXPECT_EQ(t->groups(), 10u);
  const auto rows = t->Rows();
  ASSERT_EQ(rows.size(), 11u);
  EXPECT_EQ(rows.back().value, kOtherGroup);  // last
  GroupCounts sum;
  for (const GroupRow& r : rows) {
    AddTo(&sum, r.counts);
    if (r.value == kOtherGroup) {
      ExpectCounts(r.counts, other, "~other");
      EXPECT_EQ(r.distinct[0].Count(), other_users.size());
    } else {
      ASSERT_EQ(own.count(r.value), 1u) << r.value;
      ExpectCounts(r.counts, own[r.value], r.value);
      EXPECT_EQ(r.distinct[0].Count(), 3u) << r.value;
    }
  }
  ExpectCounts(sum, total, "totals");
  GroupRow o;
  ASSERT_TRUE(t->Row(kOtherGroup, &o));
  ExpectCounts(o.counts, other, "Row(~other)");
  GroupRow v20;
  EXPECT_FALSE(t->Row("v20", &v20));  // counted, but in "~other"
}

// Writers racing to add the same new value when one group is left: the
// value gets that group, and every writer's add counts in it (a writer
// that lost the race to publish it must not count in "~other").
TEST(GroupTable, RacingFirstAddsOfOneValueAtTheBoundAllCountInItsGroup) {
  frs::testing::TempDir dir;
  constexpr int kThreads = 2, kTrials = 300;
  int split = 0;
  std::string example;
  for (int trial = 0; trial < kTrials; ++trial) {
    const std::string path = dir / ("t" + std::to_string(trial) + ".frs");
    // A new day's file with room for one group: its first adds race (the
    // race is widest on a fresh file, whose pages fault in on first touch).
    auto t = OpenOrDie(path, GroupTableShape{1, 0});
    ASSERT_NE(t, nullptr);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int k = 0; k < kThreads; ++k)
      threads.emplace_back([&] {
        ready.fetch_add(1);
        while (ready.load() < kThreads) {
        }
        t->Add("x", GroupCounts{1, 1, 0, 1}, nullptr);
      });
    for (auto& th : threads) th.join();
    GroupRow x, other;
    ASSERT_TRUE(t->Row("x", &x));
    ASSERT_TRUE(t->Row(kOtherGroup, &other));
    if (x.counts.requests != kThreads) {
      ++split;
      example =
          "'x' counted " + std::to_string(x.counts.requests) + ", '~other' " + std::to_string(other.counts.requests);
    }
    t.reset();
    std::filesystem::remove(path);
  }
  EXPECT_EQ(split, 0) << split << " of " << kTrials << " trials split one value's adds, e.g. " << example;
}

// A child that opens the table when told (a byte on `go`) and adds n
// times (n = 0: until killed, or 20 s at most should its parent fail
// first); exits 0 when every Add succeeded.
[[noreturn]] void AddInChild(int go, const std::string& path, std::string_view prefix, uint64_t n) {
  char c;
  if (::read(go, &c, 1) != 1) ::_exit(3);
  auto t = GroupTable::Open(path, GroupTableShape{1000, 1}, Mode::kWrite);
  if (!t.ok()) ::_exit(4);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (uint64_t i = 0; n == 0 || i < n; ++i) {
    if (n == 0 && i % 4096 == 0 && std::chrono::steady_clock::now() > give_up) ::_exit(6);
    const std::string value = "v" + std::to_string(i % 100);
    const std::string user = std::string(prefix) + std::to_string(i / 100 % 7);
    const uint32_t code = sketch::CodeOf(user);
    if (!t.value()->Add(value, DecisionOf(i), &code)) ::_exit(5);
  }
  ::_exit(0);
}

// Forks a child that adds as AddInChild does to the table at `path` once
// StartAdding(*go) is called; its pid (-1 when it cannot be started).
pid_t ForkAdder(const std::string& path, uint64_t adds, int* go) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[1]);
    AddInChild(fds[0], path, "c", adds);
  }
  ::close(fds[0]);
  *go = fds[1];
  return child;
}

bool StartAdding(int go) {
  const bool sent = ::write(go, "g", 1) == 1;
  ::close(go);
  return sent;
}

TEST(GroupTable, TwoProcessesAddingAtOnceCountExactly) {
  frs::testing::TempDir dir;
  const std::string path = dir / "stats/2/app/2026-11-22.frs";
  constexpr uint64_t kAdds = 50000;
  int go = -1;
  const pid_t child = ForkAdder(path, kAdds, &go);
  ASSERT_GE(child, 0);
  // Both create the file at once, then add at once.
  ASSERT_TRUE(StartAdding(go));
  {
    auto t = OpenOrDie(path, GroupTableShape{1000, 1});
    ASSERT_NE(t, nullptr);
    for (uint64_t i = 0; i < kAdds; ++i) {
      const uint32_t code = sketch::CodeOf("p" + std::to_string(i / 100 % 7));
      ASSERT_TRUE(t->Add("v" + std::to_string(i % 100), DecisionOf(i), &code));
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;

  std::map<std::string, GroupCounts> truth;
  for (uint64_t i = 0; i < kAdds; ++i) {
    AddTo(&truth["v" + std::to_string(i % 100)], DecisionOf(i));
    AddTo(&truth["v" + std::to_string(i % 100)], DecisionOf(i));
  }
  auto t = OpenOrDie(path, GroupTableShape{1000, 1}, Mode::kRead);
  ASSERT_NE(t, nullptr);
  const auto rows = ByValue(*t);
  ASSERT_EQ(rows.size(), 100u);
  EXPECT_EQ(t->groups(), 100u);
  EXPECT_EQ(t->lost(), 0u);
  for (const auto& [value, want] : truth) {
    ASSERT_EQ(rows.count(value), 1u) << value;
    ExpectCounts(rows.at(value).counts, want, value);
    EXPECT_EQ(rows.at(value).distinct[0].Count(), 14u) << value;  // p0..p6 and c0..c6
  }
  // No temporary file of the creation race is left behind.
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
    ++files;
    EXPECT_EQ(e.path().string(), path);
  }
  EXPECT_EQ(files, 1u);
}

TEST(GroupTable, AWriterKilledMidwayLeavesAConsistentFile) {
  frs::testing::TempDir dir;
  const std::string path = dir / "t.frs";
  {
    auto t = OpenOrDie(path, GroupTableShape{1000, 1});  // made before the child starts
    ASSERT_NE(t, nullptr);
  }
  int go = -1;
  const pid_t child = ForkAdder(path, 0, &go);  // adds until killed
  ASSERT_GE(child, 0);
  ASSERT_TRUE(StartAdding(go));

  auto t = OpenOrDie(path, GroupTableShape{1000, 1});
  ASSERT_NE(t, nullptr);
  // The survivor adds to values of its own ("p0".."p99") while the child runs...
  std::map<std::string, GroupCounts> mine;
  uint64_t i = 0;
  auto add_mine = [&](uint64_t n) {
    for (uint64_t end = i + n; i < end; ++i) {
      const std::string value = "p" + std::to_string(i % 100);
      const uint32_t code = sketch::CodeOf("s" + std::to_string(i % 3));
      ASSERT_TRUE(t->Add(value, DecisionOf(i), &code));
      AddTo(&mine[value], DecisionOf(i));
    }
  };
  auto child_requests = [&] {
    uint64_t n = 0;
    for (const GroupRow& r : t->Rows())
      if (r.value[0] == 'v') n += r.counts.requests;
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (child_requests() < 30000 && std::chrono::steady_clock::now() < deadline) add_mine(1000);
  // ...is killed at some instruction of its adds...
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
  const uint64_t killed_at = child_requests();
  EXPECT_GE(killed_at, 30000u) << "the child added too slowly";
  // ...and the survivor goes on.
  add_mine(20000);
  t.reset();

  for (Mode mode : {Mode::kRead, Mode::kWrite}) {
    auto r = OpenOrDie(path, GroupTableShape{1000, 1}, mode);
    ASSERT_NE(r, nullptr);
    const auto rows = ByValue(*r);
    uint64_t ahead = 0, child_total = 0;
    size_t child_groups = 0;
    for (const auto& [value, row] : rows) {
      if (value[0] == 'p') {
        ExpectCounts(row.counts, mine[value], value);
        EXPECT_EQ(row.distinct[0].Count(), 3u) << value;
        continue;
      }
      ASSERT_EQ(value[0], 'v') << value;
      ++child_groups;
      const GroupCounts& c = row.counts;
      // Add adds requests, then allowed or denied, then units, one atomic
      // each: a kill between two leaves requests ahead by one at most.
      ASSERT_GE(c.requests, c.allowed + c.denied) << value;
      ahead += c.requests - (c.allowed + c.denied);
      EXPECT_LE(c.requests - (c.allowed + c.denied), 1u) << value;
      EXPECT_LE(c.units, 4 * c.allowed) << value;
      EXPECT_GE(row.distinct[0].Count(), 1u) << value;
      EXPECT_LE(row.distinct[0].Count(), 7u) << value;
      child_total += c.requests;
    }
    EXPECT_LE(ahead, 1u);  // one writer: one Add interrupted at most
    EXPECT_EQ(child_groups, 100u);
    EXPECT_EQ(child_total, killed_at);
    EXPECT_EQ(mine.size(), 100u);
    EXPECT_EQ(r->lost(), 0u);
  }
  // Still writable after the kill.
  auto w = OpenOrDie(path, GroupTableShape{1000, 1});
  ASSERT_NE(w, nullptr);
  const uint32_t code = sketch::CodeOf("late");
  EXPECT_TRUE(w->Add("late", GroupCounts{1, 1, 0, 1}, &code));
  GroupRow late;
  EXPECT_TRUE(w->Row("late", &late));
  EXPECT_EQ(late.counts.requests, 1u);
}

void Overwrite(const std::string& path, off_t at, const void* bytes, size_t n) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, bytes, n, at), static_cast<ssize_t>(n));
  ::close(fd);
}

// A day's file that does not fit names the full disk: posix_fallocate
// returns its error rather than setting errno, and the refusal said
// "No such file or directory" (errno of an earlier call), sending an
// operator to look for a missing directory.
TEST(GroupTable, ADayFileThatDoesNotFitSaysTheDiskIsFull) {
  frs::testing::TempDir dir;
  frs::testing::SmallDisk disk(dir / "small", "256k");
  if (!disk.mounted()) GTEST_SKIP() << "needs root and mount(2) for a small tmpfs";
  auto t = GroupTable::Open(dir / "small/day.frs", GroupTableShape{1000, 1}, Mode::kWrite);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(std::strerror(ENOSPC)), std::string::npos) << t.status().ToString();
  EXPECT_EQ(t.status().message().find(std::strerror(ENOENT)), std::string::npos) << t.status().ToString();
}

TEST(GroupTable, ADamagedHeaderIsMovedAsideForWritingAndRefusedForReading) {
  frs::testing::TempDir dir;
  const std::string path = dir / "t.frs";
  // Where a damaged file is moved: path.damaged-<pid>-<n>.
  const auto aside = [&] {
    for (const auto& e : std::filesystem::directory_iterator(dir.path()))
      if (e.path().string().starts_with(path + ".damaged-" + std::to_string(::getpid()) + "-"))
        return e.path().string();
    return std::string("(none)");
  };
  {
    auto t = OpenOrDie(path, GroupTableShape{100, 0});
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(t->Add("a", GroupCounts{5, 5, 0, 5}, nullptr));
  }
  Overwrite(path, 0, "NOTMAGIC", 8);
  auto r = GroupTable::Open(path, GroupTableShape{100, 0}, Mode::kRead);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << r.status().ToString();
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message(), path + ": bad magic");
  EXPECT_FALSE(std::filesystem::exists(aside()));  // a reader moves nothing

  {
    auto t = OpenOrDie(path, GroupTableShape{100, 0});
    ASSERT_NE(t, nullptr);
    EXPECT_TRUE(std::filesystem::exists(aside()));
    EXPECT_GT(std::filesystem::file_size(aside()), 0u);
    EXPECT_TRUE(t->Rows().empty());
    EXPECT_EQ(t->groups(), 0u);
    GroupRow a;
    EXPECT_FALSE(t->Row("a", &a));
    ASSERT_TRUE(t->Add("b", GroupCounts{1, 0, 1, 0}, nullptr));
  }
  // The new file is a good one.
  auto again = OpenOrDie(path, GroupTableShape{100, 0}, Mode::kRead);
  ASSERT_NE(again, nullptr);
  GroupRow b;
  ASSERT_TRUE(again->Row("b", &b));
  EXPECT_EQ(b.counts.denied, 1u);

  // A geometry field changed without its checksum: damaged too.
  std::filesystem::remove(aside());
  const uint32_t groups = 77;
  Overwrite(path, 20, &groups, sizeof groups);  // Header::groups
  auto r2 = GroupTable::Open(path, GroupTableShape{100, 0}, Mode::kRead);
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().code(), Status::Code::kCorruption) << r2.status().ToString();
  auto w2 = OpenOrDie(path, GroupTableShape{100, 0});
  ASSERT_NE(w2, nullptr);
  EXPECT_TRUE(std::filesystem::exists(aside()));
  EXPECT_TRUE(w2->Rows().empty());

  // A file too short for a header.
  const std::string short_path = dir / "short.frs";
  { std::ofstream(short_path) << "FRSG"; }
  auto r3 = GroupTable::Open(short_path, GroupTableShape{100, 0}, Mode::kRead);
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.status().code(), Status::Code::kCorruption);
}

TEST(GroupTable, AFileOfAnotherShapeIsUsedInTheShapeItHas) {
  frs::testing::TempDir dir;
  const std::string path = dir / "t.frs";
  {
    auto t = OpenOrDie(path, GroupTableShape{5, 1});
    ASSERT_NE(t, nullptr);
    const uint32_t code = sketch::CodeOf("u");
    ASSERT_TRUE(t->Add("a", GroupCounts{1, 1, 0, 1}, &code));
  }
  auto t = OpenOrDie(path, GroupTableShape{1000, 0});
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape().groups, 5u);
  EXPECT_EQ(t->shape().distinct, 1u);
  GroupRow a;
  ASSERT_TRUE(t->Row("a", &a));
  EXPECT_EQ(a.counts.requests, 1u);
  ASSERT_EQ(a.distinct.size(), 1u);
  EXPECT_EQ(a.distinct[0].Count(), 1u);
  EXPECT_FALSE(GroupTable::Open(dir / "bad.frs", GroupTableShape{0, 0}, Mode::kWrite).ok());
  EXPECT_FALSE(GroupTable::Open(dir / "bad.frs", GroupTableShape{10, 3}, Mode::kWrite).ok());
}

TEST(GroupTable, MergeAddsCountsAndUnitesSketches) {
  frs::testing::TempDir dir;
  auto t = OpenOrDie(dir / "here.frs", GroupTableShape{1000, 1});
  auto src = OpenOrDie(dir / "there.frs", GroupTableShape{1000, 1});
  ASSERT_NE(t, nullptr);
  ASSERT_NE(src, nullptr);
  auto add_users = [](GroupTable* table, const std::string& value, int from, int to) {
    for (int u = from; u < to; ++u) {
      const uint32_t code = sketch::CodeOf("user" + std::to_string(u));
      ASSERT_TRUE(table->Add(value, GroupCounts{1, 1, 0, 2}, &code));
    }
  };
  add_users(t.get(), "small", 0, 100);
  add_users(src.get(), "small", 50, 150);
  add_users(t.get(), "big", 0, 10000);
  add_users(src.get(), "big", 5000, 15000);
  add_users(src.get(), "new", 0, 42);
  t->AddFieldErrors(2);

  for (const GroupRow& r : src->Rows()) ASSERT_TRUE(t->Merge(r)) << r.value;

  GroupRow small, big, fresh;
  ASSERT_TRUE(t->Row("small", &small));
  ExpectCounts(small.counts, GroupCounts{200, 200, 0, 400}, "small");
  EXPECT_TRUE(small.distinct[0].exact());
  EXPECT_EQ(small.distinct[0].Count(), 150u);  // the union, not 200
  ASSERT_TRUE(t->Row("big", &big));
  ExpectCounts(big.counts, GroupCounts{20000, 20000, 0, 40000}, "big");
  EXPECT_NEAR(static_cast<double>(big.distinct[0].Count()), 15000.0, 0.02 * 15000);
  ASSERT_TRUE(t->Row("new", &fresh));
  ExpectCounts(fresh.counts, GroupCounts{42, 42, 0, 84}, "new");
  EXPECT_EQ(fresh.distinct[0].Count(), 42u);
  EXPECT_EQ(t->groups(), 3u);
  EXPECT_EQ(t->field_errors(), 2u);

  // A row with counts and no sketch: counts only.
  GroupRow plain;
  plain.value = "small";
  plain.counts = GroupCounts{3, 1, 2, 1};
  ASSERT_TRUE(t->Merge(plain));
  ASSERT_TRUE(t->Row("small", &small));
  ExpectCounts(small.counts, GroupCounts{203, 201, 2, 401}, "small+plain");
  EXPECT_EQ(small.distinct[0].Count(), 150u);

  // A decoded sketch (as one travels between servers) merges the same way.
  sketch::Sketch shipped;
  ASSERT_TRUE(sketch::Sketch::Decode(big.distinct[0].Encode(), &shipped));
  GroupRow copy;
  copy.value = "copy";
  copy.counts = GroupCounts{1, 1, 0, 0};
  copy.distinct.push_back(shipped);
  ASSERT_TRUE(t->Merge(copy));
  GroupRow got;
  ASSERT_TRUE(t->Row("copy", &got));
  EXPECT_EQ(got.distinct[0].Count(), big.distinct[0].Count());

  // Counts merged past 2^63 stop there: they wrapped to what was added
  // beyond 2^64-1 (2^64-1, then 5, read 4), and a row at 0 left the groups;
  // the request path's adds of one each still have 2^63 of room.
  GroupRow huge;
  huge.value = "huge";
  huge.counts = GroupCounts{UINT64_MAX, UINT64_MAX, 0, UINT64_MAX};
  ASSERT_TRUE(t->Merge(huge));
  huge.counts = GroupCounts{6, 5, 1, 5};
  ASSERT_TRUE(t->Merge(huge));
  ASSERT_TRUE(t->Row("huge", &got));
  constexpr uint64_t kCeiling = uint64_t{1} << 63;
  ExpectCounts(got.counts, GroupCounts{kCeiling + 1, kCeiling, 1, kCeiling}, "huge");
  EXPECT_EQ(t->groups(), 5u);
  const uint32_t code = sketch::CodeOf("one more");
  ASSERT_TRUE(t->Add("huge", GroupCounts{1, 1, 0, 1}, &code));
  ASSERT_TRUE(t->Row("huge", &got));
  ExpectCounts(got.counts, GroupCounts{kCeiling + 2, kCeiling + 1, 1, kCeiling + 1}, "huge+1");
}

// A handoff's received file holds a few groups: trimmed, it keeps a few KB
// of disk instead of its 1 MB growth step, reads back whole, and may still
// grow (a later merge of more groups).
TEST(GroupTable, TrimGivesBackTheGrowthStepAndTheTableStillReadsAndGrows) {
  frs::testing::TempDir dir;
  const std::string path = dir / "from.frs";
  auto t = OpenOrDie(path, GroupTableShape{4, 1});
  ASSERT_NE(t, nullptr);
  const uint32_t code = sketch::CodeOf("someone");
  ASSERT_TRUE(t->Add("a", GroupCounts{3, 2, 1, 7}, &code));
  ASSERT_TRUE(t->Add("b", GroupCounts{1, 1, 0, 1}, &code));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_GE(st.st_size, 1 << 20);  // the growth step, allocated
  ASSERT_TRUE(t->Trim().ok());
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_LE(st.st_size, 64 << 10) << "bytes kept";
  EXPECT_EQ(st.st_size % 4096, 0);
  EXPECT_LE(st.st_blocks * 512, 64 << 10) << "disk kept";
  ASSERT_TRUE(t->Trim().ok());  // again: nothing to give back
  t.reset();

  auto r = OpenOrDie(path, GroupTableShape{4, 1}, Mode::kRead);
  ASSERT_NE(r, nullptr);
  auto rows = ByValue(*r);
  ASSERT_EQ(rows.count("a"), 1u);
  ExpectCounts(rows["a"].counts, GroupCounts{3, 2, 1, 7}, "a");
  ExpectCounts(rows["b"].counts, GroupCounts{1, 1, 0, 1}, "b");
  EXPECT_EQ(rows["a"].distinct[0].Count(), 1u);
  EXPECT_FALSE(r->Trim().ok());  // a reader's table is not its to trim
  r.reset();

  // Written again: it grows past the trimmed end as a day's file grows.
  auto w = OpenOrDie(path, GroupTableShape{4, 1});
  ASSERT_NE(w, nullptr);
  for (int u = 0; u < 5000; ++u) {
    const uint32_t c = sketch::CodeOf("user" + std::to_string(u));
    ASSERT_TRUE(w->Add("c", GroupCounts{1, 1, 0, 0}, &c)) << u;
  }
  EXPECT_FALSE(w->damaged());
  GroupRow c;
  ASSERT_TRUE(w->Row("c", &c));
  ExpectCounts(c.counts, GroupCounts{5000, 5000, 0, 0}, "c");
  EXPECT_NEAR(static_cast<double>(c.distinct[0].Count()), 5000.0, 0.05 * 5000);
  ASSERT_TRUE(w->Row("a", &c));
  ExpectCounts(c.counts, GroupCounts{3, 2, 1, 7}, "a after the growth");
}

// Offsets in a day file are shared memory a bug, a disk or a hand may
// damage: a record offset pointing far past the file, or a value length
// beyond any key, is refused where it is read (the table stops counting
// there) and never followed into a fault.
TEST(GroupTable, DamagedOffsetsPastTheHeaderAreNeverFollowed) {
  frs::testing::TempDir dir;
  const std::string path = dir / "d.frs";
  {
    auto t = OpenOrDie(path, GroupTableShape{50, 1});
    ASSERT_NE(t, nullptr);
    for (int i = 0; i < 20; ++i) {
      const uint32_t code = sketch::CodeOf("u" + std::to_string(i));
      ASSERT_TRUE(t->Add("v" + std::to_string(i), GroupCounts{1, 1, 0, 1}, &code));
    }
  }
  // The index follows the 256-byte header: damage its first two used slots,
  // one to point 100 GB away, one at a record whose value length we spoil.
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint32_t slots[128];
  ASSERT_EQ(::pread(fd, slots, sizeof slots, 256), static_cast<ssize_t>(sizeof slots));
  int damaged = 0;
  for (uint32_t i = 0; i < 128 && damaged < 2; ++i) {
    if (slots[i] == 0) continue;
    if (damaged == 0) {
      const uint32_t far = 0x7fffff00u;
      ASSERT_EQ(::pwrite(fd, &far, 4, 256 + 4 * i), 4);
    } else {
      const uint16_t huge = 60000;
      ASSERT_EQ(::pwrite(fd, &huge, 2, uint64_t{slots[i]} * 64 + 40), 2);  // Record::value_len
    }
    ++damaged;
  }
  ::close(fd);
  ASSERT_EQ(damaged, 2);
  auto r = OpenOrDie(path, GroupTableShape{50, 1}, Mode::kRead);
  ASSERT_NE(r, nullptr);
  const auto rows = r->Rows();
  EXPECT_EQ(rows.size(), 18u);  // the two damaged groups are not shown; the rest are whole
  for (const GroupRow& row : rows) EXPECT_EQ(row.counts.requests, 1u) << row.value;
  // A writer on the damaged file neither faults nor counts into garbage.
  auto w = OpenOrDie(path, GroupTableShape{50, 1});
  ASSERT_NE(w, nullptr);
  for (int i = 0; i < 40; ++i) {
    const uint32_t code = sketch::CodeOf("x");
    w->Add("v" + std::to_string(i), GroupCounts{1, 1, 0, 1}, &code);
  }
  SUCCEED();
}

// The day's files are summed when read (its own, and each a handoff or an
// admin's POST /stats brought): two files whose merges stopped at 2^63 add
// up to 2^64, which read 0 (found by an attack with the admin token, two
// POSTs of 2^64-1); the sum stops at 2^64-1.
TEST(GroupTable, FilesSummedWhenReadStopAtTheTopInsteadOfWrapping) {
  frs::testing::TempDir dir;
  std::vector<std::shared_ptr<const GroupTable>> tables;
  for (const char* name : {"d.frs", "d.from-w1.frs", "d.from-w2.frs"}) {
    auto t = OpenOrDie(dir / name, GroupTableShape{50, 0});
    ASSERT_NE(t, nullptr);
    GroupRow row;
    row.value = "app1";
    row.counts = std::string_view(name) == "d.frs" ? GroupCounts{17, 17, 0, 17}
                                                   : GroupCounts{UINT64_MAX, UINT64_MAX, 0, UINT64_MAX};
    ASSERT_TRUE(t->Merge(row));
    // What a sender said of its field errors (POST /stats field_errors=).
    t->AddFieldErrors(std::string_view(name) == "d.frs" ? 3 : UINT64_MAX);
    tables.push_back(std::move(t));
  }
  for (const std::string& value : {std::string("app1"), std::string()}) {
    GroupStatsQuery q;
    q.value = value;
    const GroupStats got = ReadGroupStats(tables, q);
    ASSERT_EQ(got.rows.size(), 1u) << value;
    EXPECT_EQ(got.rows[0].value, "app1");
    EXPECT_EQ(got.rows[0].allowed, UINT64_MAX) << value;
    EXPECT_EQ(got.rows[0].requests, UINT64_MAX) << value;
    EXPECT_EQ(got.rows[0].units, UINT64_MAX) << value;
    EXPECT_EQ(got.rows[0].denied, 0u) << value;
    EXPECT_EQ(got.field_errors, UINT64_MAX) << value;  // it wrapped to 2^64-2
  }
}

}  // namespace group_table_test
}  // namespace frs::stats
