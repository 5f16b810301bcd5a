// server/request_attrs.h: the attributes of one <request>, checked as they
// come.
//
// Why a class of its own: two decoders read <request> elements, pugixml's
// tree (every body) and the fast scanner (the common shapes, see
// xml_scanner.h). Both feed the attributes, in document order, through this
// one checker, so that they accept and refuse exactly the same requests.
//
// Also the small value checks DecodeQuery shares (counts, keys).
//
// Thread safety: a RequestAttrs is a value used by the one thread that decodes
// its request; the functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "frs/key.h"
#include "server/wire.h"

namespace frs::server {

// The protocol's attribute names.
enum class AttrName : uint8_t {
  kCmd,
  kBiz,
  kKey,
  kN,
  kCount,
  kReceipt,
  kNode,
  kToken,
  kLease,
  kReserve,
  kReservation,
  kReplace,
  kOther
};
AttrName AttrNameOf(std::string_view name);

class RequestAttrs {
 public:
  // Fills `r` (which starts as WireRequest{}).
  explicit RequestAttrs(WireRequest* r) : r_(r) {}
  // `other`'s state, filling `r`, which holds a copy of what `other` filled
  // (the scanner's repeated member prefix).
  RequestAttrs(const RequestAttrs& other, WireRequest* r) : RequestAttrs(other) { r_ = r; }
  RequestAttrs(const RequestAttrs&) = default;
  RequestAttrs& operator=(const RequestAttrs&) = default;

  // One attribute as decoded (entities replaced). False with `err` set on
  // the first thing wrong: a control character, an unknown or repeated
  // attribute, an unknown cmd.
  bool Add(std::string_view name, std::string_view value, ProtocolError* err);
  // A cmd attribute was taken (r->cmd is the one sent).
  bool have_cmd() const { return have_cmd_; }
  // The same for a value its caller knows to hold no control character
  // (the fast scanner stops at every byte that could start one).
  bool AddPlain(std::string_view name, std::string_view value, ProtocolError* err) {
    return AddPlain(AttrNameOf(name), name, value, false, err);
  }
  // The same with the name already recognized, and `ascii` true when the
  // value is known to hold printable ASCII only: a key that is then spared
  // its byte-by-byte check in Finish (the scanner learns it while it looks
  // for the closing quote).
  // Inline for biz and key, the two attributes every batch member carries
  // once; everything else, and every refusal, out of line.
  bool AddPlain(AttrName which, std::string_view name, std::string_view value, bool ascii, ProtocolError* err) {
    if (which == AttrName::kBiz && !have_biz_) {
      have_biz_ = true;
      r_->biz = value;
      return true;
    }
    if (which == AttrName::kKey && !have_key_) {
      have_key_ = true;
      key_ascii_ = ascii;
      r_->key = value;
      return true;
    }
    return AddOther(which, name, value, ascii, err);
  }
  // After the last attribute: what the cmd needs is there and well-formed.
  // Inline for the common member (a cmd about one key, a biz, a printable
  // key, no n or count), which needs nothing more checked.
  bool Finish(ProtocolError* err) {
    const bool one_key = r_->cmd == Cmd::kQuery || r_->cmd == Cmd::kUpdate || r_->cmd == Cmd::kAcquire ||
                         r_->cmd == Cmd::kGet || r_->cmd == Cmd::kDelete;
    if (have_cmd_ && one_key && have_biz_ && !r_->biz.empty() && have_key_ && key_ascii_ && !r_->key.empty() &&
        r_->key.size() <= kMaxKeyBytes && !have_n_ && !have_count_ && !have_lease_ && !have_res_)
      return true;
    return FinishOther(err);
  }

 private:
  bool AddOther(AttrName which, std::string_view name, std::string_view value, bool ascii, ProtocolError* err);
  bool FinishOther(ProtocolError* err);

  WireRequest* r_;
  bool have_cmd_ = false, have_biz_ = false, have_key_ = false, have_n_ = false, have_count_ = false;
  bool have_lease_ = false;
  bool have_res_ = false;  // reserve or reservation
  bool have_reserve_ = false, have_reservation_ = false;
  std::string_view reserve_text_;
  bool key_ascii_ = false;
  std::string_view n_text_, count_text_;
};

// Sets `err` and returns false.
bool Fail(ProtocolError* err, int status, std::string msg);
// Decimal 0..kMaxUses, nothing else (no sign, no spaces, no hex).
bool ParseCount(std::string_view s, int64_t* out);
// 1..255 bytes of UTF-8 without control characters (frs::ValidateKeyBytes),
// and no U+FFFE or U+FFFF: what the XML protocol can carry, so a GET form
// makes no node a <request> could not name (one key, every door). Else a
// 400 naming why.
bool CheckProtocolKey(std::string_view key, ProtocolError* err);
// A control character (C0, DEL, or C1 as UTF-8) in a decoded value.
bool HasControl(std::string_view v);

}  // namespace frs::server
