// The human and portable faces of a node: Inspect/View (explain, get, dump,
// top) and ExportNode/ImportNode (one JSON object per node).
//
// Export writes a node as stored (every rule block carries its (algo,
// interval) tag, so a node of a biz the map no longer has exports whole),
// except one holding a block written under a rule since changed (another
// interval, a reload ago): that node is converted to the map's rules first,
// as the key's next use would convert it, since the importing store's
// rules.history never saw what its block was written under. Import matches
// blocks to the importing map's rules by that tag, as a reload does.
#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <unordered_map>

#include "base/utf8.h"
#include "frs/ring.h"
#include "limit/concurrency.h"
#include "limit/engine_impl.h"
#include "limit/node_json.h"
#include "limit/reservation.h"
#include "limit/rule_state.h"
#include "limit/token_bucket.h"

namespace frs::limit {
namespace {

std::string Hex64(uint64_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<size_t>(i)] = kHex[v & 15];
  return out;
}

bool ParseHex64(std::string_view s, uint64_t* out) {
  std::string bytes;
  if (s.size() != 16 || !HexDecode(s, &bytes)) return false;
  uint64_t v = 0;
  for (char c : bytes) v = v << 8 | static_cast<uint8_t>(c);
  *out = v;
  return true;
}

// Whether `state` holds a rule block whose (algo, interval) no rule of
// `biz` has: written under a rule since changed, readable only through the
// store's rules.history.
bool HoldsBlockOfAnEarlierRule(const BizConfig& biz, std::span<const uint8_t> state) {
  bool earlier = false;
  ForEachTaggedBlock(state, [&](uint32_t off, uint32_t tag, uint32_t) {
    bool current = Reservations::IsTag(tag);
    for (uint32_t i = 0; !current && i < biz.nrules; ++i) {
      const RuleSpec& spec = biz.rules[i];
      // A token bucket's block written under a max its 16 bits do not tell
      // (65,536 or more, known to this store's history) is of an earlier
      // rule too: a snapshot's or an export's reader without that history
      // read it by the bits, and 200,000 made 150,000 with 150,000 in use
      // read 112,400 in use on a new store (found from outside). One the
      // bits tell goes as it is: converted here it would be fixed to this
      // map's max, which a reader a step of a rollout behind does not run.
      const uint8_t* b = state.data() + off;
      current = TagIdentity(spec.tag) == TagIdentity(tag) &&
                (spec.algo != Algo::kTokenBucket || TokenBucket::WrittenFor(spec, b) ||
                 WrittenMax(spec, b, 0) == TokenBucket::WrittenMaxBits(b));
    }
    earlier = !current;
    return !earlier;
  });
  return earlier;
}

// Whether a rule of `biz` holds a block in `state` (biz's layout) after a
// migration or merge: a node where none does and that holds no reservation
// table keeps nothing, and written it would never expire (import and merge
// leave it unwritten).
bool AnyRuleBlock(const BizConfig& biz, const uint8_t* state) {
  for (uint32_t i = 0; i < biz.nrules; ++i)
    if (Load32(state + biz.rules[i].offset) != 0) return true;
  return false;
}

// The node's state in biz's layout (migrated in a copy when it differs).
void StateInLayout(const BizConfig& biz, const NodeInfo& node, const Now& now, uint8_t* state) {
  bool same = node.state.size() >= biz.state_bytes;
  for (uint32_t i = 0; same && i < biz.nrules; ++i)
    same = BlockIsCurrent(biz.rules[i], node.state.data() + biz.rules[i].offset);
  if (same) std::memcpy(state, node.state.data(), biz.state_bytes);
  else MigrateState(biz, node.state, state, now);
}

bool CountsLeases(const BizConfig& b) { return b.lease_rule >= 0; }
bool CountsReservations(const BizConfig& b) { return b.res_explicit && b.res_cap > 0; }

}  // namespace

std::vector<AdminEngine::BizHeldNow> EngineImpl::HeldBizzes() const {
  std::shared_ptr<const Map> map = SharedMap();
  std::vector<BizHeldNow> out;
  for (const Biz& b : map->bizzes)
    if (CountsLeases(b.cfg) || CountsReservations(b.cfg))
      out.push_back(BizHeldNow{b.cfg.id, b.cfg.name, 0, 0, CountsLeases(b.cfg), CountsReservations(b.cfg)});
  return out;
}

