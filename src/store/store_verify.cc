// StoreImpl::Verify: checks every header, writer journal and chain, and with
// `repair` fixes what can be fixed without guessing: dead owners' locks and
// journals (undone), torn or out-of-place nodes (cleared), duplicate
// identities (the younger copy cleared) and drifted counters (recounted).
#include <algorithm>
#include <cstring>
#include <string>

#include "os/shm_lock.h"
#include "store/chain_lock.h"
#include "store/chain_map.h"
#include "store/journal.h"
#include "store/nodes.h"
#include "store/store_impl.h"

namespace frs::store {

Result<Store::VerifyReport> StoreImpl::Verify(bool repair) {
  if (repair && opts_.read_only) return ReadOnly();
  VerifyReport rep;
  for (uint32_t fi = 0; fi < files_.size(); ++fi) {
    StoreFile* f = files_[fi].get();
    FileHeader* h = f->header();
    const std::string& path = f->path();
    if (Status s = StoreFile::CheckHeader(path, *h, user_geo_, fi, f->bytes()); !s.ok()) {
      rep.problems.push_back(s.message());
      continue;  // nothing else in this file can be trusted
    }
    // Writer entries whose owner died with a journal open: the next locker
    // of a chain it touched undoes the write (chain_lock.cc), and so does
    // verify, on a store it may write; read without locks it cannot, and
    // says so. Either way it is the protocol at work, not damage.
    writers_.ForEachDead(f, [&](uint32_t i, os::Owner owner, bool active) {
      if (!active) return;
      const std::string what = path + ": writer entry " + std::to_string(i) + " of dead thread " +
                               std::to_string(owner.tid) + " has an unfinished write";
      if (opts_.read_only) rep.recovered.push_back(what + ": recoverable (its next writer undoes it)");
      else if (writers_.RecoverDeadWriters(owner) > 0)
        rep.recovered.push_back(what + ": undone, as its next locker would");
    });
    uint64_t nodes = 0, slots = 0;
    Filter this_file;
    this_file.file = fi;
    Status s = WalkChains(this_file, [&](uint32_t, StoreFile*, uint32_t k) {
      VerifyChain(f, fi, k, repair, &rep, &nodes, &slots);
      return Status::OK();
    });
    if (!s.ok()) return s;
    rep.nodes += nodes;
    const uint64_t hn = std::atomic_ref<uint64_t>(h->nodes_used).load();
    const uint64_t hs = std::atomic_ref<uint64_t>(h->slots_used).load();
    if (hn != nodes || hs != slots) {
      rep.problems.push_back(path + ": header counts " + std::to_string(hn) + " nodes / " + std::to_string(hs) +
                             " slots, the chains hold " + std::to_string(nodes) + " / " + std::to_string(slots) +
                             " (counter drift, e.g. after a crash)");
      if (repair) {
        std::atomic_ref<uint64_t>(h->nodes_used).store(nodes);
        std::atomic_ref<uint64_t>(h->slots_used).store(slots);
        rep.repairs.push_back(path + ": recounted nodes_used and slots_used");
      }
    }
  }
  return rep;
}

void StoreImpl::VerifyChain(StoreFile* f, uint32_t fi, uint32_t k, bool repair, VerifyReport* rep, uint64_t* nodes,
                            uint64_t* slots) {
  const std::string& path = f->path();
  const std::string chain_at =
      path + ": keynode" +
      (group_ > 1 ? "s " + std::to_string(k * group_) + ".." + std::to_string(k * group_ + group_ - 1)
                  : " " + std::to_string(k));
  auto slot_at = [&](uint32_t s) { return path + ": " + Where(k, s) + ": "; };
  const os::Owner owner = os::ShmOwner(f->lock(k));
  const bool dead = owner.tid != 0 && !os::OwnerAlive(owner);
  // A chain lock whose holder died (kill -9 of a worker) is no damage: its
  // next locker takes it over and undoes the unfinished write. Verify is
  // that locker here (it said "problem" and exited 1 for chains nobody had
  // touched since a restart); read without locks, it only says so.
  if (dead) {
    const std::string what = chain_at + ": lock held by dead thread " + std::to_string(owner.tid);
    rep->recovered.push_back(
        what + (opts_.read_only ? std::string(": recoverable (its next locker takes it over)")
                                : std::string(": taken over as its next locker would, its unfinished write undone")));
  }
  LockSet locks(locks_, f);
  locks.Lock(k);  // takes over (and undoes) a dead owner's lock
  ++rep->chains;
  // Repairs are journaled like any write. One that cannot be (every writer
  // entry held by a live thread, or the journal full) is not made: nothing
  // is ever changed without its undo record. The report says so, and the
  // problem stays for the next `verify --repair`.
  Txn txn(writers_, fi);
  auto journaled = [&](const std::string& where, bool saved) {
    if (!saved)
      rep->problems.push_back(where + "not repaired: " + (txn.opened() ? JournalFull(f) : WritersBusy(f)).message());
    return saved;
  };
  WalkChain_locked(f, k, [&](uint32_t i, NodeExtent e) {
    NodeHeader* nh = HeaderAt(f->slot(k, i));
    std::string bad;
    // The extent the tags vouch for (see ExtentAt): a damaged span never
    // makes verify or repair reach into a neighbour.
    const uint32_t span = e.span;
    if (e.damaged) {
      bad = IsCompact(nh)
                ? "compact node of span " + std::to_string(SpanOf(nh)) +
                      ", or its lookup tag or check byte, does not describe a node that fits here"
                : "span " + std::to_string(SpanOf(nh)) + ", state " + std::to_string(ExtOf(nh)->state_len) +
                      " and key " + std::to_string(ExtOf(nh)->key_stored) + "/" + std::to_string(ExtOf(nh)->key_len) +
                      " bytes, or its lookup tag or check byte, do not describe a node that fits here";
    } else {
      // Biz id 0 is no error: the engine keeps handoff receipts under it.
      const Location loc = Locate(LocationOf(place_key_, nh));
      if (loc.file != fi || (k != loc.a && k != loc.b)) {
        bad = "node is in a chain its identity does not map to";
        if (rep->misplaced.size() <= fi) rep->misplaced.resize(fi + 1);
        ++rep->misplaced[fi];
      }
    }
    if (!bad.empty()) {
      rep->problems.push_back(slot_at(i) + bad + " (torn or damaged node)");
      // Only the damaged node's own slots, journaled: the nodes around it
      // stay as they are.
      if (repair && journaled(slot_at(i), txn.SaveRange(k, i, span) && SaveTags_locked(f, txn, k, i, span, 0))) {
        for (uint32_t s = 0; s < span; ++s) std::memset(f->slot(k, i + s), 0, kSlotBytes);
        SetTags_locked(f, k, i, span, 0);
        rep->repairs.push_back(slot_at(i) + "cleared the damaged node (" + std::to_string(span) + " slot" +
                               (span > 1 ? "s" : "") + ")");
      }
      return;
    }
    // The same identity twice in one chain (the other chain is checked when visited).
    WalkChain_locked(
        f, k,
        [&](uint32_t j, NodeExtent oe) {
      const NodeHeader* o = HeaderAt(f->slot(k, j));
      if (oe.damaged || o->id != nh->id || o->biz != nh->biz || KindOf(o) != KindOf(nh)) return;
      rep->problems.push_back(slot_at(j) + "duplicate of the node at " + Where(k, i));
      if (repair && journaled(slot_at(j), ClearNode_locked(f, txn, k, j)))
        rep->repairs.push_back(slot_at(j) + "cleared the duplicate");
        },
        i + span);
    ++*nodes;
    *slots += span;
  });
  // The tags must name exactly the nodes the headers describe.
  ChainMap m;
  m.Build(f->slot(k, 0), f->tags(k), geo_.chain);
  uint8_t* tags = f->tags(k);
  for (uint32_t s = 0; s < geo_.chain; ++s) {
    // A damaged node was reported above (and, repairing, cleared with its tags).
    if (m.IsNodeStart(s) && m.IsDamaged(s)) continue;
    const uint8_t want = m.IsNodeStart(s)                ? TagOf(PlaceHashOf(HeaderAt(f->slot(k, s))))
                         : m.start[s] != ChainMap::kFree ? kContTag
                                                         : 0;
    if (tags[s] == want) continue;
    rep->problems.push_back(slot_at(s) + "lookup tag disagrees with the node header");
    if (repair && journaled(slot_at(s), txn.Save(k, kTagsRecord))) {
      StoreTag(tags + s, want);
      rep->repairs.push_back(slot_at(s) + "rewrote the lookup tag");
    }
  }
  txn.Commit();
}

}  // namespace frs::store
