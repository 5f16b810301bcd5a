// limit/rule_event.h: a rule's own events, replicated (frs/change.h,
// Change::Kind::kEvent).
//
// A count replicates as "n uses at at_ms", merged into the other holder's
// node. A concurrency rule's state is more than a count: it names leases,
// and a lease's id must verify, and its release and renewal act, on either
// holder. So the holder that decided sends what it did to each lease
// (granted with its serial, expiry and the node's nonce; released;
// renewed; the expired ones swept), and the other holder applies the same
// events to its copy in order: both hold the same leases under the same ids
// (the MAC secret being shared, <cluster lease_key>). The sender counts the
// leases it found expired (frs_leases_expired_total); the other holder frees
// them silently, so an expiry is counted once.
//
// Another rule whose state names items (a reservation) adds its events to
// Change::Event and a case to each function here.
//
// Thread safety: plain functions.
#pragma once

#include "frs/change.h"
#include "frs/decision.h"
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

// Applies an event (c.kind == kEvent) to `state` (biz's layout), as the
// other holder made it at c.at_ms; `now` is this engine's clock. An event
// for a rule this map lacks changes nothing.
void ApplyRuleEvent(const BizConfig& biz, uint8_t* state, const Change& c, const Now& now);

// Whether the event makes a node that did not exist (a grant, a renewal),
// or only changes one that does (a release, a sweep).
bool RuleEventCreates(const Change& c);

}  // namespace frs::limit
