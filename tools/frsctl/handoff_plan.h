// frsctl/handoff_plan.h: what frsctl handoff does with one node, from the
// shard lists before and after a <cluster> change.
//
// A node's holders are its route's owner and, with replicas, its successor
// (docs/cluster.md, "Replicas"). Both old holders hold the same count, so
// exactly one of them may sum it into each new holder that lacked it, or the
// count would double there. The one that sends is the old holder that is no
// holder any more; when every old holder stays one (replicas switched on),
// the old owner copies its node to the new holder and keeps it. When both
// old holders leave, both send, under a receipt that names the node and the
// change (the same on both), so the first merges and the second is found
// merged: either shard's handoff is enough, and neither erases a node the
// other might never send. An old holder that is no holder any more erases its
// node once it is spooled (commands_handoff.cc); a holder that stays keeps
// its own. A node on a shard that was no holder of
// it (counted there misrouted, with enforce="0") is a count of its own: it
// goes to every new holder, and is erased here.
//
// Without the old list (replicas off, no --from), a node goes to its owner
// when another shard owns it, as before replicas existed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frs/ring.h"

namespace frs::ctl {

struct NodePlan {
  std::vector<std::string> dests;  // shards to sum this node into
  bool erase = false;              // erased here (after spooling when dests are named)
  bool shared = false;             // sent by both old holders: the receipt names the node and the change
  bool Keeps() const { return dests.empty() && !erase; }
};

class HandoffPlanner {
 public:
  // `before`: the ring before the change, or null when it is not known.
  HandoffPlanner(const Ring* before, bool replicas_before, const Ring& after, bool replicas_after, std::string self);

  NodePlan PlanFor(uint32_t route_pos) const;

  // A route's holders under a ring: the owner, then (with replicas and two
  // shards or more) the successor.
  static std::vector<std::string> Holders(const Ring& ring, bool replicas, uint32_t route_pos);

 private:
  const Ring* before_;
  bool replicas_before_;
  const Ring& after_;
  bool replicas_after_;
  std::string self_;
};

}  // namespace frs::ctl
