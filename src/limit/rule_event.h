// limit/rule_event.h: a rule's own events, replicated (frs/change.h,
// Change::Kind::kEvent).
//
// A count replicates as "n uses at at_ms", merged into the other holder's
// node. A concurrency rule's state is more than a count: it names leases,
// and a lease's id must verify, and its release and renewal act, on either
// holder. So the holder that decided sends what it did to each lease
// (granted with its serial, expiry and the node's nonce; released;
// renewed; the expired ones swept), and the other holder applies the same
// events to its copy: both hold the same leases under the same ids (the MAC
// secret being shared, <cluster lease_key>). Events made on one of the
// sender's workers arrive in order; two workers' in any order: a renewal
// that overtakes its grant keeps the later expiry, but a release that
// overtakes it frees nothing, and the grant then holds a place on the copy
// until its expiry (docs/cluster.md, "Leases on replicas"). An admin set and
// a give-back send the leases they ended as releases, by serial (a copy
// that ended its own first-expiring ones ended others when the events of
// another worker came in another order). The sender counts the
// leases it found expired (frs_leases_expired_total); the other holder frees
// them silently, so an expiry is counted once. Every other event leaves the
// copy's expired leases (and keeps a grant that arrives expired, unless
// this copy swept that lease already) for the next write on this holder to
// count. A sweep names no leases: it frees every lease of the copy expired
// by the sender's instant, one only the copy held included (docs/cluster.md,
// "Counting expiries", its bounds).
//
// A key's reservations (limit/reservation.h) replicate the same way: taken
// (serial, estimate, taken at, expiry, the table's nonce: the acquire's
// estimate itself comes as its count's add), settled (serial, real amount:
// the other holder settles its copy by the same rules at the sender's
// instant, so a window ended there changes nothing here either; a settle
// that overtakes its take is kept in the table until the take comes, then
// applied), the expired ones swept (an expiry changes only the table, and
// is counted by the sender). Both hold the same table, so an id the owner gave settles
// once on its successor after a failover.
//
// Another rule whose state names items adds its events to Change::Event
// and a case to each function here.
//
// Thread safety: plain functions.
#pragma once

#include "frs/change.h"
#include "frs/decision.h"
#include "frs/store.h"
#include "limit/map_config.h"

namespace frs::limit {

// The events one decided request made, each told to `sink` as a copy of
// `base` (its biz, key, route and at_ms filled): first the sweep the
// request began with, whatever its answer; then the grant, release or
// renewal, if it made one. `when` says which of the two to send (the
// count's change goes between them).
enum class EventPhase : uint8_t { kBefore, kAfter };
void SendRuleEvents(const BizConfig& biz, const Request& req, const Decision& d, const Change& base, EventPhase when,
                    ChangeSink* sink);

// Applies an event (c.kind == kEvent) to `ref` (biz's layout; with its
// reservation table when the events include a take, see
// RuleEventNeedsTable), as the other holder made it at c.at_ms; `now` is
// this engine's clock. An event for a rule this map lacks changes nothing.
void ApplyRuleEvent(const BizConfig& biz, NodeRef& ref, const Change& c, const Now& now);

// Whether the event makes a node that did not exist (a grant, a renewal, a
// reservation taken), or only changes one that does (a release, a sweep, a
// settle).
bool RuleEventCreates(const Change& c);
// Whether the event needs the node's reservation table (a take).
bool RuleEventNeedsTable(const Change& c);

}  // namespace frs::limit
