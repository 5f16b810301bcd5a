// Behaviour of the store in one process: create/find/update/erase, geometry
// and header checks, reads, batches, iteration, transactions, verify.
// Placement and eviction are placer_test.cc's, the writer table's
// writer_table_test.cc's, the chain locks' chain_lock_test.cc's.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "common/small_disk.h"
#include "common/store_ops.h"
#include "common/temp_dir.h"
#include "frs/store.h"
#include "frs/store_admin.h"
#include "os/shm_lock.h"
#include "os/sigbus_guard.h"
#include "os/unique_fd.h"
#include "store/format.h"
#include "store/identity.h"
#include "store/store_check.h"
#include "store/store_file.h"
#include "store/test_hooks.h"

namespace frs {
namespace {

using testing::TempDir;

using testing::CountOf;
using testing::ExpectClean;
using testing::MustOpen;
using testing::Opts;

// A counter node: 4 bytes of state (a general node of one 32-byte slot),
// incremented by `by`.
Status Incr(Store* s, const Key& k, uint64_t by, uint32_t now_s = 1000, uint32_t expire_s = 0,
            UpdateResult* r = nullptr) {
  return testing::AddToCounter(s, k, 4, by, now_s, expire_s, r);
}

TEST(Store, CreateFindUpdateErase) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 2, 64, 8));
  Key k = MakeKey(1, std::string("user:42"));
  EXPECT_TRUE(s->Get(k.ref()).status().IsNotFound());
  UpdateResult r;
  ASSERT_TRUE(Incr(s.get(), k, 3, 1000, 0, &r).ok());
  EXPECT_TRUE(r.created);
  EXPECT_FALSE(r.found);
  ASSERT_TRUE(Incr(s.get(), k, 4, 1000, 0, &r).ok());
  EXPECT_TRUE(r.found);
  EXPECT_EQ(CountOf(s.get(), k), 7u);
  auto info = s->Get(k.ref());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->key, "user:42");
  EXPECT_EQ(info->biz, 1);
  EXPECT_EQ(s->Stats().total.nodes_used, 1u);
  ASSERT_TRUE(s->Erase(k.ref()).ok());
  EXPECT_TRUE(s->Get(k.ref()).status().IsNotFound());
  EXPECT_TRUE(s->Erase(k.ref()).IsNotFound());
  EXPECT_EQ(s->Stats().total.nodes_used, 0u);
}

// A lookup that meets a page its file no longer has (the SIGBUS guard swaps
// in zero pages) answers the file's error, never "no such node": frsctl
// get and explain called a counted key new (explain: allowed).
TEST(Store, AGetOnAFileTruncatedUnderItIsTheFilesErrorNotNoSuchNode) {
  os::InstallSigbusGuard();
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 64, 8));
  Key k = MakeKey(1, std::string("user:42"));
  UpdateResult r;
  ASSERT_TRUE(Incr(s.get(), k, 3, 1000, 0, &r).ok());
  ASSERT_TRUE(s->Get(k.ref()).ok());
  ASSERT_EQ(::truncate((std::filesystem::path(d.path()) / "frs.0.store").c_str(), 4096), 0);
  auto got = s->Get(k.ref());
  ASSERT_FALSE(got.ok());
  EXPECT_FALSE(got.status().IsNotFound()) << got.status().ToString();
  EXPECT_NE(got.status().message().find("truncated while in use"), std::string::npos) << got.status().ToString();
}

// A store file moved away, or replaced by a copy renamed over it, while in
// use: its path names another file or none, so what this process writes
// would not be where a restart looks. CheckFiles says so and its keys are
// refused (a check from outside saw both serve on, unseen). A path missing
// for an instant (a symbolic link swapped in two steps) is not a move, and a
// chdir after the open (a relative store dir) moves nothing.
TEST(Store, AFileMovedOrReplacedUnderItIsSeenByCheckFiles) {
  for (bool replace : {false, true}) {
    TempDir d;
    const std::filesystem::path cwd = std::filesystem::current_path();
    std::filesystem::current_path(d.path());
    auto s = MustOpen(Opts("store", 1, 64, 8));  // relative to the directory it was opened in
    std::filesystem::current_path("/");
    Key k = MakeKey(1, std::string("user:42"));
    ASSERT_TRUE(Incr(s.get(), k, 3).ok());
    EXPECT_TRUE(s->CheckFiles().ok());
    std::filesystem::current_path(cwd);
    const std::filesystem::path file = std::filesystem::path(d.path()) / "store/frs.0.store";
    std::filesystem::rename(file, file.string() + ".moved");
    EXPECT_TRUE(s->CheckFiles().ok()) << "a path missing for an instant";
    std::filesystem::rename(file.string() + ".moved", file);
    EXPECT_TRUE(s->CheckFiles().ok());
    if (replace) {
      std::filesystem::copy_file(file, file.string() + ".copy");
      std::filesystem::rename(file.string() + ".copy", file);
    } else {
      std::filesystem::rename(file, file.string() + ".moved");
    }
    Status st = s->CheckFiles();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!replace && st.ok() && std::chrono::steady_clock::now() < until) {  // missing past 2 s
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      st = s->CheckFiles();
    }
    EXPECT_EQ(st.code(), Status::Code::kUnavailable) << replace;
    EXPECT_NE(st.message().find(replace ? "frs.0.store was replaced by another file while in use"
                                        : "frs.0.store no longer names the file in use"),
              std::string::npos)
        << st.message();
    EXPECT_FALSE(Incr(s.get(), k, 1).ok()) << replace;
  }
}

// The master's periodic flush (Flush(false)) must start the writeback of the
// dirty pages, so that an OS crash loses at most about one flush interval. It
// used msync(MS_ASYNC), which on Linux starts nothing: pages stayed dirty
// until the kernel's own writeback, 30 s later. cachestat(2) (Linux 6.5)
// counts a file's dirty pages.
TEST(Store, AnAsyncFlushStartsTheWritebackOfDirtyPages) {
  TempDir d;
  struct statfs fs;
  ASSERT_EQ(statfs(d.path().c_str(), &fs), 0);
  if (fs.f_type == TMPFS_MAGIC) GTEST_SKIP() << "tmpfs writes nothing back";
  auto s = MustOpen(Opts(d.path(), 1, 64, 8));
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(Incr(s.get(), MakeKey(1, "flush:" + std::to_string(i)), 1).ok());
  const std::string file = d.path() + "/frs.0.store";
  os::UniqueFd fd(open(file.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_GE(fd.get(), 0);
  struct Range {
    uint64_t off, len;
  } range{0, 0};
  struct Stat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
  };
  constexpr long kCachestat = 451;  // x86-64, arm64 and the rest of the unified table
  auto dirty = [&]() -> int64_t {
    Stat st{};
    if (syscall(kCachestat, fd.get(), &range, &st, 0) != 0) return -1;
    return static_cast<int64_t>(st.nr_dirty + st.nr_writeback);
  };
  const int64_t before = dirty();
  if (before < 0 && errno == ENOSYS) GTEST_SKIP() << "no cachestat(2) on this kernel";
  ASSERT_GT(before, 0) << "the updates left no dirty page to write back";
  ASSERT_TRUE(s->Flush(false).ok());
  int64_t left = before;
  for (int i = 0; i < 500 && left > 0; ++i) {  // up to 5 s, for a disk busy with other tests
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    left = dirty();
  }
  EXPECT_EQ(left, 0) << before << " page(s) dirty before the flush";
  // The data is what it was.
  EXPECT_EQ(CountOf(s.get(), MakeKey(1, std::string("flush:7"))), 1u);
}

// A deleted frs.1.store was recreated empty at the next start, with the old
// store's id and no word: its keys' counts silently restarted. A store is now
// created only whole; completing one is an explicit choice.
TEST(Store, AnIncompleteStoreIsRefusedAndCompletedOnlyWhenAsked) {
  TempDir d;
  std::vector<Key> keys;
  {
    auto s = MustOpen(Opts(d.path(), 2, 64, 8));
    for (int i = 0; i < 200; ++i) {
      keys.push_back(MakeKey(1, "k" + std::to_string(i)));
      ASSERT_TRUE(Incr(s.get(), keys.back(), 5).ok());
    }
  }
  ASSERT_TRUE(std::filesystem::remove(d / "frs.1.store"));
  for (bool create : {true, false}) {
    StoreOptions o = Opts(d.path(), 2, 64, 8);
    o.create_if_missing = create;
    auto s = Store::Open(o);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find(d / "frs.1.store"), std::string::npos) << s.status().message();
    EXPECT_NE(s.status().message().find("incomplete"), std::string::npos) << s.status().message();
    EXPECT_FALSE(std::filesystem::exists(d / "frs.1.store")) << "a refused open created the file";
  }
  // frs.0.store is the one deleted this time too: the recreated file takes
  // the id of the files that remain.
  StoreOptions o = Opts(d.path(), 2, 64, 8);
  o.recreate_missing_files = true;
  auto s = MustOpen(o);
  int kept = 0, lost = 0;
  for (const Key& k : keys) (CountOf(s.get(), k) == 5 ? kept : lost)++;
  EXPECT_GT(kept, 50);
  EXPECT_GT(lost, 50);
  EXPECT_EQ(kept + lost, 200);
  s.reset();
  ASSERT_TRUE(std::filesystem::remove(d / "frs.0.store"));
  s = MustOpen(o);
  auto report = s->Verify(false);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->problems.empty()) << report->problems.front();
  s.reset();
  MustOpen(Opts(d.path(), 2, 64, 8));  // complete again: opens as usual
}

