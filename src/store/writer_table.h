// store/writer_table.h: the writer entries of a store's files (format.h
// WriterEntryHeader), who holds them, and the one recovery of dead writers.
// Private to src/store.
//
// Each thread that writes a file claims one of its kWriterEntries entries
// for each write and hands it back at its end; with
// StoreOptions::keep_writer_entries (frsd's workers) it keeps it between
// writes (a per-thread cache), handing it back when another writer waits
// for one (FileHeader::writer_waiters). A batch takes one of kBatchEntries
// batch entries per batch. An entry whose owner died is recovered, its
// unfinished write undone (or, for a batch across files that reached its
// commit point, kept), before anyone reuses it or the chains it touched.
// docs/store.md, "Writer entries".
//
// A WriterTable works on the mapped files it is given (the store owns
// them; they outlive it) and on the group geometry they are laid out in;
// the journal of one critical section over an entry is Txn (journal.h).
//
// Thread safety: one WriterTable may be used from many threads; the entries
// themselves are claimed by compare-and-set on their owner word, shared
// with every process that maps the files.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "frs/store.h"
#include "os/shm_lock.h"
#include "store/store_file.h"

namespace frs::store {

class WriterTable {
 public:
  // `files`, `geo` (the group geometry, format.h GroupGeometry) and `opts`
  // (keep_writer_entries, writer_wait_ms, on_recovery) are the caller's and
  // must outlive the table.
  WriterTable(const std::vector<std::unique_ptr<StoreFile>>& files, const StoreGeometry& geo, const StoreOptions& opts);
  // Hands back the entries this process claimed and kept.
  ~WriterTable();
  WriterTable(const WriterTable&) = delete;
  WriterTable& operator=(const WriterTable&) = delete;

  StoreFile* file(uint32_t file_index) const { return files_[file_index].get(); }

  // This thread's writer entry of a file, claimed for one write (or, with
  // keep_writer_entries, on first use and kept between writes); when every
  // entry is held, dead holders' are recovered and live ones waited for
  // (AfterWrite, ReleaseKept hand them back). Null when none came free
  // within writer_wait_ms.
  WriterEntryHeader* Claim(uint32_t file_index);
  // The end of a transaction in this thread's entry of a file: the entry is
  // handed back, or, kept between writes, when someone waits for one.
  void AfterWrite(uint32_t file_index, WriterEntryHeader* w) {
    if (!keep_ ||
        std::atomic_ref<uint64_t>(files_[file_index]->header()->writer_waiters).load(std::memory_order_relaxed) != 0)
      Release(file_index, w);
  }
  // Hands this thread's entry of a file back (only a closed one: an open
  // journal stays with its owner, or, dead, for recovery).
  void Release(uint32_t file_index, WriterEntryHeader* w);
  // Hands back the entries this thread keeps between writes: those a
  // waiter wants (only_if_wanted), or all of them.
  void ReleaseKept(bool only_if_wanted);

  // A batch entry of a file for one batch, claimed before any chain lock is
  // taken (it may wait for one, up to about two seconds); null when all
  // stayed held by live threads.
  WriterEntryHeader* ClaimBatch(uint32_t file_index);
  void ReleaseBatch(WriterEntryHeader* w);

  // Calls fn(index, owner, active) for each writer entry of `f` whose owner
  // is certainly dead.
  void ForEachDead(const StoreFile* f, const std::function<void(uint32_t, os::Owner, bool)>& fn) const;
  // Undoes (or, for a committed batch across files, keeps) and frees every
  // writer entry of `dead` in every file (of every dead owner, when an
  // earlier recovery died half done); returns how many were undone. The only
  // place a dead writer's journal is undone: every path that meets a dead
  // writer (a lock taken over, a full table, RecoverDeadOwner, Verify)
  // calls it.
  uint32_t RecoverDeadWriters(os::Owner dead);
  // Restores an entry's saved images, newest first, and closes it.
  void Undo(StoreFile* f, WriterEntryHeader* w) const;

 private:
  // Claim's wait when every entry is held.
  WriterEntryHeader* WaitFor(StoreFile* f, os::Owner self);
  void ReleaseClaimed();

  const std::vector<std::unique_ptr<StoreFile>>& files_;
  const StoreGeometry& geo_;
  const StoreOptions& opts_;
  const bool keep_;
  // This table among every one of the process: the per-thread cache of kept
  // entries is keyed by it.
  const uint64_t instance_;
  Mutex claimed_mu_;
  // The entries this process kept, to hand back on destruction.
  struct Claimed {
    uint32_t file, entry;
    uint64_t owner;  // os::Owner::word()
    pid_t pid;
  };
  std::vector<Claimed> claimed_ FRS_GUARDED_BY(claimed_mu_);
};

}  // namespace frs::store
