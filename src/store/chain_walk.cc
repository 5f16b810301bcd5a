// Walks over many chains, one chain locked at a time: WalkChains (the one
// loop over files and key-nodes, with its stop checks and pacing) and the
// operations built on it, ForEach and EraseIf. Verify walks through it too
// (store_verify.cc). Inside a chain, every walk is WalkChain (chain_map.h).
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "os/stop_request.h"
#include "store/chain_lock.h"
#include "store/journal.h"
#include "store/nodes.h"
#include "store/store_impl.h"

namespace frs::store {
namespace {

// Paces a walk over the chains (see Store::Filter::busy_percent).
class WalkPacer {
 public:
  explicit WalkPacer(uint32_t busy_percent) : busy_(std::clamp<uint32_t>(busy_percent, 1, 100)) {}
  void Chain() {
    if (busy_ >= 100 || ++chains_ < kStretch) return;
    chains_ = 0;
    const auto now = std::chrono::steady_clock::now();
    const auto worked = now - since_;
    std::this_thread::sleep_for(worked * (100 - busy_) / busy_);
    since_ = std::chrono::steady_clock::now();
  }

 private:
  static constexpr uint32_t kStretch = 256;
  uint32_t busy_;
  uint32_t chains_ = 0;
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
};

// The chain's lock within `wait_ms`: asked again at once a few times (a
// request holds one for microseconds, and a walk of a busy store meets many
// held), then every millisecond. A holder found gone when the time is up is
// taken over (Lock repairs what it left): left to those who wait without a
// bound, the lock of a killed frsctl on a chain no request touched stayed
// held, and every walk of the held-now gauges stopped there (a review of
// the store's crash safety).
bool LockWithin(LockSet& locks, uint32_t k, uint32_t wait_ms) {
  for (int i = 0; i < 64; ++i) {
    if (locks.TryLock(k)) return true;
    std::this_thread::yield();
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (!locks.TryLock(k)) {
    if (std::chrono::steady_clock::now() >= end) {
      if (!locks.HolderGone(k)) return false;
      locks.Lock(k);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

Status StoreImpl::WalkChains(const Filter& filter, const ChainFn& chain,
                             const std::function<std::string()>& done_so_far) {
  WalkPacer pacer(filter.busy_percent);
  for (uint32_t fi = 0; fi < files_.size(); ++fi) {
    if (filter.file >= 0 && filter.file != fi) continue;
    StoreFile* f = files_[fi].get();
    for (uint32_t k = 0; k < geo_.keynodes; ++k) {
      if (filter.keynode >= 0 && filter.keynode / group_ != k) continue;
      if (os::StopRequested())
        return Status::Unavailable("interrupted between chains" + (done_so_far ? done_so_far() : std::string()) +
                                   "; nothing is half done");
      if (Status s = FileUsable(f); !s.ok()) return s;
      if (Status s = chain(fi, f, k); !s.ok()) return s;
      pacer.Chain();
    }
  }
  return Status::OK();
}

Status StoreImpl::ForEach(const Filter& filter, const Visitor& visit) {
  std::vector<NodeInfo> copied;
  return WalkChains(filter, [&](uint32_t fi, StoreFile* f, uint32_t k) {
    copied.clear();
    {
      // The chain is copied out under its lock and visited after: a slow
      // visitor (a terminal, a pipe) never holds a lock the server needs.
      LockSet locks(locks_, f);
      if (filter.lock_wait_ms == 0) {
        locks.Lock(k);
      } else if (!LockWithin(locks, k, filter.lock_wait_ms)) {
        return Status::Busy("chain " + std::to_string(k) + " of file " + std::to_string(fi) + " stayed locked " +
                            std::to_string(filter.lock_wait_ms) + " ms; the walk ended there");
      }
      WalkChain_locked(f, k, [&](uint32_t i, NodeExtent e) {
        if (e.damaged) {
          NoteDamage(f, k, i);
        } else if ((filter.biz < 0 || filter.biz == HeaderAt(f->slot(k, i))->biz) && Selects(filter, k, i)) {
          copied.emplace_back();
          FillInfo_locked(fi, k, i, f->slot(k, i), &copied.back());
        }
      });
    }
    for (const NodeInfo& n : copied) visit(n);
    return Status::OK();
  });
}

Result<uint64_t> StoreImpl::EraseIf(const Filter& filter, const std::function<bool(const NodeInfo&)>& pred) {
  if (opts_.read_only) return ReadOnly();
  uint64_t erased = 0;
  NodeInfo info;
  Status s = WalkChains(
      filter,
      [&](uint32_t fi, StoreFile* f, uint32_t k) {
    // One chain is one transaction: it is erased whole or (on a refused
    // journal, or a predicate that throws) not at all.
    LockSet locks(locks_, f);
    locks.Lock(k);
    Txn txn(writers_, fi);
    Status refused;
    uint64_t here = 0;
    WalkChain_locked(f, k, [&](uint32_t i, NodeExtent e) {
      if (!refused.ok()) return;
      if (e.damaged) {
        NoteDamage(f, k, i);  // left for verify --repair, which reports it
      } else if ((filter.biz < 0 || filter.biz == HeaderAt(f->slot(k, i))->biz) && Selects(filter, k, i)) {
        FillInfo_locked(fi, k, i, f->slot(k, i), &info);
        if (!pred || pred(info)) {
          if (!txn.Open()) {
            refused = WritersBusy(f);
          } else if (!ClearNode_locked(f, txn, k, i)) {
            refused = JournalFull(f);
          } else {
            ++here;
          }
        }
      }
    });
    if (!refused.ok()) return refused;
    txn.Commit();
    erased += here;
    return Status::OK();
      },
      [&] { return " after erasing " + std::to_string(erased) + " node(s)"; });
  if (!s.ok()) return s;
  return erased;
}

}  // namespace frs::store
