// The statistics by key field of a biz, read and merged (map.xml <stats>):
// frsctl stat-by, GET /stats, and a handoff's POST /stats.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "frs/key.h"
#include "stats/statistics.h"

namespace frs::stats {
namespace {

// The <stats> of a biz shaped `keys` whose by fields are those of `by` ("iface,app" finds
// by="app,iface"), or -1.
int FindStatsSpec(const KeyShape& keys, std::string_view by) {
  std::vector<std::string_view> want;
  for (size_t start = 0;;) {
    const size_t comma = by.find(',', start);
    want.push_back(by.substr(start, comma == std::string_view::npos ? by.npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::sort(want.begin(), want.end());
  for (size_t i = 0; i < keys.stats.size(); ++i) {
    std::vector<std::string_view> have;
    for (uint8_t f : keys.stats[i].by) have.push_back(keys.fields[f]);
    std::sort(have.begin(), have.end());
    if (have == want) return static_cast<int>(i);
  }
  return -1;
}

Status NoSuchStats(std::string_view name, const KeyShape& keys, std::string_view by) {
  std::string kept;
  for (const StatsSpec& s : keys.stats) kept += (kept.empty() ? "" : ", ") + std::string("by=\"") + s.by_text + "\"";
  return Status::NotFound("biz '" + std::string(name) + "' keeps no <stats by=\"" + std::string(by) + "\"> (" +
                          (kept.empty() ? std::string("it keeps none") : "it keeps " + kept) + ")");
}

// Names a merge that came without a receipt, so that no other is taken for it.
std::string UnnamedReceipt(int64_t now_ms) {
  static std::atomic<uint64_t> next{1};
  return "unnamed/" + std::to_string(now_ms) + "/" + std::to_string(::getpid()) + "/" +
         std::to_string(next.fetch_add(1));
}

Status NotKept() { return Status::Unavailable("statistics by field are kept only with a store directory"); }

}  // namespace

Result<GroupStats> Statistics::ReadBy(const BizCounters& b, std::string_view name, const KeyShape& keys,
                                      const GroupStatsQuery& q, uint32_t today) const {
  const int i = FindStatsSpec(keys, q.by);
  if (i < 0) return NoSuchStats(name, keys, q.by);
  const StatsSpec& spec = keys.stats[i];
  if (b.tables.empty() || b.tables[i] == nullptr) return NotKept();
  const uint32_t day = q.day < 0 ? today : static_cast<uint32_t>(q.day);
  StatsTable* table = b.tables[i];
  // A file found damaged (cut short, a broken header) is left out and
  // counted in `lost`, not an error for the rest of the day; the day's next
  // count sets it aside and starts a fresh one.
  uint64_t damaged = 0;
  auto tables = table->ReadDay(day, &damaged);
  if (!tables.ok()) return tables.status();
  GroupStats out = ReadGroupStats(tables.value(), q);
  // Damage met while reading (an offset outside the file): set aside, what
  // is readable carried over, and read again.
  if (!fields_->read_only() &&
      std::any_of(tables->begin(), tables->end(), [](const auto& t) { return t->damaged(); }) &&
      table->RecoverIfDamaged(day)) {
    damaged = 0;
    tables = table->ReadDay(day, &damaged);
    if (!tables.ok()) return tables.status();
    out = ReadGroupStats(tables.value(), q);
  }
  // A file found damaged while read (a received one: never moved, as no
  // count of the day writes it) gave what of it was readable; it counts in
  // lost, as one that could not be opened does.
  for (const auto& t : tables.value()) damaged += t->damaged();
  out.lost += damaged;
  if (day == today) out.lost += table->unstored();
  out.by = spec.by_text;
  out.day = day;
  for (uint8_t f : spec.distinct) out.distinct_fields.push_back(keys.fields[f]);
  return out;
}

Status Statistics::MergeBy(const BizCounters& b, std::string_view name, const KeyShape& keys, const GroupStats& in,
                           std::string_view receipt, uint32_t today, int64_t now_ms) const {
  const int i = FindStatsSpec(keys, in.by);
  if (i < 0) return NoSuchStats(name, keys, in.by);
  if (b.tables.empty() || b.tables[i] == nullptr) return NotKept();
  const StatsSpec& spec = keys.stats[i];
  // Only days this table keeps, and none after today: a day in the future
  // would never be pruned and would hide the days before it.
  if (in.day > today || in.day + spec.days <= today)
    return Status::InvalidArgument("day " + DayText(in.day) + " " + std::string(kDayNotKept) + " (the " +
                                   std::to_string(spec.days) + " days up to " + DayText(today) + ")");
  // Sketches travel by field name: a field this table does not count is
  // dropped, one it counts and the sender did not starts from nothing.
  std::vector<int> from(spec.distinct.size(), -1);
  for (size_t d = 0; d < spec.distinct.size(); ++d)
    for (size_t k = 0; k < in.distinct_fields.size(); ++k)
      if (in.distinct_fields[k] == keys.fields[spec.distinct[d]]) from[d] = static_cast<int>(k);
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
  if (id.empty()) id = UnnamedReceipt(now_ms);
  bool duplicate = false;
  return b.tables[i]->WriteReceived(in.day, id, rows, in.field_errors, &duplicate);
}

}  // namespace frs::stats
