// server/group_stats_xml.h: statistics by key field as XML, both ways.
//
//   <stats biz="api" by="app" day="2026-11-25" groups="2" field_errors="0">
//     <group value="app7" requests="1520" allowed="1500" denied="20" units="1500" distinct_user="311"/>
//   </stats>
//
// GET /stats answers it; with sketches each group also carries
// sketch_<field>="..." (stats/distinct_sketch.h's text form), which is what
// `frsctl stat --cluster` merges across shards and what POST /stats (a
// handoff) hands to a receiving shard.
//
// Thread safety: plain functions.
#pragma once

#include <string>
#include <string_view>

#include "frs/group_stats.h"
#include "frs/status.h"

namespace frs::server {

void AppendGroupStats(const GroupStats& st, std::string* out);
// At least as many bytes as AppendGroupStats writes for `st` (every string
// escaped at its worst), computed without building anything: GET /stats
// refuses an answer beyond its cap before the body exists.
size_t GroupStatsXmlBound(const GroupStats& st);
// Parses what AppendGroupStats wrote (with or without sketches).
Result<GroupStats> ParseGroupStats(std::string_view xml);

}  // namespace frs::server