// A first start killed between a file's creation and its header (SIGXFSZ
// at the ftruncate under `ulimit -f`, kill -9, a power loss before the
// header reached the disk) left a file of zeros that every later start
// refused ("file is empty"), naming the files never made "missing, their
// counts lost". Such a file holds nothing: made again, and said.
TEST(Store, AStoreWhoseMakingWasCutShortIsMadeAgainAndSaid) {
  for (const uint64_t zeros : {uint64_t{0}, store::LayoutFor({2, 64, 8}).file_bytes}) {
    TempDir d;
    { std::ofstream f(d / "frs.0.store", std::ios::binary); }
    std::filesystem::resize_file(d / "frs.0.store", zeros);
    // What frsd -t and verify read: a store to make, not one incomplete.
    Result<store::StoreCheck> check = store::CheckStoreFiles(d.path(), {2, 64, 8});
    ASSERT_TRUE(check.ok()) << check.status().ToString();
    EXPECT_FALSE(check->exists);
    ASSERT_EQ(check->cut_short.size(), 1u);
    EXPECT_EQ(CutShortStoreFiles(d.path(), 2), (std::vector<std::string>{d / "frs.0.store", d / "frs.1.store"}));
    // An open that makes nothing says what the file is, and leaves it.
    StoreOptions ro = Opts(d.path(), 2, 64, 8);
    ro.create_if_missing = false;
    auto refused = Store::Open(ro);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("making was cut short"), std::string::npos) << refused.status().message();
    EXPECT_TRUE(std::filesystem::exists(d / "frs.0.store"));
    // One that makes files removes it and makes the whole store, said.
    StoreOptions o = Opts(d.path(), 2, 64, 8);
    std::vector<std::string> said;
    o.on_recovery = [&said](const std::string& what) { said.push_back(what); };
    auto s = MustOpen(o);
    ASSERT_EQ(said.size(), 1u);
    EXPECT_NE(said[0].find("frs.0.store: held no byte but zeros (" + std::to_string(zeros) + " bytes)"),
              std::string::npos)
        << said[0];
    const Key k = MakeKey(1, std::string("k"));
    ASSERT_TRUE(Incr(s.get(), k, 3).ok());
    s.reset();
    EXPECT_EQ(CountOf(MustOpen(Opts(d.path(), 2, 64, 8)).get(), k), 3u);
  }
}

// A first start killed between two files (frs.0.store made whole, frs.1
// not yet created) left a store every later open called incomplete, "the
// counts it held lost": it held none. Where nothing was ever counted (no
// node, no file of the engine) the files not there are made, and said.
TEST(Store, AStoreThatNeverServedHasTheFilesItLacksMade) {
  TempDir d;
  MustOpen(Opts(d.path(), 3, 64, 8));
  ASSERT_TRUE(std::filesystem::remove(d / "frs.1.store"));
  // A gap is a file lost, not one a start never made (it makes them in
  // order): refused, as ever.
  auto gap = Store::Open(Opts(d.path(), 3, 64, 8));
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("incomplete"), std::string::npos) << gap.status().message();
  EXPECT_FALSE(store::CheckStoreFiles(d.path(), {3, 64, 8}).ok());
  ASSERT_TRUE(std::filesystem::remove(d / "frs.2.store"));
  Result<store::StoreCheck> check = store::CheckStoreFiles(d.path(), {3, 64, 8});
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->never_made, (std::vector<std::string>{d / "frs.1.store", d / "frs.2.store"}));
  // A read (an open that makes nothing) says so too, not "counts lost".
  StoreOptions read = Opts(d.path(), 3, 64, 8);
  read.create_if_missing = false;
  auto unmade = Store::Open(read);
  ASSERT_FALSE(unmade.ok());
  EXPECT_NE(unmade.status().message().find("never served"), std::string::npos) << unmade.status().message();
  EXPECT_EQ(unmade.status().message().find("lost"), std::string::npos) << unmade.status().message();
  // An engine opened here once (its lease.key): it may have served, and
  // counted in the files now gone. Refused as before.
  {
    std::ofstream key(d / "lease.key", std::ios::binary);
    key << std::string(16, 'k');
  }
  EXPECT_FALSE(store::CheckStoreFiles(d.path(), {3, 64, 8}).ok());
  auto refused = Store::Open(Opts(d.path(), 3, 64, 8));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("incomplete"), std::string::npos) << refused.status().message();
  std::filesystem::remove(d / "lease.key");
  StoreOptions o = Opts(d.path(), 3, 64, 8);
  std::vector<std::string> said;
  o.on_recovery = [&said](const std::string& what) { said.push_back(what); };
  MustOpen(o);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("never served"), std::string::npos) << said[0];
  EXPECT_TRUE(std::filesystem::exists(d / "frs.2.store"));
}

// The same file of zeros beside a store that served is damage, not a
// making cut short: refused, named, and left for the operator's backup.
TEST(Store, AFileOfZerosBesideAStoreThatServedIsRefusedAsDamage) {
  TempDir d;
  {
    auto s = MustOpen(Opts(d.path(), 2, 64, 8));
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(Incr(s.get(), MakeKey(1, "k" + std::to_string(i)), 1).ok());
  }
  const uint64_t bytes = std::filesystem::file_size(d / "frs.1.store");
  std::filesystem::resize_file(d / "frs.1.store", 0);
  std::filesystem::resize_file(d / "frs.1.store", bytes);
  // No stats.frs (moved aside, lost in a restore), but frs.0.store's nodes
  // say the store served: not a making cut short, whatever -t would say.
  auto nodes = Store::Open(Opts(d.path(), 2, 64, 8));
  ASSERT_FALSE(nodes.ok());
  EXPECT_NE(nodes.status().message().find("this store served"), std::string::npos) << nodes.status().message();
  EXPECT_EQ(std::filesystem::file_size(d / "frs.1.store"), bytes) << "a refused open removed the file";
  EXPECT_FALSE(store::CheckStoreFiles(d.path(), {2, 64, 8}).ok());
  EXPECT_TRUE(CutShortStoreFiles(d.path(), 2).empty());
  // frs.0.store's nodes gone too: with a stats.frs of counters, damage all the same.
  std::filesystem::resize_file(d / "frs.0.store", 0);
  std::filesystem::resize_file(d / "frs.0.store", bytes);
  {
    std::ofstream stats(d / "stats.frs", std::ios::binary);
    stats << "counters";
  }
  auto s = Store::Open(Opts(d.path(), 2, 64, 8));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("holds no byte but zeros"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("this store served"), std::string::npos) << s.status().message();
  EXPECT_EQ(std::filesystem::file_size(d / "frs.1.store"), bytes) << "a refused open changed the file";
  Result<store::StoreCheck> check = store::CheckStoreFiles(d.path(), {2, 64, 8});
  ASSERT_FALSE(check.ok());
  EXPECT_NE(check.status().message().find("this store served"), std::string::npos) << check.status().message();
  // stats.frs of zeros kept no count either: the file is a making cut short.
  std::filesystem::resize_file(d / "stats.frs", 0);
  std::filesystem::resize_file(d / "stats.frs", 4096);
  MustOpen(Opts(d.path(), 2, 64, 8));
}

// A store whose second file could not be made (no block left for its
// header) kept its first: every later open then called the second
// "missing, its counts lost". What one Open made goes when it fails.
TEST(Store, AStoreThatCannotBeMadeWholeLeavesNoFileOfIt) {
  TempDir d;
  testing::SmallDisk disk(d / "small", "256k");
  if (!disk.mounted()) GTEST_SKIP() << "needs root to mount a small tmpfs (CI runs as root)";
  const std::string dir = d / "small";
  {
    std::ofstream spare(dir + "/spare", std::ios::binary);
    spare << std::string(4096, 'x');
  }
  std::system(("dd if=/dev/zero of='" + dir + "/filler' bs=4k 2>/dev/null").c_str());
  std::filesystem::remove(dir + "/spare");  // one page free: the first header's
  auto s = Store::Open(Opts(dir + "/store", 2, 64, 8));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("frs.1.store: cannot be made (No space left on device)"), std::string::npos)
      << s.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir + "/store/frs.0.store")) << "the half-made store stayed";
  EXPECT_FALSE(std::filesystem::exists(dir + "/store/frs.1.store"));
  std::filesystem::remove(dir + "/filler");
  MustOpen(Opts(dir + "/store", 2, 64, 8));  // made whole once there is room
}

