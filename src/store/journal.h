// store/journal.h: the undo journal of one critical section (Txn), in this
// thread's writer entry of one file. Private to src/store; the writer table
// itself (claiming entries, recovering dead writers) is writer_table.h.
//
// Before a slot (or a key-node's tags) changes, its old image is appended to
// the entry's journal; the entry is marked active before the first in-place
// write and inactive after the last. Whoever finds the entry's owner dead
// restores the images (WriterTable::RecoverDeadWriters).
//
// A Txn aborts unless committed: its destructor restores every image it
// saved, so an early return or an exception (a mutator's, a visitor's, an
// allocation's) leaves the chains exactly as they were; only Commit() makes
// the writes stay and publishes the header counters. Every Save is checked:
// a write whose old image could not be journaled is not made.
//
// A batch journals into a batch entry (a journal for kMaxBatch members,
// format.h) that it claims before it takes any chain lock and hands back
// when it ends (BatchWriterClaim): the per-thread entries are sized for one
// update only, which keeps the journals a small part of a store.
//
// Thread safety: a Txn belongs to one thread. REQUIRES: the chain locks it
// writes under are held until it is committed or destroyed (declare the
// LockSet before the Txn).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>

#include "store/store_file.h"
#include "store/writer_table.h"

namespace frs::store {

// After a journal word is published (active, count): the slot writes that
// follow in program order stay after it in the instructions. A release
// store orders what comes before it only, and the compiler may move a later
// plain store to the mapping above it; a kill between the two would leave a
// slot changed that no record restores. A killed process leaves every
// store of the instructions before the one it stopped at, on any CPU (its
// recovery runs after its death), as a signal handler sees it: a compiler
// barrier is what is needed, and it costs nothing at run time.
inline void JournalPublished() { std::atomic_signal_fence(std::memory_order_seq_cst); }

// A critical section's undo journal in this thread's writer entry of a file.
class Txn {
 public:
  // A transaction on file `file_index` of `writers`' files. `batch_entry`:
  // a batch entry the caller claimed for this transaction (BatchWriterClaim);
  // null: this thread's own writer entry, claimed by Open.
  Txn(WriterTable& writers, uint32_t file_index, WriterEntryHeader* batch_entry = nullptr)
      : writers_(writers), f_(writers.file(file_index)), file_(file_index), batch_entry_(batch_entry) {}
  ~Txn() { Rollback(); }
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;

