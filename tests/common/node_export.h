// tests/common/node_export.h: a key's node as export writes it
// (AdminEngine::ExportNode), found by walking the store: what a handoff, a
// replica snapshot or frsctl export would send of it.
#pragma once

#include <string>
#include <string_view>

#include "frs/admin_engine.h"
#include "frs/store.h"

namespace frs::testing {

// The export line of the node of `key` (any biz), or "" when the store holds
// none or the walk fails.
inline std::string ExportedLine(Store& store, const AdminEngine& engine, std::string_view key) {
  std::string line;
  const Status walked = store.ForEach({}, [&](const NodeInfo& node) {
    if (node.key != key) return;
    auto exported = engine.ExportNode(node);
    if (exported.ok()) line = exported.value();
  });
  return walked.ok() ? line : std::string();
}

}  // namespace frs::testing
