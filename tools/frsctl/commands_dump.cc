// frsctl dump: every node (optionally of one file, key-node or biz), one line
// each, with its chain position. Streams: a line is printed as its chain is
// read, one chain lock held at a time, so a dump of millions of nodes needs
// no memory and never holds up frsd for longer than one chain copy.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "commands.h"
#include "format.h"
#include "json_out.h"
#include "node_out.h"

namespace frs::ctl {
namespace {

int Digits(uint64_t v) {
  int d = 1;
  while (v >= 10) {
    v /= 10;
    ++d;
  }
  return d;
}

}  // namespace

Result<int> RunDump(Session& s, const DumpArgs& a) {
  const StoreGeometry& g = s.store->geometry();
  Store::Filter filter;
  filter.busy_percent = kWalkBusyPercent;
  if (a.file >= 0) {
    if (a.file >= g.files)
      return Status::InvalidArgument("--file " + std::to_string(a.file) + " out of range: the store has files 0.." +
                                     std::to_string(g.files - 1));
    filter.file = a.file;
  }
  if (a.keynode >= 0) {
    if (a.keynode >= g.keynodes)
      return Status::InvalidArgument("--keynode " + std::to_string(a.keynode) +
                                     " out of range: each file has key-nodes 0.." + std::to_string(g.keynodes - 1));
    filter.keynode = a.keynode;
  }
  if (!a.biz.empty()) {
    Result<uint16_t> id = ResolveBizArg(s, a.biz);
    if (id.ok()) {
      filter.biz = id.value();
    } else if (std::optional<uint16_t> former = BizIdArg(a.biz)) {
      filter.biz = *former;  // a biz id map.xml no longer has
    } else {
      return id.status();
    }
  }

  const int64_t now = s.NowMs();
  const int wf = std::max(4, Digits(g.files - 1)), wk = std::max(7, Digits(g.keynodes - 1));
  int wb = 3;
  for (const BizInfo& b : s.engine->Bizzes()) wb = std::max(wb, static_cast<int>(b.name.size()));
  if (!s.json)
    std::printf("%-*s  %-*s  %-4s  %-4s  %-3s  %-*s  %10s  %10s  %-16s  %s\n", wf, "file", wk, "keynode", "slot",
                "span", "alt", wb, "biz", "count", "limit", "last use", "key");
  uint64_t nodes = 0;
  Status st = s.store->ForEach(filter, [&](const NodeInfo& n) {
    ++nodes;
    Result<NodeView> v = s.engine->View(n);
    if (s.json) {
      JsonOut j;
      j.BeginObject();
      if (v.ok()) {
        NodeMembers(v.value(), j);
      } else {
        RawNodeMembers(n, j);
      }
      j.EndObject();
      std::fwrite(j.str().data(), 1, j.str().size(), stdout);
      std::fputc('\n', stdout);
      return;
    }
    std::string biz = v.ok() ? v->biz_name : "#" + std::to_string(n.biz);
    std::string count = v.ok() ? std::to_string(v->count) : "-";
    // The count's own rule's limit (the most restrictive rule's, as an
    // answer gives them): a limit taken apart from the count showed a key
    // at 1 of 1 an hour and 3 of 3 a day as "1 of 3, denied".
    std::string limit = v.ok() ? std::to_string(v->limit) : "-";
    std::string key = ShownKey(n.key, n.key.size() < n.key_len, n.key_len != 0 || !n.key.empty(), n.fp.lo);
    std::printf("%-*u  %-*u  %-4u  %-4u  %-3s  %-*s  %10s  %10s  %-16s  %s\n", wf, n.file, wk, n.keynode, n.slot,
                n.span, n.in_alternate ? "yes" : "-", wb, biz.c_str(), count.c_str(), limit.c_str(),
                Relative(int64_t{n.last_access_s} * 1000, now).c_str(), key.c_str());
  });
  if (!st.ok()) return st;
  if (!s.json) std::printf("(%s node%s)\n", Grouped(nodes).c_str(), nodes == 1 ? "" : "s");
  return kExitOk;
}

}  // namespace frs::ctl