// A file of zeros whose lock a process holds is being made now (its creator
// writes the header under that lock): never taken for one cut short.
TEST(Store, AFileOfZerosWhoseLockIsHeldIsNotCutShort) {
  TempDir d;
  { std::ofstream f(d / "frs.0.store", std::ios::binary); }
  os::UniqueFd held(::open((d / "frs.0.store").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(held.valid());
  ASSERT_EQ(::flock(held.get(), LOCK_EX), 0);
  EXPECT_EQ(store::ClassifyZeros(d.path(), d / "frs.0.store"), store::ZerosFile::kNo);
  const std::vector<std::string> cut = CutShortStoreFiles(d.path(), 2);
  EXPECT_EQ(std::find(cut.begin(), cut.end(), d / "frs.0.store"), cut.end());
  held.reset();
  EXPECT_EQ(store::ClassifyZeros(d.path(), d / "frs.0.store"), store::ZerosFile::kCutShort);
}

// The LRU clock ticks in seconds and ties broke by slot position, so under
// insert churn the key used thousands of times a second was the one evicted
// (8,976 granted for a limit of 5,000). Heat now breaks the tie: a hot key
// survives churn in a store far too small for the keys inserted around it.
TEST(Store, AHotKeySurvivesInsertChurnWithinASecondAndAcrossSeconds) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 2, 4));  // 8 slots in all
  const Key hot = MakeKey(1, std::string("hot"));
  uint32_t now = 1000;
  for (int i = 0; i < 5000; ++i) {
    if (i % 1000 == 999) ++now;  // a few second boundaries too
    ASSERT_TRUE(Incr(s.get(), hot, 1, now).ok());
    Key cold = MakeKey(1, "cold" + std::to_string(i));
    ASSERT_TRUE(Incr(s.get(), cold, 1, now).ok());
  }
  EXPECT_EQ(CountOf(s.get(), hot), 5000u) << "the hot key was evicted under churn";
  EXPECT_GT(s->Stats().total.evictions_live, 4000u) << "the churn did evict";
  // Heat cools: after a long idle spell the once-hot key is evicted like any.
  now += 100;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(Incr(s.get(), MakeKey(1, "late" + std::to_string(i)), 1, now).ok());
  EXPECT_EQ(CountOf(s.get(), hot), 0u) << "an idle key kept its place forever";
}

TEST(Store, SameKeyUnderTwoBizzesIsTwoNodes) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 64, 8));
  Key a = MakeKey(1, std::string("k")), b = MakeKey(2, std::string("k"));
  ASSERT_TRUE(Incr(s.get(), a, 1).ok());
  ASSERT_TRUE(Incr(s.get(), b, 5).ok());
  EXPECT_EQ(CountOf(s.get(), a), 1u);
  EXPECT_EQ(CountOf(s.get(), b), 5u);
}

TEST(Store, ReadOnlyMutatorCreatesNothing) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 64, 8));
  Key k = MakeKey(1, std::string("q"));
  ASSERT_TRUE(s->Update(k.ref(), 8, 1000, [](NodeRef& n) {
                 EXPECT_FALSE(n.exists);
                 return Commit::kNone;
               }).ok());
  EXPECT_EQ(s->Stats().total.nodes_used, 0u);
}

TEST(Store, LongKeysKeepAPrefixAndStayDistinct) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 16, 8));
  std::string base(200, 'x');
  Key a = MakeKey(1, base + "a"), b = MakeKey(1, base + "b");
  ASSERT_TRUE(Incr(s.get(), a, 1).ok());
  ASSERT_TRUE(Incr(s.get(), b, 2).ok());
  EXPECT_EQ(CountOf(s.get(), a), 1u);
  EXPECT_EQ(CountOf(s.get(), b), 2u);
  auto info = s->Get(a.ref());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->key_len, 201);
  EXPECT_LT(info->key.size(), 201u);
  EXPECT_EQ(info->key, base.substr(0, info->key.size()));
}

TEST(Store, StateGrowsAndShrinksAcrossSlots) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 8, 8));
  Key k = MakeKey(1, std::string("grow"));
  ASSERT_TRUE(Incr(s.get(), k, 9).ok());
  // Grow to 200 bytes (8 slots of 32): the first 8 bytes are kept.
  ASSERT_TRUE(s->Update(k.ref(), 200, 1000, [](NodeRef& n) {
                 EXPECT_TRUE(n.exists);
                 EXPECT_EQ(n.stored_state_bytes, 4u);
                 n.state[199] = 7;
                 return Commit::kWrite;
               }).ok());
  auto info = s->Get(k.ref());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state.size(), 200u);
  EXPECT_EQ(info->span, 8u);
  EXPECT_EQ(info->state[199], 7);
  EXPECT_EQ(CountOf(s.get(), k), 9u);
  EXPECT_EQ(info->key, "grow");
  ASSERT_TRUE(Incr(s.get(), k, 1).ok());  // back to 4 bytes
  info = s->Get(k.ref());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->span, 1u);  // a general node: 28 header bytes and 4 of state
  EXPECT_EQ(CountOf(s.get(), k), 10u);
  EXPECT_EQ(s->Stats().total.slots_used, 1u);
}

TEST(Store, StateTooLargeForChainIsRefused) {
  TempDir d;
  // One key-node of 2 slots: its group is itself.
  auto s = MustOpen(Opts(d.path(), 1, 1, 2));
  Key k = MakeKey(1, std::string("big"));
  Status st = s->Update(k.ref(), 300, 1000, [](NodeRef&) { return Commit::kWrite; });
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("key-node groups hold 2"), std::string::npos) << st.message();
  // 8 key-nodes of 2 slots form one group of 16: a node of 11 slots fits.
  TempDir d2;
  auto g = MustOpen(Opts(d2.path(), 1, 8, 2));
  EXPECT_TRUE(g->Update(k.ref(), 300, 1000, [](NodeRef&) { return Commit::kWrite; }).ok());
  EXPECT_EQ(g->Get(k.ref())->span, 11u);
}

// ---- geometry and headers

TEST(StoreHeader, OtherGeometryIsRefusedNamingTheField) {
  TempDir d;
  { MustOpen(Opts(d.path(), 2, 64, 8)); }
  auto r = Store::Open(Opts(d.path(), 2, 64, 4));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kMismatch);
  EXPECT_NE(r.status().message().find("chain=8 but srv.xml says chain=4"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("frs.0.store"), std::string::npos);
  r = Store::Open(Opts(d.path(), 2, 128, 8));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("keynodes=64"), std::string::npos) << r.status().message();
}

// More files than the store has is its geometry too, not files lost: the
// message said "frs.2.store is missing ... restore it from a backup".
TEST(StoreHeader, MoreFilesThanTheStoreHasIsAnotherGeometryNotALostFile) {
  TempDir d;
  { MustOpen(Opts(d.path(), 2, 64, 8)); }
  auto r = Store::Open(Opts(d.path(), 3, 64, 8));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kMismatch) << r.status().ToString();
  EXPECT_NE(r.status().message().find("files=2 but srv.xml says files=3"), std::string::npos) << r.status().message();
}

void PatchFile(const std::string& path, size_t off, const void* bytes, size_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(off));
  f.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
}

// A store of one file whose header has `n` bytes at `off` overwritten with
// `bytes` is refused on open, saying `says` (and with `code` when given).
void ExpectPatchedHeaderRefused(size_t off, const void* bytes, size_t n, const std::string& says,
                                std::optional<Status::Code> code = std::nullopt) {
  TempDir d;
  { MustOpen(Opts(d.path(), 1, 64, 8)); }
  PatchFile(d / "frs.0.store", off, bytes, n);
  auto r = Store::Open(Opts(d.path(), 1, 64, 8));
  ASSERT_FALSE(r.ok());
  if (code) {
    EXPECT_EQ(r.status().code(), *code);
  }
  EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
}

// An intact header of another version is another format; a version byte
// changed under a checksum that no longer holds is damage (verify --repair
// rebuilds it), not a store to upgrade or export.
TEST(StoreHeader, WrongVersionIsRefused) {
  TempDir d;
  { MustOpen(Opts(d.path(), 1, 64, 8)); }
  store::FileHeader h{};
  {
    std::ifstream f(d / "frs.0.store", std::ios::binary);
    f.read(reinterpret_cast<char*>(&h), sizeof h);
  }
  h.version = 99;
  h.checksum = store::HeaderChecksum(h);
  PatchFile(d / "frs.0.store", 0, &h, sizeof h);
  auto r = Store::Open(Opts(d.path(), 1, 64, 8));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kMismatch) << r.status().ToString();
  EXPECT_NE(r.status().message().find("format version 99"), std::string::npos) << r.status().message();

  for (uint32_t v : {4u, 99u})
    ExpectPatchedHeaderRefused(offsetof(store::FileHeader, version), &v, 4, "header checksum mismatch",
                               Status::Code::kCorruption);
}

// A new store is of format 6: a placement key of its own (random, never 0)
// in every file's header, the same in each, another in another store; a
// file whose key is not the others' (made by hand beside them) is refused.
TEST(StoreHeader, ANewStoreHasAPlacementKeyOfItsOwnInEveryFile) {
  TempDir d, e;
  { MustOpen(Opts(d.path(), 2, 64, 8)); }
  { MustOpen(Opts(e.path(), 1, 64, 8)); }
  auto header = [](const std::filesystem::path& p) {
    store::FileHeader h{};
    std::ifstream f(p, std::ios::binary);
    f.read(reinterpret_cast<char*>(&h), sizeof h);
    return h;
  };
  const store::FileHeader h0 = header(d / "frs.0.store"), h1 = header(d / "frs.1.store");
  const store::FileHeader other = header(e / "frs.0.store");
  EXPECT_EQ(h0.version, 6u);
  EXPECT_TRUE(store::StoreFile::PlaceKeyOf(h0).keyed());
  EXPECT_TRUE(store::StoreFile::PlaceKeyOf(h0) == store::StoreFile::PlaceKeyOf(h1));
  EXPECT_FALSE(store::StoreFile::PlaceKeyOf(h0) == store::StoreFile::PlaceKeyOf(other));
  // One copy of the key changed under a checksum made anew: no build writes
  // that; all three changed: a file of another key.
  store::FileHeader h = h1;
  h.place_key[0] ^= 1;
  h.checksum = store::HeaderChecksum(h);
  PatchFile(d / "frs.1.store", 0, &h, sizeof h);
  auto r = Store::Open(Opts(d.path(), 2, 64, 8));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("copies of its placement key disagree"), std::string::npos)
      << r.status().message();
  h.place_key_copies[0][0] ^= 1;
  h.place_key_copies[1][0] ^= 1;
  h.checksum = store::HeaderChecksum(h);
  PatchFile(d / "frs.1.store", 0, &h, sizeof h);
  r = Store::Open(Opts(d.path(), 2, 64, 8));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("placement key is not the other files'"), std::string::npos)
      << r.status().message();
  // Format 6 with no key is nothing a build writes.
  h = h0;
  h.place_key[0] = h.place_key[1] = 0;
  h.checksum = store::HeaderChecksum(h);
  PatchFile(d / "frs.0.store", 0, &h, sizeof h);
  r = Store::Open(Opts(d.path(), 2, 64, 8));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("without a placement key"), std::string::npos) << r.status().message();
}

