// store/placer.h: where a new (or grown) node goes when its key's chains A
// and B are both locked, as docs/store.md "Placement and eviction" tells
// it, one named step each, tried in order:
//   1. FreeRun       a free run in the less loaded chain (two-choice)
//   2. ReclaimStale  a window of free and stale nodes (expired, or of a
//                    removed biz), reused before anything live
//   3. CuckooStep    one resident moved to its other key-node, when that
//                    frees a long enough run here
//   4. EvictLru      the window whose most recently used live node is the
//                    oldest (last second of use, then heat)
// A batch's pinned nodes are never reclaimed, moved or evicted. The
// decisions themselves are placement.h's pure functions; the Placer acts on
// them in a mapped file, each write journaled in the caller's Txn. Private
// to src/store.
//
// The Placer owns the set of live bizzes (whose nodes are not stale for
// being of a removed biz), swapped whole by SetLiveBizzes.
//
// Thread safety: one Placer may be used from many threads. Place_locked
// REQUIRES the locks of both of the key's chains (held in `locks`).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "frs/store.h"
#include "store/chain_lock.h"
#include "store/journal.h"
#include "store/placement.h"
#include "store/store_file.h"

namespace frs::store {

// Where a placement put a node's first slot.
struct Placement {
  uint32_t keynode = 0, slot = 0;
  bool ok = false;
  bool journal_full = false;  // a step could not journal what it had to write: nothing placed
};
// Nodes a batch found or placed: never moved or evicted by its later members.
using Pins = std::vector<std::pair<uint32_t, uint32_t>>;  // (key-node, slot)

class Placer {
 public:
  // `user_geo`: the configured geometry (where a moved node's other chain
  // is, Locate); the caller's, and must outlive the Placer. Every biz is
  // live until SetLiveBizzes says otherwise.
  explicit Placer(const StoreGeometry& user_geo);
  Placer(const Placer&) = delete;
  Placer& operator=(const Placer&) = delete;

  // Biz id -> configured; ids past the end are not.
  void SetLiveBizzes(std::vector<bool> live);
  std::shared_ptr<const std::vector<bool>> LiveBizzes() const;

  // Finds room for a node of `span` slots in chain loc.a or loc.b of `f`
  // (both locked in `locks`): the four steps above, in order. Whatever it
  // clears or moves is journaled in `txn` first, and counted in its
  // counters and in `r` (may be null); `pins` (may be null) are never moved
  // or evicted. Not ok: no room (every window pinned), or journal_full
  // (nothing placed; the txn rolls back what a step began).
  Placement Place_locked(StoreFile* f, Txn& txn, const Location& loc, uint32_t span, uint32_t now_s, LockSet& locks,
                         const Pins* pins, UpdateResult* r) const;

 private:
  const StoreGeometry& user_geo_;
  const uint32_t group_;  // KeynodeGroup(user_geo_)
  mutable Mutex live_mu_;
  std::shared_ptr<const std::vector<bool>> live_ FRS_GUARDED_BY(live_mu_);
};

}  // namespace frs::store
