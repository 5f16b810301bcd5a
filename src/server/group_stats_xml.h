// server/group_stats_xml.h: statistics by key field as XML, both ways (GET
// /stats answers it, POST /stats takes it): frs/group_stats.h's codec, under
// the names the handler uses.
//
// Thread safety: plain functions.
#pragma once

#include "frs/group_stats.h"

namespace frs::server {

using frs::AppendGroupStats;
using frs::GroupStatsXmlBound;
using frs::ParseGroupStats;

}  // namespace frs::server
