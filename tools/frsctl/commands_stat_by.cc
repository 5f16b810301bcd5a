// frsctl stat --by F: statistics by key field (map.xml <stats>) of one day,
// for every biz that keeps a table by F (or the one --biz names): from the
// store's own files, or with --cluster from every shard over HTTP (GET
// /stats with the distinct sketches), summed per group with the distinct
// sketches merged, so a user seen on two shards counts once.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "commands.h"
#include "format.h"
#include "frs/calendar.h"
#include "frs/engine.h"
#include "frs/group_stats.h"
#include "frs/http_client.h"
#include "frs/percent_encode.h"
#include "json_out.h"

namespace frs::ctl {
namespace {

// The bizzes (names) of map.xml that keep a table by `by`, or `only`.
// The bizzes of `map` (map.xml's at `map_path`) that `a` asks for.
Result<std::vector<std::string>> BizzesBy(const Result<std::vector<BizInfo>>& map, const std::string& map_path,
                                          const StatArgs& a) {
  if (!map.ok()) return map.status();
  std::vector<std::string> out;
  for (const BizInfo& b : map.value()) {
    if (!a.biz.empty() && a.biz != b.name && a.biz != std::to_string(b.id)) continue;
    out.push_back(b.name);
  }
  if (out.empty()) {
    std::string known;
    for (const BizInfo& b : map.value()) known += (known.empty() ? "" : ", ") + b.name;
    return Status::InvalidArgument("unknown biz \"" + PrintableHead(a.biz) + "\" (" + map_path + " has " + known + ")");
  }
  return out;
}

// The tables of statistics by key field the map keeps, for a message: "api
// by app, app,iface; sh by a", or "none".
std::string TablesKept(const Result<std::vector<BizInfo>>& map) {
  if (!map.ok()) return "none";
  std::string out;
  for (const BizInfo& b : map.value()) {
    if (b.stats_by.empty()) continue;
    out += (out.empty() ? "" : "; ") + b.name + " by ";
    for (size_t i = 0; i < b.stats_by.size(); ++i) out += (i ? " and " : "") + b.stats_by[i];
  }
  return out.empty() ? "none (a biz keeps them with <stats by=\"FIELD\"/>, docs/rules.md)" : out;
}

void Print(const Session& s, const GroupStats& st) {
  if (s.json) {
    JsonOut j;
    j.BeginObject().Key("biz").String(st.biz).Key("by").String(st.by).Key("day").String(DayText(st.day));
    j.Key("groups").Uint(st.groups).Key("field_errors").Uint(st.field_errors);
    if (st.lost) j.Key("lost").Uint(st.lost);
    j.Key("rows").BeginArray();
    for (const GroupStat& g : st.rows) {
      j.BeginObject().Key("value").String(g.value).Key("requests").Uint(g.requests).Key("allowed").Uint(g.allowed);
      j.Key("denied").Uint(g.denied).Key("units").Uint(g.units);
      for (size_t d = 0; d < st.distinct_fields.size() && d < g.distinct.size(); ++d)
        j.Key("distinct_" + st.distinct_fields[d]).Uint(g.distinct[d]);
      j.EndObject();
    }
    j.EndArray().EndObject();
    std::printf("%s\n", j.str().c_str());
    return;
  }
  std::printf("biz %s  by %s  %s  groups %u  field errors %llu%s\n", st.biz.c_str(), st.by.c_str(),
              DayText(st.day).c_str(), st.groups, static_cast<unsigned long long>(st.field_errors),
              st.lost ? ("  lost " + std::to_string(st.lost)).c_str() : "");
  size_t width = 5;
  for (const GroupStat& g : st.rows) width = std::max(width, std::min<size_t>(g.value.size(), 60));
  std::printf("  %-*s %12s %12s %12s %12s", static_cast<int>(width), "value", "requests", "allowed", "denied", "units");
  for (const std::string& f : st.distinct_fields) std::printf("  %s", ("distinct " + f).c_str());
  std::printf("\n");
  for (const GroupStat& g : st.rows) {
    std::printf("  %-*s %12llu %12llu %12llu %12llu", static_cast<int>(width), g.value.c_str(),
                static_cast<unsigned long long>(g.requests), static_cast<unsigned long long>(g.allowed),
                static_cast<unsigned long long>(g.denied), static_cast<unsigned long long>(g.units));
    for (size_t d = 0; d < g.distinct.size() && d < st.distinct_fields.size(); ++d)
      std::printf("  %*llu", static_cast<int>(st.distinct_fields[d].size() + 9),
                  static_cast<unsigned long long>(g.distinct[d]));
    std::printf("\n");
  }
}

}  // namespace

Result<int> RunStatBy(Session& s, const StatArgs& a) {
  // The engine's bizzes: the map the running frsd runs while it does
  // (frsd.running), not map.xml as it is now.
  const Result<std::vector<BizInfo>> map = s.engine->Bizzes();
  auto bizzes = BizzesBy(map, s.cfg.map_path, a);
  if (!bizzes.ok()) return bizzes.status();
  bool any = false;
  for (const std::string& biz : bizzes.value()) {
    auto st = s.engine->StatsBy({.biz = biz, .by = a.by, .day = a.day, .value = a.value, .top = a.top});
    if (!st.ok()) {
      // Asked for one biz: say why it has none; else show those that have one.
      if (!a.biz.empty() && st.status().IsNotFound()) return Status::InvalidArgument(st.status().message());
      if (!st.status().IsNotFound()) return st.status();
      continue;
    }
    Print(s, st.value());
    any = true;
  }
  if (!any)
    return Status::InvalidArgument("no biz of " + s.cfg.map_path + " keeps <stats by=\"" + a.by +
                                   "\">; it keeps: " + TablesKept(map));
  return kExitOk;
}

Result<int> RunStatByCluster(Session& s, const StatArgs& a) {
  if (s.cfg.cluster_shards.empty())
    return Status::InvalidArgument(s.cfg.path + " has no <cluster>: use frsctl stat --by without --cluster");
  const Result<std::vector<BizInfo>> map = ReadMapBizzes(s.cfg.map_path);
  auto bizzes = BizzesBy(map, s.cfg.map_path, a);
  if (!bizzes.ok()) return bizzes.status();
  auto tz = CalendarZone::Load(s.cfg.timezone);
  if (!tz.ok()) return tz.status();
  const uint32_t today = static_cast<uint32_t>(std::max<int64_t>(tz.value().DayOf(s.NowMs() / 1000), 0));
  size_t down = 0;
  bool any = false;
  // A shard that could not be reached is not asked again for the next biz:
  // it is named once, and a hung one costs one timeout, not one per biz.
  std::set<std::string> unreached;
  for (const std::string& biz : bizzes.value()) {
    // One day for every shard (each would answer its own "today" otherwise).
    std::string target = "/stats?biz=" + PercentEncoded(biz, kPercentQueryValue) +
                         "&by=" + PercentEncoded(a.by, kPercentQueryValue) +
                         "&sketches=1&day=" + DayText(static_cast<uint32_t>(a.day >= 0 ? a.day : today));
    if (!a.value.empty()) target += "&value=" + PercentEncoded(a.value, kPercentQueryValue);
    GroupStatsSum sum;
    for (const RingShard& sh : s.cfg.cluster_shards) {
      if (unreached.count(sh.name) != 0) continue;
      HttpClient http(sh.name, 5000);
      http.SetBearer(s.cfg.admin_token);  // a header: a proxy's access log writes the target
      auto resp = http.Get(target);
      if (!resp.ok() || resp->status != 200) {
        // A shard whose map keeps no such table counts nothing for it; any
        // other answer (an older frsd without /stats, an error) is a shard
        // missing from the sums.
        if (resp.ok() && resp->status == 404 && resp->body.find("keeps no") != std::string::npos) continue;
        ++down;
        if (!resp.ok()) unreached.insert(sh.name);
        std::fprintf(stderr, "frsctl: shard %s: %s\n", sh.name.c_str(),
                     resp.ok() ? ("answered " + std::to_string(resp->status)).c_str()
                               : WithoutShardName(resp.status().message(), sh.name).c_str());
        continue;
      }
      auto st = ParseGroupStats(resp->body);
      if (!st.ok()) return Status::IOError("shard " + sh.name + ": " + st.status().message());
      if (Status added = sum.Add(st.value()); !added.ok())
        return Status::IOError("shard " + sh.name + ": " + added.message());
    }
    if (sum.empty()) continue;
    Print(s, sum.Total(a.top));
    any = true;
  }
  if (!any && down == 0)
    return Status::InvalidArgument("no biz of " + s.cfg.map_path + " keeps <stats by=\"" + a.by +
                                   "\">; it keeps: " + TablesKept(map));
  return down ? kExitNo : kExitOk;
}

}  // namespace frs::ctl
