// Chain locks that survive their holder: taking one over from a dead owner
// recovers that owner's unfinished writes before the chain is touched, and
// ReleaseDeadOwner releases every lock a reaped process held.
#include <atomic>
#include <string>

#include "os/shm_lock.h"
#include "store/chain_lock.h"

namespace frs::store {

void ChainLocks::Wait(StoreFile* f, uint32_t keynode) {
  writers_.ReleaseKept(/*only_if_wanted=*/false);
  // A wait on a live owner is reported (through on_recovery) after a second
  // and each time it doubles: a lock is never waited on silently. The
  // context lives on this frame: the uncontended path allocates nothing.
  struct WaitContext {
    const StoreOptions* opts;
    const StoreFile* file;
    uint32_t keynode;
  } ctx{&opts_, f, keynode};
  os::LockWaitReport report;
  report.ctx = &ctx;
  report.fn = [](const void* p, os::Owner owner, int64_t waited_ms) {
    const auto* c = static_cast<const WaitContext*>(p);
    if (c->opts->on_recovery)
      c->opts->on_recovery("waited " + std::to_string(waited_ms) + " ms for the lock of keynode " +
                           std::to_string(c->keynode) + " in " + c->file->path() + ", held by live thread " +
                           std::to_string(owner.tid));
  };
  if (opts_.on_lock_wait) opts_.on_lock_wait(os::ShmOwner(f->lock(keynode)).tid);
  const os::LockResult r = os::ShmLock(f->lock(keynode), &report);
  if (opts_.on_lock_wait) opts_.on_lock_wait(0);
  if (r.took_over) RecoverOwner_locked(f, r.dead_owner);
}

void ChainLocks::RecoverOwner_locked(StoreFile* f, os::Owner dead) {
  const uint32_t undone = writers_.RecoverDeadWriters(dead);
  std::atomic_ref<uint64_t>(f->header()->lock_recoveries).fetch_add(1, std::memory_order_relaxed);
  if (opts_.on_recovery)
    opts_.on_recovery("recovered a lock of dead owner " + std::to_string(dead.tid) + " in " + f->path() +
                      (undone ? " and undid its unfinished write" : ""));
}

Result<uint32_t> ChainLocks::ReleaseDeadOwner(int32_t pid) {
  if (pid <= 0) return Status::InvalidArgument("pid must be positive");
  const uint32_t tid = static_cast<uint32_t>(pid);
  uint32_t released = 0;
  for (auto& fp : files_) {
    StoreFile* f = fp.get();
    bool touched = false;
    // Only identities that are really gone: if the kernel already gave the
    // pid to another process (of frsctl, say) its start time differs and it
    // is left alone.
    writers_.ForEachDead(f, [&](uint32_t, os::Owner o, bool) {
      if (o.tid == tid) touched |= writers_.RecoverDeadWriters(o) > 0;
    });
    for (uint32_t k = 0; k < geo_.keynodes; ++k) {
      const os::Owner o = os::ShmOwner(f->lock(k));
      if (o.tid != tid || os::OwnerAlive(o)) continue;
      writers_.RecoverDeadWriters(o);  // before the chain is released: its journals first
      if (os::ShmForceUnlock(f->lock(k), o)) {
        ++released;
        touched = true;
      }
    }
    if (touched) std::atomic_ref<uint64_t>(f->header()->lock_recoveries).fetch_add(1, std::memory_order_relaxed);
  }
  return released;
}

}  // namespace frs::store
