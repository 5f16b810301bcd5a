// frsctl/handoff_stats.h: a leaving shard's statistics by key field, handed
// to the shards that stay (handoff_stats.cc says how, exactly once).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frs/ring.h"
#include "frs/status.h"
#include "session.h"

namespace frs::ctl {

// Sends every day file; a file that could not be sent stays and its reason
// is added to `failed`. Returns the files sent.
Result<uint64_t> HandOffStats(Session& s, const Ring& ring, const std::string& token, std::vector<Status>* failed);

}  // namespace frs::ctl
