// A reload that changes a rule (docs/rules.md, "Changing a rule"): whatever
// the change, no window of the new rule grants more than the stricter of the
// two rules allows. Driven through the engine and its reload, on a fake clock.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/node_export.h"
#include "common/temp_dir.h"
#include "frs/admin_engine.h"
#include "limit/rule_harness.h"

namespace frs {
namespace {

using limit::testing::kDay0;
constexpr int64_t kHour = 3600, kMinute = 60;

class RuleChangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions o;
    o.dir = dir_ / "store";
    o.geometry = StoreGeometry{1, 1024, 8};
    auto s = Store::Open(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s.value());
  }

  // An engine whose map is one biz "a" holding `rules`.
  void Open(const std::string& rules, const std::string& tz = "UTC") {
    std::ofstream(dir_ / "map.xml") << Map(rules);
    EngineOptions o;
    o.map_path = dir_ / "map.xml";
    o.store = store_.get();
    o.stats_dir = dir_ / "store";
    o.clock = &clock_;
    o.timezone = tz;
    auto e = AdminEngine::Open(o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e.value());
  }
  static std::string Map(const std::string& rules) { return "<map><biz id=\"1\" name=\"a\">" + rules + "</biz></map>"; }
  void Reload(const std::string& rules) {
    const Status s = engine_->ReloadText(Map(rules), dir_ / "map.xml");
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  Decision Do(Cmd cmd, std::string_view key = "k", int64_t n = 1) {
    return engine_->Execute(Request{.cmd = cmd, .biz = "a", .key = key, .n = n});
  }
  bool Acquire(std::string_view key = "k") { return Do(Cmd::kAcquire, key).allowed; }
  // Acquires until denied (at most `cap` tries); answers how many were granted.
  int AcquireAll(std::string_view key = "k", int cap = 100) {
    int granted = 0;
    while (granted < cap && Acquire(key)) ++granted;
    return granted;
  }
  void At(int64_t s) { clock_.Set(s * 1000); }

  testing::TempDir dir_;
  FakeClock clock_{kDay0 * 1000};
  std::unique_ptr<Store> store_;
  std::unique_ptr<AdminEngine> engine_;
};

const std::string kDay = R"(<rule name="cap" algo="calendar" interval="86400" max="5"/>)";
const std::string kHourly = R"(<rule name="cap" algo="calendar" interval="3600" max="5"/>)";
const std::string kFixedDay = R"(<rule name="cap" algo="fixed" interval="86400" max="5"/>)";
const std::string kFixedHour = R"(<rule name="cap" algo="fixed" interval="3600" max="5"/>)";

// The day's 5 may all have been used in the current hour: the state does not
// say when in the day they were, so the hour carries all of them.
TEST_F(RuleChangeTest, ADayNarrowedToAnHourAfterItsFirstHourKeepsTheDaysUses) {
  Open(kDay);
  At(kDay0 + 10 * kMinute);
  ASSERT_EQ(AcquireAll(), 5);
  At(kDay0 + 14 * kHour + 20 * kMinute);
  EXPECT_FALSE(Acquire()) << "the day is used up";
  Reload(kHourly);
  At(kDay0 + 14 * kHour + 30 * kMinute);
  EXPECT_FALSE(Acquire()) << "the uses the day counted may lie in this hour";
  EXPECT_EQ(Do(Cmd::kGet).count, 5);
  // The next hour holds none of them.
  At(kDay0 + 15 * kHour);
  EXPECT_EQ(AcquireAll(), 5);
}

// Ten reloads between two rules in one calendar hour never grant more than
// either rule's max there.
TEST_F(RuleChangeTest, AReloadStormGrantsAtMostTheStricterMaxInOneHour) {
  for (const auto& [first, second] :
       {std::pair{kDay, kHourly}, std::pair{kHourly, kDay}, std::pair{kFixedDay, kFixedHour},
        std::pair{kFixedHour, kFixedDay}, std::pair{kDay, kFixedHour}, std::pair{kFixedDay, kHourly}}) {
    SCOPED_TRACE(first + " / " + second);
    const int64_t hour = clock_.NowMs() / 1000 / 86400 * 86400 + 86400 + 6 * kHour;  // the next day, 06:00
    const std::string key = "storm" + std::to_string(hour);
    Open(first);
    At(hour + kMinute);
    int granted = AcquireAll(key);
    for (int i = 0; i < 10; ++i) {
      At(hour + (i + 2) * 5 * kMinute);
      Reload(i % 2 == 0 ? second : first);
      granted += AcquireAll(key);
    }
    EXPECT_EQ(granted, 5);
  }
}

// A fixed day narrowed to a fixed hour, after that hour would have ended:
// the day's window is still open, and its uses may be this hour's.
TEST_F(RuleChangeTest, AFixedDayNarrowedToAnHourKeepsItsUsesUntilTheDayWouldHaveEnded) {
  Open(kFixedDay);
  At(kDay0 + 10 * kMinute);
  ASSERT_EQ(AcquireAll(), 5);
  Reload(kFixedHour);
  At(kDay0 + 14 * kHour + 30 * kMinute);
  EXPECT_FALSE(Acquire());
  At(kDay0 + 15 * kHour + 30 * kMinute);
  EXPECT_EQ(AcquireAll(), 5) << "an hour after the conversion, the carried uses are gone";
  // Near the day's end the carried hour ends with the day.
  Reload(kFixedDay);
  At(kDay0 + 86400 + 10 * kMinute);
  ASSERT_EQ(AcquireAll("late"), 5);
  Reload(kFixedHour);
  At(kDay0 + 2 * 86400 - 10 * kMinute);
  EXPECT_FALSE(Acquire("late"));
  At(kDay0 + 2 * 86400 + 10 * kMinute);
  EXPECT_EQ(AcquireAll("late"), 5) << "the old day ended at 00:10, as the carried hour";
}

// A clock stepped back before the old window when the rule changes: the
// count stays with the old window's time, as "Time" in docs/rules.md says.
TEST_F(RuleChangeTest, ANarrowedWindowUnderAClockSteppedBackKeepsItsCount) {
  Open(kDay);
  At(kDay0 + 86400 + 14 * kHour);
  ASSERT_EQ(AcquireAll(), 5);
  Reload(kHourly);
  At(kDay0 + 86400 - 2 * kHour);  // two hours before the day began
  EXPECT_FALSE(Acquire());
  At(kDay0 + 86400 + 14 * kHour + 30 * kMinute);
  EXPECT_FALSE(Acquire()) << "the day's uses may lie in this hour";
}

// A changed algorithm between the two window rules carries the count as a
// changed interval does.
TEST_F(RuleChangeTest, ACalendarDayMadeAFixedHourKeepsTheDaysUses) {
  Open(kDay);
  At(kDay0 + 10 * kMinute);
  ASSERT_EQ(AcquireAll(), 5);
  Reload(kFixedHour);
  At(kDay0 + 9 * kHour);
  EXPECT_FALSE(Acquire());
  At(kDay0 + 10 * kHour + 1);
  EXPECT_EQ(AcquireAll(), 5);
}

TEST_F(RuleChangeTest, AFixedDayMadeACalendarHourKeepsTheDaysUses) {
  Open(kFixedDay);
  At(kDay0 + 10 * kMinute);
  ASSERT_EQ(AcquireAll(), 5);
  Reload(kHourly);
  At(kDay0 + 9 * kHour + 30 * kMinute);
  EXPECT_FALSE(Acquire());
  At(kDay0 + 10 * kHour);
  EXPECT_EQ(AcquireAll(), 5);
}

TEST_F(RuleChangeTest, AFixedHourMadeACalendarDayKeepsTheHoursUses) {
  Open(kFixedHour);
  At(kDay0 + 9 * kHour + 50 * kMinute);
  ASSERT_EQ(AcquireAll(), 5);
  Reload(kDay);
  At(kDay0 + 14 * kHour);
  EXPECT_FALSE(Acquire()) << "the hour's uses lie in today";
  At(kDay0 + 86400);
  EXPECT_EQ(AcquireAll(), 5);
}

// A rule whose windows move to another zone (zone="UTC" added, same
// interval): the uses of the old zone's day may lie in the new zone's day.
TEST_F(RuleChangeTest, ADayMovedToAnotherZoneKeepsItsUses) {
  Open(kDay, "America/New_York");
  At(kDay0 + 12 * kHour);  // 07:00 in New York: its day began at 05:00 UTC
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Acquire());
  Reload(R"(<rule name="cap" algo="calendar" interval="86400" max="5" zone="UTC"/>)");
  At(kDay0 + 13 * kHour);
  EXPECT_EQ(AcquireAll(), 2) << "3 of the UTC day's 5 were used";
  // And back: the UTC day's uses (all of today, UTC) may lie in New York's day.
  At(kDay0 + 86400 + 23 * kHour);
  ASSERT_EQ(AcquireAll(), 5);
  Reload(kDay);
  At(kDay0 + 86400 + 23 * kHour + 30 * kMinute);  // New York's day began at 05:00 UTC
  EXPECT_FALSE(Acquire());
}

