// A node's reservation table as NodeOp and a batch's acquires see it: where
// it sits, how a node gets one, and the settle command
// (limit/reservation.h says what a reservation is).
#include <algorithm>
#include <cstring>
#include <string>

#include "limit/node_op.h"
#include "limit/reservation.h"
#include "limit/rule_state.h"

namespace frs::limit {
namespace {

// A table after biz's rules: of any length from one entry to biz's bound
// (it grows with what the key holds at once: MakeReservationRoom).
struct Table {
  uint8_t* p = nullptr;
  uint32_t bytes = 0;
  explicit operator bool() const { return p != nullptr; }
};

// Whether `tag` is a table's of a length biz takes (its length: TagBytes).
bool TableTagFits(const BizConfig& biz, uint32_t tag) {
  const uint32_t bytes = (tag >> 27) * kBlockUnit;  // a table's tag has no other bit
  return Reservations::IsTag(tag) && bytes >= Reservations::Bytes(1) && bytes <= biz.res_bytes;
}

// The table in biz's place, or none. (On every request that reserves or
// settles, several times: kept to a few instructions.)
inline Table TableOf(const BizConfig& biz, const NodeRef& ref) {
  const uint32_t at = biz.state_bytes;
  if (ref.state_bytes < at + Reservations::Bytes(1)) return {};
  const uint32_t tag = Load32(ref.state + at);
  const uint32_t bytes = (tag >> 27) * kBlockUnit;
  if ((tag & ~(15u << 27)) != 0 || bytes < Reservations::Bytes(1) || bytes > biz.res_bytes ||
      ref.state_bytes < at + bytes)
    return {};
  return Table{ref.state + at, bytes};
}

// The node ends with its rules (nothing follows them).
void DropTail(const BizConfig& biz, NodeRef& ref) {
  if (ref.state_bytes > biz.state_bytes) std::memset(ref.state + biz.state_bytes, 0, ref.state_bytes - biz.state_bytes);
  ref.state_bytes = std::min(ref.state_bytes, biz.state_bytes);
}

}  // namespace

bool ReservationsInPlace(const BizConfig& biz, NodeRef& ref) {
  const uint32_t have = std::min(ref.stored_state_bytes, ref.state_bytes);
  if (biz.res_bytes != 0 && have >= biz.state_bytes + Reservations::Bytes(1)) {
    const uint32_t tag = Load32(ref.state + biz.state_bytes);
    if (TableTagFits(biz, tag) && have >= biz.state_bytes + (tag >> 27) * kBlockUnit) {
      const uint32_t end = biz.state_bytes + (tag >> 27) * kBlockUnit;
      std::memset(ref.state + end, 0, ref.state_bytes - end);
      ref.state_bytes = end;
      return true;
    }
  }
  if (!Reservations::Find(std::span<const uint8_t>(ref.state, have)).empty()) return false;
  DropTail(biz, ref);
  return true;
}

bool PlaceReservations(const BizConfig& biz, std::span<const uint8_t> old, NodeRef& ref, uint32_t* need_bytes,
                       bool rule_started, bool from_other_holder) {
  const std::span<const uint8_t> table = Reservations::Find(old);
  if (table.empty() || biz.res_cap == 0) {
    // A reload that took reservations away: the held ones stay charged
    // their estimates, as at their expiry.
    DropTail(biz, ref);
    return true;
  }
  // As long as it was, within biz's bound (a lowered bound keeps those
  // that end last: Rebuild).
  const uint32_t cap = std::min(biz.res_cap, std::max<uint32_t>(1, Reservations::Cap(Clamp32(table.size()))));
  const uint32_t end = biz.state_bytes + Reservations::Bytes(cap);
  if (ref.state_bytes < end) {
    *need_bytes = end;
    return false;
  }
  Reservations::Rebuild(table, ref.state + biz.state_bytes, cap);
  if (from_other_holder) Reservations::SeenFromTheOtherHolder(ref.state + biz.state_bytes, Reservations::Bytes(cap));
  if (rule_started) Reservations::MarkHeldBeforeARule(ref.state + biz.state_bytes, Reservations::Bytes(cap));
  std::memset(ref.state + end, 0, ref.state_bytes - end);
  ref.state_bytes = end;
  return true;
}

uint32_t SweepReservations(const BizConfig& biz, NodeRef& ref, const Now& now) {
  const Table t = TableOf(biz, ref);
  return t ? Reservations::Sweep(t.p, t.bytes, now.s) : 0;
}

namespace {

// The table made, or grown to `cap` entries (more than it has, at most
// biz's bound); false: `asked` is short of it (*need_bytes).
bool GrowTable(const BizConfig& biz, NodeRef& ref, const Table& t, uint32_t cap, uint32_t asked, uint32_t* need_bytes) {
  const uint32_t end = biz.state_bytes + Reservations::Bytes(cap);
  if (asked < end) {
    *need_bytes = end;
    return false;
  }
  uint8_t* at = ref.state + biz.state_bytes;
  if (!t) {
    Reservations::Rebuild({}, at, cap);
  } else {
    // The entries added are free: zero, as the store gives what it was
    // asked for past the stored state (zeroed here all the same: cheap, and
    // it rests on no caller).
    std::memset(at + t.bytes, 0, Reservations::Bytes(cap) - t.bytes);
    Store32(at, Reservations::Tag(Reservations::Bytes(cap)));
  }
  ref.state_bytes = end;
  return true;
}

}  // namespace

bool HasReservationRoom(const BizConfig& biz, NodeRef& ref, uint32_t asked, uint32_t* need_bytes, Decision* d) {
  const Table t = TableOf(biz, ref);
  // A node that never took one gets a table of one entry; one whose every
  // entry is held grows by one, up to biz's bound: a key holds the room of
  // the most it has held at once (a table is made smaller only by a
  // reload's bound), not the bound's in every node.
  if (!t) return biz.res_cap == 0 || GrowTable(biz, ref, t, 1, asked, need_bytes);
  // The sweep before this freed every entry past its expiry: each one in
  // use is held.
  int64_t first_expiry = 0;
  uint32_t occupied = 0;
  const uint32_t cap = Reservations::Cap(t.bytes);
  const uint32_t held = Reservations::InUse(t.p, t.bytes, &first_expiry, &occupied);
  // A settle kept ahead of its take (a copy that serves after a failover)
  // keeps its entry while the table may still grow: Take would reuse it.
  if (occupied < cap || (held < cap && cap == biz.res_cap)) return true;
  if (cap < biz.res_cap) return GrowTable(biz, ref, t, cap + 1, asked, need_bytes);
  d->res_expires = first_expiry;
  return false;
}

bool MakeReservationRoom(const BizConfig& biz, NodeRef& ref, uint32_t asked, uint32_t entries, uint32_t* need_bytes) {
  const Table t = TableOf(biz, ref);
  const uint32_t cap = t ? Reservations::Cap(t.bytes) : 0;
  const uint32_t want = std::min(biz.res_cap, std::max(entries, 1u));
  return want <= cap || GrowTable(biz, ref, t, want, asked, need_bytes);
}

uint32_t ReservationEntriesUsed(const BizConfig& biz, const NodeRef& ref) {
  const Table t = TableOf(biz, ref);
  int64_t first_expiry = 0;
  uint32_t occupied = 0;
  if (t) Reservations::InUse(t.p, t.bytes, &first_expiry, &occupied);
  return occupied;
}

int64_t ReservationRoomAt(const BizConfig& biz, const NodeRef& ref, int64_t now_s, std::span<const uint32_t> own,
                          uint32_t together) {
  const Table t = TableOf(biz, ref);
  if (!t) return now_s;
  Reservations::Entry held[Reservations::kMaxPerKey];
  const uint32_t n = std::min<uint32_t>(Reservations::Held(t.p, t.bytes, now_s, held), Reservations::kMaxPerKey);
  int64_t before[Reservations::kMaxPerKey];
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; ++i)
    if (std::find(own.begin(), own.end(), held[i].serial) == own.end()) before[m++] = held[i].expires;
  // `together` places needed, cap - m free once the batch's own are put back.
  const uint32_t free = biz.res_cap > m ? biz.res_cap - m : 0;
  if (together <= free) return now_s;
  const uint32_t wait_for = std::min(together - free, m);
  if (wait_for == 0) return now_s;
  std::nth_element(before, before + wait_for - 1, before + m);
  return before[wait_for - 1];
}

