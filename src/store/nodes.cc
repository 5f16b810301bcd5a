// One node in a chain: finding it by its tag, writing it whole, clearing it,
// its tags, and copying it out (each `_locked`: REQUIRES the chain's lock),
// and what a node's header says (its route, staleness, damage met).
#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "frs/ring.h"
#include "store/journal.h"
#include "store/node_codec.h"
#include "store/nodes.h"
#include "store/packed_state.h"
#include "store/store_impl.h"

namespace frs::store {

// Node images are little-endian (format.h); so is every machine this builds for.
static_assert(std::endian::native == std::endian::little);

namespace {

// Whether a node's tags already read `tag` at its first slot and kContTag
// after (a cleared node: 0 at every slot).
bool TagsAre(const uint8_t* tags, uint32_t slot, uint32_t span, uint8_t tag) {
  bool same = tags[slot] == tag;
  const uint8_t cont = tag == 0 ? 0 : kContTag;
  for (uint32_t k = 1; same && k < span; ++k) same = tags[slot + k] == cont;
  return same;
}

}  // namespace

StoreImpl::NodeKey StoreImpl::NodeKeyOf(const KeyRef& key) const {
  NodeKey k;
  k.biz = key.biz;
  k.ident = IdentityOf(key);
  const uint64_t unkeyed = key.prepared ? key.place : PlaceHash(key.biz, k.ident);
  k.tag = TagOf(unkeyed);
  k.place =
      key.prepared && key.located_by == instance_ ? key.location : LocationHash(place_key_, key.biz, k.ident, unkeyed);
  return k;
}

void StoreImpl::LocateKey(KeyRef* key) const {
  if (!key->prepared) return;  // its identity is not fixed: derived at each look
  key->location = NodeKeyOf(*key).place;
  key->located_by = instance_;
}

bool StoreImpl::FindInChain_locked(StoreFile* f, uint32_t keynode, uint32_t home, const NodeKey& nk, Pos* pos) const {
  const uint8_t* tags = f->tags(keynode);
  const uint8_t kind = static_cast<uint8_t>(nk.ident.form);
  return ForEachTaggedFrom(tags, geo_.chain, home, nk.tag, [&](uint32_t i) {
    const NodeHeader* h = HeaderAt(f->slot(keynode, i));
    if (h->id != nk.ident.id || h->biz != nk.biz || KindOf(h) != kind) return false;
    // Identity, biz and form matched the key, whose tag tags[i] is: the
    // node's own tag, which the extent check need not hash again.
    const NodeExtent e = ExtentAt(f->slot(keynode, 0), tags, geo_.chain, i, /*tag_is_its_own=*/true);
    if (e.damaged) {
      // Its key acts as absent: nothing is read from or written into a
      // node whose fields cannot be trusted.
      NoteDamage(f, keynode, i);
      return false;
    }
    *pos = {keynode, i, true, e.span};
    return true;
  });
}

bool SaveTags_locked(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot, uint32_t span, uint8_t tag) {
  // Rewriting a node in place (the common update) leaves its tags as they
  // are: nothing to save. (Its check byte is saved with its slot's record.)
  return TagsAre(f->tags(keynode), slot, span, tag) || txn.Save(keynode, kTagsRecord);
}

void SetTags_locked(StoreFile* f, uint32_t keynode, uint32_t slot, uint32_t span, uint8_t tag) {
  uint8_t* tags = f->tags(keynode);
  uint8_t* checks = ChecksOf(tags, f->chain());
  // The node is written: its check follows from it (a cleared one has none).
  const uint8_t check = tag == 0 ? 0 : NodeCheck(f->slot(keynode, slot), span);
  if (checks[slot] != check) checks[slot] = check;
  for (uint32_t k = 1; k < span; ++k)
    if (checks[slot + k] != 0) checks[slot + k] = 0;
  if (TagsAre(tags, slot, span, tag)) return;
  StoreTag(tags + slot, tag);
  for (uint32_t k = 1; k < span; ++k) StoreTag(tags + slot + k, tag == 0 ? 0 : kContTag);
}

bool ClearNode_locked(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot) {
  // The extent the tags vouch for, not the header's span: clearing a
  // damaged node must not clear a neighbour.
  const uint32_t span = ExtentAt(f->slot(keynode, 0), f->tags(keynode), f->chain(), slot).span;
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
  if (!key.bytes.empty() && key.bytes.size() == key.key_len)
    return {Ring::HashRoute(Ring::RouteOf(key.bytes, {})), true};
  return {};
}

void StoreImpl::ComposeNode(const NodeKey& nk, const KeyRef& key, RouteMark route, uint8_t heat, const uint8_t* state,
                            uint32_t state_bytes, const uint8_t* key_bytes, uint32_t key_avail, uint32_t expire_s,
                            uint32_t now_s, NodeImage* out) {
  NodeHeader* h = HeaderAt(out->bytes);
  std::memset(out->bytes, 0, kSlotBytes);
  h->id = nk.ident.id;
  h->biz = nk.biz;
  h->heat_kind = static_cast<uint8_t>((heat & kMaxHeat) | static_cast<uint8_t>(nk.ident.form) << 6);
  h->expire_s = expire_s;
  h->last_access_s = now_s;
  h->route_pos = route.pos;
  const uint8_t route_bit = route.known ? kRouteKnown : 0;
  out->tag = nk.tag;
  // A one-rule state whose key need not be kept packs into the header's
  // slot: 32 bytes per key (packed_state.h says which states pack).
  uint64_t word = 0;
  if (state_bytes == kCompactStateBytes && !key.keep_key &&
      PackState(std::span<const uint8_t, kCompactStateBytes>(state, kCompactStateBytes), expire_s, &word)) {
    h->form = static_cast<uint8_t>(1 | kFormCompact | route_bit);
    std::memcpy(out->bytes + kNodeHeaderBytes, &word, 8);  // little-endian, as the file
    out->span = 1;
    return;
  }
  // A general node: the slots its state needs, or, for a key to keep whole,
  // those its key needs too; the key bytes fill what room is left.
  const uint32_t must_keep = key.keep_key ? key_avail : 0;
  const uint32_t span = NodeSlots(state_bytes, must_keep);
  const uint32_t room = span * kSlotBytes - kGeneralHeaderBytes - state_bytes;
  const uint32_t key_stored = std::min(key_avail, room);
  std::memset(out->bytes + kSlotBytes, 0, (span - 1) * kSlotBytes);
  h->form = static_cast<uint8_t>(span | route_bit);
  GeneralExt* x = reinterpret_cast<GeneralExt*>(out->bytes + kNodeHeaderBytes);
  x->state_len = static_cast<uint16_t>(state_bytes);
  x->key_len = key.key_len;
  x->key_stored = static_cast<uint8_t>(key_stored);
  std::memcpy(out->bytes + kGeneralHeaderBytes, state, state_bytes);
  if (key_stored) std::memcpy(out->bytes + kGeneralHeaderBytes + state_bytes, key_bytes, key_stored);
  out->span = span;
}

bool StoreImpl::WriteNode_locked(StoreFile* f, Txn& txn, uint32_t keynode, uint32_t slot, NodeImage& img,
                                 bool alternate) {
  const uint32_t span = img.span;
  if (!txn.SaveRange(keynode, slot, span) || !SaveTags_locked(f, txn, keynode, slot, span, img.tag)) return false;
  NodeHeader* h = HeaderAt(img.bytes);
  h->form = static_cast<uint8_t>((h->form & ~kNodeInAlternate) | (alternate ? kNodeInAlternate : 0));
  if (hook_) {
    std::memcpy(f->slot(keynode, slot), img.bytes, 16);
    hook_(1);
  }
  std::memcpy(f->slot(keynode, slot), img.bytes, span * kSlotBytes);
  SetTags_locked(f, keynode, slot, span, img.tag);
  return true;
}

void StoreImpl::FillInfo_locked(uint32_t file, uint32_t keynode, uint32_t slot, const uint8_t* p, NodeInfo* out) const {
  DecodeNode(p, out);
  const UserPos up = UserPosOf(keynode, slot);
  out->file = file;
  out->keynode = up.keynode;
  out->slot = up.slot;
}

void StoreImpl::NoteDamage(StoreFile* f, uint32_t keynode, uint32_t slot) const {
  if (!opts_.read_only) std::atomic_ref<uint64_t>(f->header()->damaged_nodes).fetch_add(1, std::memory_order_relaxed);
  // Logged once per node while this store is open (the first 4096): a
  // lookup meets it on every request.
  const uint64_t where = (uint64_t{keynode} << 8) | slot;
  MutexLock g(&damage_mu_);
  if (!damage_logged_.insert({f->path(), where}).second || damage_logged_.size() > 4096) return;
  if (opts_.on_recovery)
    opts_.on_recovery(f->path() + ": " + Where(keynode, slot) +
                      ": damaged node ignored (its key counts as absent; `frsctl verify --repair` clears it)");
}

}  // namespace frs::store