// A narrowed sliding window counts exactly the recorded uses inside it, and
// a narrowed token bucket keeps its tokens in use: neither starts afresh.
TEST_F(RuleChangeTest, SlidingAndTokenBucketNarrowedKeepWhatTheyHold) {
  Open(R"(<rule name="cap" algo="sliding" interval="86400" max="5"/>)");
  At(kDay0 + 14 * kHour);
  ASSERT_EQ(AcquireAll(), 5);
  Reload(R"(<rule name="cap" algo="sliding" interval="3600" max="5"/>)");
  At(kDay0 + 14 * kHour + 30 * kMinute);
  EXPECT_FALSE(Acquire());
  Open(R"(<rule name="tb" algo="token_bucket" interval="86400" max="5"/>)");
  ASSERT_EQ(AcquireAll("t"), 5);
  Reload(R"(<rule name="tb" algo="token_bucket" interval="3600" max="5"/>)");
  At(kDay0 + 14 * kHour + 40 * kMinute);
  EXPECT_EQ(AcquireAll("t"), 0) << "refilled at 5 an hour: 12 minutes a token";
  At(kDay0 + 14 * kHour + 52 * kMinute);
  EXPECT_EQ(AcquireAll("t"), 1);
}

// A lowered max of a token bucket keeps its tokens in use (the full-again
// instant alone would have made 4 of 10 in use 2 of 5); a raised one keeps
// the instant the bucket is full again.
TEST_F(RuleChangeTest, ATokenBucketsChangedMaxKeepsTheStricterReading) {
  Open(R"(<rule name="tb" algo="token_bucket" interval="3600" max="10"/>)");
  At(kDay0 + 14 * kHour);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Acquire());
  Reload(R"(<rule name="tb" algo="token_bucket" interval="3600" max="5"/>)");
  EXPECT_EQ(AcquireAll(), 1) << "4 of 5 tokens are in use";
  EXPECT_EQ(Do(Cmd::kGet).count, 5);
  Reload(R"(<rule name="tb" algo="token_bucket" interval="3600" max="20"/>)");
  EXPECT_EQ(AcquireAll(), 0) << "full again in an hour, as under max 5";
  At(kDay0 + 15 * kHour);
  EXPECT_EQ(AcquireAll(), 20);
}