TEST(StoreHeader, SmashedChecksumIsRefused) {
  uint64_t t = 12345;
  ExpectPatchedHeaderRefused(offsetof(store::FileHeader, created_unix), &t, 8, "checksum", Status::Code::kCorruption);
}

TEST(StoreHeader, BadMagicIsRefused) { ExpectPatchedHeaderRefused(0, "NOTASTOR", 8, "bad magic"); }

// A file of another size than its header says is refused, and the message
// says what to do: a cut one is restored or given up (its keys restart), a
// grown one is cut back to the size it names (nothing of it was lost).
TEST(StoreHeader, AFileOfAnotherSizeIsRefusedSayingWhatToDo) {
  TempDir d;
  { MustOpen(Opts(d.path(), 1, 64, 8)); }
  const std::string file = d / "frs.0.store";
  const uintmax_t size = std::filesystem::file_size(file);
  std::filesystem::resize_file(file, size - 4096);
  auto r = Store::Open(Opts(d.path(), 1, 64, 8));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kCorruption);
  EXPECT_NE(r.status().message().find("(truncated): restore it from a backup; without one, remove it and run frsctl "
                                      "init --recreate-missing"),
            std::string::npos)
      << r.status().message();
  std::filesystem::resize_file(file, size + 4096);
  r = Store::Open(Opts(d.path(), 1, 64, 8));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("(extended): with frsd stopped, truncate -s " + std::to_string(size) + " " +
                                      file),
            std::string::npos)
      << r.status().message();
  std::filesystem::resize_file(file, size);
  EXPECT_TRUE(Store::Open(Opts(d.path(), 1, 64, 8)).ok());
}

TEST(StoreHeader, FilesOfTwoStoresAreNotMixed) {
  TempDir a, b;
  { MustOpen(Opts(a.path(), 2, 64, 8)); }
  { MustOpen(Opts(b.path(), 2, 64, 8)); }
  std::filesystem::copy_file(b / "frs.1.store", a / "frs.1.store", std::filesystem::copy_options::overwrite_existing);
  auto r = Store::Open(Opts(a.path(), 2, 64, 8));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("another store"), std::string::npos) << r.status().message();
}

TEST(StoreHeader, MissingStoreWithoutCreateIsNotFound) {
  TempDir d;
  StoreOptions o = Opts(d / "nope", 1, 64, 8);
  o.create_if_missing = false;
  auto r = Store::Open(o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound());
}

// <store dir> naming a regular file: said so, whether or not the store may
// be created (it read "no such store file" under it, or ENOTDIR).
TEST(StoreHeader, AFileWhereTheDirectoryShouldBeIsNamed) {
  TempDir d;
  const std::string file = d / "data";
  { std::ofstream(file) << "x"; }
  for (bool create : {false, true}) {
    StoreOptions o = Opts(file, 1, 64, 8);
    o.create_if_missing = create;
    auto r = Store::Open(o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), file + ": not a directory (<store dir> must name a directory)");
  }
}

TEST(Store, FilesAreCreatedSparseAndPrivate) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 1 << 16, 8));
  struct stat st;
  ASSERT_EQ(::stat((d / "frs.0.store").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, static_cast<uint64_t>(st.st_size) / 4);
}

TEST(Store, CloseAndReopenKeepsEveryNode) {
  TempDir d;
  std::vector<Key> keys;
  for (int i = 0; i < 500; ++i) keys.push_back(MakeKey(1, "k" + std::to_string(i)));
  {
    auto s = MustOpen(Opts(d.path(), 2, 256, 8));
    for (int i = 0; i < 500; ++i) ASSERT_TRUE(Incr(s.get(), keys[i], i + 1).ok());
  }
  auto s = MustOpen(Opts(d.path(), 2, 256, 8));
  for (int i = 0; i < 500; ++i) EXPECT_EQ(CountOf(s.get(), keys[i]), uint64_t(i + 1));
  EXPECT_EQ(s->Stats().total.nodes_used, 500u);
  ExpectClean(s.get());
}

// ---- reads (ReadEach)

// What one ReadEach call showed, item by item.
struct ReadSeen {
  size_t index = 0;
  Status::Code code = Status::Code::kOk;
  bool exists = false;
  uint32_t value = 0;
};

std::vector<ReadSeen> ReadAll(Store* s, const std::vector<Key>& keys, uint32_t now_s, bool base_impl = false,
                              uint32_t state_bytes = 4) {
  std::vector<Store::ReadItem> items;
  for (const Key& k : keys) items.push_back({k.ref(), state_bytes});
  std::vector<ReadSeen> seen;
  auto fn = [&](size_t i, const Status& st, NodeRef& node) {
    ReadSeen r{i, st.code(), node.exists, 0};
    if (st.ok()) std::memcpy(&r.value, node.state, 4);
    seen.push_back(r);
    if (st.ok()) std::memset(node.state, 0xAB, node.state_bytes);  // a read's copy: never written back
  };
  if (base_impl) s->Store::ReadEach(items, now_s, fn);
  else s->ReadEach(items, now_s, fn);
  return seen;
}

// Keys in a crowded store: many live in their alternate chain, so reads
// take both locks and find nodes in B as well as in A.
std::vector<Key> CrowdedKeys(Store* s, int present) {
  std::vector<Key> keys;
  for (int i = 0; i < present; ++i) {
    keys.push_back(MakeKey(1, "r" + std::to_string(i)));
    EXPECT_TRUE(Incr(s, keys.back(), i + 1).ok());
  }
  int in_alternate = 0;
  for (const Key& k : keys) in_alternate += s->Get(k.ref())->in_alternate;
  EXPECT_GT(in_alternate, 0);
  EXPECT_EQ(s->Stats().total.evictions_live, 0u);
  return keys;
}

TEST(StoreRead, ReadEachSeesEveryNodeAsUpdateLeftItAndChangesNone) {
  TempDir d;
  // 34 key-nodes of 4 slots: 17 groups of two per file (8 slots each), so
  // that groups fill up and nodes go to their alternate.
  auto s = MustOpen(Opts(d.path(), 2, 34, 4));
  const int kPresent = 40;
  std::vector<Key> keys = CrowdedKeys(s.get(), kPresent);
  for (int i = 0; i < 9; ++i) keys.push_back(MakeKey(1, "absent" + std::to_string(i)));
  // Present and absent keys mixed, more of them than the store looks ahead.
  std::vector<Key> order;
  for (size_t i = 0; i < keys.size(); ++i)
    order.push_back(keys[(i * 5) % keys.size()]);  // 5 is prime to 49: each key once
  const uint64_t nodes = s->Stats().total.nodes_used;

  const std::vector<ReadSeen> seen = ReadAll(s.get(), order, 2000);
  ASSERT_EQ(seen.size(), order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t k = (i * 5) % keys.size();
    SCOPED_TRACE(order[i].bytes);
    EXPECT_EQ(seen[i].index, i) << "one call per item, in order";
    EXPECT_EQ(seen[i].code, Status::Code::kOk);
    EXPECT_EQ(seen[i].exists, k < kPresent);
    EXPECT_EQ(seen[i].value, k < kPresent ? k + 1 : 0u);
  }
  // Nothing was written or created; each read recorded its use.
  EXPECT_EQ(s->Stats().total.nodes_used, nodes);
  for (int i = 0; i < kPresent; ++i) {
    EXPECT_EQ(CountOf(s.get(), keys[i]), static_cast<uint64_t>(i + 1));
    EXPECT_EQ(s->Get(keys[i].ref())->last_access_s, 2000u);
  }
  for (size_t i = kPresent; i < keys.size(); ++i) EXPECT_TRUE(s->Get(keys[i].ref()).status().IsNotFound());
  ExpectClean(s.get());

  // The default implementation (through Update) answers the same.
  const std::vector<ReadSeen> base = ReadAll(s.get(), order, 2001, /*base_impl=*/true);
  ASSERT_EQ(base.size(), seen.size());
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(base[i].index, seen[i].index);
    EXPECT_EQ(base[i].exists, seen[i].exists);
    EXPECT_EQ(base[i].value, seen[i].value);
  }
}

TEST(StoreRead, ReadEachNamesTheItemItCannotReadAndReadsTheRest) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 16, 8));
  const Key a = MakeKey(1, std::string("a")), b = MakeKey(1, std::string("b"));
  ASSERT_TRUE(Incr(s.get(), a, 5).ok());
  ASSERT_TRUE(Incr(s.get(), b, 6).ok());
  std::vector<Store::ReadItem> items = {{a.ref(), 4}, {b.ref(), kMaxStateBytes + 1}, {b.ref(), 4}};
  std::vector<std::pair<Status::Code, uint32_t>> seen;
  s->ReadEach(items, 1000, [&](size_t, const Status& st, NodeRef& node) {
    uint32_t v = 0;
    if (st.ok()) std::memcpy(&v, node.state, 4);
    else EXPECT_EQ(node.state, nullptr);
    seen.emplace_back(st.code(), v);
  });
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], std::make_pair(Status::Code::kOk, 5u));
  EXPECT_EQ(seen[1].first, Status::Code::kInvalidArgument);
  EXPECT_EQ(seen[2], std::make_pair(Status::Code::kOk, 6u));
}

