#include "server/snapshot_merge.h"

#include <vector>

namespace frs::server {

Result<uint64_t> MergeSnapshot(std::string_view body, AdminEngine* engine, const std::string& receipt_base) {
  std::vector<std::string_view> lines;
  uint64_t merged = 0, batch = 0;
  auto flush = [&]() -> Status {
    if (lines.empty()) return Status::OK();
    const std::string receipt = receipt_base + "/" + std::to_string(batch++);
    auto r = engine->MergeNodes(lines, receipt);
    if (!r.ok()) return r.status();
    if (!r.value())
      return Status::Conflict("batch " + receipt + " (" + std::to_string(lines.size()) +
                              " nodes) was not merged: its receipt is in the store already; " + std::to_string(merged) +
                              " nodes merged before it");
    merged += lines.size();
    lines.clear();
    return Status::OK();
  };
  while (!body.empty()) {
    const size_t nl = body.find('\n');
    std::string_view line = body.substr(0, nl);
    body.remove_prefix(nl == std::string_view::npos ? body.size() : nl + 1);
    if (line.empty()) continue;
    lines.push_back(line);
    if (lines.size() == AdminEngine::kMaxMergeNodes)
      if (Status s = flush(); !s.ok()) return s;
  }
  if (Status s = flush(); !s.ok()) return s;
  return merged;
}

}  // namespace frs::server
