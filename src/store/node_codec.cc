// The node codec's reading side (node_codec.h).
#include "store/node_codec.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>

#include "store/chain_map.h"
#include "store/packed_state.h"

namespace frs::store {

void ReadNodeState(const uint8_t* p, uint8_t* state, uint32_t state_bytes, uint32_t* stored_bytes) {
  const NodeHeader* h = HeaderAt(p);
  if (IsCompact(h)) {
    uint64_t word = 0;
    std::memcpy(&word, p + kNodeHeaderBytes, 8);
    alignas(8) uint8_t block[kCompactStateBytes];
    UnpackState(word, h->expire_s, std::span<uint8_t, kCompactStateBytes>(block, kCompactStateBytes));
    std::memcpy(state, block, std::min(state_bytes, kCompactStateBytes));
    *stored_bytes = kCompactStateBytes;
    return;
  }
  const GeneralExt* x = ExtOf(h);
  std::memcpy(state, p + kGeneralHeaderBytes, std::min<uint32_t>(x->state_len, state_bytes));
  *stored_bytes = x->state_len;
}

uint32_t ReadNodeKey(const uint8_t* p, uint8_t* key, uint8_t* key_len) {
  const NodeHeader* h = HeaderAt(p);
  const Identity ident = IdentityOfNode(h);
  if (ident.form != KeyForm::kHashed) {
    const std::string text = TextOf(ident);
    std::memcpy(key, text.data(), text.size());
    *key_len = static_cast<uint8_t>(text.size());
    return static_cast<uint32_t>(text.size());
  }
  if (IsCompact(h)) {
    *key_len = 0;
    return 0;
  }
  const GeneralExt* x = ExtOf(h);
  const uint32_t cap = std::clamp<uint32_t>(SpanOf(h), 1, kMaxSpan) * kSlotBytes - kGeneralHeaderBytes;
  const uint32_t sl = std::min<uint32_t>(x->state_len, cap);
  const uint32_t ks = std::min<uint32_t>(x->key_stored, cap - sl);
  std::memcpy(key, p + kGeneralHeaderBytes + sl, ks);
  *key_len = x->key_len;
  return ks;
}

void DecodeNode(const uint8_t* p, NodeInfo* out) {
  const NodeHeader* h = HeaderAt(p);
  out->span = SpanOf(h);
  out->in_alternate = (h->form & kNodeInAlternate) != 0;
  out->compact = IsCompact(h);
  out->biz = h->biz;
  uint8_t key[kMaxKeyBytes];
  const uint32_t ks = ReadNodeKey(p, key, &out->key_len);
  out->key.assign(reinterpret_cast<const char*>(key), ks);
  // A node whose whole key is known reports the key's full fingerprint, as a
  // request would compute it (an export's import checks it); otherwise the
  // identity, which is then the fingerprint's low half.
  out->fp = out->key_len > 0 && ks == out->key_len ? FingerprintOf(h->biz, out->key) : Fingerprint{h->id, 0};
  out->expire_s = h->expire_s;
  out->last_access_s = h->last_access_s;
  out->route_pos = h->route_pos;
  out->route_known = (h->form & kRouteKnown) != 0;
  uint8_t state[kMaxStateBytes];
  uint32_t stored = 0;
  ReadNodeState(p, state, kMaxStateBytes, &stored);
  out->state.assign(state, state + std::min(stored, kMaxStateBytes));
}

}  // namespace frs::store