TEST(StoreRead, ReadEachOnADeletedFileFailsEachItemAndNamesTheFile) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 16, 8));
  const Key a = MakeKey(1, std::string("a"));
  ASSERT_TRUE(Incr(s.get(), a, 5).ok());
  ASSERT_TRUE(std::filesystem::remove(std::filesystem::path(d.path()) / "frs.0.store"));
  EXPECT_FALSE(s->CheckFiles().ok());
  std::vector<Store::ReadItem> items = {{a.ref(), 4}, {a.ref(), 4}};
  int calls = 0;
  s->ReadEach(items, 1000, [&](size_t, const Status& st, NodeRef&) {
    ++calls;
    EXPECT_EQ(st.code(), Status::Code::kUnavailable);
    EXPECT_NE(st.message().find("frs.0.store"), std::string::npos) << st.message();
  });
  EXPECT_EQ(calls, 2);
}

// A read-only store takes no locks, so it refuses ReadEach as it refuses
// Update: a batch's reads answer as the same requests alone.
TEST(StoreRead, AReadOnlyStoreRefusesReadEachAsItRefusesUpdate) {
  TempDir d;
  std::vector<Key> keys;
  {
    auto s = MustOpen(Opts(d.path(), 2, 34, 4));
    keys = CrowdedKeys(s.get(), 30);
  }
  StoreOptions o = Opts(d.path(), 2, 34, 4);
  o.read_only = true;
  auto s = MustOpen(o);
  const Status alone = s->Update(keys[0].ref(), 4, 5000, [](NodeRef&) { return Commit::kNone; });
  ASSERT_FALSE(alone.ok());
  const std::vector<ReadSeen> seen = ReadAll(s.get(), keys, 5000);
  ASSERT_EQ(seen.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(seen[i].code, alone.code());
    EXPECT_FALSE(seen[i].exists);
    EXPECT_EQ(s->Get(keys[i].ref())->last_access_s, 1000u);
  }
}

// Readers beside writers on the same chains (the TSan preset runs this
// suite): every read sees a whole node, as one write left it, and each
// key's count never goes back. A tracked node's 240 bytes (9 slots) hold
// its count at both ends, plainly and inverted, so a torn read shows;
// churn keys come and go in the same chains, so that nodes sit in both
// chains and free slots move. Any two chains hold every node (no eviction
// resets a count).
TEST(StoreRead, ReadsBesideWritersSeeWholeNodesAndCountsThatNeverGoBack) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 4, 16));
  std::vector<Key> tracked, churn;
  for (int i = 0; i < 3; ++i) tracked.push_back(MakeKey(1, "tracked-key-" + std::to_string(i)));
  for (int i = 0; i < 4; ++i) churn.push_back(MakeKey(2, "churn-key-" + std::to_string(i)));
  static constexpr uint32_t kBytes = 240;
  auto bump = [&](const Key& k) {
    return s->Update(k.ref(), kBytes, 1000, [](NodeRef& n) {
      uint64_t v;
      std::memcpy(&v, n.state, 8);
      ++v;
      const uint64_t inv = ~v;
      std::memcpy(n.state, &v, 8);
      std::memcpy(n.state + kBytes - 8, &inv, 8);
      return Commit::kWrite;
    });
  };
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, torn{0}, backwards{0}, seen{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w)
    threads.emplace_back([&] {
      for (int round = 0; round < 2000; ++round) {
        for (const Key& k : tracked) failures += !bump(k).ok();
        // The writing goes on once a reader has read a node (5 s at most):
        // on a busy machine the readers were at times scheduled only after
        // the writers' 20 ms, and the test then had read nothing.
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (round == 0 && seen.load() == 0 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      }
    });
  threads.emplace_back([&] {
    while (!stop) {
      for (const Key& k : churn) failures += !Incr(s.get(), k, 1).ok();
      for (const Key& k : churn) failures += !s->Erase(k.ref()).ok();
    }
  });
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&] {
      std::vector<Store::ReadItem> items;
      for (const Key& k : tracked) items.push_back({k.ref(), kBytes});
      for (const Key& k : churn) items.push_back({k.ref(), 4});
      std::vector<uint64_t> last(tracked.size(), 0);
      while (!stop) {
        s->ReadEach(items, 1000, [&](size_t i, const Status& st, NodeRef& node) {
          if (!st.ok()) {
            ++failures;
            return;
          }
          if (i >= tracked.size() || !node.exists) return;
          uint64_t v, inv;
          std::memcpy(&v, node.state, 8);
          std::memcpy(&inv, node.state + kBytes - 8, 8);
          ++seen;
          if (inv != ~v) ++torn;
          if (v < last[i]) ++backwards;
          last[i] = v;
        });
      }
    });
  threads[0].join();
  threads[1].join();
  stop = true;
  for (size_t t = 2; t < threads.size(); ++t) threads[t].join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(backwards.load(), 0);
  EXPECT_GT(seen.load(), 0);
  EXPECT_EQ(s->Stats().total.evictions_live, 0u);
  for (const Key& k : tracked) EXPECT_EQ(CountOf(s.get(), k), 4000u);  // 2 writers x 2000
  ExpectClean(s.get());
}

// ---- batches

TEST(StoreBatch, AllNodesSeenTogetherAndWrittenTogether) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 2, 64, 8));
  Key a = MakeKey(1, std::string("a")), b = MakeKey(2, std::string("b"));
  ASSERT_TRUE(Incr(s.get(), a, 5).ok());
  std::vector<Store::BatchItem> items = {{a.ref(), 8}, {b.ref(), 8}, {a.ref(), 8}};
  ASSERT_TRUE(s->UpdateBatch(items, 1000, [](std::span<NodeRef> n, std::span<Commit> c) {
                 ASSERT_EQ(n.size(), 3u);
                 EXPECT_TRUE(n[0].exists);
                 EXPECT_FALSE(n[1].exists);
                 EXPECT_EQ(n[0].state, n[2].state);  // same node, same buffer
                 testing::AddToEach(n, c, 1);
               }).ok());
  EXPECT_EQ(CountOf(s.get(), a), 7u);
  EXPECT_EQ(CountOf(s.get(), b), 1u);
  // A batch that writes nothing leaves everything as it was.
  ASSERT_TRUE(s->UpdateBatch(items, 1000, [](std::span<NodeRef> n, std::span<Commit> c) {
                 for (size_t i = 0; i < n.size(); ++i) {
                   n[i].state[0] = 99;
                   c[i] = Commit::kNone;
                 }
               }).ok());
  EXPECT_EQ(CountOf(s.get(), a), 7u);
  EXPECT_EQ(CountOf(s.get(), b), 1u);
}

TEST(StoreBatch, MembersCrowdingOneChainRollBackWhole) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 1, 2));
  Key x = MakeKey(1, std::string("x"));
  ASSERT_TRUE(Incr(s.get(), x, 1).ok());
  std::vector<Key> keys = {MakeKey(1, std::string("p")), MakeKey(1, std::string("q")), MakeKey(1, std::string("r"))};
  std::vector<Store::BatchItem> items;
  for (auto& k : keys) items.push_back({k.ref(), 8});
  Status st = s->UpdateBatch(items, 1000, [](std::span<NodeRef>, std::span<Commit> c) {
    for (auto& x : c) x = Commit::kWrite;
  });
  EXPECT_EQ(st.code(), Status::Code::kBusy);
  for (auto& k : keys) EXPECT_TRUE(s->Get(k.ref()).status().IsNotFound());
  EXPECT_EQ(CountOf(s.get(), x), 1u);
  ExpectClean(s.get());
}

// ---- iteration

TEST(StoreIteration, ForEachFiltersAndEraseIfErasesOneBiz) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 2, 32, 8));
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(Incr(s.get(), MakeKey(1, "a" + std::to_string(i)), 1).ok());
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(Incr(s.get(), MakeKey(2, "b" + std::to_string(i)), 1).ok());
  size_t all = 0, biz2 = 0, file1 = 0;
  std::set<std::string> keys;
  ASSERT_TRUE(s->ForEach({}, [&](const NodeInfo& n) {
                 ++all;
                 keys.insert(std::to_string(n.biz) + n.key);
               }).ok());
  ASSERT_TRUE(s->ForEach({-1, -1, 2}, [&](const NodeInfo& n) {
                 EXPECT_EQ(n.biz, 2);
                 ++biz2;
               }).ok());
  ASSERT_TRUE(s->ForEach({1, -1, -1}, [&](const NodeInfo& n) {
                 EXPECT_EQ(n.file, 1u);
                 ++file1;
               }).ok());
  EXPECT_EQ(all, 80u);
  EXPECT_EQ(keys.size(), 80u);
  EXPECT_EQ(biz2, 30u);
  EXPECT_GT(file1, 0u);
  auto erased = s->EraseIf({-1, -1, 2}, nullptr);
  ASSERT_TRUE(erased.ok());
  EXPECT_EQ(*erased, 30u);
  EXPECT_EQ(s->Stats().total.nodes_used, 50u);
}

