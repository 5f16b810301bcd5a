// limit/node_op.h: one command applied to one node's state.
//
// The store runs the mutator under the node's chain lock on a private copy of
// the state; NodeOp is that mutator's body. It first brings the state to the
// biz's current layout (a reload may have added, removed, reordered or
// changed rules: blocks are matched by their (algo, interval) tag), then
// judges the rules together and records on all of them or none.
//
// The store may run a mutator more than once for one call (it retries when
// a node must grow into another chain), so Apply derives everything from
// the NodeRef it is given and overwrites its outputs.
//
// Thread safety: a NodeOp belongs to one call.
#pragma once

#include <cstdint>
#include <span>

#include "frs/decision.h"
#include "frs/store.h"
#include "limit/concurrency.h"
#include "limit/lease_id.h"
#include "limit/map_config.h"
#include "limit/reservation.h"

namespace frs::limit {

// Gives a verdict its rule's policy name and quota (RateLimit-Policy).
void NameRule(const RuleSpec& spec, RuleResult* r);

// What a node's conversion to a reloaded layout ended: leases (a lowered
// max into fewer places, a removed concurrency rule, and those past their
// expiry that no sweep had counted yet) and reservations (a lowered
// `reservations`, or none kept). A write that stores the conversion counts
// them as expired: they ended without a release or a settle.
struct LayoutEnded {
  uint32_t leases = 0, reservations = 0;
  // Of those leases, the ones that still held (not expired), for the other
  // holder of the route, which ends them by serial: its copy, converted by
  // its own reload or not yet, keeps leases by time only, so those would
  // hold there until their expiry (a failover then refused a key whose
  // places were free). The first held_n of held_serial (at most
  // Decision::kMaxLeasesEnded; left unset past them: every request makes
  // one of these, and a conversion is rare).
  uint32_t held_n = 0;
  uint32_t nonce = 0;  // their node's series
  uint32_t held_serial[Decision::kMaxLeasesEnded];
};

// Brings ref.state to biz's layout. When the node holds more state bytes
// than were asked for and its layout differs (a rule was removed or
// shrank), the blocks past the copied prefix are needed: sets *need_bytes
// to the stored size and returns false (call again with that many bytes).
// *converted (when given) says whether the state was rebuilt (its rules or
// its reservation table), *ended what that ended.
bool AdoptLayout(const BizConfig& biz, NodeRef& ref, const Now& now, uint32_t* need_bytes, bool* converted = nullptr,
                 LayoutEnded* ended = nullptr);
// Rebuilds biz's blocks in `state` (biz.state_bytes, zeroed first) from
// `old_state`, a sequence of tagged blocks of any layout. True when a rate
// rule started from zero (no block was its, or none converted): it never
// counted the reservations the node holds (PlaceReservations marks them).
// `written_max` (optional, per tagged block of old_state in order): the max
// each token bucket block was written under, as an export said it ("max");
// 0 or absent: the rule history's, else the block's own 16 bits.
bool MigrateState(const BizConfig& biz, std::span<const uint8_t> old_state, uint8_t* state, const Now& now,
                  std::span<const int64_t> written_max = {});

// Judges "n more now" on every rule into d->rules / d->nrules.
void EvaluateRules(const BizConfig& biz, const uint8_t* state, const Now& now, int64_t n, Decision* d);
// Sets d's top fields from its rules: the denying rule with the largest
// retry_after, else the one with the least remaining. `enforce` false
// (shadow): allowed regardless, would_deny tells.
void Summarize(Decision* d, bool enforce);
// When the node is equivalent to a fresh one (unix s, clamped to 32 bits).
uint32_t NodeExpireS(const BizConfig& biz, const uint8_t* state, const Now& now);
// Records n on every rule, keeping d's pre-record verdicts (allowed,
// retry_after) and reporting the counts after.
void RecordRules(const BizConfig& biz, uint8_t* state, const Now& now, int64_t n, Decision* d);

// A give-back (a release naming no lease, Request::give_back), of a request
// and of a replica's copy alike: lowers each rule's count now (held leases
// for a concurrency rule, unless !leases) by n, never below 0; a concurrency
// rule's SetCount keeps the leases that expire last, so those granted (or
// renewed) earliest end first, and says which it ended in d (leases_ended).
// A copy whose sender names the leases it ended ends those instead
// (leases false). Returns the most any rule gave back; d's rules are left
// judged before it.
int64_t GiveBackUses(const BizConfig& biz, uint8_t* state, const Now& now, int64_t n, Decision* d, bool leases = true);
// The leases a set or a give-back ended, in d (leases_ended, lease_nonce),
// after those of NoteConversionEnded.
void NoteLeasesEnded(const BizConfig& biz, const uint8_t* state, const Concurrency::Ended& ended, Decision* d);
// The leases the node's conversion to its biz's layout ended while they
// held (LayoutEnded::held_serial), in d: the first in leases_ended, which the
// other holder of the route ends by serial (limit/rule_event.h).
void NoteConversionEnded(const LayoutEnded& ended, Decision* d);

// What a read (query, get) answers of a node: adopts biz's layout, then
// judges "n more now" on every rule and sums up. False, with d untouched:
// the node holds more state than `ref` carries (*need_bytes says how much),
// read it again with that many bytes.
bool ReadRules(const BizConfig& biz, NodeRef& ref, const Now& now, int64_t n, Decision* d, uint32_t* need_bytes);

// Leases (the biz's concurrency rule, if any). SweepLeases frees the leases
// past their expiry and returns how many (the caller counts them, and
// writes the node when any). LeaseGranted fills d's lease when the rule
// granted one since its next serial was `next_before`.
uint32_t SweepLeases(const BizConfig& biz, uint8_t* state, const Now& now);
uint32_t NextLeaseSerial(const BizConfig& biz, const uint8_t* state);
// The leases an admin set granted (serials from next_before), for the
// other holder: it grants none itself, and holds these under their ids.
void LeasesSet(const BizConfig& biz, const uint8_t* state, const Now& now, uint32_t next_before, Decision* d);
void LeaseGranted(const BizConfig& biz, const uint8_t* state, const Now& now, std::string_view key,
                  const LeaseSecret& secret, uint32_t next_before, Decision* d);

// Reservations (limit/reservation.h; their code is in reservation_op.cc).
// ReservationsInPlace: the node's table, if any, sits after biz's rules,
// from one entry to biz's bound long (ref.state_bytes is made to end with
// it, or with the rules). PlaceReservations: moves a table found in `old`
// there, as long as it was within biz's bound (false: *need_bytes says the
// bytes to read the node with first); `rule_started` (MigrateState's
// answer) marks the reservations it holds as taken before a rule that never
// counted them, which a settle then changes nowhere (Reservations::Predates);
// `from_other_holder`: `old` is the route's other holder's node (a replica
// snapshot), whose adopted marks are turned to this holder's view
// (Reservations::SeenFromTheOtherHolder).
// SweepReservations frees the expired ones and returns how many.
// GrantReservation takes one for an acquire that recorded `n`;
// HasReservationRoom, asked before recording, makes the table (of one
// entry) when the node has none and grows it by one when every entry is
// held, within biz's bound (`asked`: the bytes the node was read with;
// false: *need_bytes more are needed, or the table is at its bound and full,
// and d->res_expires says when its first one expires). MakeReservationRoom
// makes the table (a replica's copy taking the sender's) or grows it to
// `entries`, within the bound: false only when *need_bytes more are needed.
// ReservationEntriesUsed: the entries not free (held, or kept ahead).
// NodeExpireS with the table: a node is kept while it holds one.
bool ReservationsInPlace(const BizConfig& biz, NodeRef& ref);
bool PlaceReservations(const BizConfig& biz, std::span<const uint8_t> old, NodeRef& ref, uint32_t* need_bytes,
                       bool rule_started = false, bool from_other_holder = false);
uint32_t SweepReservations(const BizConfig& biz, NodeRef& ref, const Now& now);
bool HasReservationRoom(const BizConfig& biz, NodeRef& ref, uint32_t asked, uint32_t* need_bytes, Decision* d);
bool MakeReservationRoom(const BizConfig& biz, NodeRef& ref, uint32_t asked, uint32_t entries, uint32_t* need_bytes);
uint32_t ReservationEntriesUsed(const BizConfig& biz, const NodeRef& ref);
void GrantReservation(const BizConfig& biz, NodeRef& ref, const Now& now, std::string_view key,
                      const LeaseSecret& secret, int64_t n, int64_t reserve_s, Decision* d);
// When a batch with `together` members reserving on ref's node finds room
// there: the instant enough of the reservations held before it expire.
// `own`: the serials the batch's earlier members took on the node, which go
// back with the batch when it is refused and hold no place after it.
int64_t ReservationRoomAt(const BizConfig& biz, const NodeRef& ref, int64_t now_s, std::span<const uint32_t> own,
                          uint32_t together);
uint32_t NodeExpireS(const BizConfig& biz, const NodeRef& ref, const Now& now);
// SettleReservation: the one settle, of a request (NodeOp, once the id is
// checked) and of a replica's copy (limit/rule_event.h, at the sender's
// instant `at`: a window ended there has ended here): charges `serial` at
// `real` in every rule's window as it was taken in, adds what each rule gave
// back and charged beyond the estimate to *sum, and frees it (its expiry in
// *expires, when given); false (and nothing changed) when the node does not
// hold it.
// AdoptReservation keeps the other holder's reservation `e` under its serial
// and table nonce (the table made first by HasReservationRoom), or settles
// it at once when its settle came first (SettleAheadOfItsTake: the sender's
// workers send on links of their own, so a settle made on one can overtake
// the take made on another; it is kept until the take of that serial under
// the same table `nonce` comes, or until the reservation's `expires`).
bool SettleReservation(const BizConfig& biz, NodeRef& ref, const Now& at, uint32_t serial, int64_t real,
                       Reservations::RuleSettle* sum, int64_t* expires = nullptr);
void AdoptReservation(const BizConfig& biz, NodeRef& ref, uint32_t nonce, const Reservations::Entry& e,
                      const TimeZone* tz);
void SettleAheadOfItsTake(const BizConfig& biz, NodeRef& ref, const Now& at, uint32_t serial, int64_t real,
                          int64_t expires, uint32_t nonce);

struct NodeOp {
  const BizConfig* biz = nullptr;
  Cmd cmd = Cmd::kQuery;
  std::string_view key;                 // for lease ids
  const LeaseSecret* secret = nullptr;  // for lease ids
  const LeaseSecret* also = nullptr;    // a rotation's second key: its ids verify too, none is made
  std::string_view lease;               // kRelease, kRenew: the id (checked well-formed)
  int64_t reserve = 0;                  // kAcquire: take a reservation for this many seconds
  std::string_view reservation;         // kSettle: the id (checked well-formed); n is the real amount
  ParsedLeaseId id;                     // lease or reservation taken apart by the check (serial 0: parse here)
  int64_t n = 1;
  int64_t count = 0;       // kSet
  bool give_back = false;  // kRelease: n uses given back, no lease named (Request::give_back)
  Now now;
  Decision* d = nullptr;
  uint32_t need_bytes = 0;  // out: see AdoptLayout
  bool recorded = false;    // out: uses were recorded

  Commit Apply(NodeRef& ref);

 private:
  Commit ApplyLease(NodeRef& ref, bool converted, uint32_t expired);
  Commit ApplyGiveBack(NodeRef& ref, bool converted, uint32_t expired);
  Commit ApplySettle(NodeRef& ref, bool changed);
};

}  // namespace frs::limit
