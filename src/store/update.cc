// Update and UpdateBatch: find the node under its chain lock(s), load what
// the mutator sees (LoadNode_locked), run the mutator, write the result back
// (StoreNode_locked). Both operations share the one load and the one
// write-back; they differ only in how they take their locks and journals.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "store/chain_lock.h"
#include "store/journal.h"
#include "store/node_codec.h"
#include "store/nodes.h"
#include "store/store_impl.h"

namespace frs::store {

StoreImpl::Pos StoreImpl::FindWithA_locked(StoreFile* f, const Location& loc, const NodeKey& nk, LockSet& locks) {
  Pos pos;
  if (FindInChain_locked(f, loc.a, loc.home_a, nk, &pos)) return pos;
  if (loc.a == loc.b) return {};
  if (!locks.Holds(loc.b)) {
    if (loc.b > loc.a) {
      locks.Lock(loc.b);
    } else if (!locks.TryLock(loc.b)) {
      // Keep the global order: release A, take B then A, and look in A again.
      locks.UnlockAll();
      locks.Lock(loc.b);
      locks.Lock(loc.a);
      if (FindInChain_locked(f, loc.a, loc.home_a, nk, &pos)) return pos;
    }
  }
  // A node moves between its chains only under both locks, so a node absent
  // from A and found in B while both are held is really there.
  if (FindInChain_locked(f, loc.b, loc.home_b, nk, &pos)) return pos;
  return {};
}

StoreImpl::Pos StoreImpl::LockAndFind(StoreFile* f, const Location& loc, const NodeKey& nk, LockSet& locks) {
  // A peek at both chains' tags without locks (their misses overlap) says
  // where the node probably is. One that sits in B alone is updated under B's
  // lock alone: a node moves between its chains only under both locks, so
  // finding it in B once B is held is proof. Everything else takes A first.
  const bool one_chain = loc.a == loc.b;
  __builtin_prefetch(f->lock(loc.a), 1, 3);
  // The line of A's head with the check byte of the key's own chain, which
  // a lookup that finds the node there reads next.
  __builtin_prefetch(ChecksOf(f->tags(loc.a), geo_.chain) + loc.home_a, 0, 3);
  if (!one_chain) __builtin_prefetch(f->lock(loc.b), 1, 3);
  Location at = loc;
  if (!one_chain && !HomeTagged(f, loc.a, loc.home_a, nk.tag)) {
    // Most nodes live in their own chain of A (placement.h LessLoaded): a
    // match in that one tag word sends the lookup to A without reading the
    // rest of either group's tags. (Reading A's first 56 tags instead, where
    // best fit puts most multi-slot nodes, was 8 % slower for one-slot
    // nodes and no faster for two-slot ones.) Past that word, A's tags are
    // read before B's: a node of several slots is mostly in A but outside
    // its own chain (best fit, placement.h FreeRunIn), and a match in A
    // ends the peek without reading B's; the lookup in A then begins at
    // that match (it still reads every tag word of A, wrapping round).
    const int in_a = FirstTagged(f->tags(loc.a), geo_.chain, nk.tag);
    if (in_a >= 0) {
      at.home_a = static_cast<uint32_t>(in_a);
    } else if (PeekTag(f, loc.b, nk.tag)) {
      locks.Lock(loc.b);
      Pos pos;
      if (FindInChain_locked(f, loc.b, loc.home_b, nk, &pos)) return pos;
      locks.UnlockAll();
    }
  }
  locks.Lock(loc.a);
  return FindWithA_locked(f, at, nk, locks);
}

void StoreImpl::LoadNode_locked(StoreFile* f, const KeyRef& key, const Pos& pos, uint32_t state_bytes, uint32_t now_s,
                                uint8_t* state, NodeRef* ref, LoadedNode* out) const {
  ref->state = state;
  ref->state_bytes = state_bytes;
  std::memset(state, 0, state_bytes);
  out->pos = pos;
  out->key_stored = static_cast<uint32_t>(key.bytes.size());
  if (!pos.found) return;
  const uint8_t* p = f->slot(pos.keynode, pos.slot);
  const NodeHeader* h = HeaderAt(p);
  ref->exists = true;
  ref->expire_s = h->expire_s;
  ReadNodeState(p, state, state_bytes, &ref->stored_state_bytes);
  out->old_span = pos.span;  // measured by FindInChain_locked, under this lock
  out->heat = NextHeat(HeatOf(h), h->last_access_s, now_s);
  out->route = {h->route_pos, (h->form & kRouteKnown) != 0};
  if (!IsCompact(h) && key.bytes.size() < ExtOf(h)->key_stored) {
    // An import by fingerprint: keep the key bytes the node already has.
    uint8_t key_len = 0;
    out->keep_key = true;
    out->key_stored = ReadNodeKey(p, out->kept_key, &key_len);
  }
}

StoreImpl::WriteBack StoreImpl::StoreNode_locked(StoreFile* f, Txn& txn, const Location& loc, const NodeKey& nk,
                                                 const KeyRef& key, const LoadedNode& node, const NodeRef& ref,
                                                 uint32_t now_s, LockSet& locks, Pins* pins, UpdateResult* r) {
  const Pos& pos = node.pos;
  const RouteMark route = RouteFor(key, pos.found ? &node.route : nullptr);
  // The node's form (compact or general) and so its span follow from what
  // the mutator left: composed first, then placed.
  NodeImage img;
  ComposeNode(nk, key, route, node.heat, ref.state, ref.state_bytes, node.key_bytes(key), node.key_stored, ref.expire_s,
              now_s, &img);
  const uint32_t span = img.span;
  if (pos.found) {
    // In place: the node shrinks, keeps its size, or grows into free slots
    // right after it.
    bool fits = span <= node.old_span;
    if (!fits) {
      ChainMap m;
      m.Build(f->slot(pos.keynode, 0), f->tags(pos.keynode), geo_.chain);
      fits = pos.slot + span <= geo_.chain;
      for (uint32_t k = pos.slot + node.old_span; fits && k < pos.slot + span; ++k)
        fits = m.start[k] == ChainMap::kFree;
    }
    if (fits) {
      if (span < node.old_span) {
        // The slots it gives back become free: zeroed, and their
        // continuation tags cleared.
        const uint32_t freed = node.old_span - span;
        if (!txn.SaveRange(pos.keynode, pos.slot + span, freed) ||
            !SaveTags_locked(f, txn, pos.keynode, pos.slot + span, freed, 0))
          return WriteBack::kJournalFull;
        for (uint32_t k = span; k < node.old_span; ++k) std::memset(f->slot(pos.keynode, pos.slot + k), 0, kSlotBytes);
        SetTags_locked(f, pos.keynode, pos.slot + span, freed, 0);
      }
      if (!WriteNode_locked(f, txn, pos.keynode, pos.slot, img, pos.keynode != loc.a)) return WriteBack::kJournalFull;
      txn.slots += static_cast<int64_t>(span) - node.old_span;
      return WriteBack::kWritten;
    }
    // Moving it may take the other chain: both must be held.
    if (loc.a != loc.b && !(locks.Holds(loc.a) && locks.Holds(loc.b))) return WriteBack::kNeedBothLocks;
    if (!ClearNode_locked(f, txn, pos.keynode, pos.slot)) return WriteBack::kJournalFull;
    if (pins) std::erase(*pins, std::make_pair(pos.keynode, pos.slot));
  }
  const Placement pl = placer_.Place_locked(f, txn, loc, span, now_s, locks, pins, r);
  if (pl.journal_full) return WriteBack::kJournalFull;
  if (!pl.ok) return WriteBack::kNoRoom;
  if (!WriteNode_locked(f, txn, pl.keynode, pl.slot, img, pl.keynode != loc.a)) return WriteBack::kJournalFull;
  if (pins) pins->emplace_back(pl.keynode, pl.slot);
  if (r && !pos.found) r->created = true;
  txn.nodes += 1;
  txn.slots += span;
  return WriteBack::kWritten;
}

Status StoreImpl::Update(const KeyRef& key, uint32_t state_bytes, uint32_t now_s, const Mutator& fn,
                         UpdateResult* result) {
  if (opts_.read_only) return ReadOnly();
  // A file that is gone is not touched; one that broke during the operation
  // (its mapping replaced with zero pages by the SIGBUS guard) makes the
  // operation fail rather than be acknowledged.
  const NodeKey nk = NodeKeyOf(key);  // once per update: its identity and place
  StoreFile* f = files_[FileOf(nk.place, geo_)].get();
  if (f->broken()) return FileUsable(f);
  Status s = UpdateImpl(key, nk, state_bytes, now_s, fn, result);
  if (f->broken()) return FileUsable(f);
  return s;
}

Status StoreImpl::UpdateImpl(const KeyRef& key, const NodeKey& nk, uint32_t state_bytes, uint32_t now_s,
                             const Mutator& fn, UpdateResult* result) {
  if (Status s = CheckRequest(key, state_bytes); !s.ok()) return s;
  const Location loc = Locate(nk.place);
  StoreFile* f = files_[loc.file].get();
  UpdateResult local;
  UpdateResult* r = result ? result : &local;
  *r = UpdateResult{};

  alignas(8) uint8_t state[kMaxSpan * kSlotBytes];
  LockSet locks(locks_, f);
  Pos pos = LockAndFind(f, loc, nk, locks);
  for (;;) {
    NodeRef ref;
    LoadedNode node;
    LoadNode_locked(f, key, pos, state_bytes, now_s, state, &ref, &node);
    r->found = pos.found;

    const Commit c = fn(ref);
    if (hook_) hook_(0);

    if (c == Commit::kNone) {
      if (pos.found) Touch_locked(HeaderAt(f->slot(pos.keynode, pos.slot)), node.heat, now_s);
      return Status::OK();
    }
    {
      // Declared after the LockSet: an early return or an exception rolls
      // back under the locks.
      Txn txn(writers_, loc.file);
      if (!txn.Open()) return WritersBusy(f);
      if (c == Commit::kErase) {
        if (pos.found && !ClearNode_locked(f, txn, pos.keynode, pos.slot)) return JournalFull(f);
        txn.Commit();
        return Status::OK();
      }
      switch (StoreNode_locked(f, txn, loc, nk, key, node, ref, now_s, locks, nullptr, r)) {
        case WriteBack::kWritten: txn.Commit(); return Status::OK();
        case WriteBack::kNoRoom: return Status::Busy("no room in the key's chains");
        case WriteBack::kJournalFull: return JournalFull(f);
        case WriteBack::kNeedBothLocks: break;  // nothing was written
      }
    }
    // Growing needs the other chain too: take both in order and look again.
    locks.UnlockAll();
    locks.Lock(std::min(loc.a, loc.b));
    locks.Lock(std::max(loc.a, loc.b));
    pos = FindWithA_locked(f, loc, nk, locks);
  }
}

Status StoreImpl::UpdateBatch(std::span<const BatchItem> items, uint32_t now_s, const BatchMutator& fn,
                              std::vector<UpdateResult>* results) {
  if (opts_.read_only) return ReadOnly();
  const size_t n = items.size();
  if (n > kMaxBatch) return Status::InvalidArgument("a batch holds at most " + std::to_string(kMaxBatch) + " members");
  // Each member's identity and place, once.
  std::vector<NodeKey> nks(n);
  std::vector<Location> locs(n);
  for (size_t i = 0; i < n; ++i) {
    nks[i] = NodeKeyOf(items[i].key);
    locs[i] = Locate(nks[i].place);
  }
  for (const Location& l : locs)
    if (Status s = FileUsable(files_[l.file].get()); !s.ok()) return s;
  Status s = UpdateBatchImpl(items, nks, locs, now_s, fn, results);
  for (const Location& l : locs)
    if (StoreFile* f = files_[l.file].get(); f->broken()) return FileUsable(f);
  return s;
}

Status StoreImpl::ClaimAndLockBatch(std::span<const Location> locs, std::vector<BatchWriterClaim>& claims,
                                    std::vector<std::unique_ptr<LockSet>>& lockset) {
  // A batch entry of every file the batch touches, claimed in file order
  // before any chain lock: waiting for one while holding locks could wait on
  // a batch that waits for those locks.
  std::vector<uint32_t> files;
  for (const Location& l : locs) files.push_back(l.file);
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  for (uint32_t file : files)
    if (!claims[file].Claim(writers_, file)) return WritersBusy(files_[file].get());
  // Every chain of every member, per file, locked in (file, key-node) order.
  std::vector<std::pair<uint32_t, uint32_t>> chains;
  for (const Location& l : locs) {
    chains.emplace_back(l.file, l.a);
    chains.emplace_back(l.file, l.b);
  }
  std::sort(chains.begin(), chains.end());
  chains.erase(std::unique(chains.begin(), chains.end()), chains.end());
  for (auto& [file, k] : chains) {
    if (!lockset[file]) lockset[file] = std::make_unique<LockSet>(locks_, files_[file].get());
    lockset[file]->Lock(k);
  }
  return Status::OK();
}

void StoreImpl::MergeSharedCommits(std::span<const size_t> owner, std::span<NodeRef> refs, std::span<Commit> commits) {
  // Shared members: the owner's node takes the strongest commit asked of it.
  for (size_t i = 0; i < owner.size(); ++i) {
    if (owner[i] == i) continue;
    refs[owner[i]].expire_s = refs[i].expire_s;
    if (commits[i] == Commit::kWrite || (commits[i] == Commit::kErase && commits[owner[i]] == Commit::kNone))
      commits[owner[i]] = commits[i];
  }
}

Status StoreImpl::UpdateBatchImpl(std::span<const BatchItem> items, std::span<const NodeKey> nks,
                                  std::span<const Location> locs, uint32_t now_s, const BatchMutator& fn,
                                  std::vector<UpdateResult>* results) {
  const size_t n = items.size();
  if (n == 0) return Status::OK();
  for (size_t i = 0; i < n; ++i)
    if (Status s = CheckRequest(items[i].key, items[i].state_bytes); !s.ok()) return s;
  // Claimed, then locked; the lock sets declared after the claims, so that
  // they unlock before the entries go back.
  std::vector<BatchWriterClaim> claims(files_.size());
  std::vector<std::unique_ptr<LockSet>> lockset(files_.size());
  if (Status s = ClaimAndLockBatch(locs, claims, lockset); !s.ok()) return s;

  // Find and load each member; members naming one node share the first
  // one's buffer (owner[i] is that first member), read with the most bytes
  // any of them asks (a later member's reservation table is the node's).
  std::vector<size_t> owner(n);
  std::vector<uint32_t> asked(n);
  std::vector<NodeRef> refs(n);
  std::vector<Commit> commits(n, Commit::kNone);
  std::vector<std::array<uint8_t, kMaxSpan * kSlotBytes>> bufs(n);
  std::vector<LoadedNode> nodes(n);
  for (size_t i = 0; i < n; ++i) {
    owner[i] = i;
    for (size_t j = 0; j < i; ++j)
      if (nks[j].biz == nks[i].biz && nks[j].ident == nks[i].ident) {
        owner[i] = j;
        break;
      }
    asked[owner[i]] = std::max(asked[owner[i]], items[i].state_bytes);
  }
  for (size_t i = 0; i < n; ++i) {
    if (owner[i] != i) {
      refs[i] = refs[owner[i]];
      continue;
    }
    StoreFile* f = files_[locs[i].file].get();
    const Pos pos = FindWithA_locked(f, locs[i], nks[i], *lockset[locs[i].file]);  // both chains are held
    LoadNode_locked(f, items[i].key, pos, asked[i], now_s, bufs[i].data(), &refs[i], &nodes[i]);
  }
  fn(std::span<NodeRef>(refs), std::span<Commit>(commits));
  if (hook_) hook_(0);
  MergeSharedCommits(owner, refs, commits);
  if (results) results->assign(n, UpdateResult{});

  // Declared after the lock sets: whatever returns (or throws) before the
  // commit below rolls every file back, under the locks.
  std::vector<std::unique_ptr<Txn>> txns(files_.size());
  auto txn_for = [&](uint32_t file) -> Txn& {
    if (!txns[file]) txns[file] = std::make_unique<Txn>(writers_, file, claims[file].entry());
    return *txns[file];
  };
  // A batch across files is one transaction: every file's journal is opened
  // now, in file order, and joins the batch before anything is written; the
  // first is its coordinator (see WriterEntryHeader).
  std::vector<uint32_t> batch_files;
  for (size_t i = 0; i < n; ++i)
    if (owner[i] == i && commits[i] != Commit::kNone) batch_files.push_back(locs[i].file);
  std::sort(batch_files.begin(), batch_files.end());
  batch_files.erase(std::unique(batch_files.begin(), batch_files.end()), batch_files.end());
  uint64_t batch_no = 0;
  if (batch_files.size() > 1) {
    static std::atomic<uint64_t> batches{0};
    batch_no = (os::Self().word() * 0x9E3779B97F4A7C15ull) ^ (batches.fetch_add(1) + 1);
    if (batch_no == 0) batch_no = 1;
    for (uint32_t file : batch_files)
      if (!txn_for(file).Open()) return WritersBusy(files_[file].get());
    const uint32_t coord_file = batch_files.front();
    const uint32_t coord_entry = txns[coord_file]->entry_index();
    for (uint32_t file : batch_files) txns[file]->JoinBatch(batch_no, coord_file, coord_entry);
  }
  // Nodes found or placed by this batch must survive its later insertions.
  Pins pins;
  for (size_t i = 0; i < n; ++i)
    if (owner[i] == i && nodes[i].pos.found) pins.emplace_back(nodes[i].pos.keynode, nodes[i].pos.slot);

  for (size_t i = 0; i < n; ++i) {
    if (owner[i] != i) continue;
    StoreFile* f = files_[locs[i].file].get();
    Txn& txn = txn_for(locs[i].file);
    if (!txn.Open()) return WritersBusy(f);
    const Pos& pos = nodes[i].pos;
    UpdateResult* r = results ? &(*results)[i] : nullptr;
    if (r) r->found = pos.found;
    if (commits[i] == Commit::kNone) {
      if (pos.found) Touch_locked(HeaderAt(f->slot(pos.keynode, pos.slot)), nodes[i].heat, now_s);
      continue;
    }
    if (commits[i] == Commit::kErase) {
      if (pos.found && !ClearNode_locked(f, txn, pos.keynode, pos.slot)) return JournalFull(f);
      continue;
    }
    // Every slot touched so far is put back if a member fails: the batch is
    // all or nothing. (Both chains of every member are held, so
    // kNeedBothLocks cannot happen.)
    switch (StoreNode_locked(f, txn, locs[i], nks[i], items[i].key, nodes[i], refs[i], now_s, *lockset[locs[i].file],
                             &pins, r)) {
      case WriteBack::kWritten: break;
      case WriteBack::kJournalFull: return JournalFull(f);
      case WriteBack::kNoRoom:
      case WriteBack::kNeedBothLocks: return Status::Busy("the batch's members crowd one chain; nothing was recorded");
    }
  }
  if (batch_no != 0) {
    // Every file is written. One store commits the whole batch; then the
    // participants close their journals, then the coordinator. A death
    // before the commit point undoes every file; after it, keeps every file.
    if (hook_) hook_(2);
    txns[batch_files.front()]->MarkCommitted(batch_no);
    if (hook_) hook_(3);
    for (size_t k = 1; k < batch_files.size(); ++k) txns[batch_files[k]]->Commit();
    if (hook_) hook_(4);
  }
  // The coordinator last (the others are already closed), and the journals
  // of files that only had reads.
  for (auto& t : txns)
    if (t) t->Commit();
  return Status::OK();
}

}  // namespace frs::store