// A walk that must not wait behind a stuck holder (frsd's master's, for
// frs_leases_held) ends with Busy at a chain held longer than its bound,
// and walks every chain once the holder lets go.
TEST(StoreIteration, AWalkWithALockWaitEndsAtAChainHeldLongerThanIt) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 32, 8));
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(Incr(s.get(), MakeKey(1, "a" + std::to_string(i)), 1).ok());
  // Its chains are key-node groups (store::GroupGeometry): chain 1 is one.
  ASSERT_GT(store::GroupGeometry(StoreGeometry{1, 32, 8}).keynodes, 1u);
  auto f = store::StoreFile::Open(d.path(), 0, StoreGeometry{1, 32, 8}, /*create=*/false, 0, store::PlaceKey{});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  // Held by a live owner (this thread, as far as the word says).
  std::atomic_ref<uint64_t> word((*f)->lock(1)->bits);
  word.store(os::Self().word(), std::memory_order_release);
  Store::Filter bounded;
  bounded.lock_wait_ms = 20;
  size_t seen = 0;
  const auto start = std::chrono::steady_clock::now();
  Status st = s->ForEach(bounded, [&](const NodeInfo&) { ++seen; });
  EXPECT_EQ(st.code(), Status::Code::kBusy) << st.ToString();
  EXPECT_NE(st.message().find("chain 1 of file 0 stayed locked 20 ms"), std::string::npos) << st.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
  EXPECT_LT(seen, 50u);
  word.store(0, std::memory_order_release);
  seen = 0;
  ASSERT_TRUE(s->ForEach(bounded, [&](const NodeInfo&) { ++seen; }).ok());
  EXPECT_EQ(seen, 50u);
  // Held by a thread that is gone (a killed frsctl, which no master reaps):
  // taken over once the bound is up, not a Busy at every walk until some
  // request touches that chain.
  os::Owner gone = os::Self();
  gone.start += 1;
  word.store(gone.word(), std::memory_order_release);
  seen = 0;
  st = s->ForEach(bounded, [&](const NodeInfo&) { ++seen; });
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(seen, 50u);
  EXPECT_EQ(word.load() & os::kLockTidMask, 0u) << "the lock went with the walk";
}

// Where the node of k lies in a store in `dir` (one file of 16 key-nodes of
// 4 slots) made to hold k alone: its key-node, its slot and the offset of
// its first byte in frs.0.store.
struct LoneNode {
  uint32_t keynode = 0, slot = 0;
  size_t at = 0;
};

void StoreLoneNode(const std::string& dir, const Key& k, LoneNode* n) {
  auto s = MustOpen(Opts(dir, 1, 16, 4));
  ASSERT_TRUE(Incr(s.get(), k, 1).ok());
  auto info = s->Get(k.ref());
  n->keynode = info->keynode;
  n->slot = info->slot;
  n->at = store::LayoutFor({1, 16, 4}).chains_offset + (n->keynode * 4 + n->slot) * kSlotBytes;
}

TEST(StoreVerify, DetectsAndRepairsADamagedNode) {
  TempDir d;
  Key k = MakeKey(1, std::string("dmg"));
  LoneNode n;
  ASSERT_NO_FATAL_FAILURE(StoreLoneNode(d.path(), k, &n));
  const uint32_t keynode = n.keynode, slot = n.slot;
  uint8_t form = 0x1F;  // span 31: out of range
  PatchFile(d / "frs.0.store", n.at + offsetof(store::NodeHeader, form), &form, 1);
  auto s = MustOpen(Opts(d.path(), 1, 16, 4));
  auto v = s->Verify(false);
  ASSERT_TRUE(v.ok());
  ASSERT_FALSE(v->problems.empty());
  EXPECT_NE(v->problems[0].find("keynode " + std::to_string(keynode) + " slot " + std::to_string(slot)),
            std::string::npos)
      << v->problems[0];
  v = s->Verify(true);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->repairs.empty());
  v = s->Verify(false);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->problems.empty()) << v->problems[0];
}

// One damaged byte destroyed other nodes: a node whose span read 255 made
// the next update memset slots past its chain, and a span of 1 -> 3 made
// verify --repair zero two intact neighbours' tags. Damage must stay inside
// the node that has it, for every field a write is driven by.
TEST(StoreVerify, DamageStaysInsideTheDamagedNode) {
  struct Damage {
    const char* what;
    size_t offset;  // in the node's first slot
    uint8_t value;
  };
  // The test's nodes are general nodes of one slot (a 4-byte state) whose
  // route is known: form 0x81.
  const size_t ext = kNodeHeaderBytes;
  const Damage damages[] = {
      {"span 31", offsetof(store::NodeHeader, form), 0x9F},
      {"span 3 over a neighbour", offsetof(store::NodeHeader, form), 0x83},
      {"span 0", offsetof(store::NodeHeader, form), 0x80},
      {"compact bit on a general node", offsetof(store::NodeHeader, form), 0xA2},
      {"state_len 0xff..", ext + offsetof(store::GeneralExt, state_len) + 1, 0xff},
      {"key_stored 255", ext + offsetof(store::GeneralExt, key_stored), 255},
      {"identity (tag no longer matches)", offsetof(store::NodeHeader, id) + 1, 0x5a},
  };
  const StoreGeometry g{1, 4, 8};
  for (const Damage& dmg : damages) {
    SCOPED_TRACE(dmg.what);
    TempDir d;
    std::vector<Key> keys;
    Key victim = MakeKey(1, std::string("none"));
    uint32_t vk = 0, vs = 0;
    {
      auto s = MustOpen(Opts(d.path(), g.files, g.keynodes, g.chain));
      // Fill until some chain holds a node with two nodes right after it.
      for (int i = 0; i < 20; ++i) {
        keys.push_back(MakeKey(1, "key" + std::to_string(i)));
        ASSERT_TRUE(Incr(s.get(), keys.back(), 10 + i).ok());
      }
      bool found = false;
      for (const Key& k : keys) {
        auto info = s->Get(k.ref());
        ASSERT_TRUE(info.ok());
        const uint32_t sp = info->span;
        if (info->slot + 2 * sp >= g.chain) continue;
        int after = 0;
        for (const Key& o : keys) {
          auto oi = s->Get(o.ref());
          if (oi->keynode == info->keynode && (oi->slot == info->slot + sp || oi->slot == info->slot + 2 * sp)) ++after;
        }
        if (after == 2) {
          victim = k;
          vk = info->keynode;
          vs = info->slot;
          found = true;
          break;
        }
      }
      ASSERT_TRUE(found) << "no node with two neighbours after it";
    }
    store::FileLayout l = store::LayoutFor(g);
    PatchFile(d / "frs.0.store", l.chains_offset + (uint64_t{vk} * g.chain + vs) * kSlotBytes + dmg.offset, &dmg.value,
              1);

    auto s = MustOpen(Opts(d.path(), g.files, g.keynodes, g.chain));
    auto counts = [&] {
      std::map<std::string, uint64_t> out;
      for (size_t i = 0; i < keys.size(); ++i)
        if (!(keys[i].fp == victim.fp)) out["key" + std::to_string(i)] = CountOf(s.get(), keys[i]);
      return out;
    };
    const auto before = counts();
    for (const auto& [name, count] : before) EXPECT_GT(count, 0u) << name << " was lost to the damage";
    // Update the damaged key (it counts as absent: a new node) and every
    // other key, then insert more: nothing but the damaged node may change.
    EXPECT_EQ(CountOf(s.get(), victim), 0u);
    ASSERT_TRUE(Incr(s.get(), victim, 1).ok());
    for (const Key& k : keys) {
      if (!(k.fp == victim.fp)) {
        ASSERT_TRUE(Incr(s.get(), k, 1000).ok());
      }
    }
    for (const auto& [name, count] : counts()) EXPECT_EQ(count, before.at(name) + 1000) << name;
    EXPECT_EQ(CountOf(s.get(), victim), 1u);
    // A lookup that meets the node counts it; a damaged fingerprint makes it
    // another key's node, which no lookup meets (verify still finds it).
    if (dmg.offset != offsetof(store::NodeHeader, id) + 1) {
      EXPECT_GT(s->Stats().total.damaged_nodes, 0u);
    }

    auto v = s->Verify(false);
    ASSERT_TRUE(v.ok());
    ASSERT_FALSE(v->problems.empty());
    EXPECT_NE(v->problems[0].find("keynode " + std::to_string(vk) + " slot " + std::to_string(vs)), std::string::npos)
        << v->problems[0];
    v = s->Verify(true);
    ASSERT_TRUE(v.ok());
    for (const auto& [name, count] : counts()) EXPECT_EQ(count, before.at(name) + 1000) << name << " after repair";
    EXPECT_EQ(CountOf(s.get(), victim), 1u);
    v = s->Verify(false);
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->problems.empty()) << v->problems[0];
  }
}

}  // namespace
}  // namespace frs

namespace frs {
namespace {

TEST(Store, ReserveBacksTheWholeFileAndKeepsNodes) {
  testing::TempDir d;
  StoreOptions o;
  o.dir = d.path();
  o.geometry = {1, 4096, 8};
  auto s = Store::Open(o);
  ASSERT_TRUE(s.ok());
  Key k = MakeKey(1, std::string("r"));
  ASSERT_TRUE(s.value()
                  ->Update(
                      k.ref(), 8, 1000,
                      [](NodeRef& n) {
    n.state[0] = 42;
    return Commit::kWrite;
                      })
                  .ok());
  ASSERT_TRUE(s.value()->Reserve().ok());
  struct stat st;
  ASSERT_EQ(::stat((d / "frs.0.store").c_str(), &st), 0);
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, static_cast<uint64_t>(st.st_size));
  auto n = s.value()->Get(k.ref());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->state[0], 42);
}

}  // namespace
}  // namespace frs