void GrantReservation(const BizConfig& biz, NodeRef& ref, const Now& now, std::string_view key,
                      const LeaseSecret& secret, int64_t n, int64_t reserve_s, Decision* d) {
  const Table t = TableOf(biz, ref);
  Reservations::Entry e;
  if (!t || !Reservations::Take(t.p, t.bytes, n, now.s, reserve_s, &e, now.serial_half)) return;
  d->res_serial = e.serial;
  d->res_nonce = Reservations::Nonce(t.p);
  d->res_mac = Reservations::Mac(secret, biz.id, Reservations::Nonce(t.p), e.serial, key);
  d->res_expires = e.expires;
}

void AdoptReservation(const BizConfig& biz, NodeRef& ref, uint32_t nonce, const Reservations::Entry& e,
                      const TimeZone* tz) {
  const Table t = TableOf(biz, ref);
  if (!t) return;
  int64_t real = 0, settled_s = 0;
  if (!Reservations::TakeSettledAhead(t.p, t.bytes, e.serial, e.expires, nonce, &real, &settled_s)) {
    Reservations::Adopt(t.p, t.bytes, nonce, e);
    return;
  }
  // Settled by the other holder before this copy had it: settled now, as
  // it was there (the estimate's add came just before this, from the same
  // request), and never held here.
  Reservations::Adopt(t.p, t.bytes, nonce, e);
  Reservations::RuleSettle sum;
  SettleReservation(biz, ref, Now::At(settled_s * 1000, tz), e.serial, real, &sum);
}