Result<std::vector<AdminEngine::BizHeldNow>> EngineImpl::HeldNow(uint32_t lock_wait_ms) {
  std::shared_ptr<const Map> map = SharedMap();
  const Now now = NowAt();
  std::vector<BizHeldNow> out;
  std::vector<const Biz*> of;  // parallel to out
  for (const Biz& b : map->bizzes) {
    if (!CountsLeases(b.cfg) && !CountsReservations(b.cfg)) continue;
    out.push_back(BizHeldNow{b.cfg.id, b.cfg.name, 0, 0, CountsLeases(b.cfg), CountsReservations(b.cfg)});
    of.push_back(&b);
  }
  if (out.empty()) return out;
  // One walk over the store whatever the number of such bizzes (an Envoy
  // configuration may have many): a lone one filtered by the walk itself.
  std::unordered_map<uint16_t, size_t> index;
  for (size_t i = 0; i < out.size(); ++i) index.emplace(out[i].biz_id, i);
  Store::Filter f;
  f.lock_wait_ms = lock_wait_ms;
  if (out.size() == 1) f.biz = out[0].biz_id;
  Status s = store_->ForEach(f, [&](const NodeInfo& node) {
    auto it = index.find(node.biz);
    if (it == index.end()) return;
    const BizConfig& cfg = of[it->second]->cfg;
    BizHeldNow& b = out[it->second];
    if (b.has_reservations) {
      // The table sits after the rules' blocks as stored (a reload since
      // the node's last write changes nothing of it).
      const std::span<const uint8_t> table = Reservations::Find(node.state);
      if (!table.empty()) {
        Reservations::Entry held[Reservations::kMaxPerKey];
        // A table of a larger bound than the biz has now (a reload lowered
        // it) holds no more than it at the key's next touch.
        b.reservations +=
            std::min<uint32_t>({Reservations::Held(table.data(), static_cast<uint32_t>(table.size()), now.s, held),
                                static_cast<uint32_t>(std::size(held)), cfg.res_cap});
      }
    }
    if (!b.has_leases) return;
    const RuleSpec& spec = cfg.rules[cfg.lease_rule];
    // A node of an older layout (a reload since its last write) is read as
    // the rules see it.
    uint8_t state[kMaxStateBytes] = {};
    StateInLayout(cfg, node, now, state);
    Concurrency::Lease held[Concurrency::kMaxLeases];
    b.leases += Concurrency::Held(spec, state + spec.offset, now, held);
  });
  if (!s.ok()) return s;
  return out;
}

void EngineImpl::ViewReservations(const BizConfig& biz, const NodeInfo& node, const Now& now, NodeView* v) const {
  v->reservations_cap = biz.res_cap;
  const std::span<const uint8_t> table = Reservations::Find(node.state);
  if (table.empty()) return;
  Reservations::Entry held[Reservations::kMaxPerKey];
  const uint32_t bytes = static_cast<uint32_t>(table.size());
  uint32_t n = std::min<uint32_t>(Reservations::Held(table.data(), bytes, now.s, held), std::size(held));
  // As the key's next touch will hold them: a bound a reload lowered keeps
  // those that end last (Reservations::Rebuild).
  if (n > biz.res_cap) {
    std::partial_sort(held, held + biz.res_cap, held + n,
                      [](const Reservations::Entry& a, const Reservations::Entry& b) { return a.expires > b.expires; });
    n = biz.res_cap;
  }
  for (uint32_t i = 0; i < n; ++i) {
    ReservationView r{held[i].serial, Reservations::Nonce(table.data()), "", held[i].estimate, held[i].taken_s,
                      held[i].expires};
    if (ids_known_ && v->key_kept && !v->key_truncated)
      r.id = LeaseIdText(r.serial, Reservations::Mac(lease_secret_, biz.id, r.nonce, r.serial, v->key));
    v->reservations.push_back(std::move(r));
  }
}

Result<NodeView> EngineImpl::View(const NodeInfo& node) const {
  std::shared_ptr<const Map> map = SharedMap();
  const Biz* biz = map->FindId(node.biz);
  if (biz == nullptr) return Status::NotFound("biz id " + std::to_string(node.biz) + " is not in the map");
  const Now now = NowAt();
  uint8_t state[kMaxStateBytes] = {};
  StateInLayout(biz->cfg, node, now, state);
  NodeView v;
  v.biz_id = biz->cfg.id;
  v.biz_name = biz->cfg.name;
  v.key = node.key;
  v.key_truncated = node.key.size() < node.key_len;
  v.key_kept = node.key_len != 0 || !node.key.empty();
  v.mode = biz->cfg.mode;
  for (uint32_t i = 0; i < biz->cfg.nrules; ++i) {
    RuleView r;
    Explain(biz->cfg.rules[i], state + biz->cfg.rules[i].offset, now, &r);
    v.rules.push_back(r);
  }
  if (biz->cfg.lease_rule >= 0) {
    const RuleSpec& spec = biz->cfg.rules[biz->cfg.lease_rule];
    const uint8_t* block = state + spec.offset;
    Concurrency::Lease held[Concurrency::kMaxLeases];
    const size_t n = std::min<size_t>(Concurrency::Held(spec, block, now, held), std::size(held));
    for (size_t i = 0; i < n; ++i) {
      LeaseView l{held[i].serial, Concurrency::Nonce(block), "", held[i].expires};
      l.other_series = (l.serial & Concurrency::kOtherSeries) != 0;
      if (ids_known_ && v.key_kept && !v.key_truncated && !l.other_series)
        l.id = LeaseIdText(l.serial, LeaseMac(lease_secret_, biz->cfg.id, l.nonce, l.serial, v.key));
      v.leases.push_back(std::move(l));
    }
  }
  ViewReservations(biz->cfg, node, now, &v);
  Decision d;
  EvaluateRules(biz->cfg, state, now, 1, &d);
  for (uint32_t i = 0; i < biz->cfg.nrules && i < v.rules.size(); ++i) v.rules[i].remaining = d.rules[i].remaining;
  Summarize(&d, true);
  v.count = d.count;
  v.limit = d.limit;
  v.node = node;
  return v;
}

