#include "limit/field_stats.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "frs/key.h"

namespace frs::limit {
namespace {

// Days of files kept open for writing: today and the two before (a request
// decided just before midnight may still be counted just after it).
constexpr size_t kOpenDays = 3;

}  // namespace

StatsTable::StatsTable(std::string dir, const StatsSpec& spec)
    : dir_(std::move(dir)), shape_{spec.groups, static_cast<uint32_t>(spec.distinct.size())}, days_(spec.days) {}

std::string StatsTable::PathOf(uint32_t day) const { return dir_ + "/" + DayText(day) + ".frs"; }

void StatsTable::Reshape(const StatsSpec& spec) {
  std::lock_guard<std::mutex> lock(mu_);
  shape_.groups = spec.groups;
  days_ = spec.days;
}

GroupTable* StatsTable::Day(uint32_t day) {
  const Open* c = current_.load(std::memory_order_acquire);
  if (c != nullptr && c->day == day) return c->table.get();
  return OpenDay(day);
}

GroupTable* StatsTable::OpenDay(uint32_t day) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& o : open_)
    if (o->day == day) return o->table.get();
  auto t = GroupTable::Open(PathOf(day), shape_, GroupTable::Mode::kWrite);
  if (!t.ok()) return nullptr;
  auto fresh = std::make_unique<Open>(Open{day, std::shared_ptr<GroupTable>(std::move(t.value()))});
  GroupTable* table = fresh->table.get();
  // Days arrive in order but for a request that straddled midnight: only a
  // newer day moves `current_`. An Open is never moved (readers on the
  // fast path hold its address); one is freed kOpenDays days after its day.
  auto it = std::find_if(open_.begin(), open_.end(), [day](const auto& o) { return o->day > day; });
  const bool newest = it == open_.end();
  open_.insert(it, std::move(fresh));
  if (newest) {
    current_.store(open_.back().get(), std::memory_order_release);
    while (open_.size() > kOpenDays) open_.pop_front();
    DropOldDays(day);
  }
  return table;
}

void StatsTable::DropOldDays(uint32_t today) const {
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    uint32_t day;
    if (name.size() < 14 || !name.ends_with(".frs") || !ParseDayText(name.substr(0, 10), &day)) continue;
    if (day + days_ <= today) ::unlink((dir_ + "/" + std::string(name)).c_str());
  }
  ::closedir(d);
}

Result<std::shared_ptr<const GroupTable>> StatsTable::ReadDay(uint32_t day) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A day past `days` is gone even while its file is still mapped here.
    if (!open_.empty() && day + days_ <= open_.back()->day) return Status::NotFound("day " + DayText(day) + " is no longer kept");
    for (const auto& o : open_)
      if (o->day == day) return std::shared_ptr<const GroupTable>(o->table);
  }
  GroupTableShape shape;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shape = shape_;
  }
  auto t = GroupTable::Open(PathOf(day), shape, GroupTable::Mode::kRead);
  if (!t.ok()) return t.status();
  return std::shared_ptr<const GroupTable>(std::move(t.value()));
}

StatsTable* FieldStats::TableFor(uint16_t biz, const BizConfig& cfg, const StatsSpec& spec) {
  if (dir_.empty()) return nullptr;
  const std::string name = spec.DirName(cfg.fields);
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = tables_[{biz, name}];
  if (slot == nullptr) {
    slot = std::make_unique<StatsTable>(dir_ + "/stats/" + std::to_string(biz) + "/" + name, spec);
  } else {
    slot->Reshape(spec);
  }
  return slot.get();
}

bool FieldStats::SplitKey(const BizConfig& cfg, std::string_view key, std::string_view* fields) {
  const size_t want = cfg.fields.size();
  size_t n = 0, start = 0;
  while (true) {
    const size_t at = key.find(cfg.separator, start);
    if (n == want) return false;
    fields[n++] = key.substr(start, at == std::string_view::npos ? key.npos : at - start);
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return n == want;
}

void FieldStats::Count(const BizConfig& cfg, std::span<StatsTable* const> tables, std::string_view key,
                       const GroupCounts& delta, uint32_t day) {
  std::string_view fields[kMaxKeyFields];
  const bool split = SplitKey(cfg, key, fields);
  for (size_t i = 0; i < tables.size() && i < cfg.stats.size(); ++i) {
    if (tables[i] == nullptr) continue;
    GroupTable* t = tables[i]->Day(day);
    if (t == nullptr) continue;
    if (!split) {
      t->AddFieldError();
      continue;
    }
    const StatsSpec& spec = cfg.stats[i];
    char buf[kMaxKeyBytes];
    std::string_view value;
    if (spec.by.size() == 1) {
      value = fields[spec.by[0]];
    } else {
      size_t len = 0;
      for (size_t k = 0; k < spec.by.size(); ++k) {
        if (k != 0) buf[len++] = cfg.separator;
        const std::string_view f = fields[spec.by[k]];
        std::memcpy(buf + len, f.data(), f.size());
        len += f.size();
      }
      value = std::string_view(buf, len);
    }
    uint32_t codes[kMaxDistinctFields] = {};
    for (size_t d = 0; d < spec.distinct.size() && d < kMaxDistinctFields; ++d)
      codes[d] = sketch::CodeOf(fields[spec.distinct[d]]);
    t->Add(value, delta, codes);
  }
}

GroupStats ReadGroupStats(const GroupTable& table, const GroupStatsQuery& q) {
  GroupStats out;
  out.field_errors = table.field_errors();
  out.lost = table.lost();
  out.groups = table.groups();
  std::vector<GroupRow> rows;
  if (!q.value.empty()) {
    GroupRow r;
    if (table.Row(q.value, &r)) rows.push_back(std::move(r));
  } else {
    rows = table.Rows();
  }
  std::sort(rows.begin(), rows.end(), [](const GroupRow& a, const GroupRow& b) {
    if (a.counts.requests != b.counts.requests) return a.counts.requests > b.counts.requests;
    return a.value < b.value;
  });
  if (q.top != 0 && rows.size() > q.top) rows.resize(q.top);
  for (GroupRow& r : rows) {
    GroupStat s;
    s.value = std::move(r.value);
    s.requests = r.counts.requests;
    s.allowed = r.counts.allowed;
    s.denied = r.counts.denied;
    s.units = r.counts.units;
    for (const sketch::Sketch& sk : r.distinct) {
      s.distinct.push_back(sk.Count());
      if (q.sketches) s.sketches.push_back(sk.Encode());
    }
    out.rows.push_back(std::move(s));
  }
  return out;
}

}  // namespace frs::limit
