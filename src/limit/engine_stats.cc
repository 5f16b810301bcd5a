// The statistics by key field of a biz, read and merged (map.xml <stats>).
#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "limit/engine_impl.h"

#include <unistd.h>

namespace frs::limit {
namespace {

// The <stats> of `biz` whose by fields are those of `by` ("iface,app" finds
// by="app,iface"), or -1.
int FindStatsSpec(const BizConfig& biz, std::string_view by) {
  std::vector<std::string_view> want;
  for (size_t start = 0;;) {
    const size_t comma = by.find(',', start);
    want.push_back(by.substr(start, comma == std::string_view::npos ? by.npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::sort(want.begin(), want.end());
  for (size_t i = 0; i < biz.stats.size(); ++i) {
    std::vector<std::string_view> have;
    for (uint8_t f : biz.stats[i].by) have.push_back(biz.fields[f]);
    std::sort(have.begin(), have.end());
    if (have == want) return static_cast<int>(i);
  }
  return -1;
}

Status NoSuchStats(const BizConfig& biz, std::string_view by) {
  std::string kept;
  for (const StatsSpec& s : biz.stats) kept += (kept.empty() ? "" : ", ") + std::string("by=\"") + s.by_text + "\"";
  return Status::NotFound("biz '" + biz.name + "' keeps no <stats by=\"" + std::string(by) + "\"> (" +
                          (kept.empty() ? std::string("it keeps none") : "it keeps " + kept) + ")");
}

// Names a merge that came without a receipt, so that no other is taken for it.
std::string UnnamedReceipt(const Clock& clock) {
  static std::atomic<uint64_t> next{1};
  return "unnamed/" + std::to_string(clock.NowMs()) + "/" + std::to_string(::getpid()) + "/" +
         std::to_string(next.fetch_add(1));
}

}  // namespace

Result<GroupStats> EngineImpl::StatsBy(const GroupStatsQuery& q) const {
  std::shared_ptr<const Map> map = SharedMap();
  const Biz* biz = map->Find(q.biz);
  if (biz == nullptr) return Status::NotFound("unknown biz '" + q.biz + "'");
  const int i = FindStatsSpec(biz->cfg, q.by);
  if (i < 0) return NoSuchStats(biz->cfg, q.by);
  const StatsSpec& spec = biz->cfg.stats[i];
  if (biz->stats_tables.empty() || biz->stats_tables[i] == nullptr)
    return Status::Unavailable("statistics by field are kept only with a store directory");
  const uint32_t today = Today();
  const uint32_t day = q.day < 0 ? today : static_cast<uint32_t>(q.day);
  StatsTable* table = biz->stats_tables[i];
  // A file found damaged (cut short, a broken header) is left out and
  // counted in `lost`, not an error for the rest of the day; the day's next
  // count sets it aside and starts a fresh one.
  uint64_t damaged = 0;
  auto tables = table->ReadDay(day, &damaged);
  if (!tables.ok()) return tables.status();
  GroupStats out = ReadGroupStats(tables.value(), q);
  // Damage met while reading (an offset outside the file): set aside, what
  // is readable carried over, and read again.
  if (!field_stats_->read_only() &&
      std::any_of(tables->begin(), tables->end(), [](const auto& t) { return t->damaged(); }) &&
      table->RecoverIfDamaged(day)) {
    damaged = 0;
    tables = table->ReadDay(day, &damaged);
    if (!tables.ok()) return tables.status();
    out = ReadGroupStats(tables.value(), q);
  }
  out.lost += damaged;
  if (day == today) out.lost += table->unstored();
  out.biz_id = biz->cfg.id;
  out.biz = biz->cfg.name;
  out.by = spec.by_text;
  out.day = day;
  for (uint8_t f : spec.distinct) out.distinct_fields.push_back(biz->cfg.fields[f]);
  return out;
}

Status EngineImpl::MergeStatsBy(const GroupStats& in, std::string_view receipt) {
  std::shared_ptr<const Map> map = SharedMap();
  const Biz* biz = in.biz.empty() ? map->FindId(in.biz_id) : map->Find(in.biz);
  if (biz == nullptr)
    return Status::NotFound("unknown biz '" + (in.biz.empty() ? std::to_string(in.biz_id) : in.biz) + "'");
  const int i = FindStatsSpec(biz->cfg, in.by);
  if (i < 0) return NoSuchStats(biz->cfg, in.by);
  if (biz->stats_tables.empty() || biz->stats_tables[i] == nullptr)
    return Status::Unavailable("statistics by field are kept only with a store directory");
  const StatsSpec& spec = biz->cfg.stats[i];
  // Only days this table keeps, and none after today: a day in the future
  // would never be pruned and would hide the days before it.
  const uint32_t today = Today();
  if (in.day > today || in.day + spec.days <= today)
    return Status::InvalidArgument("day " + DayText(in.day) + " " + std::string(kDayNotKept) + " (the " +
                                   std::to_string(spec.days) + " days up to " + DayText(today) + ")");
  // Sketches travel by field name: a field this table does not count is
  // dropped, one it counts and the sender did not starts from nothing.
  std::vector<int> from(spec.distinct.size(), -1);
  for (size_t d = 0; d < spec.distinct.size(); ++d)
    for (size_t k = 0; k < in.distinct_fields.size(); ++k)
      if (in.distinct_fields[k] == biz->cfg.fields[spec.distinct[d]]) from[d] = static_cast<int>(k);
  std::vector<GroupRow> rows;
  for (const GroupStat& g : in.rows) {
    if (g.value.size() > kMaxKeyBytes) return Status::InvalidArgument("a group value is longer than 255 bytes");
    GroupRow r;
    r.value = g.value;
    r.counts = {g.allowed + g.denied, g.allowed, g.denied, g.units};
    for (size_t d = 0; d < spec.distinct.size(); ++d) {
      sketch::Sketch sk;
      // An empty text is no sketch (a row may carry its sketches in pieces).
      if (from[d] >= 0 && static_cast<size_t>(from[d]) < g.sketches.size() && !g.sketches[from[d]].empty() &&
          !sketch::Sketch::Decode(g.sketches[from[d]], &sk))
        return Status::InvalidArgument("group '" + g.value + "': its " + in.distinct_fields[from[d]] +
                                       " sketch is not one this server reads");
      r.distinct.push_back(std::move(sk));
    }
    rows.push_back(std::move(r));
  }
  // Without a receipt the merge cannot be recognized again: each is its own.
  std::string id(receipt);
  if (id.empty()) id = UnnamedReceipt(*clock_);
  bool duplicate = false;
  return biz->stats_tables[i]->WriteReceived(in.day, id, rows, in.field_errors, &duplicate);
}

}  // namespace frs::limit