Result<NodeView> EngineImpl::Inspect(std::string_view biz_name, std::string_view key) {
  std::shared_ptr<const Map> map = SharedMap();
  const Biz* biz = map->Find(biz_name);
  if (biz == nullptr) return UnknownBiz(biz_name);
  if (std::string why = ValidateKeyBytes(key); !why.empty()) return Status::InvalidArgument("bad key: " + why);
  auto node = store_->Get(KeyRef{biz->cfg.id, FingerprintOf(biz->cfg.id, key), key, static_cast<uint8_t>(key.size())});
  if (!node.ok()) {
    if (node.status().IsNotFound()) {
      return Status::NotFound("no node for key '" + std::string(key) + "' in biz '" + biz->cfg.name + "'");
    }
    return node.status();
  }
  Result<NodeView> v = View(node.value());
  if (v.ok() && (!v.value().key_kept || v.value().key_truncated)) {
    // Looked up by its key: the caller knows the text the node did not keep,
    // or kept only the first bytes of.
    v.value().key = std::string(key);
    v.value().key_kept = true;
    v.value().key_truncated = false;
  }
  if (v.ok() && ids_known_) {
    for (LeaseView& l : v.value().leases)
      if (l.id.empty() && !l.other_series)
        l.id = LeaseIdText(l.serial, LeaseMac(lease_secret_, biz->cfg.id, l.nonce, l.serial, key));
    for (ReservationView& r : v.value().reservations)
      if (r.id.empty())
        r.id = LeaseIdText(r.serial, Reservations::Mac(lease_secret_, biz->cfg.id, r.nonce, r.serial, key));
  }
  return v;
}

bool EngineImpl::LeaseEnded(uint16_t biz_id, std::string_view key, uint32_t serial, int64_t until) {
  std::shared_ptr<const Map> map = SharedMap();
  const Biz* biz = map->FindId(biz_id);
  if (biz == nullptr || biz->cfg.lease_rule < 0 || !ValidateKeyBytes(key).empty()) return false;
  const Now now = NowAt();
  auto node = store_->Get(KeyRef{biz->cfg.id, FingerprintOf(biz->cfg.id, key), key, static_cast<uint8_t>(key.size())});
  // No node is no lease here, but not surely none anywhere (handed off
  // since, or evicted): ended only once its expiry has passed.
  if (!node.ok()) return node.status().IsNotFound() && until <= now.s;
  uint8_t state[kMaxStateBytes] = {};
  StateInLayout(biz->cfg, node.value(), now, state);
  const RuleSpec& spec = biz->cfg.rules[biz->cfg.lease_rule];
  Concurrency::Lease held[Concurrency::kMaxLeases];
  const size_t n = std::min<size_t>(Concurrency::Held(spec, state + spec.offset, now, held), std::size(held));
  // Another series' lease of that serial counts as the same: only a lease
  // surely gone is said to be.
  for (size_t i = 0; i < n; ++i)
    if ((held[i].serial & Concurrency::kMaxSerial) == (serial & Concurrency::kMaxSerial)) return false;
  return true;
}

