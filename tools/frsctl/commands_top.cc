// frsctl top BIZ [N]: the keys of one biz with the highest counts (the
// "abnormal IP" view). One walk of the biz's nodes keeping the N best in a
// heap, so memory stays O(N) whatever the store's size.
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

// Orders by count, then by key (reversed, so equal counts list keys A..Z).
struct ByCount {
  bool operator()(const NodeView& a, const NodeView& b) const {
    if (a.count != b.count) return a.count > b.count;
    return a.key < b.key;
  }
};

}  // namespace

Result<int> RunTop(Session& s, const TopArgs& a) {
  if (a.biz.empty()) return Status::InvalidArgument("top needs BIZ (or --denied for the keys denied lately)");
  Result<uint16_t> id = ResolveBizArg(s, a.biz);
  if (!id.ok()) return id.status();
  if (a.n == 0) return Status::InvalidArgument("N must be at least 1");
  Store::Filter filter;
  filter.busy_percent = kWalkBusyPercent;
  filter.biz = id.value();
  // A min-heap on count: its top is the weakest of the best N so far.
  std::priority_queue<NodeView, std::vector<NodeView>, ByCount> best;
  uint64_t seen = 0;
  Status st = s.store->ForEach(filter, [&](const NodeInfo& n) {
    Result<NodeView> v = s.engine->View(n);
    if (!v.ok()) return;
    ++seen;
    if (best.size() < a.n) {
      best.push(std::move(v).value());
    } else if (ByCount()(v.value(), best.top())) {
      best.pop();
      best.push(std::move(v).value());
    }
  });
  if (!st.ok()) return st;
  std::vector<NodeView> rows;
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
      NodeMembers(rows[i], j);
      j.EndObject();
      std::printf("%s\n", j.str().c_str());
    }
    return kExitOk;
  }
  std::printf("%s: top %zu of %s node%s by count\n", a.biz.c_str(), rows.size(), Grouped(seen).c_str(),
              seen == 1 ? "" : "s");
  Table t({"#", "count", "limit", "state", "last use", "key"});
  t.AlignRight({0, 1, 2});
  for (size_t i = 0; i < rows.size(); ++i) {
    const NodeView& v = rows[i];
    bool denies = false;
    for (const RuleView& r : v.rules) denies |= r.denies;
    t.Row({std::to_string(i + 1), Grouped(static_cast<uint64_t>(std::max<int64_t>(v.count, 0))),
           Grouped(static_cast<uint64_t>(std::max<int64_t>(v.limit, 0))), denies ? "denied" : "allowed",
           Relative(int64_t{v.node.last_access_s} * 1000, now),
           ShownKey(v.key, v.key_truncated, v.key_kept, v.node.fp.lo)});
  }
  t.Print(stdout, 2);
  return kExitOk;
}

}  // namespace frs::ctl
