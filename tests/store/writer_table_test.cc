// The writer table (store/writer_table.h) on its own, over mapped files
// without a Store: who holds an entry when, what a waiter does, and the one
// recovery of dead writers; and, through a Store, batches sharing the batch
// entries.
#include "store/writer_table.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/store_ops.h"
#include "common/temp_dir.h"
#include "store/journal.h"
#include "store/store_files.h"

namespace frs {
namespace {

using store::kAllWriterEntries;
using store::kBatchEntries;
using store::kWriterEntries;
using store::WriterEntryHeader;
using store::WriterTable;
using testing::DeadOwner;
using testing::OpenEntryWithImage;
using testing::PutNode;
using testing::StoreFiles;

uint64_t OwnerOf(const WriterEntryHeader* w) { return store::AtomicLoad(w->owner); }

// A node at key-node 2, slot 3 of `f`, and its bytes as written: what a
// recovery must put back.
std::array<uint8_t, kSlotBytes> PutNodeAt23(store::StoreFile* f) {
  PutNode(f, 2, 3, 111, 1, 1000);
  std::array<uint8_t, kSlotBytes> bytes;
  std::memcpy(bytes.data(), f->slot(2, 3), kSlotBytes);
  return bytes;
}

// `owner` died writing that node: its entry `entry` open with the node's
// image, the slot half overwritten. Returns the image a recovery must put
// back.
std::array<uint8_t, kSlotBytes> DiedWritingAt23(store::StoreFile* f, uint32_t entry, os::Owner owner) {
  const std::array<uint8_t, kSlotBytes> before = PutNodeAt23(f);
  OpenEntryWithImage(f, entry, owner, 2, 3);
  std::memset(f->slot(2, 3), 0xAB, kSlotBytes);  // the write it died in
  return before;
}

TEST(WriterTable, AClaimedEntryIsThisThreadsUntilItsWriteEnds) {
  StoreFiles s(1, 4, 64);
  WriterTable t(s.files, s.geo, s.opts);
  WriterEntryHeader* w = t.Claim(0);
  ASSERT_NE(w, nullptr);
  EXPECT_LT(s.file(0)->writer_index(w), kWriterEntries) << "a write takes a per-thread entry, not a batch one";
  EXPECT_EQ(OwnerOf(w), os::Self().word());
  EXPECT_EQ(w->active, 0u);
  t.AfterWrite(0, w);
  EXPECT_EQ(OwnerOf(w), 0u) << "without keep_writer_entries the entry goes back after each write";
}

TEST(WriterTable, AKeptEntryStaysUntilAWaiterWantsIt) {
  StoreFiles s(1, 4, 64);
  s.opts.keep_writer_entries = true;
  WriterTable t(s.files, s.geo, s.opts);
  WriterEntryHeader* w = t.Claim(0);
  ASSERT_NE(w, nullptr);
  t.AfterWrite(0, w);
  EXPECT_EQ(OwnerOf(w), os::Self().word()) << "kept between writes";
  EXPECT_EQ(t.Claim(0), w) << "the next write of this thread takes the one it keeps";
  t.ReleaseKept(/*only_if_wanted=*/true);
  EXPECT_EQ(OwnerOf(w), os::Self().word()) << "nobody waits: kept";
  // Someone waits for an entry: the end of the next write hands it back.
  std::atomic_ref<uint64_t>(s.file(0)->header()->writer_waiters).store(1);
  t.AfterWrite(0, w);
  EXPECT_EQ(OwnerOf(w), 0u);
  std::atomic_ref<uint64_t>(s.file(0)->header()->writer_waiters).store(0);
  // And all of them, when asked (a thread about to wait for a chain lock).
  w = t.Claim(0);
  ASSERT_NE(w, nullptr);
  t.ReleaseKept(/*only_if_wanted=*/false);
  EXPECT_EQ(OwnerOf(w), 0u);
}

TEST(WriterTable, AnOpenJournalIsNeverHandedBack) {
  StoreFiles s(1, 4, 64);
  WriterTable t(s.files, s.geo, s.opts);
  WriterEntryHeader* w = t.Claim(0);
  ASSERT_NE(w, nullptr);
  w->active = 1;  // a write in progress (or one its thread died in)
  t.Release(0, w);
  EXPECT_EQ(OwnerOf(w), os::Self().word());
  w->active = 0;
  t.Release(0, w);
  EXPECT_EQ(OwnerOf(w), 0u);
}

TEST(WriterTable, DestroyingTheTableHandsBackTheEntriesItKept) {
  StoreFiles s(2, 4, 64);
  s.opts.keep_writer_entries = true;
  WriterEntryHeader* kept = nullptr;
  WriterEntryHeader* open = nullptr;
  {
    WriterTable t(s.files, s.geo, s.opts);
    kept = t.Claim(0);
    open = t.Claim(1);
    ASSERT_NE(kept, nullptr);
    ASSERT_NE(open, nullptr);
    open->active = 1;
  }
  EXPECT_EQ(OwnerOf(kept), 0u);
  EXPECT_EQ(OwnerOf(open), os::Self().word()) << "an open journal stays for recovery";
}

TEST(WriterTable, RecoveringADeadWriterRestoresItsImagesAndFreesItsEntries) {
  StoreFiles s(1, 4, 64);
  WriterTable t(s.files, s.geo, s.opts);
  store::StoreFile* f = s.file(0);
  const os::Owner dead = DeadOwner();
  const std::array<uint8_t, kSlotBytes> before = DiedWritingAt23(f, 5, dead);
  f->writer(6)->owner = dead.word();  // a closed entry of the same owner

  std::vector<uint32_t> seen;
  t.ForEachDead(f, [&](uint32_t i, os::Owner o, bool active) {
    EXPECT_EQ(o, dead);
    EXPECT_EQ(active, i == 5);
    seen.push_back(i);
  });
  EXPECT_EQ(seen, (std::vector<uint32_t>{5, 6}));
  EXPECT_EQ(t.RecoverDeadWriters(dead), 1u);
  EXPECT_EQ(std::memcmp(f->slot(2, 3), before.data(), kSlotBytes), 0) << "its saved image is back";
  for (uint32_t i : {5u, 6u}) {
    EXPECT_EQ(OwnerOf(f->writer(i)), 0u) << i;
    EXPECT_EQ(f->writer(i)->active, 0u) << i;
  }
  EXPECT_EQ(t.RecoverDeadWriters(dead), 0u) << "nothing left to undo";
}

// An open journal of another dead owner is recovered too: a thread that
// took over a dead holder's chain lock and died before its first recovery
// lock left that holder's journal open, and the next taker recovered only
// the second, wrote, and a later recovery of the first put the old images
// back over those writes (a review of the store's crash safety).
TEST(WriterTable, ARecoveryAlsoUndoesAnOpenJournalOfAnotherDeadOwner) {
  StoreFiles s(1, 4, 64);
  WriterTable t(s.files, s.geo, s.opts);
  store::StoreFile* f = s.file(0);
  const os::Owner first = DeadOwner();
  os::Owner second = first;
  second.start += 1;  // another dead thread: the one that took over and died
  const std::array<uint8_t, kSlotBytes> before = DiedWritingAt23(f, 5, first);
  EXPECT_EQ(t.RecoverDeadWriters(second), 1u);
  EXPECT_EQ(std::memcmp(f->slot(2, 3), before.data(), kSlotBytes), 0)
      << "the first's image is back before anyone writes";
  EXPECT_EQ(OwnerOf(f->writer(5)), 0u);
  // A live owner's open journal is left alone.
  OpenEntryWithImage(f, 6, os::Self(), 2, 3);
  EXPECT_EQ(t.RecoverDeadWriters(second), 0u);
  EXPECT_EQ(OwnerOf(f->writer(6)), os::Self().word());
}

// A batch across files is kept or undone whole, as its coordinator entry
// says: committed, every file keeps its writes; not yet, every file is undone.
TEST(WriterTable, ADeadBatchAcrossFilesIsKeptWhenCommittedAndUndoneWhenNot) {
  for (bool committed : {false, true}) {
    SCOPED_TRACE(committed ? "committed" : "not committed");
    StoreFiles s(2, 4, 64);
    WriterTable t(s.files, s.geo, s.opts);
    const os::Owner dead = DeadOwner();
    constexpr uint64_t kBatch = 77;
    for (uint32_t fi = 0; fi < 2; ++fi) {
      store::StoreFile* f = s.file(fi);
      OpenEntryWithImage(f, kWriterEntries, dead, 1, 0);
      WriterEntryHeader* w = f->writer(kWriterEntries);
      w->batch = kBatch;
      w->coord_file = 0;
      w->coord_entry = kWriterEntries;
      std::memset(f->slot(1, 0), 0xCD, kSlotBytes);
    }
    if (committed) s.file(0)->writer(kWriterEntries)->committed = kBatch;
    EXPECT_EQ(t.RecoverDeadWriters(dead), committed ? 0u : 2u);
    for (uint32_t fi = 0; fi < 2; ++fi) {
      EXPECT_EQ(s.file(fi)->slot(1, 0)[0], committed ? 0xCD : 0) << "file " << fi;
      EXPECT_EQ(OwnerOf(s.file(fi)->writer(kWriterEntries)), 0u) << "file " << fi;
    }
  }
}

TEST(WriterTable, AFullTableRecoversDeadHoldersInsteadOfWaiting) {
  StoreFiles s(1, 4, 64);
  WriterTable t(s.files, s.geo, s.opts);
  store::StoreFile* f = s.file(0);
  PutNode(f, 0, 0, 5, 1, 1000);
  const os::Owner dead = DeadOwner();
  for (uint32_t i = 0; i < kWriterEntries; ++i) f->writer(i)->owner = dead.word();
  OpenEntryWithImage(f, 3, dead, 0, 0);
  std::memset(f->slot(0, 0), 0xEE, kSlotBytes);
  WriterEntryHeader* w = t.Claim(0);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(store::HeaderAt(f->slot(0, 0))->id, 5u) << "the dead holder's write was undone first";
  EXPECT_EQ(f->header()->writer_waiters, 0u) << "the waiter counted itself out";
  uint32_t free = 0;
  for (uint32_t i = 0; i < kWriterEntries; ++i) free += OwnerOf(f->writer(i)) == 0;
  EXPECT_EQ(free, kWriterEntries - 1) << "every dead holder's entry is free again";
}

TEST(WriterTable, AFullTableOfLiveHoldersGivesUpAfterWriterWaitMs) {
  StoreFiles s(1, 4, 64);
  s.opts.writer_wait_ms = 30;
  WriterTable t(s.files, s.geo, s.opts);
  // A live thread other than this one owns every entry.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::atomic<uint64_t> holder{0};
  std::thread th([&] {
    holder.store(os::Self().word());
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return done; });
  });
  while (holder.load() == 0) std::this_thread::yield();
  for (uint32_t i = 0; i < kWriterEntries; ++i) s.file(0)->writer(i)->owner = holder.load();
  EXPECT_EQ(t.Claim(0), nullptr);
  EXPECT_EQ(s.file(0)->header()->writer_waiters, 0u);
  for (uint32_t i = 0; i < kWriterEntries; ++i) EXPECT_EQ(OwnerOf(s.file(0)->writer(i)), holder.load()) << i;
  {
    std::lock_guard<std::mutex> g(mu);
    done = true;
  }
  cv.notify_all();
  th.join();
}

