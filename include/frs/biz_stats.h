// frs/biz_stats.h: a biz's counters of the last days.
//
// Every process deciding on one store (frsd's workers, any program linking
// libfrs) adds each decision to one small file of per-biz daily counters;
// Engine::DailyStats reads them, and frsd's /metrics shows today's
// (frs_biz_today_*). The statistics by key field are in frs/group_stats.h.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace frs {

struct BizStatsDay {
  uint32_t day = 0;  // days since 1970-01-01 in the engine's time zone
  uint64_t requests = 0, allowed = 0, denied = 0, new_keys = 0;
};

struct BizStats {
  uint16_t id = 0;
  std::string name;
  std::vector<BizStatsDay> days;  // newest first, up to 8
};

}  // namespace frs
