// The human and portable faces of a node: Inspect/View (explain, get, dump,
// top) and ExportNode/ImportNode (one JSON object per node).
//
// Export needs no map: every rule block carries its (algo, interval) tag, so
// nodes of a biz the map no longer has still export whole. Import matches
// blocks to the importing map's rules by that tag, as a reload does.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "limit/engine_impl.h"
#include "limit/node_json.h"

namespace frs::limit {
namespace {

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool ParseHex64(std::string_view s, uint64_t* out) {
  std::string bytes;
  if (s.size() != 16 || !HexDecode(s, &bytes)) return false;
  uint64_t v = 0;
  for (char c : bytes) v = v << 8 | static_cast<uint8_t>(c);
  *out = v;
  return true;
}

// The node's state in biz's layout (migrated in a copy when it differs).
void StateInLayout(const BizConfig& biz, const NodeInfo& node, const Now& now, uint8_t* state) {
  bool same = node.state.size() >= biz.state_bytes;
  for (uint32_t i = 0; same && i < biz.nrules; ++i) {
    uint32_t tag = Load32(node.state.data() + biz.rules[i].offset);
    same = tag == biz.rules[i].tag || tag == 0;
  }
  if (same) std::memcpy(state, node.state.data(), biz.state_bytes);
  else MigrateState(biz, node.state, state, now);
}

}  // namespace

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
  v.mode = biz->cfg.mode;
  for (uint32_t i = 0; i < biz->cfg.nrules; ++i) {
    RuleView r;
    Explain(biz->cfg.rules[i], state + biz->cfg.rules[i].offset, now, &r);
    v.rules.push_back(r);
  }
  Decision d;
  EvaluateRules(biz->cfg, state, now, 1, &d);
  Summarize(&d, true);
  v.count = d.count;
  v.node = node;
  return v;
}

Result<NodeView> EngineImpl::Inspect(std::string_view biz_name, std::string_view key) {
  std::shared_ptr<const Map> map = SharedMap();
  const Biz* biz = map->Find(biz_name);
  if (biz == nullptr) return Status::NotFound("unknown biz '" + std::string(biz_name) + "'");
  if (std::string why = ValidateKeyBytes(key); !why.empty()) return Status::InvalidArgument("bad key: " + why);
  auto node = store_->Get(KeyRef{biz->cfg.id, FingerprintOf(biz->cfg.id, key), key, static_cast<uint8_t>(key.size())});
  if (!node.ok()) {
    if (node.status().IsNotFound()) {
      return Status::NotFound("no node for key '" + std::string(key) + "' in biz '" + biz->cfg.name + "'");
    }
    return node.status();
  }
  return View(node.value());
}

Result<std::string> EngineImpl::ExportNode(const NodeInfo& node) const {
  std::shared_ptr<const Map> map = SharedMap();
  const Biz* biz = map->FindId(node.biz);
  JsonWriter w;
  w.BeginObject();
  w.Key("biz").Int(node.biz);
  w.Key("biz_name").String(biz ? std::string_view(biz->cfg.name) : std::string_view());
  w.Key("key").String(Utf8Prefix(node.key));
  w.Key("key_hex").String(HexEncode(node.key));
  w.Key("key_len").Int(node.key_len);
  w.Key("fp_lo").String(Hex64(node.fp.lo));
  w.Key("fp_hi").String(Hex64(node.fp.hi));
  w.Key("expire_s").Int(node.expire_s);
  w.Key("last_access_s").Int(node.last_access_s);
  w.Key("rules").BeginArray();
  const uint8_t* s = node.state.data();
  for (size_t off = 0; off + kBlockUnit <= node.state.size();) {
    uint32_t tag = Load32(s + off);
    uint32_t bytes = TagBytes(tag);
    if (tag == 0 || bytes == 0 || off + bytes > node.state.size()) break;
    w.BeginObject();
    w.Key("algo").String(AlgoName(TagAlgo(tag)));
    w.Key("interval").Int(TagInterval(tag));
    w.Key("state").String(HexEncode(std::string_view(reinterpret_cast<const char*>(s + off), bytes)));
    w.EndObject();
    off += bytes;
  }
  w.EndArray();
  w.EndObject();
  return w.str();
}

Status EngineImpl::ImportNode(std::string_view json_line) {
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
  if (j.type != T::kObject || !biz_id || !key_len || !fp_lo || !fp_hi || !rules || (!key_hex && !key_text)) {
    return Status::InvalidArgument("a node needs biz, key or key_hex, key_len, fp_lo, fp_hi and rules");
  }
  std::shared_ptr<const Map> map = SharedMap();
  const Biz* biz = biz_name && !biz_name->s.empty() ? map->Find(biz_name->s) : nullptr;
  if (biz == nullptr && biz_id->i >= 1 && biz_id->i <= 65535) biz = map->FindId(static_cast<uint16_t>(biz_id->i));
  if (biz == nullptr) {
    return Status::NotFound("biz '" + (biz_name ? biz_name->s : std::string()) + "' (id " +
                            std::to_string(biz_id->i) + ") is not in the map");
  }
  std::string key;
  if (key_hex) {
    if (!HexDecode(key_hex->s, &key)) return Status::InvalidArgument("key_hex is not hex");
  } else {
    key = key_text->s;
  }
  if (key_len->i < 1 || key_len->i > static_cast<int64_t>(kMaxKeyBytes) || key.size() > static_cast<size_t>(key_len->i)) {
    return Status::InvalidArgument("key_len " + std::to_string(key_len->i) + " does not fit the key");
  }
  Fingerprint fp;
  if (!ParseHex64(fp_lo->s, &fp.lo) || !ParseHex64(fp_hi->s, &fp.hi)) {
    return Status::InvalidArgument("fp_lo and fp_hi must be 16 hex digits");
  }
  const bool whole_key = key.size() == static_cast<size_t>(key_len->i);
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

  std::string old_state;
  for (const JsonValue& r : rules->array) {
    const JsonValue* algo = r.Find("algo");
    const JsonValue* interval = r.Find("interval");
    const JsonValue* state = r.Find("state");
    Algo a;
    std::string block;
    if (!algo || algo->type != T::kString || !ParseAlgo(algo->s, &a) || !interval || interval->type != T::kInt ||
        !state || state->type != T::kString || !HexDecode(state->s, &block)) {
      return Status::InvalidArgument("a rule needs algo, interval and a hex state");
    }
    if (block.size() < kBlockUnit || block.size() > kMaxBlockBytes) {
      return Status::InvalidArgument("a rule state of " + std::to_string(block.size()) + " bytes");
    }
    uint32_t tag = Load32(reinterpret_cast<const uint8_t*>(block.data()));
    if (TagAlgo(tag) != a || TagInterval(tag) != interval->i || TagBytes(tag) != block.size()) {
      return Status::InvalidArgument("a rule state's tag does not match its algo, interval and length");
    }
    old_state += block;
    if (old_state.size() > kMaxStateBytes) return Status::InvalidArgument("rule states exceed a node's state");
  }
  const Now now = NowAt();
  const BizConfig& cfg = biz->cfg;
  auto fn = [&](NodeRef& ref) {
    MigrateState(cfg, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(old_state.data()), old_state.size()),
                 ref.state, now);
    ref.expire_s = NodeExpireS(cfg, ref.state, now);
    return Commit::kWrite;
  };
  return store_->Update(KeyRef{cfg.id, fp, key, static_cast<uint8_t>(key_len->i)}, cfg.state_bytes,
                        Clamp32(now.s), fn);
}

}  // namespace frs::limit