TEST(WriterTable, BatchesTakeBatchEntriesOnly) {
  StoreFiles s(1, 4, 64);
  WriterTable t(s.files, s.geo, s.opts);
  std::vector<WriterEntryHeader*> held;
  for (uint32_t n = 0; n < kBatchEntries; ++n) {
    WriterEntryHeader* w = t.ClaimBatch(0);
    ASSERT_NE(w, nullptr);
    const uint32_t i = s.file(0)->writer_index(w);
    EXPECT_GE(i, kWriterEntries);
    EXPECT_LT(i, kAllWriterEntries);
    held.push_back(w);
  }
  for (uint32_t i = 0; i < kWriterEntries; ++i) EXPECT_EQ(OwnerOf(s.file(0)->writer(i)), 0u) << i;
  held[0]->active = 1;
  for (WriterEntryHeader* w : held) t.ReleaseBatch(w);
  EXPECT_EQ(OwnerOf(held[0]), os::Self().word()) << "an open batch journal stays for recovery";
  for (size_t n = 1; n < held.size(); ++n) EXPECT_EQ(OwnerOf(held[n]), 0u) << n;
}

// A Txn journals into the entry the table gives it, and hands it back.
TEST(WriterTable, ATxnRollsBackThroughItsEntryAndHandsItBack) {
  StoreFiles s(1, 4, 64);
  WriterTable t(s.files, s.geo, s.opts);
  store::StoreFile* f = s.file(0);
  PutNode(f, 1, 2, 9, 1, 1000);
  {
    store::Txn txn(t, 0);
    ASSERT_TRUE(txn.Save(1, 2));
    ASSERT_TRUE(txn.opened());
    std::memset(f->slot(1, 2), 0, kSlotBytes);
  }
  EXPECT_EQ(store::HeaderAt(f->slot(1, 2))->id, 9u);
  for (uint32_t i = 0; i < kAllWriterEntries; ++i) EXPECT_EQ(OwnerOf(f->writer(i)), 0u) << i;
}

