// One node in a chain: finding it by its tag, writing it whole, clearing it,
// its tags, and copying it out (each `_locked`: REQUIRES the chain's lock),
// and what a node's header says (its route, staleness, damage met).
#include <algorithm>
#include <cstring>
#include <string>

#include "frs/ring.h"
#include "store/journal.h"
#include "store/store_impl.h"

namespace frs::store {
namespace {

// Whether a node's tags already read `tag` at its first slot and 0 after.
bool TagsAre(const uint8_t* tags, uint32_t slot, uint32_t span, uint8_t tag) {
  bool same = tags[slot] == tag;
  for (uint32_t k = 1; same && k < span; ++k) same = tags[slot + k] == 0;
  return same;
}

}  // namespace

bool StoreImpl::FindInChain_locked(StoreFile* f, uint32_t keynode, uint16_t biz, const Fingerprint& fp,
                                   uint32_t* slot) const {
  const uint8_t* tags = f->tags(keynode);
  const uint8_t t = TagOf(fp.hi);
  for (uint32_t i = 0; i < geo_.chain; ++i) {
    if (tags[i] != t) continue;
    const NodeHeader* h = HeaderAt(f->slot(keynode, i));
    if (h->fp_lo == fp.lo && h->fp_hi == fp.hi && h->biz == biz && h->key_len != 0) {
      if (ExtentAt(f->slot(keynode, 0), tags, geo_.chain, i).damaged) {
        // Its key acts as absent: nothing is read from or written into a
        // node whose fields cannot be trusted.
        NoteDamage(f, keynode, i);
        continue;
      }
      *slot = i;
      return true;
    }
  }
  return false;
}

bool StoreImpl::SaveTags_locked(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot, uint32_t span,
                                uint8_t tag) {
  // Rewriting a node in place (the common update) leaves its tags as they
  // are: nothing to save.
  return TagsAre(f->tags(keynode), slot, span, tag) || txn.Save(keynode, kTagsRecord);
}

void StoreImpl::SetTags_locked(StoreFile* f, uint32_t keynode, uint32_t slot, uint32_t span, uint8_t tag) {
  uint8_t* tags = f->tags(keynode);
  if (TagsAre(tags, slot, span, tag)) return;
  StoreTag(tags + slot, tag);
  for (uint32_t k = 1; k < span; ++k) StoreTag(tags + slot + k, 0);
}

bool StoreImpl::ClearNode_locked(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot) {
  // The extent the tags vouch for, not the header's span: clearing a
  // damaged node must not clear a neighbour.
  const uint32_t span = ExtentAt(f->slot(keynode, 0), f->tags(keynode), geo_.chain, slot).span;
  if (!txn.SaveRange(keynode, slot, span) || !SaveTags_locked(f, txn, keynode, slot, span, 0)) return false;
  for (uint32_t k = 0; k < span; ++k) std::memset(f->slot(keynode, slot + k), 0, kSlotBytes);
  SetTags_locked(f, keynode, slot, span, 0);
  txn.nodes -= 1;
  txn.slots -= span;
  return true;
}

StoreImpl::RouteMark StoreImpl::RouteFor(const KeyRef& key, const RouteMark* existing) {
  if (key.route_known) return {key.route_pos, true};
  if (existing) return *existing;
  if (!key.bytes.empty() && key.bytes.size() == key.key_len) return {Ring::HashRoute(Ring::RouteOf(key.bytes, {})), true};
  return {};
}

bool StoreImpl::WriteNode_locked(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot, uint32_t span,
                                 const KeyRef& key, RouteMark route, bool alternate, uint8_t heat,
                                 const uint8_t* state, uint32_t state_bytes, const uint8_t* key_bytes,
                                 uint32_t key_stored, uint32_t expire_s, uint32_t now_s) {
  const uint8_t tag = TagOf(key.fp.hi);
  if (!txn.SaveRange(keynode, slot, span) || !SaveTags_locked(f, txn, keynode, slot, span, tag)) return false;
  // Compose the node privately, then copy it in: the slots are contiguous.
  alignas(8) uint8_t img[kMaxSpan * kSlotBytes];
  std::memset(img, 0, span * kSlotBytes);
  NodeHeader* h = HeaderAt(img);
  h->fp_lo = key.fp.lo;
  h->fp_hi = key.fp.hi;
  h->biz = key.biz;
  h->key_len = key.key_len;
  h->span = static_cast<uint8_t>(span);
  h->state_len = static_cast<uint16_t>(state_bytes);
  const uint32_t room = span * kSlotBytes - kNodeHeaderBytes - state_bytes;
  key_stored = std::min(key_stored, room);
  h->key_stored = static_cast<uint8_t>(key_stored);
  h->flags = NodeFlags(alternate, heat);
  h->expire_s = expire_s;
  h->last_access_s = now_s;
  h->route_pos = route.pos;
  h->route_flags = route.known ? kRouteKnown : 0;
  std::memcpy(img + kNodeHeaderBytes, state, state_bytes);
  if (key_stored) std::memcpy(img + kNodeHeaderBytes + state_bytes, key_bytes, key_stored);
  if (hook_) {
    std::memcpy(f->slot(keynode, slot), img, 16);
    hook_(1);
  }
  std::memcpy(f->slot(keynode, slot), img, span * kSlotBytes);
  SetTags_locked(f, keynode, slot, span, tag);
  return true;
}

void StoreImpl::FillInfo_locked(uint32_t file, uint32_t keynode, uint32_t slot, const uint8_t* p,
                                NodeInfo* out) const {
  const NodeHeader* h = HeaderAt(p);
  out->file = file;
  out->keynode = keynode;
  out->slot = slot;
  out->span = h->span;
  out->in_alternate = h->flags & kNodeInAlternate;
  out->biz = h->biz;
  out->fp = Fingerprint{h->fp_lo, h->fp_hi};
  out->key_len = h->key_len;
  const uint32_t cap = std::clamp<uint32_t>(h->span, 1, kMaxSpan) * kSlotBytes - kNodeHeaderBytes;
  const uint32_t sl = std::min<uint32_t>(h->state_len, cap);
  const uint32_t ks = std::min<uint32_t>(h->key_stored, cap - sl);
  out->key.assign(reinterpret_cast<const char*>(p + kNodeHeaderBytes + sl), ks);
  out->expire_s = h->expire_s;
  out->last_access_s = h->last_access_s;
  out->route_pos = h->route_pos;
  out->route_known = (h->route_flags & kRouteKnown) != 0;
  out->state.assign(p + kNodeHeaderBytes, p + kNodeHeaderBytes + sl);
}

bool StoreImpl::IsStale(const NodeHeader* h, uint32_t now_s, const std::vector<bool>& live) {
  return (h->expire_s != 0 && h->expire_s <= now_s) || !live[h->biz];
}

void StoreImpl::NoteDamage(StoreFile* f, uint32_t keynode, uint32_t slot) const {
  if (!opts_.read_only)
    std::atomic_ref<uint64_t>(f->header()->damaged_nodes).fetch_add(1, std::memory_order_relaxed);
  // Logged once per node and process: a lookup meets it on every request.
  const uint64_t where = (uint64_t{keynode} << 8) | slot;
  std::lock_guard<std::mutex> g(damage_mu_);
  if (!damage_logged_.insert({f->path(), where}).second || damage_logged_.size() > 4096) return;
  if (opts_.on_recovery)
    opts_.on_recovery(f->path() + ": keynode " + std::to_string(keynode) + " slot " + std::to_string(slot) +
                      ": damaged node ignored (its key counts as absent; `frsctl verify --repair` clears it)");
}

}  // namespace frs::store