void SettleAheadOfItsTake(const BizConfig& biz, NodeRef& ref, const Now& at, uint32_t serial, int64_t real,
                          int64_t expires, uint32_t nonce) {
  const Table t = TableOf(biz, ref);
  if (t) Reservations::SettledAhead(t.p, t.bytes, serial, real, at.s, expires, nonce);
}

bool SettleReservation(const BizConfig& biz, NodeRef& ref, const Now& at, uint32_t serial, int64_t real,
                       Reservations::RuleSettle* sum, int64_t* expires) {
  const Table t = TableOf(biz, ref);
  Reservations::Entry e;
  if (!t || !Reservations::Get(t.p, t.bytes, serial, &e)) return false;
  if (expires != nullptr) *expires = e.expires;
  // Taken before a rule that started from zero: that rule's count is other
  // clients' uses only, and no rule's own state says which rules counted
  // this one, so each keeps the estimate (as after the window ended).
  const bool predates = Reservations::Predates(t.p, t.bytes, serial);
  for (uint32_t i = 0; i < biz.nrules && !predates; ++i) {
    const Reservations::RuleSettle r =
        Reservations::SettleRule(biz.rules[i], ref.state + biz.rules[i].offset, at, e, real);
    sum->returned += r.returned;
    sum->overrun += r.overrun;
  }
  Reservations::Free(t.p, t.bytes, serial);
  return true;
}

uint32_t NodeExpireS(const BizConfig& biz, const NodeRef& ref, const Now& now) {
  const uint32_t rules = NodeExpireS(biz, ref.state, now);
  const Table t = TableOf(biz, ref);
  return t ? std::max(rules, Clamp32(Reservations::LastExpiry(t.p, t.bytes))) : rules;
}

namespace {
// Whether a reservation id's hash was made under `secret` (null: no key).
bool ReservationMadeUnder(const LeaseSecret* secret, const BizConfig& biz, const uint8_t* table, uint32_t serial,
                          std::string_view key, uint64_t mac) {
  return secret != nullptr && Reservations::Mac(*secret, biz.id, Reservations::Nonce(table), serial, key) == mac;
}
}  // namespace

Commit NodeOp::ApplySettle(NodeRef& ref, bool changed) {
  d->status = Status::OK();
  const Table table = ref.exists ? TableOf(*biz, ref) : Table{};
  uint8_t* t = table.p;
  uint32_t serial = id.serial;
  uint64_t mac = id.mac;
  // Made only for an error's message: 24 digits do not fit a short string,
  // and a settle that succeeds should not allocate one.
  auto text = [this] { return std::string(reservation); };
  // The id's hash first: an id of another key, a lease's or a forged one
  // learns nothing and settles nothing.
  if (t == nullptr) {
    d->status = Status::Conflict(
        "reservation " + text() +
        " is unknown: this key holds no reservation (none taken, the key's node erased since by an operator's reset or "
        "delete, or evicted for room: frs_store_evictions_live_total)");
  } else if ((serial == 0 && !ParseLeaseId(reservation, &serial, &mac)) ||
             !(ReservationMadeUnder(secret, *biz, t, serial, key, mac) ||
               ReservationMadeUnder(also, *biz, t, serial, key, mac))) {
    d->status =
        Status::Conflict("reservation " + text() + " is unknown: it was never taken for this key in biz '" + biz->name +
                         "' (another biz's or key's id, a lease's, a forged one, one of a node an operator's reset or "
                         "delete erased since, or "
                         "one taken on another frsd keyed otherwise: shards without one <cluster lease_key>)");
  } else if (Reservations::RuleSettle sum; !SettleReservation(*biz, ref, now, serial, n, &sum, &d->res_expires)) {
    // The sweep before this freed (and counted) one that expired.
    d->status = Status::Gone("reservation " + text() +
                             " is no longer held: settled already, or expired (and charged its estimate; so is one "
                             "ended by a reload that lowered the reservations per key, logged then), or taken after "
                             "the export a restore of this store went back to (forgotten with its count)");
  } else {
    d->res_returned = sum.returned;
    d->res_overrun = sum.overrun;
    d->res_nonce = Reservations::Nonce(t);  // which table's serial, for the other holder
    d->settled = true;
    changed = true;
  }
  EvaluateRules(*biz, ref.state, now, 1, d);
  Summarize(d, biz->mode == Mode::kEnforce);
  // A settle is a report of what was used, not a request: it is never
  // denied (one that failed reads not allowed: the engine says so of every
  // decision whose status is not OK).
  d->allowed = true;
  d->retry_after = 0;
  if (!changed) return Commit::kNone;
  ref.expire_s = NodeExpireS(*biz, ref, now);
  return Commit::kWrite;
}

}  // namespace frs::limit
