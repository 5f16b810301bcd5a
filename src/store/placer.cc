// The Placer (placer.h): one placement's steps over the two chains' maps.
#include "store/placer.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "store/chain_lock.h"
#include "store/journal.h"
#include "store/nodes.h"

namespace frs::store {
namespace {

// One placement: the two candidate chains (both locked), their maps, and
// what the steps share. REQUIRES: the locks of loc.a and loc.b.
class Steps {
 public:
  Steps(const StoreGeometry& user_geo, uint32_t group, std::shared_ptr<const std::vector<bool>> live, StoreFile* f,
        Txn& txn, LockSet& locks, const Location& loc, uint32_t span, uint32_t now_s, const Pins* pins, UpdateResult* r)
      : user_geo_(user_geo),
        group_(group),
        chain_(f->chain()),
        f_(f),
        txn_(txn),
        locks_(locks),
        span_(span),
        now_s_(now_s),
        pins_(pins),
        r_(r),
        live_(std::move(live)) {
    cands_[0] = loc.a;
    cands_[1] = loc.b;
    homes_[0] = loc.home_a;
    homes_[1] = loc.home_b;
    ncand_ = loc.a == loc.b ? 1 : 2;
    for (int c = 0; c < ncand_; ++c) maps_[c].FromTags(f->tags(cands_[c]), chain_);
  }

  // Each step decides on the maps the tags give (ChainMap::FromTags), then
  // checks the slots it is about to write over (Confirmed): a free slot
  // whose header does not read free is damage the tags do not show, and the
  // step runs again on maps built from the node headers (Build), which
  // count such a slot as a damaged node's.
  Placement FreeRun() {
    return Checked([this] { return FreeRunStep(); });
  }
  Placement ReclaimStale() {
    return Checked([this] { return ReclaimStaleStep(); });
  }
  Placement EvictLru() {
    return Checked([this] { return EvictLruStep(); });
  }
  // One resident moved to its other key-node's group (it checks the slots
  // it moves into itself).
  Placement Cuckoo() { return CuckooStep(); }

 private:
  // A step's answer: its placement, or that a slot it chose is not free.
  static constexpr uint32_t kUnconfirmed = UINT32_MAX;
  template <class Step>
  Placement Checked(Step&& step) {
    Placement p = step();
    if (p.keynode != kUnconfirmed || exact_) return p;
    exact_ = true;
    for (int c = 0; c < ncand_; ++c) maps_[c].Build(f_->slot(cands_[c], 0), f_->tags(cands_[c]), chain_);
    return step();
  }
  static Placement Unconfirmed() {
    Placement p;
    p.keynode = kUnconfirmed;
    return p;
  }
  // Whether every slot of [s, s + n) in chain `keynode` that a map says is
  // free reads free in its header too (maps from Build are so by making).
  bool Confirmed(const ChainMap& m, uint32_t keynode, uint32_t s, uint32_t n) const {
    if (exact_) return true;
    for (uint32_t k = s; k < s + n; ++k)
      if (m.start[k] == ChainMap::kFree && !IsFree(HeaderAt(f_->slot(keynode, k)))) return false;
    return true;
  }

  Placement FreeRunStep() {
    int runs[2] = {-1, -1};
    bool fits[2] = {false, false};
    uint32_t free_slots[2] = {0, 0};
    for (int c = 0; c < ncand_; ++c) {
      runs[c] = FreeRunIn(maps_[c], span_, homes_[c]);
      fits[c] = runs[c] >= 0;
      free_slots[c] = maps_[c].FreeSlots();
    }
    const int best = LessLoaded(fits, free_slots, ncand_);
    if (best < 0) return {};
    if (!Confirmed(maps_[best], cands_[best], static_cast<uint32_t>(runs[best]), span_)) return Unconfirmed();
    return {cands_[best], static_cast<uint32_t>(runs[best]), true};
  }

  Placement ReclaimStaleStep() {
    for (int c = 0; c < ncand_; ++c) {
      for (uint32_t s = 0; s + span_ <= maps_[c].n; ++s) {
        bool ok = true;
        for (uint32_t k = s; k < s + span_ && ok; ++k) {
          const uint8_t st = maps_[c].start[k];
          if (st == ChainMap::kFree) continue;
          ok = Stale(c, st) && !Pinned(cands_[c], st);
        }
        if (!ok) continue;
        return EvictWindow(c, s);
      }
    }
    return {};
  }

