// stats/day_files.h: the day files of statistics by key field a store
// directory keeps, listed and read for a handoff (AdminEngine::StatsDayFiles
// and ExportStatsDay, frs/admin_engine.h).
//
// Thread safety: plain functions over the files; they change nothing.
#pragma once

#include <string>
#include <vector>

#include "frs/group_stats.h"
#include "frs/status.h"

namespace frs::stats {

// Every day file under `dir`/stats/: its own days' and those a handoff
// brought, in the order the directories list them. Folders that are not a
// biz id's, and files that are not a day's, are not listed.
Result<std::vector<StatsDayFile>> ListDayFiles(const std::string& dir);

// The file read whole with its sketches, whatever the map says now: the
// table as it was counted. GroupStats::biz is the biz id's text.
Result<GroupStats> ReadDayFile(const StatsDayFile& file);

}  // namespace frs::stats
