// frsctl top BIZ [N] [--rule R]: the keys of one biz with the highest counts
// (the "abnormal IP" view), of the most restrictive rule or of rule R. One
// walk of the biz's nodes keeping the N best in a heap, so memory stays O(N)
// whatever the store's size.
#include <algorithm>
#include <cstdio>
#include <queue>
#include <vector>

#include "commands.h"
#include "format.h"
#include "json_out.h"
#include "node_out.h"

namespace frs::ctl {
namespace {

// A node as top ranks it: the count and limit of one rule (`rule` >= 0, its
// place in the biz), else the node's own (its most restrictive rule's).
struct Ranked {
  NodeView view;
  int64_t count = 0, limit = 0;
};

Ranked RankOf(NodeView v, int rule) {
  Ranked r;
  const bool one = rule >= 0 && static_cast<size_t>(rule) < v.rules.size();
  r.count = one ? v.rules[static_cast<size_t>(rule)].count : v.count;
  r.limit = one ? v.rules[static_cast<size_t>(rule)].limit : v.limit;
  r.view = std::move(v);
  return r;
}

// Orders by count, then by key (reversed, so equal counts list keys A..Z).
struct ByCount {
  bool operator()(const Ranked& a, const Ranked& b) const {
    if (a.count != b.count) return a.count > b.count;
    return a.view.key < b.view.key;
  }
};

// The place of the rule `name` in biz `id` (a NodeView's rules[i] is the
// biz's rules[i]), or why there is none.
Result<int> RuleIndex(const Session& s, uint16_t id, const std::string& name) {
  for (const BizInfo& b : s.engine->Bizzes()) {
    if (b.id != id) continue;
    std::string names;
    for (size_t i = 0; i < b.rules.size(); ++i) {
      if (b.rules[i] == name) return static_cast<int>(i);
      names += (i ? ", " : "") + b.rules[i];
    }
    return Status::InvalidArgument("biz '" + b.name + "' has no rule '" + name + "' (its rules: " + names + ")");
  }
  return Status::NotFound("no biz with id " + std::to_string(id));
}

}  // namespace

Result<int> RunTop(Session& s, const TopArgs& a) {
  if (a.biz.empty()) return Status::InvalidArgument("top needs BIZ (or --denied for the keys denied lately)");
  Result<uint16_t> id = ResolveBizArg(s, a.biz);
  if (!id.ok()) return id.status();
  if (a.n == 0) return Status::InvalidArgument("N must be at least 1");
  int rule = -1;
  if (!a.rule.empty()) {
    Result<int> r = RuleIndex(s, id.value(), a.rule);
    if (!r.ok()) return r.status();
    rule = r.value();
  }
  Store::Filter filter;
  filter.busy_percent = kWalkBusyPercent;
  filter.biz = id.value();
  // A min-heap on count: its top is the weakest of the best N so far.
  std::priority_queue<Ranked, std::vector<Ranked>, ByCount> best;
  uint64_t seen = 0;
  Status st = s.store->ForEach(filter, [&](const NodeInfo& n) {
    Result<NodeView> v = s.engine->View(n);
    if (!v.ok()) return;
    ++seen;
    Ranked r = RankOf(std::move(v).value(), rule);
    if (best.size() < a.n) {
      best.push(std::move(r));
    } else if (ByCount()(r, best.top())) {
      best.pop();
      best.push(std::move(r));
    }
  });
  if (!st.ok()) return st;
  std::vector<Ranked> rows;
  while (!best.empty()) {
    rows.push_back(best.top());
    best.pop();
  }
  std::reverse(rows.begin(), rows.end());
  const int64_t now = s.NowMs();
  if (s.json) {
    for (size_t i = 0; i < rows.size(); ++i) {
      JsonOut j;
      j.BeginObject().Key("rank").Uint(i + 1);
      if (rule >= 0) j.Key("rank_rule").String(a.rule).Key("rank_count").Int(rows[i].count);
      NodeMembers(rows[i].view, j);
      j.EndObject();
      std::printf("%s\n", j.str().c_str());
    }
    return kExitOk;
  }
  std::printf("%s: top %zu of %s node%s by count%s\n", a.biz.c_str(), rows.size(), Grouped(seen).c_str(),
              seen == 1 ? "" : "s", rule >= 0 ? (" of rule " + a.rule).c_str() : "");
  Table t({"#", "count", "limit", "state", "last use", "key"});
  t.AlignRight({0, 1, 2});
  for (size_t i = 0; i < rows.size(); ++i) {
    const NodeView& v = rows[i].view;
    bool denies = false;
    for (const RuleView& r : v.rules) denies |= r.denies;
    t.Row({std::to_string(i + 1), Grouped(static_cast<uint64_t>(std::max<int64_t>(rows[i].count, 0))),
           Grouped(static_cast<uint64_t>(std::max<int64_t>(rows[i].limit, 0))), denies ? "denied" : "allowed",
           Relative(int64_t{v.node.last_access_s} * 1000, now),
           ShownKey(v.key, v.key_truncated, v.key_kept, v.node.fp.lo)});
  }
  t.Print(stdout, 2);
  return kExitOk;
}

}  // namespace frs::ctl