Result<std::string> EngineImpl::ExportNode(const NodeInfo& node) const {
  std::shared_ptr<const Map> map = SharedMap();
  const Biz* biz = map->FindId(node.biz);
  JsonWriter w;
  w.Reserve(320 + 3 * node.key.size() + 2 * node.state.size());  // a line made once (a snapshot makes one a node)
  w.BeginObject();
  w.Key("biz").Int(node.biz);
  w.Key("biz_name").String(biz ? std::string_view(biz->cfg.name) : std::string_view());
  // "key" is for people: the stored key up to its first byte that is not
  // well-formed UTF-8 (base/utf8.h; a stored prefix may end inside a
  // character). Before, an overlong form or a surrogate passed here and
  // came out raw, which a strict JSON reader refuses. "key_hex" is the
  // exact bytes, and what import reads.
  w.Key("key").String(Utf8ValidPrefix(node.key));
  w.Key("key_hex").String(HexEncode(node.key));
  w.Key("key_len").Int(node.key_len);
  w.Key("fp_lo").String(Hex64(node.fp.lo));
  w.Key("fp_hi").String(Hex64(node.fp.hi));
  w.Key("expire_s").Int(node.expire_s);
  w.Key("last_access_s").Int(node.last_access_s);
  if (node.route_known) w.Key("route_pos").Int(node.route_pos);
  w.Key("rules").BeginArray();
  std::string reservations;
  // A token bucket's block says 16 bits of the max it was written under:
  // "max" says it whole where this store knows it (its rule's, or its
  // history's for a block a reload left), so that a reader whose map and
  // history never had it (an import, a new store taking a snapshot, a
  // shard a step of a rollout behind) converts it as a reload here would.
  // Read by it, a lowered max's tokens in use were read as a raise's (found
  // from outside: 100,000 of 200,000 read 75,000 of 150,000).
  // Said only when it is known and more than the bits: a max under 65,536
  // is its bits, and one this store cannot tell from another (an earlier
  // max a multiple of 65,536 away, or none its history knows) is left to
  // the reader's own history, as before.
  const auto written_max = [&](const uint8_t* b, uint32_t tag) -> int64_t {
    if (TagAlgo(tag) != Algo::kTokenBucket || biz == nullptr) return 0;
    const int64_t bits = TokenBucket::WrittenMaxBits(b);
    for (uint32_t i = 0; i < biz->cfg.nrules; ++i) {
      const RuleSpec& spec = biz->cfg.rules[i];
      if (TagIdentity(spec.tag) != TagIdentity(tag)) continue;
      const bool current = TokenBucket::WrittenFor(spec, b);
      int64_t known = current ? spec.max : 0;
      for (uint32_t p = 0; p < spec.npast; ++p) {
        const RulePast& past = spec.past[p];
        if (past.identity != TagIdentity(tag) || (past.max & 0xffff) != bits || past.max == spec.max) continue;
        if (current) return 0;  // two maxes alike: not told apart here
        if (known == 0) known = past.max;
      }
      return known >= 65536 ? known : 0;
    }
    return 0;
  };
  const auto block = [&](const uint8_t* b, uint32_t tag) {
    w.BeginObject();
    w.Key("algo").String(AlgoName(TagAlgo(tag)));
    w.Key("interval").Int(TagInterval(tag));
    w.Key("state").String(HexEncode(std::string_view(reinterpret_cast<const char*>(b), TagBytes(tag))));
    if (const int64_t m = written_max(b, tag); m > 0) w.Key("max").Int(m);
    w.EndObject();
  };
  const bool convert = biz != nullptr && HoldsBlockOfAnEarlierRule(biz->cfg, node.state);
  if (convert) {
    uint8_t converted[kMaxStateBytes] = {};
    StateInLayout(biz->cfg, node, NowAt(), converted);
    for (uint32_t i = 0; i < biz->cfg.nrules; ++i) {
      const uint8_t* b = converted + biz->cfg.rules[i].offset;
      if (const uint32_t tag = Load32(b); tag != 0) block(b, tag);  // 0: a rule this key never used
    }
  }
  const uint8_t* s = node.state.data();
  ForEachTaggedBlock(node.state, [&](uint32_t off, uint32_t tag, uint32_t bytes) {
    if (Reservations::IsTag(tag)) {
      // Not a rule: the table goes beside the rules, whole (its nonce
      // with it), so a holder keyed by the same <cluster lease_key> settles
      // the same ids; one keyed otherwise holds them to their expiry.
      reservations = HexEncode(std::string_view(reinterpret_cast<const char*>(s + off), bytes));
    } else if (!convert) {
      block(s + off, tag);
    }
    return true;
  });
  w.EndArray();
  if (!reservations.empty()) w.Key("reservations").String(reservations);
  w.EndObject();
  return w.Take();
}

