#include "receipt_line.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "frs/admin_engine.h"
#include "hex.h"
#include "json_in.h"
#include "json_out.h"

namespace frs::ctl {

namespace {

constexpr std::string_view kPrefix = "{\"receipt\":";
constexpr uint32_t kReceiptStateBytes = 16;  // what MergeNodes writes: the time it merged, then zeros

bool Hex64(const JsonValue* v, uint64_t* out) {
  if (v == nullptr || !v->IsString() || v->text.size() != 16) return false;
  char* end = nullptr;
  *out = std::strtoull(v->text.c_str(), &end, 16);
  return end == v->text.c_str() + 16;
}

bool Whole(const JsonValue* v, uint64_t max, uint64_t* out) {
  if (v == nullptr || !v->IsNumber() || v->number < 0 || v->number > static_cast<double>(max)) return false;
  *out = static_cast<uint64_t>(v->number);
  return static_cast<double>(*out) == v->number;
}

}  // namespace

std::string ReceiptLine(const NodeInfo& n) {
  char lo[17], hi[17];
  std::snprintf(lo, sizeof lo, "%016" PRIx64, n.fp.lo);
  std::snprintf(hi, sizeof hi, "%016" PRIx64, n.fp.hi);
  uint32_t at = 0;
  if (n.state.size() >= 4) std::memcpy(&at, n.state.data(), 4);  // little-endian, as the store keeps it
  JsonOut j;
  j.BeginObject().Key("receipt").BeginObject();
  j.Key("fp_lo").String(lo).Key("fp_hi").String(hi).Key("key_len").Uint(n.key_len).Key("key").String(Hex(n.key));
  j.EndObject().Key("at").Uint(at).Key("expire").Uint(n.expire_s).EndObject();
  return j.str();
}

bool IsReceiptLine(std::string_view line) { return line.substr(0, kPrefix.size()) == kPrefix; }

Status ImportReceipt(std::string_view line, Store* store, uint32_t now_s) {
  Result<JsonValue> v = ParseJson(line);
  if (!v.ok()) return v.status();
  const JsonValue* r = v->Find("receipt");
  uint64_t lo = 0, hi = 0, key_len = 0, at = 0, expire = 0;
  std::string key;
  const JsonValue* k = r != nullptr ? r->Find("key") : nullptr;
  if (r == nullptr || !r->IsObject() || !Hex64(r->Find("fp_lo"), &lo) || !Hex64(r->Find("fp_hi"), &hi) ||
      !Whole(r->Find("key_len"), 255, &key_len) || k == nullptr || !k->IsString() || !Unhex(k->text, &key) ||
      key.size() > key_len || !Whole(v->Find("at"), UINT32_MAX, &at) || !Whole(v->Find("expire"), UINT32_MAX, &expire))
    return Status::InvalidArgument(
        "a receipt line needs receipt{fp_lo, fp_hi: 16 hex digits, key_len: 0..255, key: hex}, at and expire (unix "
        "seconds)");
  if (store == nullptr || expire <= now_s) return Status::OK();
  KeyRef ref{kReceiptBiz, Fingerprint{lo, hi}, {}, static_cast<uint8_t>(key_len)};
  if (key_len > 0 && key.size() == key_len) ref.bytes = key;
  return store->Update(ref, kReceiptStateBytes, now_s, [&](NodeRef& node) {
    std::memset(node.state, 0, node.state_bytes);
    const uint32_t when = static_cast<uint32_t>(at);
    std::memcpy(node.state, &when, 4);
    node.expire_s = std::max<uint32_t>(node.expire_s, static_cast<uint32_t>(expire));
    return Commit::kWrite;
  });
}

}  // namespace frs::ctl