  Placement CuckooStep() {
    const uint32_t chain = chain_;
    for (int c = 0; c < ncand_; ++c) {
      const ChainMap& m = maps_[c];
      for (uint32_t s = 0; s < chain; ++s) {
        if (m.start[s] != s || m.IsDamaged(s) || Pinned(cands_[c], s)) continue;
        const uint32_t nspan = m.SpanOf(s);
        ChainMap without = m;
        for (uint32_t k = s; k < s + nspan; ++k) without.MarkFree(k);
        const int here = FreeRunIn(without, span_, homes_[c]);
        if (here < 0) continue;
        const NodeHeader* h = HeaderAt(f_->slot(cands_[c], s));
        const Location nl = Locate(LocationOf(f_->place_key(), h), user_geo_, group_);
        if (nl.a == nl.b) continue;
        const uint32_t other = (h->form & kNodeInAlternate) ? nl.a : nl.b;
        if (other == cands_[c]) continue;
        bool locked_here = false;
        if (!locks_.Holds(other)) {
          if (!locks_.TryLock(other)) continue;  // never wait here: the order of locks is not ours to choose
          locked_here = true;
        }
        // Moved only as its header describes it, into slots that read free.
        const NodeExtent e = ExtentAt(f_->slot(cands_[c], 0), f_->tags(cands_[c]), chain, s);
        ChainMap om;
        om.FromTags(f_->tags(other), chain);
        const int dest =
            e.damaged || e.span != nspan ? -1 : FreeRunIn(om, nspan, other == nl.b ? nl.home_b : nl.home_a);
        if (dest < 0 || !Confirmed(om, other, static_cast<uint32_t>(dest), nspan) ||
            !Confirmed(m, cands_[c], static_cast<uint32_t>(here), span_)) {
          if (locked_here) locks_.Unlock(other);
          continue;
        }
        // The other chain stays locked until the operation ends: its old
        // images are in the journal, and a rollback (or a recovery after a
        // death) restores them, which only its lock holder may do.
        if (!Move(cands_[c], s, nspan, other, static_cast<uint32_t>(dest), other == nl.b))
          return JournalFullPlacement();
        return {cands_[c], static_cast<uint32_t>(here), true};
      }
    }
    return {};
  }

  Placement EvictLruStep() {
    int ev_c = -1;
    uint32_t ev_s = 0;
    uint64_t ev_cost = UINT64_MAX;
    for (int c = 0; c < ncand_; ++c) {
      const ChainMap& m = maps_[c];
      for (uint32_t s = 0; s + span_ <= m.n; ++s) {
        uint64_t cost = 0;
        bool ok = true;
        for (uint32_t k = s; k < s + span_ && ok; ++k) {
          if (m.start[k] == ChainMap::kFree) continue;
          if (Pinned(cands_[c], m.start[k])) {
            ok = false;
            break;
          }
          const NodeHeader* h = HeaderAt(f_->slot(cands_[c], m.start[k]));
          cost = std::max<uint64_t>(cost, RecencyOf(h) + 1);
        }
        if (ok && cost < ev_cost) {
          ev_cost = cost;
          ev_c = c;
          ev_s = s;
        }
      }
    }
    if (ev_c < 0) return {};
    return EvictWindow(ev_c, ev_s);
  }

