#include "stats/statistics.h"

#include <algorithm>

namespace frs::stats {

Result<std::unique_ptr<Statistics>> Statistics::Open(const std::string& dir, bool read_only, StatsReporter report) {
  auto daily = DailyStats::Open(dir, read_only, /*check_body=*/false);  // the start's check made it
  if (!daily.ok()) return daily.status();
  // The table of recent denials is a view for operators: a store where it
  // cannot be made (an old read-only copy) still serves without it.
  auto denials = RecentDenials::Open(dir, read_only);
  if (!denials.ok() && report)
    report("recent denials are not kept (frsctl top --denied): " + denials.status().ToString());
  return std::unique_ptr<Statistics>(new Statistics(std::move(daily.value()),
                                                    denials.ok() ? std::move(denials.value()) : nullptr,
                                                    std::make_unique<FieldStats>(dir, read_only, std::move(report))));
}

BizCounters Statistics::Attach(uint16_t id, const KeyShape& keys) {
  BizCounters b;
  b.slot = daily_->SlotFor(id);
  for (const StatsSpec& spec : keys.stats) b.tables.push_back(fields_->TableFor(id, keys, spec));
  if (std::all_of(b.tables.begin(), b.tables.end(), [](StatsTable* t) { return t == nullptr; })) b.tables.clear();
  return b;
}

void Statistics::KeepOnly(std::span<const BizCounters* const> kept) {
  std::vector<const StatsTable*> tables;
  for (const BizCounters* b : kept) tables.insert(tables.end(), b->tables.begin(), b->tables.end());
  fields_->CloseAllBut(tables);
}

void Statistics::Prefetch(const BizCounters& b, const KeyShape& keys, std::string_view key, uint32_t day) {
  if (!b.tables.empty()) FieldStats::Prefetch(keys, b.tables, key, day);
}

void Statistics::Count(const BizCounters& b, uint16_t id, const KeyShape& keys, std::string_view key, const Counted& c,
                       uint32_t day, int64_t now_s, StatsTally* tally) {
  const uint64_t delta[DailyStats::kFields] = {1, c.allowed ? 1u : 0u, c.allowed ? 0u : 1u, c.created ? 1u : 0u};
  if (tally != nullptr) tally->Add(b.slot, day, delta);
  else daily_->Add(b.slot, day, delta);
  if (c.denial && denials_ != nullptr) denials_->Count(id, key, now_s);
  if (!b.tables.empty())
    FieldStats::Count(keys, b.tables, key, GroupCounts{1, c.allowed ? 1u : 0u, c.allowed ? 0u : 1u, c.units}, day);
}

}  // namespace frs::stats