// ---- a transaction aborts unless committed

namespace frs {
namespace {

struct HookThrew : std::runtime_error {
  HookThrew() : std::runtime_error("hook threw") {}
};

// An exception in the middle of a write (here the test hook's, thrown with
// the node half written) leaves the chain as it was: the journal rolls back
// instead of publishing what was written so far.
TEST(StoreTxn, AnExceptionMidWriteRollsTheUpdateBack) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 1, 8));  // one chain: k at slot 0, a neighbour at slot 1
  const Key k = MakeKey(1, std::string("torn")), other = MakeKey(1, std::string("neighbour"));
  ASSERT_TRUE(Incr(s.get(), k, 5).ok());
  ASSERT_TRUE(Incr(s.get(), other, 1).ok());
  store::SetTestHookInCriticalSection(s.get(), [](int phase) {
    if (phase == 1) throw HookThrew();
  });
  EXPECT_THROW((void)Incr(s.get(), k, 1000), HookThrew);
  // Growing k past its neighbour moves it: its old place is cleared before
  // the new one is written (before, the exception left k cleared and lost).
  EXPECT_THROW((void)s->Update(
                   k.ref(), 200, 1000,
                   [](NodeRef& n) {
    n.state[100] = 1;
    return Commit::kWrite;
                   }),
               HookThrew);
  EXPECT_THROW((void)Incr(s.get(), MakeKey(1, std::string("new")), 1), HookThrew);
  store::SetTestHookInCriticalSection(s.get(), nullptr);
  EXPECT_EQ(CountOf(s.get(), k), 5u);
  EXPECT_EQ(s->Get(k.ref())->state.size(), 4u);
  EXPECT_EQ(CountOf(s.get(), other), 1u);
  EXPECT_TRUE(s->Get(MakeKey(1, std::string("new")).ref()).status().IsNotFound());
  EXPECT_EQ(s->Stats().total.nodes_used, 2u);
  ExpectClean(s.get());
  ASSERT_TRUE(Incr(s.get(), k, 1).ok());  // nothing was left locked
  EXPECT_EQ(CountOf(s.get(), k), 6u);
}

// An undo restores a node's check byte with its bytes: a damaged node that
// a write evicted, and whose write was then undone, comes back damaged, not
// with a fresh check over its damaged bytes.
TEST(StoreTxn, AnUndoneEvictionLeavesADamagedNodeDamaged) {
  TempDir d;
  std::vector<Key> keys;
  {
    auto s = MustOpen(Opts(d.path(), 1, 1, 8));  // one group of 8 slots
    for (int i = 0; i < 8; ++i) {
      keys.push_back(MakeKey(1, "full" + std::to_string(i)));
      // keys[0] is the least recently used: the one an insert evicts.
      ASSERT_TRUE(Incr(s.get(), keys.back(), 1, 1000 + i).ok());
    }
  }
  auto s = MustOpen(Opts(d.path(), 1, 1, 8));
  const uint32_t victim_slot = s->Get(keys[0].ref())->slot;
  // Damage its state: its check no longer matches.
  const uint8_t junk = 0x77;
  PatchFile(d / "frs.0.store",
            store::LayoutFor(StoreGeometry{1, 1, 8}).chains_offset + uint64_t{victim_slot} * kSlotBytes +
                kGeneralHeaderBytes,
            &junk, 1);
  auto v = s->Verify(false);
  ASSERT_TRUE(v.ok());
  ASSERT_FALSE(v->problems.empty());
  for (const std::string& p : v->problems) std::printf("before: %s\n", p.c_str());
  const size_t problems = v->problems.size();
  // An insert evicts it, and dies in the middle of writing the new node.
  store::SetTestHookInCriticalSection(s.get(), [](int phase) {
    if (phase == 1) throw HookThrew();
  });
  EXPECT_THROW((void)Incr(s.get(), MakeKey(1, std::string("newcomer")), 1, 2000), HookThrew);
  store::SetTestHookInCriticalSection(s.get(), nullptr);
  v = s->Verify(false);
  ASSERT_TRUE(v.ok());
  for (const std::string& p : v->problems) std::printf("after: %s\n", p.c_str());
  ASSERT_EQ(v->problems.size(), problems) << "the undo made the damaged node look whole";
  EXPECT_NE(v->problems[0].find("slot " + std::to_string(victim_slot)), std::string::npos) << v->problems[0];
  for (int i = 1; i < 8; ++i) EXPECT_EQ(CountOf(s.get(), keys[i]), 1u);
}

// The same in a batch, in one file and across files: an exception after some
// members are written publishes none of them (before, the members written so
// far stayed, and the one being written stayed torn).
TEST(StoreTxn, AnExceptionMidBatchPublishesNothing) {
  for (uint32_t files : {1u, 2u}) {
    SCOPED_TRACE(std::to_string(files) + " file(s)");
    TempDir d;
    auto s = MustOpen(Opts(d.path(), files, 64, 8));
    std::vector<Key> keys;
    for (int i = 0; i < 8; ++i) {
      keys.push_back(MakeKey(1, "m" + std::to_string(i)));
      if (i % 2 == 0) {
        ASSERT_TRUE(Incr(s.get(), keys.back(), 1).ok());  // half exist, half are new
      }
    }
    std::vector<Store::BatchItem> items;
    for (const Key& k : keys) items.push_back({k.ref(), 8});
    int writes = 0;
    store::SetTestHookInCriticalSection(s.get(), [&](int phase) {
      if (phase == 1 && ++writes == 5) throw HookThrew();
    });
    EXPECT_THROW((void)s->UpdateBatch(items, 1000, testing::AddingToEach(100)), HookThrew);
    store::SetTestHookInCriticalSection(s.get(), nullptr);
    EXPECT_EQ(writes, 5);
    for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(CountOf(s.get(), keys[i]), i % 2 == 0 ? 1u : 0u) << i;
    EXPECT_EQ(s->Stats().total.nodes_used, 4u);
    ExpectClean(s.get());
  }
}

// EraseIf erases one chain as one transaction: a predicate that throws
// half-way leaves the chain whole.
TEST(StoreTxn, AThrowingPredicateErasesNothingOfItsChain) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 1, 8));  // one chain
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Incr(s.get(), MakeKey(1, "e" + std::to_string(i)), 1).ok());
  int seen = 0;
  EXPECT_THROW((void)s->EraseIf(
                   {},
                   [&](const NodeInfo&) {
    if (++seen == 2) throw HookThrew();
    return true;
                   }),
               HookThrew);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(CountOf(s.get(), MakeKey(1, "e" + std::to_string(i))), 1u) << i;
  EXPECT_EQ(s->Stats().total.nodes_used, 3u);
  ExpectClean(s.get());
}

// verify --repair never clears anything it cannot journal: with every
// writer entry held by a live thread it reports the repair as not made and
// leaves the damaged node's bytes alone (before, such a repair could clear
// slots with no undo record); once an entry is free it repairs.
TEST(StoreVerify, ARepairThatCannotBeJournaledIsNotMade) {
  TempDir d;
  const Key k = MakeKey(1, std::string("dmg"));
  LoneNode n;
  ASSERT_NO_FATAL_FAILURE(StoreLoneNode(d.path(), k, &n));
  const size_t at = n.at;
  uint8_t form = 0x1F;  // span 31: out of range
  PatchFile(d / "frs.0.store", at + offsetof(store::NodeHeader, form), &form, 1);
  StoreOptions o = Opts(d.path(), 1, 16, 4);
  o.keep_writer_entries = true;  // the holders below keep theirs, as frsd's workers do
  auto s = MustOpen(o);

  std::mutex mu;
  std::condition_variable cv;
  int claimed = 0;
  bool release = false;
  std::vector<std::thread> holders;
  for (uint32_t t = 0; t < store::kWriterEntries; ++t)
    holders.emplace_back([&] {
      EXPECT_TRUE(Incr(s.get(), MakeKey(2, std::string("w")), 1).ok());
      std::unique_lock<std::mutex> g(mu);
      ++claimed;
      cv.notify_all();
      cv.wait(g, [&] { return release; });
    });
  {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return claimed == static_cast<int>(store::kWriterEntries); });
  }
  std::vector<uint8_t> before(64), after(64);
  {
    std::ifstream in(d / "frs.0.store", std::ios::binary);
    in.seekg(static_cast<std::streamoff>(at));
    in.read(reinterpret_cast<char*>(before.data()), 64);
  }
  auto v = s->Verify(true);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  for (const std::string& r : v->repairs) EXPECT_EQ(r.find("cleared"), std::string::npos) << r;
  bool said = false;
  for (const std::string& p : v->problems)
    said |= p.find("not repaired") != std::string::npos && p.find("writer entries") != std::string::npos;
  EXPECT_TRUE(said) << "no problem says the repair was not made";
  {
    std::ifstream in(d / "frs.0.store", std::ios::binary);
    in.seekg(static_cast<std::streamoff>(at));
    in.read(reinterpret_cast<char*>(after.data()), 64);
  }
  EXPECT_EQ(before, after) << "the damaged node was changed without an undo record";
  {
    std::lock_guard<std::mutex> g(mu);
    release = true;
  }
  cv.notify_all();
  for (auto& th : holders) th.join();
  v = s->Verify(true);  // the exited threads' entries are reclaimed
  ASSERT_TRUE(v.ok());
  bool cleared = false;
  for (const std::string& r : v->repairs) cleared |= r.find("cleared the damaged node") != std::string::npos;
  EXPECT_TRUE(cleared);
  ExpectClean(s.get());
}

}  // namespace
}  // namespace frs