namespace {

std::span<const uint8_t> AsBytes(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// One exported node, parsed and checked against this engine's map.
struct ParsedNode {
  const BizConfig* cfg = nullptr;
  Fingerprint fp;
  std::string key;
  uint8_t key_len = 0;
  uint32_t route_pos = 0;
  bool route_known = false;
  std::string state;         // rule blocks, each carrying its tag
  std::string reservations;  // the node's reservation table, or empty
  uint32_t sent_biz = 0;     // the biz id it names (set also when the map lacks it), 0 if none in range
  // Per block of `state`, in order: the max a token bucket's was written
  // under, as its exporter knew it ("max"); 0: not said.
  std::vector<int64_t> written_max;
};

}  // namespace

// A node line's "rules": each block checked against its algo, interval
// and time (BlockProblem), appended to *state; per block, the max an
// export said a token bucket's was written under (0: not said).
static Status ParseRuleBlocks(const JsonValue& rules, int64_t now_s, std::string* state,
                              std::vector<int64_t>* written_max) {
  using T = JsonValue::Type;
  for (const JsonValue& r : rules.array) {
    const JsonValue* algo = r.Find("algo");
    const JsonValue* interval = r.Find("interval");
    const JsonValue* st = r.Find("state");
    const JsonValue* max = r.Find("max");
    Algo a;
    std::string block;
    if (!algo || algo->type != T::kString || !ParseAlgo(algo->s, &a) || !interval || interval->type != T::kInt || !st ||
        st->type != T::kString || !HexDecode(st->s, &block)) {
      return Status::InvalidArgument("a rule needs algo, interval and a hex state");
    }
    if (max != nullptr) {
      // Each reason named, with the value: one message for every fault hid
      // which it was (found from outside).
      if (a != Algo::kTokenBucket || block.size() != TokenBucket::kBytes)
        return Status::InvalidArgument("a rule's max is said of a token_bucket's state only, not of a " +
                                       std::string(AlgoName(a)) + " rule's");
      if (max->type != T::kInt || max->i <= 0 || max->i > kMaxUses)
        return Status::InvalidArgument("a token_bucket rule's max is an integer in 1..2147483647");
      const int64_t bits = TokenBucket::WrittenMaxBits(reinterpret_cast<const uint8_t*>(block.data()));
      if ((max->i & 0xffff) != bits)
        return Status::InvalidArgument("a token_bucket rule's max " + std::to_string(max->i) +
                                       " is not the one its state was written under, whose low 16 bits are " +
                                       std::to_string(bits));
    }
    written_max->push_back(max != nullptr ? max->i : 0);
    const uint32_t most = a == Algo::kConcurrency ? kMaxLeaseBlockBytes : kMaxBlockBytes;
    if (block.size() < kBlockUnit || block.size() > most) {
      return Status::InvalidArgument("a rule state of " + std::to_string(block.size()) + " bytes");
    }
    uint32_t tag = Load32(reinterpret_cast<const uint8_t*>(block.data()));
    if (TagAlgo(tag) != a || TagInterval(tag) != interval->i || TagBytes(tag) != block.size()) {
      return Status::InvalidArgument("a rule state's tag does not match its algo, interval and length");
    }
    if (std::string p =
            BlockProblem(a, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(block.data()), block.size()),
                         now_s);
        !p.empty())
      return Status::InvalidArgument("a " + std::string(AlgoName(a)) + " rule's state holds " + p);
    *state += block;
    if (state->size() > kMaxStateBytes) return Status::InvalidArgument("rule states exceed a node's state");
  }
  return Status::OK();
}

