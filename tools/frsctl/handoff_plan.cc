#include "handoff_plan.h"

#include <algorithm>
#include <utility>

namespace frs::ctl {
namespace {

bool In(const std::vector<std::string>& set, const std::string& name) {
  return std::find(set.begin(), set.end(), name) != set.end();
}

}  // namespace

HandoffPlanner::HandoffPlanner(const Ring* before, bool replicas_before, const Ring& after, bool replicas_after,
                               std::string self)
    : before_(before),
      replicas_before_(replicas_before),
      after_(after),
      replicas_after_(replicas_after),
      self_(std::move(self)) {}

std::vector<std::string> HandoffPlanner::Holders(const Ring& ring, bool replicas, uint32_t route_pos) {
  std::vector<std::string> out{ring.shards()[ring.OwnerOfHash(route_pos)].name};
  if (replicas) {
    const long succ = ring.SuccessorOfHash(route_pos);
    if (succ >= 0) out.push_back(ring.shards()[static_cast<size_t>(succ)].name);
  }
  return out;
}

NodePlan HandoffPlanner::PlanFor(uint32_t route_pos) const {
  NodePlan plan;
  const std::vector<std::string> now = Holders(after_, replicas_after_, route_pos);
  if (before_ == nullptr) {
    if (now.front() != self_) plan = {{now.front()}, true};
    return plan;
  }
  const std::vector<std::string> was = Holders(*before_, replicas_before_, route_pos);
  if (!In(was, self_)) {
    // A count of this shard's own: every new holder lacks it.
    if (!In(now, self_)) plan = {now, true};
    return plan;  // a holder now: what it counted since the change stays
  }
  size_t leaving = 0;
  for (const std::string& h : was) leaving += In(now, h) ? 0 : 1;
  const bool self_stays = In(now, self_);
  // The sender: this shard when it leaves (both leaving: both, shared), the
  // old owner when every old holder stays.
  const bool sends = !self_stays || (leaving == 0 && was.front() == self_);
  if (sends)
    for (const std::string& h : now)
      if (!In(was, h)) plan.dests.push_back(h);
  plan.shared = !self_stays && leaving > 1 && !plan.dests.empty();
  plan.erase = !self_stays;
  return plan;
}

}  // namespace frs::ctl