  bool Stale(int c, uint32_t slot) const { return IsStale(HeaderAt(f_->slot(cands_[c], slot)), now_s_, *live_); }
  bool Pinned(uint32_t keynode, uint32_t slot) const {
    if (!pins_) return false;
    for (const auto& p : *pins_)
      if (p.first == keynode && p.second == slot) return true;
    return false;
  }
  static Placement JournalFullPlacement() {
    Placement p;
    p.journal_full = true;
    return p;
  }
  // Clears every node overlapping the window [s, s + span) of chain c,
  // counting each as a stale or a live eviction; the window is the placement.
  Placement EvictWindow(int c, uint32_t s) {
    const ChainMap& m = maps_[c];
    if (!Confirmed(m, cands_[c], s, span_)) return Unconfirmed();
    uint8_t last = ChainMap::kFree;
    for (uint32_t k = s; k < s + span_; ++k) {
      if (m.start[k] == ChainMap::kFree || m.start[k] == last) continue;
      last = m.start[k];
      const bool stale = Stale(c, last);
      if (!ClearNode_locked(f_, txn_, cands_[c], last)) return JournalFullPlacement();
      (stale ? txn_.evict_stale : txn_.evict_live) += 1;
      if (r_) (stale ? r_->evicted_stale : r_->evicted_live) = true;
    }
    return {cands_[c], s, true};
  }
  // Moves the node of `nspan` slots at (from, s) to (to, dest), marking in
  // its flags which of its key-nodes it now lives in. Everything it changes
  // is journaled before the first write; false: nothing moved.
  [[nodiscard]] bool Move(uint32_t from, uint32_t s, uint32_t nspan, uint32_t to, uint32_t dest, bool to_alternate) {
    alignas(8) uint8_t img[kMaxSpan * kSlotBytes];
    std::memcpy(img, f_->slot(from, s), nspan * kSlotBytes);
    NodeHeader* nh = HeaderAt(img);
    nh->form = static_cast<uint8_t>((nh->form & ~kNodeInAlternate) | (to_alternate ? kNodeInAlternate : 0));
    const uint8_t tag = TagOf(PlaceHashOf(nh));
    if (!txn_.SaveRange(to, dest, nspan) || !SaveTags_locked(f_, txn_, to, dest, nspan, tag) ||
        !txn_.SaveRange(from, s, nspan) || !SaveTags_locked(f_, txn_, from, s, nspan, 0))
      return false;
    std::memcpy(f_->slot(to, dest), img, nspan * kSlotBytes);
    SetTags_locked(f_, to, dest, nspan, tag);
    for (uint32_t k = 0; k < nspan; ++k) std::memset(f_->slot(from, s + k), 0, kSlotBytes);
    SetTags_locked(f_, from, s, nspan, 0);
    txn_.cuckoo += 1;
    return true;
  }

  const StoreGeometry& user_geo_;
  const uint32_t group_;
  const uint32_t chain_;
  StoreFile* f_;
  Txn& txn_;
  LockSet& locks_;
  const uint32_t span_, now_s_;
  const Pins* pins_;
  UpdateResult* r_;
  const std::shared_ptr<const std::vector<bool>> live_;  // a snapshot: SetLiveBizzes may swap it meanwhile
  uint32_t cands_[2];
  uint32_t homes_[2];
  int ncand_;
  bool exact_ = false;  // maps_ built from the node headers
  ChainMap maps_[2];
};

}  // namespace

Placer::Placer(const StoreGeometry& user_geo)
    : user_geo_(user_geo),
      group_(KeynodeGroup(user_geo)),
      live_(std::make_shared<const std::vector<bool>>(65536, true)) {}

void Placer::SetLiveBizzes(std::vector<bool> live) {
  live.resize(65536, false);
  auto p = std::make_shared<const std::vector<bool>>(std::move(live));
  MutexLock g(&live_mu_);
  live_ = std::move(p);
}

std::shared_ptr<const std::vector<bool>> Placer::LiveBizzes() const {
  MutexLock g(&live_mu_);
  return live_;
}

Placement Placer::Place_locked(StoreFile* f, Txn& txn, const Location& loc, uint32_t span, uint32_t now_s,
                               LockSet& locks, const Pins* pins, UpdateResult* r) const {
  // A snapshot: SetLiveBizzes may swap the set meanwhile.
  Steps p(user_geo_, group_, LiveBizzes(), f, txn, locks, loc, span, now_s, pins, r);
  if (Placement pl = p.FreeRun(); pl.ok) return pl;
  if (Placement pl = p.ReclaimStale(); pl.ok || pl.journal_full) return pl;
  if (Placement pl = p.Cuckoo(); pl.ok || pl.journal_full) return pl;
  return p.EvictLru();
}

}  // namespace frs::store