// Its times are judged against now_s (BlockProblem, TimeProblem). Its biz
// is the map's of its name, else of its id; `by_id`: of its id only.
static Status ParseNode(std::string_view json_line, const Map& map, int64_t now_s, ParsedNode* out,
                        bool by_id = false) {
  auto parsed = ParseJson(json_line);
  if (!parsed.ok()) return parsed.status();
  const JsonValue& j = parsed.value();
  auto field = [&](const char* name, JsonValue::Type type) -> const JsonValue* {
    const JsonValue* v = j.Find(name);
    return v && v->type == type ? v : nullptr;
  };
  using T = JsonValue::Type;
  const JsonValue* biz_id = field("biz", T::kInt);
  const JsonValue* biz_name = field("biz_name", T::kString);
  const JsonValue* key_hex = field("key_hex", T::kString);
  const JsonValue* key_text = field("key", T::kString);
  const JsonValue* key_len = field("key_len", T::kInt);
  const JsonValue* fp_lo = field("fp_lo", T::kString);
  const JsonValue* fp_hi = field("fp_hi", T::kString);
  const JsonValue* rules = field("rules", T::kArray);
  const JsonValue* route = field("route_pos", T::kInt);
  if (j.type != T::kObject || !biz_id || !key_len || !fp_lo || !fp_hi || !rules || (!key_hex && !key_text)) {
    return Status::InvalidArgument("a node needs biz, key or key_hex, key_len, fp_lo, fp_hi and rules");
  }
  if (biz_id->i >= 1 && biz_id->i <= 65535) out->sent_biz = static_cast<uint32_t>(biz_id->i);
  const Biz* biz = !by_id && biz_name && !biz_name->s.empty() ? map.Find(biz_name->s) : nullptr;
  if (biz == nullptr && biz_id->i >= 1 && biz_id->i <= 65535) biz = map.FindId(static_cast<uint16_t>(biz_id->i));
  if (biz == nullptr) {
    return Status::NotFound("biz '" + (biz_name ? biz_name->s : std::string()) + "' (id " + std::to_string(biz_id->i) +
                            ") is not in the map");
  }
  std::string key;
  if (key_hex) {
    if (!HexDecode(key_hex->s, &key)) return Status::InvalidArgument("key_hex is not hex");
    // Both given (an export writes key, for people, as key_hex's bytes up to
    // the first that is not UTF-8): one node, one key.
    if (key_text && key_text->s != Utf8ValidPrefix(key))
      return Status::InvalidArgument("key and key_hex name different keys");
  } else {
    key = key_text->s;
  }
  // key_len 0: a node that did not keep its key (a compact node of a long
  // key, store format 4); it is imported by its fingerprint alone.
  if (key_len->i < 0 || key_len->i > static_cast<int64_t>(kMaxKeyBytes) ||
      key.size() > static_cast<size_t>(key_len->i)) {
    return Status::InvalidArgument("key_len " + std::to_string(key_len->i) + " does not fit the key");
  }
  Fingerprint fp;
  if (!ParseHex64(fp_lo->s, &fp.lo) || !ParseHex64(fp_hi->s, &fp.hi)) {
    return Status::InvalidArgument("fp_lo and fp_hi must be 16 hex digits");
  }
  const bool whole_key = key_len->i > 0 && key.size() == static_cast<size_t>(key_len->i);
  if (biz->cfg.id != biz_id->i) {
    // The fingerprint hashes the biz id: moving to another id needs the whole key.
    if (!whole_key) {
      return Status::InvalidArgument("biz '" + biz->cfg.name + "' has id " + std::to_string(biz->cfg.id) +
                                     " here, and a truncated key cannot be fingerprinted again");
    }
    fp = FingerprintOf(biz->cfg.id, key);
  } else if (whole_key && !(FingerprintOf(biz->cfg.id, key) == fp)) {
    return Status::Corruption("the fingerprint does not match the key");
  }
  if (route) {
    if (route->i < 0 || route->i > int64_t{UINT32_MAX})
      return Status::InvalidArgument("route_pos is not a 32-bit value");
    out->route_pos = static_cast<uint32_t>(route->i);
    out->route_known = true;
  } else if (whole_key) {
    // An export of format 2 has no route: the key's own (hash tag, else key).
    out->route_pos = Ring::HashRoute(Ring::RouteOf(key, {}));
    out->route_known = true;
  }

  std::string state;
  if (Status rs = ParseRuleBlocks(*rules, now_s, &state, &out->written_max); !rs.ok()) return rs;
  if (const JsonValue* res = j.Find("reservations")) {
    std::string table;
    // At most kMaxPerKey entries: the tag's length field wraps past it (a
    // table of 256 bytes read as tag 0x80000000, taken, its reservations
    // gone unseen).
    if (res->type != T::kString || !HexDecode(res->s, &table) || table.size() < kBlockUnit ||
        table.size() > Reservations::Bytes(Reservations::kMaxPerKey) ||
        Load32(reinterpret_cast<const uint8_t*>(table.data())) !=
            Reservations::Tag(static_cast<uint32_t>(table.size())))
      return Status::InvalidArgument("reservations must be a reservation table in hex");
    if (std::string p = Reservations::TimeProblem(AsBytes(table), now_s, kMostAheadS); !p.empty())
      return Status::InvalidArgument("the reservation table holds " + p);
    out->reservations = std::move(table);
  }
  out->cfg = &biz->cfg;
  out->fp = fp;
  out->key = std::move(key);
  out->key_len = static_cast<uint8_t>(key_len->i);
  out->state = std::move(state);
  return Status::OK();
}

// How far a restored node's next serials move (ImportNode): this, and a
// random part of the spread.
constexpr uint32_t kRestoredSerialsSkip = 1u << 20;
constexpr uint32_t kRestoredSerialsSpread = 1u << 29;

Result<bool> EngineImpl::ImportNode(std::string_view json_line) {
  std::shared_ptr<const Map> map = SharedMap();
  const Now now = NowAt();
  ParsedNode pn;
  if (Status s = ParseNode(json_line, *map, now.s, &pn); !s.ok()) return s;
  const BizConfig& cfg = *pn.cfg;
  const bool table = !pn.reservations.empty() && cfg.res_cap != 0;
  bool written = false;
  auto fn = [&](NodeRef& ref) {
    const bool started =
        MigrateState(cfg, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(pn.state.data()), pn.state.size()),
                     ref.state, now, pn.written_max);
    // Not one block taken by a rule of the map (they were all a removed
    // rule's): nothing to keep. An existing node stays as it is.
    if (!table && !AnyRuleBlock(cfg, ref.state)) return Commit::kNone;
    uint32_t need = 0;
    if (table) PlaceReservations(cfg, AsBytes(pn.reservations), ref, &need, started);  // asked with room for it
    // The node as it was at its export, ids and all: the leases and
    // reservations its live predecessor granted since had the same nonce
    // and the serials that follow, and granted again they were another
    // client's (a settle of the old id ended the new holder's reservation,
    // a release freed its lease: found from outside after a documented
    // restore). The next serials skip at least 2^20 and a random part of
    // 2^29 besides: the same backup restored twice must not give the same
    // serials again, which a fixed skip did (found from outside), and a
    // quarter of the lease serials at most per restore keeps a wrap to
    // ids still held (2^31) many restores away.
    const uint32_t skip = kRestoredSerialsSkip + (NewIdNonce() & (kRestoredSerialsSpread - 1));
    if (cfg.lease_rule >= 0)
      Concurrency::SkipSerials(ref.state + cfg.rules[static_cast<size_t>(cfg.lease_rule)].offset, skip);
    if (table && ref.state_bytes > cfg.state_bytes) Reservations::SkipSerials(ref.state + cfg.state_bytes, skip);
    ref.expire_s = NodeExpireS(cfg, ref, now);
    written = true;
    return Commit::kWrite;
  };
  Status s = store_->Update(KeyRef{cfg.id, pn.fp, pn.key, pn.key_len, pn.route_pos, pn.route_known, cfg.keep_keys},
                            cfg.state_bytes + (table ? cfg.res_bytes : 0), Clamp32(now.s), fn);
  if (!s.ok()) return s;
  return written;
}

