// Which shard sends a node where, after a ring change with or without
// replicas: run every shard's plan for a position on a model of the shards
// (each old holder holds the node's count c, every other shard nothing) and
// check that each new holder ends with exactly c and every other shard with
// nothing. A plan that let both old holders send would give 2c.
#include "handoff_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace frs::ctl {
namespace {

std::vector<RingShard> Shards(std::initializer_list<int> ports) {
  std::vector<RingShard> out;
  for (int p : ports) out.push_back({"127.0.0.1:" + std::to_string(p), 1});
  return out;
}

struct Change {
  const char* what;
  std::vector<RingShard> before, after;
  bool replicas_before, replicas_after;
};

// Every position's counts after each shard ran its handoff, or the first
// position where they are wrong.
// `skip`: a shard whose handoff does not run (lost); only positions where
// the plan allows that (both old holders leave) are checked then.
std::string Check(const Change& c, const std::string& skip = "") {
  const Ring before = Ring::Make(c.before).value();
  const Ring after = Ring::Make(c.after).value();
  std::set<std::string> names;
  for (const RingShard& s : c.before) names.insert(s.name);
  for (const RingShard& s : c.after) names.insert(s.name);
  for (uint32_t i = 0; i < 4000; ++i) {
    const uint32_t pos = i * 1073741u + 12345u;
    const auto was = HandoffPlanner::Holders(before, c.replicas_before, pos);
    const auto now = HandoffPlanner::Holders(after, c.replicas_after, pos);
    if (!skip.empty()) {
      const bool both_leave = std::none_of(was.begin(), was.end(), [&](const std::string& h) {
        return std::find(now.begin(), now.end(), h) != now.end();
      });
      if (!both_leave || was.size() < 2) continue;
    }
    std::map<std::string, int> held;
    for (const std::string& h : was) held[h] = 5;
    std::map<std::string, int> result = held;
    std::set<std::string> shared_merged;  // a receiver merges a shared receipt once
    for (const std::string& self : names) {
      if (held.count(self) == 0 || self == skip) continue;
      const NodePlan plan = HandoffPlanner(&before, c.replicas_before, after, c.replicas_after, self).PlanFor(pos);
      for (const std::string& d : plan.dests)
        if (!plan.shared || shared_merged.insert(d).second) result[d] += held[self];
      if (plan.erase) result[self] -= held[self];
    }
    // A shard whose handoff never ran keeps its node: fine when it stays a holder.
    if (!skip.empty() && held.count(skip) != 0 && std::find(now.begin(), now.end(), skip) == now.end())
      result[skip] = 0;
    for (const std::string& n : names) {
      const bool holder = std::find(now.begin(), now.end(), n) != now.end();
      if (result[n] != (holder ? 5 : 0))
        return "position " + std::to_string(pos) + ": " + n + " holds " + std::to_string(result[n]) + ", want " +
               (holder ? "5" : "0");
    }
  }
  return "";
}

TEST(HandoffPlan, EveryNewHolderEndsWithTheCountOnceAndNoOtherShardKeepsIt) {
  const std::vector<Change> changes = {
      {"a shard added, replicas", Shards({1, 2, 3}), Shards({1, 2, 3, 4}), true, true},
      {"a shard removed, replicas", Shards({1, 2, 3, 4}), Shards({1, 3, 4}), true, true},
      {"two added at once, replicas", Shards({1, 2, 3}), Shards({1, 2, 3, 4, 5}), true, true},
      {"two removed, one added", Shards({1, 2, 3, 4, 5}), Shards({1, 3, 6}), true, true},
      {"a pair grows to three", Shards({1, 2}), Shards({1, 2, 3}), true, true},
      {"replicas switched on", Shards({1, 2, 3}), Shards({1, 2, 3}), false, true},
      {"replicas switched off", Shards({1, 2, 3}), Shards({1, 2, 3}), true, false},
      {"switched on with a shard added", Shards({1, 2, 3}), Shards({1, 2, 3, 4}), false, true},
      {"no replicas, a shard added", Shards({1, 2, 3}), Shards({1, 2, 3, 4}), false, false},
      {"nothing changed", Shards({1, 2, 3}), Shards({1, 2, 3}), true, true},
  };
  for (const Change& c : changes) EXPECT_EQ(Check(c), "") << c.what;
}

TEST(HandoffPlan, WhenBothOldHoldersLeaveEitherOnesHandoffIsEnough) {
  const Change c{"two added at once", Shards({1, 2, 3}), Shards({1, 2, 3, 4, 5}), true, true};
  for (int lost : {1, 2, 3}) EXPECT_EQ(Check(c, "127.0.0.1:" + std::to_string(lost)), "") << lost;
}

TEST(HandoffPlan, AStayingHolderKeepsItsNodeAndOnlyOneOldHolderSends) {
  const Ring before = Ring::Make(Shards({1, 2, 3})).value();
  const Ring after = Ring::Make(Shards({1, 2, 3, 4})).value();
  int sent_by_one = 0;
  for (uint32_t pos = 0; pos < 400000000u; pos += 999983u) {
    const auto was = HandoffPlanner::Holders(before, true, pos);
    const auto now = HandoffPlanner::Holders(after, true, pos);
    int senders = 0;
    for (const std::string& h : was) {
      const NodePlan p = HandoffPlanner(&before, true, after, true, h).PlanFor(pos);
      senders += !p.dests.empty();
      EXPECT_FALSE(p.shared);  // one shard added: at most one old holder leaves
      const bool stays = std::find(now.begin(), now.end(), h) != now.end();
      EXPECT_EQ(p.erase, !stays) << pos << " " << h;
    }
    EXPECT_LE(senders, 1) << pos;
    sent_by_one += senders;
  }
  EXPECT_GT(sent_by_one, 0);
}

TEST(HandoffPlan, ANodeCountedOnANonHolderGoesToEveryNewHolder) {
  const Ring before = Ring::Make(Shards({1, 2, 3})).value();
  for (uint32_t pos = 0; pos < 4000000000u; pos += 99999989u) {
    const auto was = HandoffPlanner::Holders(before, true, pos);
    for (int port : {1, 2, 3}) {
      const std::string self = "127.0.0.1:" + std::to_string(port);
      if (std::find(was.begin(), was.end(), self) != was.end()) continue;
      const NodePlan p = HandoffPlanner(&before, true, before, true, self).PlanFor(pos);
      EXPECT_EQ(p.dests, was);
      EXPECT_TRUE(p.erase);
    }
  }
}

TEST(HandoffPlan, WithoutTheOldListANodeGoesToItsOwner) {
  const Ring after = Ring::Make(Shards({1, 2})).value();
  const uint32_t pos = 777;
  const std::string owner = after.shards()[after.OwnerOfHash(pos)].name;
  const std::string other = owner == "127.0.0.1:1" ? "127.0.0.1:2" : "127.0.0.1:1";
  EXPECT_TRUE(HandoffPlanner(nullptr, false, after, false, owner).PlanFor(pos).Keeps());
  const NodePlan p = HandoffPlanner(nullptr, false, after, false, other).PlanFor(pos);
  EXPECT_EQ(p.dests, std::vector<std::string>{owner});
  EXPECT_TRUE(p.erase);
}

}  // namespace
}  // namespace frs::ctl
