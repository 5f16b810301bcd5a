// limit/map_config.h: map.xml, the businesses and their rules.
//
//   <map>
//     <biz id="1" name="login" mode="enforce">
//       <rule algo="fixed" interval="60" max="5" borrow="2"/>
//     </biz>
//   </map>
//
// Every error is one line "file:line: message" naming the element, the
// attribute and the value. Limits: biz id 1..65535, name [A-Za-z0-9_.-]{1,64}
// and not only digits (so a numeric biz in a request is always an id),
// 1..kMaxRulesPerBiz rules, interval 1..31536000 s, max and burst
// 1..2^31-1, borrow 0..2^31-1 (fixed and calendar only), burst for
// token_bucket only; algo="concurrency" takes max (1..77) and lease
// (1..65534 s) instead of interval, at most one per biz.
//
// Thread safety: a MapConfig is a value; parsing touches no global state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frs/decision.h"
#include "frs/status.h"
#include "limit/rule_state.h"
#include "stats/stats_spec.h"

namespace frs::limit {

inline constexpr size_t kMaxBizNameBytes = 64;
inline constexpr size_t kMaxUnitBytes = 32;
inline constexpr size_t kMaxStatsPerBiz = 8;
inline constexpr uint32_t kMaxStatsDays = 366;
inline constexpr uint32_t kMaxStatsGroups = 1000000;

using stats::kMaxKeyFields;  // fields="...": stats/stats_spec.h
using stats::StatsSpec;      // <stats>

struct BizConfig {
  uint16_t id = 0;
  std::string name;
  Mode mode = Mode::kEnforce;
  uint32_t nrules = 0;
  RuleSpec rules[kMaxRulesPerBiz];
  uint32_t state_bytes = 0;  // sum of the rules' blocks
  int32_t lease_rule = -1;   // the index of its concurrency rule (at most one), -1: none
  // reservations="N": how many a key holds at once (limit/reservation.h; 0:
  // none), the table's bytes after the rules' blocks in a node that holds
  // one, and whether map.xml asked for them by name.
  uint32_t res_cap = 0;
  uint32_t res_bytes = 0;
  bool res_explicit = false;
  // keys="keep": every node keeps its whole key text (readable in dump, top
  // and explain) at the cost of more slots; by default a key that is not its
  // node's identity (store/identity.h) is kept only where a node has room.
  bool keep_keys = false;
  // fields="app,user,iface" separator="|": what a key is made of, for
  // <stats>. A key with another number of fields counts in field_errors.
  std::vector<std::string> fields;
  char separator = ':';
  // unit="content-bytes": what one of a request's n counts (the RateLimit
  // fields' quota unit); "" is the default, requests.
  std::string unit;
  std::vector<StatsSpec> stats;
  int line = 0;

  // Its keys' fields and tables, as the statistics read them.
  stats::KeyShape Shape() const { return {fields, separator, stats}; }

  // Same rules in the same order (what a reload may keep as is).
  bool SameLayout(const BizConfig& o) const;
  // Whether every node of this biz is a compact one (one 32-byte slot,
  // store/packed_state.h): one fixed or calendar rule without borrow, or one
  // token bucket with max below 65536 and an interval below 2^20 s, and
  // keys not kept.
  bool CompactNodes() const;
  // Slots the widest node of this biz takes.
  uint32_t NodeSlotsNeeded() const;
};

struct MapConfig {
  std::string path;
  std::vector<BizConfig> bizzes;  // in file order
};

bool ValidBizName(std::string_view name);
// A quota unit: 1..kMaxUnitBytes of a-z, 0-9 and '-', starting with a letter
// (an RFC 9651 token and string alike, needing no escapes).
bool ValidUnit(std::string_view unit);

// The descriptors the statistics by key field of `map` may keep open in one
// process: every table's open days (stats::kOpenDaysPerTable). Part of
// frsd's descriptor need.
uint64_t StatsDescriptors(const MapConfig& map);

// Reads and parses `path`.
Result<MapConfig> LoadMapFile(const std::string& path);
// Parses map.xml text; messages name `path`.
Result<MapConfig> ParseMap(std::string_view text, const std::string& path);

// A reload from `running` to `next` that changes which rules of a biz hold
// one (algorithm, interval) that two of them share, or their order: refused
// (a node tells such rules apart by their order, docs/rules.md).
Status CheckRuleOrder(const MapConfig& running, const MapConfig& next);

// The statistics tables (<stats>) a reload from `running` to `next` stops
// keeping for a biz it keeps (a table of other fields, or one removed), one
// line each for the master's log: their day files stay where they are, and
// no query reads them any more.
std::vector<std::string> StatsTablesLeft(const MapConfig& running, const MapConfig& next);
// What a reload from `running` to `next` ends of what keys hold, one line
// each for its log: a concurrency rule whose block gets fewer places than
// it had (a lowered max that keeps its places keeps every lease held) or
// that is removed, a biz that takes fewer reservations per key (a raised
// concurrency max leaves the default fewer bytes), and rate rules started
// anew beside reservations held. A key holding more than fits keeps those
// that end last when it is next touched. A biz removed whose keys may hold
// leases or reservations is one line too.
std::vector<std::string> HeldAReloadEnds(const MapConfig& running, const MapConfig& next, bool with_envoy = false);

// What a reload from `running` to `next` changes of the bizzes, by id, for
// the master's log: "biz(es) N added (a, b), M removed (c), K changed (d)",
// each list cut after 8 names; "" when no biz is added, removed or changed
// (a rule's algorithm, window, limits, zone or name; the biz's mode,
// reservations, key keeping, unit, key fields or statistics). map.xml's
// bizzes and <grpc config>'s descriptors (envoy.*) are said apart.
struct MapChange {
  std::string bizzes;  // map.xml's: "biz(es) ..."
  std::string envoy;   // Envoy's descriptors: "descriptor(s) ..."
};
// `with_envoy`: the maps are composed with <grpc config>'s descriptors, whose
// names (envoy.*) map.xml may not take then; without it every biz is
// map.xml's, whatever its name.
MapChange MapChangeWords(const MapConfig& running, const MapConfig& next, bool with_envoy = false);

}  // namespace frs::limit
