// Dead writers: an entry whose owner died is recovered, its unfinished
// write undone (or, for a batch across files that reached its commit point,
// kept), before anyone reuses it or the chains it touched.
// RecoverDeadWriters is the only place a dead writer's journal is undone;
// every path that meets a dead writer (a lock taken over, a writer table
// full of entries, RecoverDeadOwner, Verify) calls it. Taking and handing
// back entries is writer_table.cc.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "os/shm_lock.h"
#include "store/journal.h"
#include "store/store_impl.h"

namespace frs::store {
void StoreImpl::ForEachDeadWriter(StoreFile* f, const std::function<void(uint32_t, os::Owner, bool)>& fn) const {
  for (uint32_t i = 0; i < kAllWriterEntries; ++i) {
    const WriterEntryHeader* w = f->writer(i);
    const os::Owner owner = os::Owner::FromWord(AtomicLoad(w->owner));
    if (owner.tid == 0 || os::OwnerAlive(owner)) continue;
    fn(i, owner, AtomicLoad(w->active) != 0);
  }
}

void StoreImpl::UndoEntry(StoreFile* f, WriterEntryHeader* w) {
  JournalRecord* recs = f->records(w);
  const uint32_t n = std::min<uint32_t>(AtomicLoad(w->count), f->capacity(f->writer_index(w)));
  // Newest first, so a slot saved twice ends with its oldest image.
  for (uint32_t i = n; i-- > 0;) {
    if (recs[i].keynode >= geo_.keynodes) continue;
    if (IsTagsRecord(recs[i].slot)) {
      const uint32_t first = (recs[i].slot - kTagsRecord) * kSlotBytes;
      if (first >= geo_.chain) continue;
      uint8_t* tags = f->tags(recs[i].keynode) + first;
      for (uint32_t k = 0; k < std::min(kSlotBytes, geo_.chain - first); ++k) StoreTag(tags + k, recs[i].image[k]);
      continue;
    }
    const uint32_t slot = recs[i].slot & kRecordSlotMask;
    if (slot >= geo_.chain) continue;
    std::memcpy(f->slot(recs[i].keynode, slot), recs[i].image, kSlotBytes);
    // The slot's check byte with it (format.h JournalRecord).
    if (recs[i].slot & kRecordHasCheck)
      ChecksOf(f->tags(recs[i].keynode), geo_.chain)[slot] = static_cast<uint8_t>(recs[i].slot >> 8);
  }
  std::atomic_ref<uint32_t>(w->count).store(0, std::memory_order_release);
  std::atomic_ref<uint32_t>(w->active).store(0, std::memory_order_release);
}

// Outside the thread-safety analysis: it takes one recovery lock per file in
// a loop, a set the analysis cannot name.
uint32_t StoreImpl::RecoverDeadWriters(os::Owner dead) FRS_NO_THREAD_SAFETY_ANALYSIS {
  // In every file at once: a batch across files is kept or undone as a
  // whole, decided by its coordinator entry before any entry is touched. The
  // recovery locks (taken in file order) serialize this against anyone else
  // recovering the same owner. It is safe without the dead owner's chain
  // locks: they stay held by the dead owner until someone takes them over,
  // and every take-over runs this first.
  //
  // A recovery lock taken over from a dead holder means a recovery died
  // half done: the writer it was undoing is still active, owned by a dead
  // thread whose chain locks that holder had already taken over, so no
  // take-over will ever name it again. This pass then finishes the recovery
  // of every dead writer, not only `dead`'s (undoing again is harmless: the
  // images are the same).
  bool interrupted = false;
  for (auto& f : files_) {
    const os::LockResult lr = os::ShmLock(&f->header()->recovery_lock);
    if (!lr.took_over) continue;
    interrupted = true;
    std::atomic_ref<uint64_t>(f->header()->lock_recoveries).fetch_add(1, std::memory_order_relaxed);
    if (opts_.on_recovery)
      opts_.on_recovery("took over the recovery lock of dead owner " + std::to_string(lr.dead_owner.tid) + " in " +
                        f->path() + ": its interrupted recovery is finished now");
  }
  auto recovered = [&](uint64_t owner) {
    return owner == dead.word() || (interrupted && owner != 0 && !os::OwnerAlive(os::Owner::FromWord(owner)));
  };
  struct Act {
    StoreFile* f;
    WriterEntryHeader* w;
    bool undo;
  };
  std::vector<Act> acts;
  for (auto& fp : files_) {
    StoreFile* f = fp.get();
    for (uint32_t i = 0; i < kAllWriterEntries; ++i) {
      WriterEntryHeader* w = f->writer(i);
      const uint64_t owner = AtomicLoad(w->owner);
      if (!recovered(owner)) continue;
      bool undo = AtomicLoad(w->active) != 0;
      const uint64_t batch = AtomicLoad(w->batch);
      if (undo && batch != 0 && w->coord_file < files_.size() && w->coord_entry < kAllWriterEntries) {
        const WriterEntryHeader* c = files_[w->coord_file]->writer(w->coord_entry);
        undo = !(AtomicLoad(c->owner) == owner && AtomicLoad(c->committed) == batch);
      }
      acts.push_back({f, w, undo});
    }
  }
  uint32_t undone = 0;
  for (const Act& a : acts) {
    if (a.undo) {
      UndoEntry(a.f, a.w);
      ++undone;
    }
  }
  for (const Act& a : acts) {
    std::atomic_ref<uint32_t>(a.w->count).store(0, std::memory_order_relaxed);
    std::atomic_ref<uint32_t>(a.w->active).store(0, std::memory_order_release);
    std::atomic_ref<uint64_t>(a.w->batch).store(0, std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(a.w->committed).store(0, std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(a.w->owner).store(0, std::memory_order_release);
  }
  for (auto it = files_.rbegin(); it != files_.rend(); ++it) os::ShmUnlock(&(*it)->header()->recovery_lock);
  return undone;
}

}  // namespace frs::store
