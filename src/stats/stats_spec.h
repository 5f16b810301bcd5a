// stats/stats_spec.h: what map.xml asks of a biz's statistics by key field,
// as the statistics read it (limit/map_config.h parses it).
//
// Thread safety: values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace frs::stats {

// The most fields a key is split into (map.xml's fields="...").
inline constexpr size_t kMaxKeyFields = 16;

// <stats by="app,iface" distinct="user" days="31" groups="100000"/>: daily
// counters per value of the `by` fields (stats/field_stats.h). Two <stats>
// of one biz with the same `by` are one table: their distinct fields are
// joined and the larger days and groups kept.
struct StatsSpec {
  std::vector<uint8_t> by;        // indexes into the biz's key fields, in the order given
  std::vector<uint8_t> distinct;  // at most 2, none of them in `by`
  uint32_t days = 31;
  uint32_t groups = 100000;
  std::string by_text;  // "app,iface"
  int line = 0;
  // The table's directory name under stats/<biz id>/: "app,iface" or
  // "app,iface+user" (a changed distinct starts a new table).
  std::string DirName(const std::vector<std::string>& fields) const;
};

// What a biz's keys are made of and which tables it keeps: a view of its
// map.xml entry (fields="app,user,iface" separator="|" and its <stats>),
// valid while the map it views lives.
struct KeyShape {
  const std::vector<std::string>& fields;
  char separator;
  std::span<const StatsSpec> stats;
};

}  // namespace frs::stats