Status EngineImpl::CheckImport(std::string_view json_line) const {
  std::shared_ptr<const Map> map = SharedMap();
  ParsedNode pn;
  return ParseNode(json_line, *map, NowAt().s, &pn);
}

namespace {

// ReplaceNodes: the sent rules whole, but for a concurrency rule's leases
// of this node's own (a new owner's, granted under its nonce): merged, so
// that its clients' ids still release them (Concurrency::Merge).
void ReplaceRules(const BizConfig& cfg, uint8_t* state, const uint8_t* incoming, const Now& now) {
  const RuleSpec* lease = cfg.lease_rule >= 0 ? &cfg.rules[cfg.lease_rule] : nullptr;
  uint8_t mine[kMaxLeaseBlockBytes];
  if (lease) std::memcpy(mine, state + lease->offset, lease->bytes);
  std::memcpy(state, incoming, cfg.state_bytes);
  if (!lease) return;
  std::memcpy(state + lease->offset, mine, lease->bytes);
  MergeBlock(*lease, state + lease->offset, incoming + lease->offset, now);
}

// ReplaceNodes keeps a reservation table of this node's own: reservations
// held here under another nonce than the sent table's (a new owner's, when
// replicas were switched on with a shard added), whose ids its clients
// hold; the sent ones stay charged at their estimates.
bool TableOfItsOwn(std::span<const uint8_t> here, const std::string& sent) {
  int64_t first_expiry = 0;
  if (here.empty() || Reservations::InUse(here.data(), static_cast<uint32_t>(here.size()), &first_expiry) == 0)
    return false;
  return sent.size() < Reservations::kHeaderBytes ||
         Reservations::Nonce(here.data()) != Reservations::Nonce(reinterpret_cast<const uint8_t*>(sent.data()));
}

}  // namespace

