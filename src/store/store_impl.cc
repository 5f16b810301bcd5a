// StoreImpl: construction, and the operations small enough to need no file
// of their own (Get, Erase, Stats, Flush, Reserve, CheckFiles, the live
// bizzes, request checks, the statuses every part returns). The rest of the
// class is spread by concept; store_impl.h has the map.
#include "store/store_impl.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "store/chain_lock.h"
#include "store/test_hooks.h"

namespace frs::store {

namespace {
// A number per opened store for as long as the process lives: a KeyRef
// located by a store closed since never matches the one opened after it,
// whatever address that one has.
uint64_t NextInstance() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

StoreImpl::StoreImpl(StoreOptions opts, std::vector<std::unique_ptr<StoreFile>> files)
    : opts_(std::move(opts)),
      user_geo_(opts_.geometry),
      group_(KeynodeGroup(user_geo_)),
      geo_(GroupGeometry(user_geo_)),
      files_(std::move(files)),
      writers_(files_, geo_, opts_),
      locks_(files_, geo_, writers_, opts_),
      placer_(user_geo_),
      place_key_(files_.front()->place_key()),
      instance_(NextInstance()) {}

StoreImpl::~StoreImpl() = default;

void StoreImpl::SetLiveBizzes(std::vector<bool> live) { placer_.SetLiveBizzes(std::move(live)); }

Result<uint32_t> StoreImpl::RecoverDeadOwner(int32_t pid) {
  if (pid > 0 && opts_.read_only) return ReadOnly();
  return locks_.ReleaseDeadOwner(pid);
}

Status StoreImpl::CheckRequest(const KeyRef& key, uint32_t state_bytes) const {
  // key_len 0 with no bytes: an import by fingerprint of a node that did not
  // keep its key (its identity is key.fp.lo).
  if (key.bytes.size() > key.key_len) return Status::InvalidArgument("key bytes longer than key_len");
  if (key.key_len == 0 && key.keep_key) return Status::InvalidArgument("key is empty");
  if (state_bytes > kMaxStateBytes)
    return Status::InvalidArgument("node state of " + std::to_string(state_bytes) + " bytes exceeds the maximum " +
                                   std::to_string(kMaxStateBytes));
  // The narrowest node this request may make: a compact one when the state
  // may pack, else a general one keeping what it must. A state that turns
  // out not to pack in chains too short for it finds no room (Busy); the
  // configuration check (BizConfig::NodeSlotsNeeded) keeps that from
  // happening to the bizzes whose states always pack.
  const bool may_pack = state_bytes == kCompactStateBytes && !key.keep_key;
  const uint32_t span = may_pack ? 1 : NodeSlots(state_bytes, key.keep_key ? key.key_len : 0);
  if (span > geo_.chain)
    return Status::InvalidArgument(
        "a node of " + std::to_string(state_bytes) + " state bytes" +
        (key.keep_key ? " and a kept key of " + std::to_string(key.key_len) + " bytes" : "") + " needs " +
        std::to_string(span) + " slots but key-node groups hold " + std::to_string(geo_.chain));
  return Status::OK();
}

std::string StoreImpl::Where(uint32_t group, uint32_t slot) const {
  const UserPos p = UserPosOf(group, slot);
  return "keynode " + std::to_string(p.keynode) + " slot " + std::to_string(p.slot);
}

Status StoreImpl::FileUsable(const StoreFile* f) {
  if (!f->broken()) return Status::OK();
  // Why a page of it could not be had: the file gone or cut short (those
  // texts are CheckStillThere's), or a page of a file with holes that its
  // full file system could not back: nothing is lost then, and room is the
  // cure.
  if (Status s = f->CheckStillThere(); !s.ok()) return s;
  Result<uint64_t> holes = f->BytesToReserve();
  struct statvfs vfs;
  if (holes.ok() && holes.value() > 0 && ::statvfs(f->path().c_str(), &vfs) == 0 && vfs.f_bavail == 0)
    return Status::Unavailable(f->path() +
                               ": no space left on its file system for a page of this file, which is not fully "
                               "allocated (frsd allocates a store when it starts; frsctl init does too); nothing "
                               "was recorded, and a lock this process held is recovered by its next user once this "
                               "process has ended (until then, a chain it held waits): free space, then run frsctl "
                               "again or restart what uses the store (this process no longer reads the file)");
  return Status::Unavailable(f->path() +
                             ": a page of it could not be read or written while in use (an I/O error, a quota, "
                             "or space since freed); nothing was recorded: check the disk, then restart what uses "
                             "the store");
}

Status StoreImpl::CheckFiles() {
  Status first;
  for (const auto& f : files_) {
    if (f->broken()) {
      if (first.ok()) first = FileUsable(f.get());
      continue;
    }
    if (Status s = f->CheckStillThere(); !s.ok() && first.ok()) first = s;
  }
  return first;
}

Status StoreImpl::ReadOnly() const {
  return Status::Unavailable(opts_.dir +
                             ": the store is open read-only (its file system is read-only, or this user "
                             "may not write it); nothing was changed");
}

void StoreImpl::Prefetch(const KeyRef& key, Prefetching what) const {
  const NodeKey nk = NodeKeyOf(key);
  const Location loc = Locate(nk.place);
  const StoreFile* f = files_[loc.file].get();
  if (f->broken()) return;
  if (what == Prefetching::kNodes) return PrefetchNodes(f, loc, nk.tag);
  PrefetchHeads(f, loc);
  if (what == Prefetching::kHeadsAndChain) {
    // The key's own chain in its group, where its node is unless that
    // chain was full when it was placed.
    const uint8_t* first = f->slot(loc.a, loc.home_a);
    const uint8_t* end = first + size_t{user_geo_.chain} * kSlotBytes;
    for (const uint8_t* p = first; p < end; p += 64) __builtin_prefetch(p, 0, 3);
    __builtin_prefetch(end - 1, 0, 3);  // a chain that starts mid-line ends in one more
  }
}

void StoreImpl::PrefetchHeads(const StoreFile* f, const Location& loc) const {
  // A group's head is up to three lines: the lock word and 56 tags, then
  // the last tags and the check bytes of slots 0..55 (read once a tag
  // matches), then the rest of the check bytes. A's first two, B's first.
  __builtin_prefetch(f->lock(loc.a), 0, 3);
  __builtin_prefetch(reinterpret_cast<const uint8_t*>(f->lock(loc.a)) + 64, 0, 3);
  __builtin_prefetch(f->lock(loc.b), 0, 3);
}

void StoreImpl::PrefetchNodes(const StoreFile* f, const Location& loc, uint8_t tag) const {
  // The tags are a hint read without the lock, as PeekTag reads them.
  for (const uint32_t k : {loc.a, loc.b}) {
    ForEachTagged(f->tags(k), geo_.chain, tag, [&](uint32_t i) {
      __builtin_prefetch(f->slot(k, i), 0, 3);
      return false;
    });
  }
}

Result<NodeInfo> StoreImpl::Get(const KeyRef& key) {
  const NodeKey nk = NodeKeyOf(key);
  const Location loc = Locate(nk.place);
  StoreFile* f = files_[loc.file].get();
  if (Status s = FileUsable(f); !s.ok()) return s;
  LockSet locks(locks_, f);
  locks.Lock(loc.a);
  const Pos pos = FindWithA_locked(f, loc, nk, locks);
  NodeInfo info;
  if (pos.found) FillInfo_locked(loc.file, pos.keynode, pos.slot, f->slot(pos.keynode, pos.slot), &info);
  // The SIGBUS guard may have replaced the mapping during the lookup (or the
  // lock takeover before it): its zero pages are no answer, and "no such
  // node" would call a counted key new (frsctl explain: allowed).
  if (f->broken()) return FileUsable(f);
  if (!pos.found) return Status::NotFound("no such node");
  return info;
}

Status StoreImpl::Erase(const KeyRef& key) {
  bool found = false;
  Status s = Update(
      key, 0, 0,
      [&](NodeRef& n) {
    found = n.exists;
    return n.exists ? Commit::kErase : Commit::kNone;
      },
      nullptr);
  if (!s.ok()) return s;
  return found ? Status::OK() : Status::NotFound("no such node");
}

StoreStats StoreImpl::Stats() const {
  StoreStats s;
  s.geometry = user_geo_;
  s.slots = geo_.slots();
  for (const auto& f : files_) {
    s.bytes_mapped += f->bytes();
    AddCounters(CountersOf(*f->header()), &s);
  }
  return s;
}

Status StoreImpl::WritersBusy(StoreFile* f) {
  return Status::Busy(f->path() + ": all " + std::to_string(kWriterEntries) + " writer entries (or all " +
                      std::to_string(kBatchEntries) + " batch entries) are held by live threads; nothing was written");
}

Status StoreImpl::JournalFull(StoreFile* f) {
  return Status::Busy(f->path() + ": the undo journal of this write is full; nothing was written");
}

Status StoreImpl::Reserve() {
  if (opts_.read_only) return ReadOnly();
  // frsd calls this once, at start, and frsctl init on a store it has just
  // made, when no other process can have it open: a writer that was killed
  // while it waited for a writer entry left its count in the header, which
  // would make every holder hand its entry back after each write until
  // cleared.
  for (const auto& f : files_)
    std::atomic_ref<uint64_t>(f->header()->writer_waiters).store(0, std::memory_order_relaxed);
  // Compare first, allocate after: on a disk too small, nothing is allocated
  // (before, a failed start left ext4 100 % full).
  uint64_t need = 0;
  for (const auto& f : files_) {
    Result<uint64_t> n = f->BytesToReserve();
    if (!n.ok()) return n.status();
    need += n.value();
  }
  if (need > 0) {
    struct statvfs vfs;
    if (::statvfs(opts_.dir.c_str(), &vfs) != 0) return Status::FromErrno(opts_.dir + ": statvfs", errno);
    const uint64_t avail = uint64_t{vfs.f_bavail} * vfs.f_frsize;
    if (need > avail)
      return Status::Unavailable(opts_.dir + ": the store needs " + std::to_string(need) +
                                 " more bytes on its disk and only " + std::to_string(avail) +
                                 " are free; nothing was allocated (free space, or a smaller <store> geometry)");
  }
  for (const auto& f : files_)
    if (Status s = f->Reserve(); !s.ok()) return s;
  return Status::OK();
}

void SetTestHookInCriticalSection(Store* store, std::function<void(int phase)> hook) {
  auto* impl = dynamic_cast<StoreImpl*>(store);
  if (!impl) std::abort();  // a test handed in a store that Store::Open did not make
  impl->SetTestHook(std::move(hook));
}

Status StoreImpl::Flush(bool sync) {
  for (const auto& f : files_)
    if (Status s = f->Sync(sync); !s.ok()) return s;
  return Status::OK();
}

}  // namespace frs::store
