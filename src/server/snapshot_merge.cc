#include "server/snapshot_merge.h"

#include <vector>

namespace frs::server {

SnapshotMerged MergeSnapshot(std::string_view body, AdminEngine* engine, const std::string& receipt_base) {
  std::vector<std::string_view> lines;
  SnapshotMerged out;
  uint64_t batch = 0;
  auto flush = [&]() -> Status {
    if (lines.empty()) return Status::OK();
    const std::string receipt = receipt_base + "/" + std::to_string(batch++);
    std::vector<AdminEngine::LeftOutNode> left_out;
    auto r = engine->MergeKnownNodes(lines, receipt, &left_out);
    if (!r.ok()) return r.status();
    if (!r.value())
      return Status::Conflict("batch " + receipt + " (" + std::to_string(lines.size()) +
                              " nodes) was not merged: its receipt is in the store already; " +
                              std::to_string(out.nodes) + " nodes merged before it");
    out.nodes += lines.size() - left_out.size();
    for (AdminEngine::LeftOutNode& l : left_out)
      if (l.line < lines.size()) out.left_out.push_back({lines[l.line], l.biz, std::move(l.why), receipt});
    lines.clear();
    return Status::OK();
  };
  while (!body.empty()) {
    const size_t nl = body.find('\n');
    std::string_view line = body.substr(0, nl);
    body.remove_prefix(nl == std::string_view::npos ? body.size() : nl + 1);
    if (line.empty()) continue;
    lines.push_back(line);
    if (lines.size() == AdminEngine::kMaxMergeNodes) {
      out.status = flush();
      if (!out.status.ok()) return out;
    }
  }
  out.status = flush();
  return out;
}

}  // namespace frs::server