  // Saves the slot's current image (or, for slot kTagsRecord, the key-node's
  // tags) unless already saved. Must precede any write to the slot. False
  // when no writer entry could be claimed or the journal is full: the write
  // must not be made (the caller returns, and the Txn rolls back).
  [[nodiscard]] bool Save(uint32_t keynode, uint32_t slot) {
    if (!Open()) return false;
    if (slot != kTagsRecord) return SaveRecord(keynode, slot);
    for (uint32_t c = 0; c < TagRecords(f_->chain()); ++c)
      if (!SaveRecord(keynode, kTagsRecord + c)) return false;
    return true;
  }
  // Claims this thread's writer entry and opens the journal. Every write
  // path calls it before its first change, so that when all writer entries
  // are held by live threads the operation fails whole instead of writing
  // without an undo record.
  [[nodiscard]] bool Open() {
    if (w_) return true;
    w_ = batch_entry_ ? batch_entry_ : writers_.Claim(file_);
    if (!w_) return false;
    recs_ = f_->records(w_);
    cap_ = f_->capacity(f_->writer_index(w_));
    std::atomic_ref<uint32_t>(w_->count).store(0, std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(w_->batch).store(0, std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(w_->committed).store(0, std::memory_order_relaxed);
    std::atomic_ref<uint32_t>(w_->active).store(1, std::memory_order_release);
    JournalPublished();
    return true;
  }
  // Makes this journal part of batch `batch` across files, whose coordinator
  // entry is `coord_entry` of file `coord_file`. REQUIRES: Open, and no
  // write yet.
  void JoinBatch(uint64_t batch, uint32_t coord_file, uint32_t coord_entry) {
    w_->coord_file = coord_file;
    w_->coord_entry = coord_entry;
    std::atomic_ref<uint64_t>(w_->batch).store(batch, std::memory_order_release);
  }
  // The coordinator's commit point: from here on, recovery keeps every file's
  // writes of the batch instead of undoing them.
  void MarkCommitted(uint64_t batch) {
    std::atomic_ref<uint64_t>(w_->committed).store(batch, std::memory_order_release);
  }
  uint32_t entry_index() const { return f_->writer_index(w_); }
  bool empty() const { return !w_ || w_->count == 0; }
  bool opened() const { return w_ != nullptr; }
  // Saves slots [slot, slot + span) of one chain (each unless already
  // saved), as Save of each would, in one pass: a node of several slots
  // (a lease's three, a reservation table's six) is journaled at every
  // write, and a Save per slot searched the journal and published the
  // count once per slot. The count is published once, after every image:
  // recovery reads only what it counts, and no slot is written before this
  // returns.
  [[nodiscard]] bool SaveRange(uint32_t keynode, uint32_t slot, uint32_t span) {
    if (!Open()) return false;
    if (span == 0) return true;
    if (span > 32 || slot + span > kRecordSlotMask + 1) {
      for (uint32_t k = 0; k < span; ++k)
        if (!SaveRecord(keynode, slot + k)) return false;
      return true;
    }
    uint32_t n = w_->count;
    uint32_t saved = 0;  // bit k: slot + k has its record already
    for (uint32_t i = 0; i < n; ++i) {
      if (recs_[i].keynode != keynode || IsTagsRecord(recs_[i].slot)) continue;
      const uint32_t k = (recs_[i].slot & kRecordSlotMask) - slot;  // wraps above span when below slot
      if (k < span) saved |= 1u << k;
    }
    const uint8_t* checks = ChecksOf(f_->tags(keynode), f_->chain());
    for (uint32_t k = 0; k < span; ++k) {
      if (saved >> k & 1) continue;
      if (n >= cap_) {
        std::atomic_ref<uint32_t>(w_->count).store(n, std::memory_order_release);
        return false;
      }
      recs_[n].keynode = keynode;
      std::memcpy(recs_[n].image, f_->slot(keynode, slot + k), kSlotBytes);
      recs_[n].slot = (slot + k) | kRecordHasCheck | uint32_t{checks[slot + k]} << 8;
      ++n;
    }
    std::atomic_ref<uint32_t>(w_->count).store(n, std::memory_order_release);
    JournalPublished();
    return true;
  }
  // Restores every saved image, newest first, and closes the journal; the
  // counters are dropped. A no-op once committed. The entry leaves its batch
  // (and a coordinator withdraws its commit mark) before anything is
  // restored, so a death during a rollback undoes every file of the batch.
  void Rollback() {
    if (w_) {
      std::atomic_ref<uint64_t>(w_->committed).store(0, std::memory_order_release);
      std::atomic_ref<uint64_t>(w_->batch).store(0, std::memory_order_release);
      writers_.Undo(f_, w_);
      if (!batch_entry_) writers_.AfterWrite(file_, w_);
    }
    w_ = nullptr;
    nodes = slots = evict_stale = evict_live = cuckoo = 0;
  }
  // Closes the journal (the writes stay), then publishes the header counters:
  // they follow the data, so a crash can leave them behind (verify recounts)
  // but never ahead.
  void Commit() {
    if (w_) {
      std::atomic_ref<uint32_t>(w_->active).store(0, std::memory_order_release);
      // Inactive entries are never looked at: these clear only for tidiness.
      std::atomic_ref<uint64_t>(w_->batch).store(0, std::memory_order_relaxed);
      std::atomic_ref<uint64_t>(w_->committed).store(0, std::memory_order_relaxed);
      if (!batch_entry_) writers_.AfterWrite(file_, w_);
      w_ = nullptr;
    }
    FileHeader* h = f_->header();
    auto add = [](uint64_t& field, int64_t d) {
      if (d) std::atomic_ref<uint64_t>(field).fetch_add(static_cast<uint64_t>(d), std::memory_order_relaxed);
    };
    add(h->nodes_used, nodes);
    add(h->slots_used, slots);
    add(h->evictions_stale, evict_stale);
    add(h->evictions_live, evict_live);
    add(h->cuckoo_moves, cuckoo);
    nodes = slots = evict_stale = evict_live = cuckoo = 0;
  }

  // Counter changes of this critical section, applied by Commit().
  int64_t nodes = 0, slots = 0, evict_stale = 0, evict_live = 0, cuckoo = 0;

 private:
  [[nodiscard]] bool SaveRecord(uint32_t keynode, uint32_t slot) {
    uint32_t n = w_->count;
    const bool tags = IsTagsRecord(slot);
    for (uint32_t i = 0; i < n; ++i)
      if (recs_[i].keynode == keynode &&
          (tags ? recs_[i].slot == slot : !IsTagsRecord(recs_[i].slot) && (recs_[i].slot & kRecordSlotMask) == slot))
        return true;
    if (n >= cap_) return false;
    recs_[n].keynode = keynode;
    recs_[n].slot = slot;
    if (IsTagsRecord(slot)) {
      const uint32_t first = (slot - kTagsRecord) * kSlotBytes;
      std::memset(recs_[n].image, 0, kSlotBytes);
      std::memcpy(recs_[n].image, f_->tags(keynode) + first, std::min(kSlotBytes, f_->chain() - first));
    } else {
      std::memcpy(recs_[n].image, f_->slot(keynode, slot), kSlotBytes);
      recs_[n].slot = slot | kRecordHasCheck | uint32_t{ChecksOf(f_->tags(keynode), f_->chain())[slot]} << 8;
    }
    std::atomic_ref<uint32_t>(w_->count).store(n + 1, std::memory_order_release);
    JournalPublished();
    return true;
  }

  WriterTable& writers_;
  StoreFile* f_;
  uint32_t file_;
  WriterEntryHeader* batch_entry_;
  WriterEntryHeader* w_ = nullptr;
  JournalRecord* recs_ = nullptr;
  uint32_t cap_ = 0;
};

// A batch entry of one file, held for one batch. REQUIRES: declared before
// the batch's LockSets and Txns, so that it is handed back after they roll
// back or commit and unlock.
class BatchWriterClaim {
 public:
  BatchWriterClaim() = default;
  BatchWriterClaim(const BatchWriterClaim&) = delete;
  BatchWriterClaim& operator=(const BatchWriterClaim&) = delete;
  ~BatchWriterClaim() { Release(); }
  // Claims a batch entry of `f` (waits while all are held by live threads,
  // up to about two seconds); false when none could be had.
  [[nodiscard]] bool Claim(WriterTable& writers, uint32_t file_index) {
    writers_ = &writers;
    w_ = writers.ClaimBatch(file_index);
    return w_ != nullptr;
  }
  WriterEntryHeader* entry() const { return w_; }
  void Release() {
    if (w_) writers_->ReleaseBatch(w_);
    w_ = nullptr;
  }

 private:
  WriterTable* writers_ = nullptr;
  WriterEntryHeader* w_ = nullptr;
};

}  // namespace frs::store
