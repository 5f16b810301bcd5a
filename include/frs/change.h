// frs/change.h: a change an engine made to a node, as a replica needs it.
//
// With <cluster replicas="1"> every change of a count is also made on the
// other holder of its route (docs/cluster.md, "Replicas"). The engine tells
// a ChangeSink of each change it made, after the node's lock is released;
// the server ships them, and the other holder folds them into its own node
// of the key with AdminEngine::ApplyChanges. A change is what was recorded,
// not the state after it: "n more uses at at_ms" merges into a node that
// holds other uses (the other holder's, during a split) and loses none.
//
// Thread safety: a Change is a value whose key points into the request that
// made it (valid during OnChange only); a sink is called from the deciding
// thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace frs {

struct Change {
  enum class Kind : uint8_t {
    kAdd,       // n uses recorded at at_ms (an allowed acquire, an update, a shadow denial)
    kSet,       // the admin `set`: the count is now n
    kErase,     // the admin `delete`: the node is gone
    kResetBiz,  // the admin `reset`: every node of the biz is gone (key empty)
    kEvent,     // one of a rule's own events (`event`), for state that is more than a count
  };
  // What a rule whose state names items (a concurrency rule's leases, a
  // key's reservations) did to
  // one of them. The other holder applies it to its copy of that rule, so
  // that both hold the same items: the same lease, under the same id, held
  // until the same second (the sources' src/limit/rule_event.h). Each of the sender's
  // workers sends on a link of its own: events of one worker arrive in
  // order, those of two in any order. Another kind of item adds its events
  // here and in rule_event.cc.
  enum class Event : uint8_t {
    kNone,
    kLeaseGrant,    // lease `item` granted, held until `until`, the node's nonce `nonce`
    kLeaseRelease,  // lease `item` released
    kLeaseRenew,    // lease `item` held until `until` now (granted, when the copy lacks it)
    kLeaseSweep,    // the leases expired by at_ms were freed (and counted, by the sender only)
    kGiveBack,      // `n` uses given back (a release without an id: Envoy's negative hits): every
                    // rule's count lowered by n, never below 0; a concurrency rule's first-expiring
                    // leases end (`item` 1: the leases the sender ended follow as kLeaseRelease
                    // events, and the copy ends those, by serial; 0, an earlier sender: its own)
    kResTake,       // reservation `item` taken: estimate `n`, at at_ms, held until `until`, the table's nonce `nonce`
    kResSettle,     // reservation `item` settled at the real amount `n`; `until` its expiry (0: not said),
                    // how long a copy its take has not reached yet keeps the settle for it, and `nonce`
                    // its table's (0: not said), which take it is for
    kResSweep,      // the reservations expired by at_ms were freed (and counted, by the sender only)
  };
  Kind kind = Kind::kAdd;
  uint16_t biz_id = 0;
  std::string_view key;
  // The route's ring position, when the request named it (frs/ring.h);
  // else the route its key implies.
  uint32_t route_pos = 0;
  bool route_known = false;
  int64_t n = 0;
  int64_t at_ms = 0;  // the engine's clock when it decided
  // kEvent only.
  Event event = Event::kNone;
  uint32_t item = 0;   // the item the event names (a lease's or a reservation's serial)
  uint32_t nonce = 0;  // the rule's incarnation (a lease node's nonce, a reservation table's)
  int64_t until = 0;   // unix s: the item holds until then
};

class ChangeSink {
 public:
  virtual ~ChangeSink() = default;
  virtual void OnChange(const Change& change) = 0;
  // Around every request the engine executes (before its clock is read,
  // after its last OnChange): a sink that must see the store still while
  // it reads it (a replica's snapshot) waits here until then.
  virtual void Enter() {}
  virtual void Leave() {}
};

// Enter/Leave of a sink that may be null, as one scope.
class ChangeScope {
 public:
  explicit ChangeScope(ChangeSink* sink) : sink_(sink) {
    if (sink_ != nullptr) sink_->Enter();
  }
  ~ChangeScope() {
    if (sink_ != nullptr) sink_->Leave();
  }
  ChangeScope(const ChangeScope&) = delete;
  ChangeScope& operator=(const ChangeScope&) = delete;

 private:
  ChangeSink* sink_;
};

}  // namespace frs