Result<bool> EngineImpl::FoldNodes(std::span<const std::string_view> json_lines, std::string_view receipt, bool replace,
                                   std::vector<LeftOutNode>* left_out, bool by_id) {
  if (receipt.empty() || receipt.size() > kMaxKeyBytes) return Status::InvalidArgument("a receipt is 1..255 bytes");
  if (json_lines.empty() || json_lines.size() > kMaxMergeNodes)
    return Status::InvalidArgument("a merge carries 1.." + std::to_string(kMaxMergeNodes) + " nodes");
  std::shared_ptr<const Map> map = SharedMap();
  const Now now = NowAt();
  std::vector<ParsedNode> nodes(json_lines.size());
  // The sent rules of each node in this map's layout (a rule the map no
  // longer has is dropped, as a reload would).
  std::vector<std::array<uint8_t, kMaxStateBytes>> incoming(json_lines.size());
  std::vector<char> started(json_lines.size(), 0);  // a rule of the sent node started from zero here
  std::vector<Store::BatchItem> items;
  items.reserve(json_lines.size() + 1);
  size_t n = 0;  // the nodes taken: those of a biz the map lacks left out when asked so
  for (size_t line = 0; line < json_lines.size(); ++line) {
    const size_t i = n;
    ParsedNode& pn = nodes[i];
    // A replica snapshot's node (by_id) is of its biz id: the copy's
    // counts are kept by id, as the changes that follow name it. By name, a
    // node of a biz whose id a rollout changed was folded into the other
    // id's node: counted twice on one side, lost on the other (found from
    // outside).
    if (Status s = ParseNode(json_lines[line], *map, now.s, &pn, by_id); !s.ok()) {
      if (left_out != nullptr) {
        left_out->push_back({line, pn.sent_biz, s.IsNotFound() ? std::string() : s.message()});
        pn = ParsedNode{};
        continue;
      }
      const std::string msg = "node " + std::to_string(line + 1) + ": " + s.message();
      return s.IsNotFound() ? Status::NotFound(msg) : Status::InvalidArgument(msg);
    }
    ++n;
    started[i] =
        MigrateState(*pn.cfg,
                     std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(pn.state.data()), pn.state.size()),
                     incoming[i].data(), now, pn.written_max);
    // A sent table is read for with room for the biz's bound: a table made
    // or grown here meanwhile never leaves the second pass short.
    const bool table = !pn.reservations.empty() && pn.cfg->res_cap != 0;
    items.push_back({KeyRef{pn.cfg->id, pn.fp, pn.key, pn.key_len, pn.route_pos, pn.route_known, pn.cfg->keep_keys},
                     pn.cfg->state_bytes + (table ? pn.cfg->res_bytes : 0)});
  }
  items.push_back(
      {KeyRef{kReceiptBiz, FingerprintOf(kReceiptBiz, receipt), receipt, static_cast<uint8_t>(receipt.size())},
       kBlockUnit});
  bool merged = false;
  std::vector<uint32_t> need(n + 1, 0);
  auto fn = [&](std::span<NodeRef> refs, std::span<Commit> commits) {
    std::fill(commits.begin(), commits.end(), Commit::kNone);
    std::fill(need.begin(), need.end(), 0);
    merged = false;
    if (refs[n].exists) return;  // sent before: already merged, all of them
    bool short_state = false;
    for (size_t i = 0; i < n; ++i) {
      const BizConfig& cfg = *nodes[i].cfg;
      const uint32_t asked = refs[i].state_bytes;
      if (!AdoptLayout(cfg, refs[i], now, &need[i])) {
        short_state = true;  // asked again with room for its table too
        continue;
      }

      // A node that holds no reservation table here takes the sent one (its
      // own, when it has one, is kept: docs/cluster.md, the handoff's
      // merge); a replacement takes the sent one, or none, in any case.
      // Every node's room is found in this one pass: the batch is asked
      // again once.
      if (!replace && (nodes[i].reservations.empty() || cfg.res_cap == 0)) continue;
      const uint32_t have = refs[i].exists ? std::min(refs[i].stored_state_bytes, refs[i].state_bytes) : 0;
      const std::span<const uint8_t> here = Reservations::Find(std::span<const uint8_t>(refs[i].state, have));
      if (!replace && !here.empty()) continue;
      if (replace && TableOfItsOwn(here, nodes[i].reservations)) continue;
      // A node here without a table ends with its rules after the
      // adoption; the room asked past them (zeroed by the store) is still
      // there for the sent table. (Without this, a batch asked again with
      // room for it was found short again, and answered merged="0".)
      if (!nodes[i].reservations.empty() && refs[i].state_bytes < asked) refs[i].state_bytes = asked;
      // A snapshot's node (by_id), and a handoff's copy (replace: its
      // sender stays the route's other holder), are the other holder's: its
      // marks of what it adopted are turned to this holder's (found by a
      // review: taken as sent, a holder back on a new store counted its
      // clients' reservations as adopted, and its full table left them out).
      short_state |=
          !PlaceReservations(cfg, AsBytes(nodes[i].reservations), refs[i], &need[i], started[i] != 0, by_id || replace);
    }
    if (short_state) return;  // a node holds a larger layout, or takes a table: read it whole, then merge
    for (size_t i = 0; i < n; ++i) {
      const BizConfig& cfg = *nodes[i].cfg;
      if (replace) ReplaceRules(cfg, refs[i].state, incoming[i].data(), now);
      for (uint32_t r = 0; r < cfg.nrules && !replace; ++r) {
        const RuleSpec& spec = cfg.rules[r];
        MergeBlock(spec, refs[i].state + spec.offset, incoming[i].data() + spec.offset, now);
      }
      // A new node none of whose blocks a rule here takes: not written (as
      // ImportNode).
      if (!refs[i].exists && !AnyRuleBlock(cfg, refs[i].state) &&
          Reservations::Find(std::span<const uint8_t>(refs[i].state, refs[i].state_bytes)).empty()) {
        commits[i] = Commit::kNone;
        continue;
      }
      refs[i].expire_s = NodeExpireS(cfg, refs[i], now);
      commits[i] = Commit::kWrite;
    }
    std::memset(refs[n].state, 0, refs[n].state_bytes);
    Store32(refs[n].state, Clamp32(now.s));
    refs[n].expire_s = Clamp32(now.s + kReceiptSeconds);
    commits[n] = Commit::kWrite;
    merged = true;
  };
  Status s = WithWholeNodes(std::span<Store::BatchItem>(items).first(n), std::span<uint32_t>(need).first(n),
                            [&] { return store_->UpdateBatch(items, Clamp32(now.s), fn); });
  if (!s.ok()) return s;
  return merged;
}

}  // namespace frs::limit