// ---- format 4: identities and node forms

namespace frs {
namespace {

// A one-rule fixed-window block as the engine writes it (limit/rule_state.h).
void FixedBlock(uint8_t* b, uint32_t interval, uint32_t start, uint32_t count, uint32_t debt) {
  const uint32_t f[4] = {interval | 1u << 27, start, count, debt};
  std::memcpy(b, f, 16);
}

TEST(StoreIdentity, ShortKeysAreTheirOwnIdentityAndEveryKeyHasOne) {
  using store::IdentityOfText;
  using store::KeyForm;
  const Fingerprint fp{0x1122334455667788ull, 0x99};
  EXPECT_EQ(IdentityOfText("a", fp).form, KeyForm::kShort);
  EXPECT_EQ(IdentityOfText("12345678", fp).form, KeyForm::kShort);
  EXPECT_EQ(IdentityOfText("123456789", fp), (store::Identity{123456789, KeyForm::kDecimal}));
  EXPECT_EQ(IdentityOfText("18446744073709551615", fp).form, KeyForm::kDecimal);
  EXPECT_EQ(IdentityOfText("18446744073709551616", fp).form, KeyForm::kHashed);  // 2^64
  EXPECT_EQ(IdentityOfText("0123456789", fp).form, KeyForm::kHashed);            // not canonical
  EXPECT_EQ(IdentityOfText("192.168.100.200", fp), (store::Identity{0xC0A864C8, KeyForm::kIpv4}));
  EXPECT_EQ(IdentityOfText("192.168.100.256", fp).form, KeyForm::kHashed);
  EXPECT_EQ(IdentityOfText("192.168.01.200", fp).form, KeyForm::kHashed);
  EXPECT_EQ(IdentityOfText(std::string("a\0b", 3), fp).form, KeyForm::kHashed);  // a NUL: not zero-padded text
  EXPECT_EQ(IdentityOfText("user:alice@example.com", fp), (store::Identity{fp.lo, KeyForm::kHashed}));
  for (const char* k : {"a", "12345678", "123456789", "18446744073709551615", "192.168.100.200", "0"})
    EXPECT_EQ(store::TextOf(IdentityOfText(k, fp)), k);
  // Every length a short key has, with a NUL at each place (never short:
  // the NUL test is one word test), and with the high bytes that look like
  // a borrow to it (0x80, 0xFF, 0x01) instead.
  for (size_t n = 1; n <= 8; ++n) {
    for (size_t at = 0; at < n; ++at) {
      std::string k(n, 'k');
      k[at] = '\0';
      EXPECT_EQ(IdentityOfText(k, fp).form, KeyForm::kHashed) << n << " " << at;
      for (char c : {'\x80', '\xff', '\x01'}) {
        k[at] = c;
        const store::Identity id = IdentityOfText(k, fp);
        EXPECT_EQ(id.form, KeyForm::kShort) << n << " " << at;
        EXPECT_EQ(store::TextOf(id), k);
      }
    }
  }
}

// Two long keys whose 64-bit fingerprints collide share a node (the odds,
// n^2 / 2^65 for n keys, are in frs/key.h); two short keys never do, since
// their identity is the key itself. The collision is forced by handing the
// store the fingerprints.
TEST(StoreIdentity, ForcedFingerprintCollisionsShareANodeOnlyForHashedKeys) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 2, 64, 8));
  const std::string a = "user:alice@example.com", b = "user:bob@example.org";
  const Fingerprint same{0xDEADBEEFCAFEF00Dull, 1};
  const Fingerprint other_hi{0xDEADBEEFCAFEF00Dull, 2};
  auto incr = [&](const std::string& key, const Fingerprint& fp) {
    return s->Update(KeyRef{1, fp, key, static_cast<uint8_t>(key.size())}, 4, 1000, [](NodeRef& n) {
      uint32_t v;
      std::memcpy(&v, n.state, 4);
      ++v;
      std::memcpy(n.state, &v, 4);
      return Commit::kWrite;
    });
  };
  ASSERT_TRUE(incr(a, same).ok());
  ASSERT_TRUE(incr(b, other_hi).ok());
  EXPECT_EQ(s->Stats().total.nodes_used, 1u) << "the store keeps 64 bits of a long key's fingerprint";
  // Short keys handed the same fingerprint are still two nodes.
  ASSERT_TRUE(incr("k1", same).ok());
  ASSERT_TRUE(incr("k2", same).ok());
  EXPECT_EQ(s->Stats().total.nodes_used, 3u);
  ExpectClean(s.get());
}

// PrepareKey derives a key's identity once, and a fingerprint only for a key
// that needs one; a prepared ref and a plain one name the same node, for
// every key form and for an import by fingerprint.
TEST(StoreIdentity, PreparedAndPlainRefsNameTheSameNode) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 2, 64, 8));
  auto incr = [&](const KeyRef& ref) {
    return s->Update(ref, 4, 1000, [](NodeRef& n) {
      uint32_t v;
      std::memcpy(&v, n.state, 4);
      ++v;
      std::memcpy(n.state, &v, 4);
      return Commit::kWrite;
    });
  };
  auto count = [&](const KeyRef& ref) -> uint32_t {
    auto info = s->Get(ref);
    if (!info.ok()) return 0;
    uint32_t v;
    std::memcpy(&v, info.value().state.data(), 4);
    return v;
  };
  uint64_t nodes = 0;
  for (const std::string key : {"k1", "12345678901", "10.0.0.1", "user:alice@example.com"}) {
    const Key plain = MakeKey(7, key);
    KeyRef prepared{7, Fingerprint{}, key, static_cast<uint8_t>(key.size())};
    PrepareKey(&prepared);
    EXPECT_TRUE(prepared.prepared);
    const bool hashed = key == "user:alice@example.com";
    EXPECT_EQ(prepared.fp == plain.fp, hashed) << key << ": a fingerprint only when the identity needs one";
    EXPECT_EQ(prepared.ident_form == static_cast<uint8_t>(store::KeyForm::kHashed), hashed) << key;
    ASSERT_TRUE(incr(prepared).ok()) << key;
    ASSERT_TRUE(incr(plain.ref()).ok()) << key;
    EXPECT_EQ(count(prepared), 2u) << key;
    EXPECT_EQ(count(plain.ref()), 2u) << key;
    EXPECT_EQ(s->Stats().total.nodes_used, ++nodes) << key;
  }
  // An import by fingerprint (the key text cut): the fingerprint is the
  // identity, prepared or not.
  const Key whole = MakeKey(7, std::string(40, 'x'));
  KeyRef cut{7, whole.fp, std::string_view(whole.bytes).substr(0, 10), 40};
  KeyRef cut_prepared = cut;
  PrepareKey(&cut_prepared);
  EXPECT_TRUE(cut_prepared.fp == whole.fp);
  ASSERT_TRUE(incr(cut_prepared).ok());
  EXPECT_EQ(count(cut), 1u);
  EXPECT_EQ(count(whole.ref()), 1u);
  ExpectClean(s.get());
}

// A one-rule state packs into one slot; when it cannot (a borrow debt) the
// node becomes a general one of two slots, and packs again once the debt is
// gone. The state the caller sees never changes with the form.
TEST(StoreForm, AOneRuleNodeIsCompactUnlessItsStateCannotPack) {
  TempDir d;
  auto s = MustOpen(Opts(d.path(), 1, 16, 8));
  const Key k = MakeKey(1, std::string("user:alice@example.com"));
  auto put = [&](uint32_t count, uint32_t debt, uint32_t expire) {
    return s->Update(k.ref(), 16, 1000, [&](NodeRef& n) {
      FixedBlock(n.state, 60, 1000, count, debt);
      n.expire_s = expire;
      return Commit::kWrite;
    });
  };
  ASSERT_TRUE(put(5, 0, 1060).ok());
  auto info = s->Get(k.ref());
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->compact);
  EXPECT_EQ(info->span, 1u);
  EXPECT_EQ(info->key_len, 0) << "a compact node keeps no key text";
  uint8_t want[16];
  FixedBlock(want, 60, 1000, 5, 0);
  EXPECT_EQ(std::memcmp(info->state.data(), want, 16), 0);

  ASSERT_TRUE(put(UINT32_MAX, 7, 1120).ok());  // a debt: expiry one interval later
  info = s->Get(k.ref());
  EXPECT_FALSE(info->compact);
  EXPECT_EQ(info->span, 2u);
  EXPECT_EQ(info->key, k.bytes.substr(0, 20));  // what fits after 28 + 16 bytes in 64
  FixedBlock(want, 60, 1000, UINT32_MAX, 7);
  EXPECT_EQ(std::memcmp(info->state.data(), want, 16), 0);
  EXPECT_EQ(s->Stats().total.slots_used, 2u);

  ASSERT_TRUE(put(3, 0, 1060).ok());
  info = s->Get(k.ref());
  EXPECT_TRUE(info->compact);
  EXPECT_EQ(s->Stats().total.slots_used, 1u);
  // An expiry the codec cannot derive the window from: kept exactly, in a
  // general node.
  ASSERT_TRUE(put(3, 0, 100000).ok());
  info = s->Get(k.ref());
  EXPECT_FALSE(info->compact);
  EXPECT_EQ(info->expire_s, 100000u);
  FixedBlock(want, 60, 1000, 3, 0);
  EXPECT_EQ(std::memcmp(info->state.data(), want, 16), 0);
  ExpectClean(s.get());
}

}  // namespace
}  // namespace frs
