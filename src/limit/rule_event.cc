#include "limit/rule_event.h"

#include <algorithm>

#include "limit/concurrency.h"
#include "limit/lease_id.h"
#include "limit/node_op.h"
#include "limit/reservation.h"
#include "limit/rule_state.h"

namespace frs::limit {
namespace {

// A key's reservations: the sweep first (as the sender's request began
// with it), then what the request took or settled.
void SendReservationEvents(const Request& req, const Decision& d, Change c, EventPhase when, ChangeSink* sink) {
  if (when == EventPhase::kBefore) {
    if (d.res_expired == 0) return;
    c.event = Change::Event::kResSweep;
    sink->OnChange(c);
    return;
  }
  if (!d.ok()) return;
  if (req.cmd == Cmd::kAcquire && d.res_serial != 0) {
    c.event = Change::Event::kResTake;
    c.item = d.res_serial;
    c.until = d.res_expires;
    c.nonce = d.res_nonce;
    c.n = std::clamp<int64_t>(req.n, 1, kMaxUses);
  } else if (req.cmd == Cmd::kSettle && d.settled) {
    uint64_t mac = 0;
    if (!ParseLeaseId(req.reservation, &c.item, &mac)) return;
    c.event = Change::Event::kResSettle;
    c.n = std::clamp<int64_t>(req.n, 0, kMaxUses);
    c.until = d.res_expires;  // how long a copy the take has not reached yet keeps the settle
    c.nonce = d.res_nonce;    // and which take it is for
  } else {
    return;
  }
  sink->OnChange(c);
}

// The leases a set or a give-back ended (Decision::leases_ended), as
// releases of their serials. Past the first Decision::kMaxLeasesEnded the
// copy keeps the rest until their expiry: it refuses more, never grants more.
void SendLeasesEnded(const Decision& d, Change c, ChangeSink* sink) {
  c.event = Change::Event::kLeaseRelease;
  c.n = 0;
  c.until = 0;
  c.nonce = d.lease_nonce;
  for (uint32_t i = 0; i < d.leases_ended_n; ++i) {
    c.item = d.leases_ended[i];
    sink->OnChange(c);
  }
}

// A settle that says its reservation's expiry: kept until its take comes,
// on a node made for it if need be.
bool SettleKeptAhead(const Change& c) { return c.event == Change::Event::kResSettle && c.until > 0; }

}  // namespace

void SendRuleEvents(const BizConfig& biz, const Request& req, const Decision& d, const Change& base, EventPhase when,
                    ChangeSink* sink) {
  Change c = base;
  c.kind = Change::Kind::kEvent;
  c.n = 0;
  // A release without an id gives uses back on any rule: the other holder
  // lowers the same counts (the same leases end: both hold the same).
  if (when == EventPhase::kAfter && req.cmd == Cmd::kRelease && req.give_back && d.ok() && d.given_back > 0) {
    c.event = Change::Event::kGiveBack;
    c.n = std::clamp<int64_t>(req.n, 1, kMaxUses);
    c.item = 1;  // its leases follow, by serial
    sink->OnChange(c);
    SendLeasesEnded(d, c, sink);
    return;
  }
  SendReservationEvents(req, d, c, when, sink);
  if (biz.lease_rule < 0) return;
  if (when == EventPhase::kBefore) {
    // The sweep first: the grant that follows may take a place it freed.
    if (d.leases_expired == 0) return;
    c.event = Change::Event::kLeaseSweep;
    sink->OnChange(c);
    // The leases a conversion ended while they held (a max lowered into
    // fewer places: LayoutEnded::held_serial), which no sweep ends on the
    // copy: by serial. A set, and a give-back that gave back, send them
    // with their own (after them: EventPhase::kAfter).
    const bool gave_back = req.cmd == Cmd::kRelease && req.give_back && d.ok() && d.given_back > 0;
    if (req.cmd != Cmd::kSet && !gave_back) SendLeasesEnded(d, c, sink);
    return;
  }
  if (!d.ok()) return;
  if (req.cmd == Cmd::kSet) {
    // The leases the set ended, by serial: a copy that ended its own
    // first-expiring ones ended others where another worker's grant came
    // before the set, or a release after it.
    SendLeasesEnded(d, c, sink);
    // The leases the set granted, as grants: made by the copy itself they
    // were other leases, of its own nonce, whose ids the sender's clients
    // could not release there.
    c.n = 0;
    c.item = 0;
    c.event = Change::Event::kLeaseGrant;
    c.until = d.lease_expires;
    c.nonce = d.lease_nonce;
    uint32_t serial = d.set_lease_first;
    for (uint16_t i = 0; i < d.set_leases; ++i, serial = Concurrency::NextInHalf(serial, req.serial_half)) {
      c.item = serial;
      sink->OnChange(c);
    }
    return;
  }
  if (req.cmd == Cmd::kRelease) {
    uint64_t mac = 0;
    if (!d.released || !ParseLeaseId(req.lease, &c.item, &mac)) return;
    c.event = Change::Event::kLeaseRelease;
    c.nonce = d.lease_nonce;  // which series the serial is of, at the other holder
  } else if (d.lease_serial != 0 && (req.cmd == Cmd::kAcquire || req.cmd == Cmd::kUpdate || req.cmd == Cmd::kRenew)) {
    c.event = req.cmd == Cmd::kRenew ? Change::Event::kLeaseRenew : Change::Event::kLeaseGrant;
    c.item = d.lease_serial;
    c.until = d.lease_expires;
    c.nonce = d.lease_nonce;
  } else {
    return;
  }
  sink->OnChange(c);
}

void ApplyRuleEvent(const BizConfig& biz, NodeRef& ref, const Change& c, const Now& now) {
  uint8_t* state = ref.state;
  switch (c.event) {
    case Change::Event::kResTake: {
      const Now at = Now::At(c.at_ms, now.tz);
      AdoptReservation(biz, ref, c.nonce, Reservations::Entry{c.item, c.n, at.s, c.until}, now.tz);
      return;
    }
    case Change::Event::kResSettle: {
      Reservations::RuleSettle sum;  // the sender's answer said it
      const Now at = Now::At(c.at_ms, now.tz);
      // Not held here: its take, made on another of the sender's workers,
      // has not come yet (or this copy let it go: expired, or its place
      // given to another). Kept for the take (a sender that did not say
      // the expiry: dropped, as before).
      if (!SettleReservation(biz, ref, at, c.item, c.n, &sum) && c.until > 0)
        SettleAheadOfItsTake(biz, ref, at, c.item, c.n, c.until, c.nonce);
      return;
    }
    case Change::Event::kResSweep:
      // As kLeaseSweep: the same entries expired there; not counted here.
      SweepReservations(biz, ref, Now::At(c.at_ms, now.tz));
      return;
    default: break;
  }
  if (c.event == Change::Event::kGiveBack) {
    Decision d;
    // A sender that names the leases it ended (item 1) sends them next.
    GiveBackUses(biz, state, now, c.n, &d, /*leases=*/c.item == 0);
    return;
  }
  if (biz.lease_rule < 0) return;
  const RuleSpec& spec = biz.rules[biz.lease_rule];
  uint8_t* block = state + spec.offset;
  switch (c.event) {
    case Change::Event::kLeaseGrant:
    case Change::Event::kLeaseRenew: Concurrency::Adopt(spec, block, now, c.item, c.until, c.nonce); return;
    case Change::Event::kLeaseRelease: Concurrency::FreeAdopted(spec, block, now, c.item, c.nonce); return;
    case Change::Event::kLeaseSweep:
      // What expired by the sender's instant (the same leases: expiries
      // are the same on both); not counted here.
      Concurrency::Sweep(spec, block, Now::At(c.at_ms, nullptr));
      return;
    case Change::Event::kGiveBack:  // handled above, for every rule
    case Change::Event::kResTake:
    case Change::Event::kResSettle:
    case Change::Event::kResSweep:
    case Change::Event::kNone: return;
  }
}

bool RuleEventCreates(const Change& c) {
  return c.event == Change::Event::kLeaseGrant || c.event == Change::Event::kLeaseRenew ||
         c.event == Change::Event::kResTake || SettleKeptAhead(c);
}

bool RuleEventNeedsTable(const Change& c) { return c.event == Change::Event::kResTake || SettleKeptAhead(c); }

}  // namespace frs::limit
