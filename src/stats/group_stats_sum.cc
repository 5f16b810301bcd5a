// stats/group_stats_sum.cc: one day's statistics summed across shards
// (frs/group_stats.h GroupStatsSum).
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "frs/group_stats.h"
#include "stats/distinct_sketch.h"
#include "stats/group_table.h"

namespace frs {

struct GroupStatsSum::Groups {
  // Per group value: its summed counts, and one merged sketch per distinct field.
  std::map<std::string, std::pair<GroupStat, std::vector<stats::sketch::Sketch>>> by_value;
};

GroupStatsSum::GroupStatsSum() : groups_(std::make_unique<Groups>()) {}
GroupStatsSum::~GroupStatsSum() = default;
GroupStatsSum::GroupStatsSum(GroupStatsSum&&) noexcept = default;
GroupStatsSum& GroupStatsSum::operator=(GroupStatsSum&&) noexcept = default;

bool GroupStatsSum::empty() const { return !have_; }

Status GroupStatsSum::Add(const GroupStats& part) {
  const size_t fields = have_ ? head_.distinct_fields.size() : part.distinct_fields.size();
  // Every sketch read first: a part with one that cannot be read adds nothing.
  std::vector<std::vector<stats::sketch::Sketch>> read(part.rows.size());
  for (size_t r = 0; r < part.rows.size(); ++r) {
    const GroupStat& g = part.rows[r];
    for (size_t d = 0; d < fields && d < g.sketches.size(); ++d) {
      stats::sketch::Sketch sk;
      if (!stats::sketch::Sketch::Decode(g.sketches[d], &sk))
        return Status::InvalidArgument("group '" + g.value + "' has a sketch that cannot be read");
      read[r].push_back(std::move(sk));
    }
  }
  if (!have_) {
    head_.biz_id = part.biz_id;
    head_.biz = part.biz;
    head_.by = part.by;
    head_.day = part.day;
    head_.distinct_fields = part.distinct_fields;
    have_ = true;
  }
  head_.field_errors += part.field_errors;
  head_.lost += part.lost;
  for (size_t r = 0; r < part.rows.size(); ++r) {
    const GroupStat& g = part.rows[r];
    auto& [row, sketches] = groups_->by_value[g.value];
    row.value = g.value;
    row.requests += g.requests;
    row.allowed += g.allowed;
    row.denied += g.denied;
    row.units += g.units;
    sketches.resize(fields);
    for (size_t d = 0; d < read[r].size(); ++d) sketches[d].Merge(read[r][d]);
  }
  return Status::OK();
}

GroupStats GroupStatsSum::Total(uint32_t top) const {
  GroupStats sum = head_;
  sum.rows.clear();
  for (const auto& [value, entry] : groups_->by_value) {
    GroupStat g = entry.first;
    for (const auto& sk : entry.second) g.distinct.push_back(sk.Count());
    sum.rows.push_back(std::move(g));
  }
  sum.groups = 0;  // groups of their own, as one shard counts them: not ~other
  for (const GroupStat& g : sum.rows) sum.groups += g.value != stats::kOtherGroup;
  std::sort(sum.rows.begin(), sum.rows.end(), [](const GroupStat& x, const GroupStat& y) {
    return x.requests != y.requests ? x.requests > y.requests : x.value < y.value;
  });
  if (top != 0 && sum.rows.size() > top) sum.rows.resize(top);
  return sum;
}

}  // namespace frs