// A token bucket's block holds 16 bits of the max it was written under, so
// a max of 65,536 or more changed with the interval kept was read as max mod
// 65,536: 100,000 made 60,000 with 50,000 in use read 30,000 in use, and
// granted 30,000 more at once (found from outside). The rule history keeps
// the earlier maxes of each interval, and the block's bits pick one: after a
// reload, after two with the key untouched, and after a restart.
TEST_F(RuleChangeTest, ATokenBucketMaxPast65535ChangedAloneKeepsItsTokensInUse) {
  const auto tb = [](int max) {
    return R"(<rule name="tb" algo="token_bucket" interval="3600" max=")" + std::to_string(max) + R"("/>)";
  };
  Open(tb(100000));
  At(kDay0 + 14 * kHour);
  for (const char* key : {"k", "u", "w"}) ASSERT_TRUE(Do(Cmd::kAcquire, key, 50000).allowed) << key;
  Reload(tb(60000));
  EXPECT_EQ(Do(Cmd::kGet, "k").count, 50000);
  EXPECT_FALSE(Do(Cmd::kAcquire, "k", 10001).allowed);
  EXPECT_TRUE(Do(Cmd::kAcquire, "k", 10000).allowed);
  // Two changes with the key untouched between: its block still holds
  // 100,000's bits.
  Reload(tb(80000));
  Reload(tb(70000));
  EXPECT_EQ(Do(Cmd::kGet, "u").count, 50000);
  EXPECT_FALSE(Do(Cmd::kAcquire, "u", 20001).allowed);
  // A map edited while frsd was stopped: the history is the store
  // directory's, read at the start.
  Open(tb(60000));
  EXPECT_EQ(Do(Cmd::kGet, "w").count, 50000);
  EXPECT_FALSE(Do(Cmd::kAcquire, "w", 10001).allowed);
  // A node exported, or sent in a replica snapshot, before its next use
  // goes converted by this store's history: a store that never ran the
  // old max (a new store taking a snapshot) reads it right. Sent as it was,
  // 150,000 of 150,000 in use read 112,400 there (found from outside).
  Open(tb(100000));
  ASSERT_TRUE(Do(Cmd::kAcquire, "v", 50000).allowed);
  Reload(tb(60000));
  std::string line = testing::ExportedLine(*store_, *engine_, "v");
  ASSERT_FALSE(line.empty());
  StoreOptions so;
  so.dir = dir_ / "other";
  so.geometry = StoreGeometry{1, 1024, 8};
  auto other_store = Store::Open(so);
  ASSERT_TRUE(other_store.ok()) << other_store.status().ToString();
  std::ofstream(dir_ / "other.xml") << Map(tb(60000));
  EngineOptions eo;
  eo.map_path = dir_ / "other.xml";
  eo.store = other_store->get();
  eo.stats_dir = dir_ / "other";
  eo.clock = &clock_;
  auto other = AdminEngine::Open(eo);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  const std::string_view lines[] = {line};
  std::vector<AdminEngine::LeftOutNode> left;
  auto merged = other.value()->MergeKnownNodes(lines, "snap-x", &left);
  ASSERT_TRUE(merged.ok() && merged.value()) << merged.status().ToString();
  EXPECT_EQ(other.value()->Execute(Request{.cmd = Cmd::kGet, .biz = "a", .key = "v"}).count, 50000);
  // A block current here, read by a store whose map has a lower max and
  // whose history never ran this one (a shard a step of a rollout ahead, an
  // import): the export says the max it was written under, and the reader
  // converts it as a reload would. By its bits, 50,000 of 100,000 read as a
  // raise's (found from outside: 100,000 of 200,000 read 75,000 of 150,000).
  Open(tb(100000));
  ASSERT_TRUE(Do(Cmd::kAcquire, "y", 50000).allowed);
  const std::string current = testing::ExportedLine(*store_, *engine_, "y");
  EXPECT_NE(current.find("\"max\":100000"), std::string::npos) << current;
  const std::string_view current_lines[] = {current};
  merged = other.value()->MergeKnownNodes(current_lines, "snap-y", &left);
  ASSERT_TRUE(merged.ok() && merged.value()) << merged.status().ToString();
  EXPECT_EQ(other.value()->Execute(Request{.cmd = Cmd::kGet, .biz = "a", .key = "y"}).count, 50000);
  // A max its state's 16 bits do not match is refused, as a damaged line:
  // a snapshot's merge leaves the node out, saying why; a handoff's
  // (MergeNodes) refuses the batch.
  std::string wrong = current;
  wrong.replace(wrong.find("\"max\":100000"), 12, "\"max\":100001");
  const std::string_view wrong_lines[] = {wrong};
  EXPECT_FALSE(other.value()->MergeNodes(wrong_lines, "snap-z").ok());
  auto refused = other.value()->MergeKnownNodes(wrong_lines, "snap-z", &left);
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_NE(left[0].why.find("max"), std::string::npos) << left[0].why;
  wrong.replace(wrong.find("\"max\":100001"), 12, "\"max\":" + std::to_string((int64_t{1} << 40) + 34464));
  const std::string_view huge_lines[] = {wrong};
  EXPECT_FALSE(other.value()->MergeNodes(huge_lines, "snap-z2").ok()) << "a max past 2^31 - 1";
  ASSERT_TRUE(other.value()->MergeKnownNodes(huge_lines, "snap-z2", &left).ok());
  ASSERT_EQ(left.size(), 1u);
  EXPECT_FALSE(left[0].why.empty());
  // A max this store cannot tell from an earlier one (a multiple of 65,536
  // apart) is not said: the reader's own history decides, as before.
  Reload(tb(165536));
  Reload(tb(100000));
  ASSERT_TRUE(Do(Cmd::kAcquire, "w2", 10).allowed);
  const std::string alike = testing::ExportedLine(*store_, *engine_, "w2");
  EXPECT_EQ(alike.find("\"max\""), std::string::npos) << alike;

  // Below 65,536 the block's bits alone were enough, and still are.
  Open(tb(1000));
  ASSERT_TRUE(Do(Cmd::kAcquire, "s", 500).allowed);
  Reload(tb(600));
  EXPECT_EQ(Do(Cmd::kGet, "s").count, 500);
}

}  // namespace
}  // namespace frs
