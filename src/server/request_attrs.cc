#include "server/request_attrs.h"

#include <algorithm>
#include <cstring>

#include "frs/key.h"

namespace frs::server {

namespace {

// By length, then bytes of a known count (compared inline, not through a
// memcmp call of a runtime length): this runs for every batch member.
// Which attributes each command takes (besides cmd and token, which all take).
struct CmdShape {
  bool biz, key, n, count, lease = false, reservation = false;
};
CmdShape ShapeOf(Cmd c) {
  switch (c) {
    case Cmd::kQuery:
    case Cmd::kUpdate:
    case Cmd::kAcquire: return {true, true, true, false};
    case Cmd::kGet:
    case Cmd::kDelete: return {true, true, false, false};
    case Cmd::kSet: return {true, true, false, true};
    case Cmd::kReset: return {true, false, false, false};
    case Cmd::kStats:
    case Cmd::kMerge: return {false, false, false, false};
    case Cmd::kRelease:
    case Cmd::kRenew: return {true, true, false, false, true};
    case Cmd::kSettle: return {true, true, true, false, false, true};
  }
  return {};
}

bool Unknown(std::string_view name, ProtocolError* err);

}  // namespace

// Found by length, then bytes of a known count.
AttrName AttrNameOf(std::string_view s) {
  const char* p = s.data();
  switch (s.size()) {
    case 1: return p[0] == 'n' ? AttrName::kN : AttrName::kOther;
    case 3:
      if (std::memcmp(p, "cmd", 3) == 0) return AttrName::kCmd;
      if (std::memcmp(p, "biz", 3) == 0) return AttrName::kBiz;
      if (std::memcmp(p, "key", 3) == 0) return AttrName::kKey;
      return AttrName::kOther;
    case 4: return std::memcmp(p, "node", 4) == 0 ? AttrName::kNode : AttrName::kOther;
    case 5:
      if (std::memcmp(p, "count", 5) == 0) return AttrName::kCount;
      if (std::memcmp(p, "token", 5) == 0) return AttrName::kToken;
      if (std::memcmp(p, "lease", 5) == 0) return AttrName::kLease;
      return AttrName::kOther;
    case 7:
      if (std::memcmp(p, "receipt", 7) == 0) return AttrName::kReceipt;
      if (std::memcmp(p, "reserve", 7) == 0) return AttrName::kReserve;
      if (std::memcmp(p, "replace", 7) == 0) return AttrName::kReplace;
      return AttrName::kOther;
    case 11: return std::memcmp(p, "reservation", 11) == 0 ? AttrName::kReservation : AttrName::kOther;
    default: return AttrName::kOther;
  }
}

bool Fail(ProtocolError* err, int status, std::string msg) {
  err->status = status;
  err->msg = std::move(msg);
  return false;
}

bool ParseCount(std::string_view s, int64_t* out) {
  // Leading zeros are a decimal's, however many ("0005" and "00000000005"
  // alike); the length bound applies to the digits after them.
  if (s.size() > 1 && s[0] == '0') {
    const size_t nz = s.find_first_not_of('0');
    s.remove_prefix(nz == std::string_view::npos ? s.size() - 1 : nz);
  }
  if (s.empty() || s.size() > 10) return false;
  // At most 10 digits fit an int64_t whatever they are; a loop, not
  // std::from_chars, whose general path cost a reservation's two requests
  // about 120 instructions a number (n, reserve).
  int64_t v = 0;
  for (const char c : s) {
    const unsigned d = static_cast<unsigned char>(c) - unsigned{'0'};
    if (d > 9) return false;
    v = v * 10 + d;
  }
  if (v > kMaxUses) return false;
  *out = v;
  return true;
}

bool CheckProtocolKey(std::string_view key, ProtocolError* err) {
  // U+FFFE and U+FFFF, UTF-8 but no XML characters, are refused there too.
  if (!KeyIsValid(key)) return Fail(err, 400, "bad key: " + ValidateKeyBytes(key));
  return true;
}

bool HasControl(std::string_view v) {
  for (size_t i = 0; i < v.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    if (c < 0x20 || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < v.size() && static_cast<unsigned char>(v[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(v[i + 1]) <= 0x9f)
      return true;
  }
  return false;
}

namespace {
bool Unknown(std::string_view name, ProtocolError* err) {
  return Fail(err, 400, "unknown attribute \"" + std::string(name.substr(0, 64)) + "\" on <request>");
}
// receipt, node or replace where no cmd="merge" comes first: said as such
// (a receipt before cmd="merge" read as an unknown attribute).
bool MergeOnly(std::string_view name, bool have_cmd, ProtocolError* err) {
  if (!have_cmd)
    return Fail(err, 400,
                "attribute \"" + std::string(name) + "\" comes after cmd=\"merge\" (its own attributes follow it)");
  return Fail(err, 400, "attribute \"" + std::string(name) + "\" is cmd=\"merge\"'s only");
}
}  // namespace

bool RequestAttrs::Add(std::string_view name, std::string_view value, ProtocolError* err) {
  // After entity decoding, as the value will be used: no attribute of the
  // protocol may hold a control character (a tab, a newline, DEL, C1).
  if (HasControl(value))
    return Fail(err, 400, "attribute \"" + std::string(name.substr(0, 64)) + "\" contains a control character");
  return AddPlain(name, value, err);
}

bool RequestAttrs::AddOther(AttrName which, std::string_view name, std::string_view value, bool ascii,
                            ProtocolError* err) {
  WireRequest* r = r_;
  bool dup = false;
  // An attribute seen before is a duplicate; it has been seen now.
  const auto Seen = [&dup](bool* seen) {
    dup = *seen;
    *seen = true;
  };
  switch (which) {
    case AttrName::kCmd:
      Seen(&have_cmd_);
      if (!ParseCmd(value, &r->cmd))
        return Fail(err, 400,
                    "unknown cmd \"" + std::string(value.substr(0, 64)) +
                        "\": use query, update, acquire, get, set, delete, reset, stats, merge, release, renew or "
                        "settle");
      break;
    case AttrName::kBiz:
      Seen(&have_biz_);
      r->biz = value;
      break;
    case AttrName::kKey:
      Seen(&have_key_);
      key_ascii_ = ascii;
      r->key = value;
      break;
    case AttrName::kN:
      Seen(&have_n_);
      n_text_ = value;
      break;
    case AttrName::kCount:
      Seen(&have_count_);
      count_text_ = value;
      break;
    case AttrName::kToken:
      Seen(&r->has_token);
      r->token = value;
      break;
    // receipt and node only after cmd="merge": before it, or for any other
    // cmd, they are unknown attributes.
    case AttrName::kReceipt:
      if (r->cmd != Cmd::kMerge || !have_cmd_) return MergeOnly(name, have_cmd_, err);
      dup = !r->receipt.empty();
      r->receipt = value;
      break;
    case AttrName::kNode:
      if (r->cmd != Cmd::kMerge || !have_cmd_) return MergeOnly(name, have_cmd_, err);
      dup = !r->node.empty();
      r->node = value;
      break;
    case AttrName::kReplace:
      // The sent node takes the place of this store's (a copy when replicas
      // are switched on, docs/cluster.md), instead of being summed into it.
      if (r->cmd != Cmd::kMerge || !have_cmd_) return MergeOnly(name, have_cmd_, err);
      if (value != "0" && value != "1") return Fail(err, 400, "replace must be 0 or 1");
      dup = r->has_replace;
      r->has_replace = true;
      r->replace = value == "1";
      break;
    case AttrName::kLease:
      Seen(&have_lease_);
      r->lease = value;
      break;
    case AttrName::kReserve:
      Seen(&have_reserve_);
      have_res_ = true;
      reserve_text_ = value;
      break;
    case AttrName::kReservation:
      Seen(&have_reservation_);
      have_res_ = true;
      r->reservation = value;
      break;
    case AttrName::kOther: return Unknown(name, err);
  }
  if (dup) return Fail(err, 400, "attribute \"" + std::string(name) + "\" appears twice");
  return true;
}

bool RequestAttrs::FinishOther(ProtocolError* err) {
  WireRequest* r = r_;
  if (!have_cmd_) return Fail(err, 400, "<request> needs a cmd attribute");
  const CmdShape shape = ShapeOf(r->cmd);
  const char* cmd = CmdName(r->cmd);
  if (shape.biz && !have_biz_) return Fail(err, 400, std::string("cmd=\"") + cmd + "\" needs a biz attribute");
  if (!shape.biz && have_biz_) return Fail(err, 400, std::string("cmd=\"") + cmd + "\" takes no biz attribute");
  if (have_biz_ && r->biz.empty()) return Fail(err, 400, "the biz attribute is empty");
  if (shape.key && !have_key_) return Fail(err, 400, std::string("cmd=\"") + cmd + "\" needs a key attribute");
  if (!shape.key && have_key_) return Fail(err, 400, std::string("cmd=\"") + cmd + "\" takes no key attribute");
  if (have_key_) {
    // Printable ASCII needs only its length checked; anything else is
    // checked byte by byte.
    const bool plain = key_ascii_ && !r->key.empty() && r->key.size() <= kMaxKeyBytes;
    if (!plain && !CheckProtocolKey(r->key, err)) return false;
  }
  if (have_n_) {
    if (!shape.n) return Fail(err, 400, std::string("cmd=\"") + cmd + "\" takes no n attribute");
    // A settle's n is the real amount: 0 when nothing was used.
    const int64_t least = r->cmd == Cmd::kSettle ? 0 : 1;
    if (!ParseCount(n_text_, &r->n) || r->n < least)
      return Fail(err, 400,
                  std::string("n must be a whole number from ") + (least == 0 ? "0" : "1") + " to 2147483647");
  }
  // What a command does not take is named before what it lacks: a settle
  // sent a lease= instead of reservation= hears of the lease.
  if (!shape.lease && have_lease_) return Fail(err, 400, std::string("cmd=\"") + cmd + "\" takes no lease attribute");
  if (shape.reservation && (!have_reservation_ || !have_n_))
    return Fail(err, 400,
                "cmd=\"settle\" needs a reservation attribute (the id an acquire answered) and n (the real amount)");
  if (!shape.reservation && have_reservation_)
    return Fail(err, 400, std::string("cmd=\"") + cmd + "\" takes no reservation attribute");
  if (have_reserve_) {
    if (r->cmd != Cmd::kAcquire) return Fail(err, 400, std::string("cmd=\"") + cmd + "\" takes no reserve attribute");
    if (!ParseCount(reserve_text_, &r->reserve) || r->reserve < 1 || r->reserve > 65534)
      return Fail(err, 400, "reserve must be a whole number of seconds from 1 to 65534");
  }
  if (r->cmd == Cmd::kMerge && (r->receipt.empty() || r->receipt.size() > kMaxKeyBytes || r->node.empty()))
    return Fail(err, 400, "cmd=\"merge\" needs a receipt (1..255 bytes) and a node attribute, after cmd");
  if (shape.lease && !have_lease_)
    return Fail(err, 400, std::string("cmd=\"") + cmd + "\" needs a lease attribute (the id an acquire answered)");
  if (shape.count && !have_count_) return Fail(err, 400, "cmd=\"set\" needs a count attribute");
  if (have_count_) {
    if (!shape.count) return Fail(err, 400, std::string("cmd=\"") + cmd + "\" takes no count attribute");
    if (!ParseCount(count_text_, &r->count)) return Fail(err, 400, "count must be a whole number from 0 to 2147483647");
  }
  return true;
}

}  // namespace frs::server
