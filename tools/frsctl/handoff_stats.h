// frsctl/handoff_stats.h: a leaving shard's statistics by key field, handed
// to the shards that stay (handoff_stats.cc says how, exactly once).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "frs/ring.h"
#include "frs/status.h"
#include "session.h"

namespace frs::ctl {

// Sends every day file; a file that could not be sent stays and its reason
// is added to `failed`; a file whose receiver does not keep its day (older
// than the receiver's `days`) stays too, not a failure: one line each in
// `skipped` (its path, and why). Returns the files sent.
Result<uint64_t> HandOffStats(Session& s, const Ring& ring, const std::string& token, std::vector<Status>* failed,
                              std::vector<std::pair<std::string, std::string>>* skipped);

}  // namespace frs::ctl