// SaveRange journals a node's slots in one pass: slots saved before (alone
// or in an overlapping range) are not saved twice, and the rollback puts
// every slot of every range back, check bytes included.
TEST(WriterTable, SaveRangeJournalsEachSlotOnceAndRollsEveryOneBack) {
  StoreFiles s(1, 4, 64);
  WriterTable t(s.files, s.geo, s.opts);
  store::StoreFile* f = s.file(0);
  for (uint32_t i = 0; i < 12; ++i) PutNode(f, 1, i, 100 + i, 1, 1000);
  PutNode(f, 2, 0, 7, 1, 1000);
  uint8_t* checks = store::ChecksOf(f->tags(1), f->chain());
  for (uint32_t i = 0; i < 12; ++i) checks[i] = static_cast<uint8_t>(0x40 + i);
  std::vector<uint8_t> before(12 * kSlotBytes), checks_before(checks, checks + 12), other(kSlotBytes);
  std::memcpy(before.data(), f->slot(1, 0), before.size());
  std::memcpy(other.data(), f->slot(2, 0), kSlotBytes);
  {
    store::Txn txn(t, 0);
    ASSERT_TRUE(txn.Save(1, 4));
    ASSERT_TRUE(txn.Save(2, 0));           // another chain's slot 0: not chain 1's
    ASSERT_TRUE(txn.SaveRange(1, 3, 3));   // 3, 4 (saved), 5
    ASSERT_TRUE(txn.SaveRange(1, 0, 7));   // 0..6: 3..5 saved already
    ASSERT_TRUE(txn.SaveRange(1, 10, 2));  // 10, 11
    ASSERT_TRUE(txn.SaveRange(1, 8, 0));   // nothing
    const WriterEntryHeader* w = nullptr;
    for (uint32_t i = 0; i < kAllWriterEntries && w == nullptr; ++i)
      if (f->writer(i)->active) w = f->writer(i);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->count, 1u + 7u + 2u) << "each slot once: chain 2's 0, chain 1's 0..6, 10, 11";
    // The writes the journal is for, images and checks alike.
    for (uint32_t i : {0u, 1u, 2u, 3u, 4u, 5u, 6u, 10u, 11u}) {
      std::memset(f->slot(1, i), 0xEE, kSlotBytes);
      checks[i] = 0x11;
    }
    std::memset(f->slot(2, 0), 0xEE, kSlotBytes);
  }
  EXPECT_EQ(std::memcmp(f->slot(1, 0), before.data(), before.size()), 0) << "every slot is back";
  EXPECT_EQ(std::vector<uint8_t>(checks, checks + 12), checks_before) << "every check byte is back";
  EXPECT_EQ(std::memcmp(f->slot(2, 0), other.data(), kSlotBytes), 0);
}

// Through a Store: a batch journals into one of a file's kBatchEntries batch
// entries, taken before any chain lock and handed back when it ends. More
// threads than entries batching at once wait their turn: every batch is
// applied, exactly once, and every entry is free afterwards.
TEST(StoreBatch, MoreConcurrentBatchesThanBatchEntriesAllLand) {
  testing::TempDir d;
  auto s = testing::MustOpen(testing::Opts(d.path(), 2, 64, 8));
  constexpr int kThreads = 2 * static_cast<int>(store::kBatchEntries), kBatches = 200;
  std::vector<Key> keys;
  for (int i = 0; i < 16; ++i) keys.push_back(MakeKey(1, "batch-key-number-" + std::to_string(i)));
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int b = 0; b < kBatches; ++b) {
        // Four keys of both files, a different four each time.
        std::vector<Store::BatchItem> items;
        for (int k = 0; k < 4; ++k) items.push_back({keys[(t + b + 4 * k) % keys.size()].ref(), 8});
        Status st = s->UpdateBatch(items, 1000, testing::AddingToEach(1));
        if (!st.ok()) failed.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0);
  uint64_t total = 0;
  for (const Key& k : keys) total += testing::CountOf(s.get(), k);
  EXPECT_EQ(total, uint64_t{kThreads} * kBatches * 4);
  // Every batch entry was handed back: one more batch per entry, from this
  // thread, does not wait.
  for (uint32_t i = 0; i < store::kBatchEntries + 1; ++i)
    ASSERT_TRUE(s->UpdateBatch(std::vector<Store::BatchItem>{{keys[0].ref(), 8}}, 1000,
                               [](std::span<NodeRef>, std::span<Commit>) {})
                    .ok());
  testing::ExpectClean(s.get());
}

}  // namespace
}  // namespace frs
