#include "stats/field_stats.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>

#include "frs/key.h"
#include "os/store_dir.h"
#include "os/unique_dir.h"
#include "os/whole_file.h"

namespace frs::stats {
namespace {

// How long an Open replaced or dropped outlives it: far longer than any
// request holds a table it found on the fast path.
constexpr auto kRetiredLife = std::chrono::seconds(60);

int64_t SteadyNow() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// The day of a file of a table's directory ("2026-11-25.frs", and the
// received and set-aside files named after it), or false.
bool DayOfName(std::string_view name, uint32_t* day) {
  return name.size() >= 14 && name[10] == '.' && ParseDayText(name.substr(0, 10), day);
}

}  // namespace

void RetiredDays::Add(std::shared_ptr<const void> open) {
  MutexLock lock(&mu_);
  retired_.emplace_back(SteadyNow(), std::move(open));
}

void RetiredDays::FreeOld() {
  const int64_t before = (std::chrono::steady_clock::now() - kRetiredLife).time_since_epoch().count();
  std::vector<std::shared_ptr<const void>> freed;  // unmapped outside the lock
  MutexLock lock(&mu_);
  std::erase_if(retired_, [&](auto& r) {
    if (r.first >= before) return false;
    freed.push_back(std::move(r.second));
    return true;
  });
}

StatsTable::StatsTable(std::string dir, const StatsSpec& spec, StatsReporter report, RetiredDays* retired,
                       std::string root)
    : dir_(std::move(dir)),
      root_(std::move(root)),
      shape_{spec.groups, static_cast<uint32_t>(spec.distinct.size())},
      days_(spec.days),
      report_(std::move(report)),
      retired_(retired != nullptr ? retired : &own_retired_) {}

StatsTable::~StatsTable() = default;

std::string StatsTable::PathOf(uint32_t day) const { return dir_ + "/" + os::store_dir::DayFileName(DayText(day)); }

std::string StatsTable::LinkOnTheWay() const { return os::store_dir::LinkBelow(root_, dir_); }

void StatsTable::Report(const std::string& what) const {
  if (report_) report_(what);
}

void StatsTable::Reshape(const StatsSpec& spec) {
  MutexLock lock(&mu_);
  shape_.groups = spec.groups;
  days_ = spec.days;
}

void StatsTable::CloseDays() {
  MutexLock lock(&mu_);
  retired_->FreeOld();
  while (!open_.empty()) {
    std::unique_ptr<Open> o = std::move(open_.back());
    open_.pop_back();
    Retire(std::move(o));
  }
  current_.store(nullptr, std::memory_order_release);
}

GroupTable* StatsTable::Day(uint32_t day) {
  const Open* c = current_.load(std::memory_order_acquire);
  if (c != nullptr && c->day == day) return c->table.get();
  // A day whose file could not be made (a full disk, a directory this user
  // may not write) is tried again every few seconds, not at every request:
  // meanwhile its updates are counted as unstored.
  if (failed_day_.load(std::memory_order_relaxed) == day && SteadyNow() < retry_at_.load(std::memory_order_relaxed)) {
    unstored_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  // A day that keeps failing is said once, not at every retry; and that it
  // opens again, with what went uncounted meanwhile.
  uint32_t failed = failed_day_.load(std::memory_order_relaxed);
  const bool failing = failed == day;
  GroupTable* t = OpenDay(day, /*say=*/!failing);
  // A day that opens after one failed (that day, or the next one's): said
  // once, by the request that clears the mark.
  if (t != nullptr && failed != UINT32_MAX &&
      failed_day_.compare_exchange_strong(failed, UINT32_MAX, std::memory_order_relaxed)) {
    const uint64_t lost = unstored_.load(std::memory_order_relaxed) - unstored_at_failure_;
    Report("statistics by field counted again in " + PathOf(day) + "; " + std::to_string(lost) +
           " update(s) of this process went uncounted meanwhile (frs_stats_unstored_total)");
  }
  if (t == nullptr) {
    if (!failing) unstored_at_failure_ = unstored_.load(std::memory_order_relaxed);
    failed_day_.store(day, std::memory_order_relaxed);
    retry_at_.store((std::chrono::steady_clock::now() + std::chrono::seconds(5)).time_since_epoch().count(),
                    std::memory_order_relaxed);
    unstored_.fetch_add(1, std::memory_order_relaxed);
  }
  return t;
}

void StatsTable::Retire(std::unique_ptr<Open> o) {
  if (current_.load(std::memory_order_relaxed) == o.get()) current_.store(nullptr, std::memory_order_release);
  retired_->Add(std::shared_ptr<const Open>(std::move(o)));
}

GroupTable* StatsTable::OpenDay(uint32_t day, bool say) {
  MutexLock lock(&mu_);
  retired_->FreeOld();
  Open* found = nullptr;
  for (const auto& o : open_)
    if (o->day == day) found = o.get();
  if (found == nullptr) {
    if (const std::string link = LinkOnTheWay(); !link.empty()) {
      if (say) Report("statistics by field not counted: " + os::store_dir::LinkRefusedWords(link));
      return nullptr;
    }
    std::string aside;
    auto t = GroupTable::Open(PathOf(day), shape_, GroupTable::Mode::kWrite, &aside);
    if (!t.ok()) {
      if (say) Report("statistics by field not counted: " + t.status().message());
      return nullptr;
    }
    if (!aside.empty()) {
      Report("statistics: " + aside);
      t.value()->AddLost(1);
    }
    auto fresh = std::make_unique<Open>(Open{day, std::shared_ptr<GroupTable>(std::move(t.value()))});
    found = fresh.get();
    auto it = std::find_if(open_.begin(), open_.end(), [day](const auto& o) { return o->day > day; });
    open_.insert(it, std::move(fresh));
  }
  // The fast path follows the clock: to a newer day, or back when the clock
  // came back more than a day (a step undone); a request that straddled
  // midnight (a day behind) leaves it.
  const Open* c = current_.load(std::memory_order_relaxed);
  const bool newer = c == nullptr || day > c->day;
  if (newer || c->day > day + 1) current_.store(found, std::memory_order_release);
  // The days kept open are those nearest the one just asked for; the others
  // are retired (a request may hold one still), never freed at once.
  while (open_.size() > kOpenDaysPerTable) {
    auto far = std::max_element(open_.begin(), open_.end(), [day](const auto& a, const auto& b) {
      const auto dist = [day](uint32_t d) { return d > day ? d - day : day - d; };
      return dist(a->day) < dist(b->day);
    });
    std::unique_ptr<Open> gone = std::move(*far);
    open_.erase(far);
    Retire(std::move(gone));
  }
  if (newer) DropOldDays(day);
  return found->table.get();
}

GroupTable* StatsTable::Recover(uint32_t day, GroupTable* damaged) {
  MutexLock lock(&mu_);
  retired_->FreeOld();
  auto it = std::find_if(open_.begin(), open_.end(), [day](const auto& o) { return o->day == day; });
  if (it == open_.end()) return nullptr;
  if ((*it)->table.get() != damaged) return (*it)->table.get();  // recovered already
  if (const std::string link = LinkOnTheWay(); !link.empty()) {
    Report("statistics: " + damaged->path() + " is damaged and " + os::store_dir::LinkRefusedWords(link));
    return nullptr;
  }
  std::string aside;
  Result<bool> moved = damaged->MoveAside(&aside);
  if (!moved.ok()) {
    Report("statistics: " + damaged->path() + " is damaged and " + moved.status().message());
    return nullptr;
  }
  std::string also;
  auto t = GroupTable::Open(PathOf(day), shape_, GroupTable::Mode::kWrite, &also);
  if (!t.ok()) {
    Report("statistics: " + damaged->path() + " is damaged and " + t.status().message());
    return nullptr;
  }
  auto fresh = std::make_unique<Open>(Open{day, std::shared_ptr<GroupTable>(std::move(t.value()))});
  GroupTable* table = fresh->table.get();
  if (!also.empty()) Report("statistics: " + also);
  const bool was_current = current_.load(std::memory_order_relaxed) == it->get();
  std::unique_ptr<Open> old = std::move(*it);
  *it = std::move(fresh);
  if (was_current) current_.store(it->get(), std::memory_order_release);
  if (moved.value()) {
    // Only the process that moved the file carries it over (the others find
    // the fresh file at the path): the groups still readable, their counts
    // and sketches, and the day's counters; the damage itself is one lost.
    uint64_t kept = 0;
    for (const GroupRow& r : damaged->Rows(/*sketches=*/true)) kept += table->Merge(r);
    table->AddFieldErrors(damaged->field_errors());
    table->AddLost(damaged->lost() + 1);
    Report("statistics: " + damaged->path() + " is damaged (an offset outside its file, or its pages gone under a " +
           "truncation); moved to " + aside + ", " + std::to_string(kept) +
           " readable group(s) carried into a fresh file, the day goes on");
  }
  Retire(std::move(old));
  return table;
}

bool StatsTable::RecoverIfDamaged(uint32_t day) {
  GroupTable* t = nullptr;
  {
    MutexLock lock(&mu_);
    for (const auto& o : open_)
      if (o->day == day && o->table->damaged()) t = o->table.get();
  }
  return t != nullptr && Recover(day, t) != nullptr;
}

void StatsTable::DropOldDays(uint32_t today) {
  if (!LinkOnTheWay().empty()) return;  // deleted nowhere a link leads
  const os::UniqueDir dir = os::OpenDir(dir_.c_str());
  DIR* const d = dir.get();
  if (d == nullptr) return;
  // A clock that stepped ahead must not delete what it skipped over: old days
  // go only when `today` follows the newest day kept (files of days after
  // `today`, left by a clock that was ahead, do not count). After a step,
  // or a stop of several days, they go at the next day instead.
  uint32_t newest = 0;
  bool any = false;
  while (dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    uint32_t day;
    if (os::store_dir::KindOfDayFile(name) != os::store_dir::DayFile::kOwn || !DayOfName(name, &day) || day >= today)
      continue;
    newest = std::max(newest, day);
    any = true;
  }
  if (any && newest + 1 == today) {
    ::rewinddir(d);
    while (dirent* e = ::readdir(d)) {
      const std::string_view name = e->d_name;
      uint32_t day;
      // The day's own file, those received, and those set aside as damaged.
      if (!DayOfName(name, &day) || os::store_dir::IsTempName(name)) continue;
      if (day + days_ <= today) ::unlink((dir_ + "/" + std::string(name)).c_str());
    }
    pruned_today_ = today;
  }
  ::rewinddir(d);
  // Temporary files of a process killed while making a file: an hour old is
  // surely abandoned (making one takes milliseconds).
  const time_t hour_ago = ::time(nullptr) - 3600;
  while (dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (!os::store_dir::IsTempName(name)) continue;
    const std::string path = dir_ + "/" + std::string(name);
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && st.st_mtime < hour_ago) ::unlink(path.c_str());
  }
}

Result<std::vector<std::shared_ptr<const GroupTable>>> StatsTable::ReadDay(uint32_t day, uint64_t* damaged) {
  std::vector<std::shared_ptr<const GroupTable>> out;
  // Not this store's counts: frsd counted nothing there (OpenDay).
  if (const std::string link = LinkOnTheWay(); !link.empty())
    return Status::IOError(os::store_dir::LinkRefusedWords(link) + " (its statistics by field are not counted)");
  GroupTableShape shape;
  {
    MutexLock lock(&mu_);
    // A day past `days` is gone even while its file is still mapped here.
    if (day + days_ <= pruned_today_) return out;
    for (const auto& o : open_)
      if (o->day == day) out.push_back(o->table);
    shape = shape_;
  }
  const std::string prefix = DayText(day);
  if (out.empty()) {
    auto own = GroupTable::Open(PathOf(day), shape, GroupTable::Mode::kRead);
    if (own.ok()) out.push_back(std::move(own.value()));
    else if (own.status().code() == Status::Code::kCorruption) ++*damaged;
    else if (!own.status().IsNotFound()) return own.status();
  }
  // Received files: <day>.from-<hash>.frs.
  if (os::UniqueDir d = os::OpenDir(dir_.c_str())) {
    while (dirent* e = ::readdir(d.get())) {
      const std::string_view name = e->d_name;
      // A link: not this store's counts (and not damage, not counted lost).
      if (e->d_type == DT_LNK || !name.starts_with(prefix) ||
          os::store_dir::KindOfDayFile(name) != os::store_dir::DayFile::kReceived)
        continue;
      auto t = GroupTable::Open(dir_ + "/" + std::string(name), shape, GroupTable::Mode::kRead);
      if (t.ok()) out.push_back(std::move(t.value()));
      else ++*damaged;  // left out, counted: the others still answer
    }
  }
  return out;
}

Status StatsTable::WriteReceived(uint32_t day, std::string_view receipt, const std::vector<GroupRow>& rows,
                                 uint64_t field_errors, bool* duplicate) {
  *duplicate = false;
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(XXH3_64bits(receipt.data(), receipt.size())));
  const std::string final_path = dir_ + "/" + os::store_dir::ReceivedDayFileName(DayText(day), id);
  if (const std::string link = LinkOnTheWay(); !link.empty())
    return Status::IOError(os::store_dir::LinkRefusedWords(link));
  if (::access(final_path.c_str(), F_OK) == 0) {
    *duplicate = true;
    return Status::OK();
  }
  uint32_t distinct;
  {
    MutexLock lock(&mu_);
    distinct = shape_.distinct;
  }
  // Made whole, then linked in: a racing request with the same receipt that
  // got there first keeps its file, and this one counts as the duplicate.
  auto made = os::WriteFileWhole(final_path, os::WholeFileOptions{.exclusive = true}, [&](const std::string& tmp) {
    auto t = GroupTable::Open(tmp, GroupTableShape{static_cast<uint32_t>(rows.size()) + 1, distinct},
                              GroupTable::Mode::kWrite);
    if (!t.ok()) return t.status();
    for (const GroupRow& r : rows)
      if (!t.value()->Merge(r))
        return Status::Unavailable("no room for the received statistics in " + dir_ + " (is the disk full?)");
    t.value()->AddFieldErrors(field_errors);
    // Written once, read only after: a few groups keep a few KB, not the
    // 1 MB growth step of a day that is still counting.
    return t.value()->Trim();
  });
  if (!made.ok()) return made.status();
  *duplicate = made.value() == os::Placed::kExisting;
  return Status::OK();
}

uint64_t FieldStats::Unstored() const {
  MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [name, table] : tables_) n += table->unstored();
  return n;
}

StatsTable* FieldStats::TableFor(uint16_t biz, const KeyShape& cfg, const StatsSpec& spec) {
  if (dir_.empty()) return nullptr;
  const std::string name = spec.DirName(cfg.fields);
  MutexLock lock(&mu_);
  auto& slot = tables_[{biz, name}];
  if (slot == nullptr) {
    slot = std::make_unique<StatsTable>(os::store_dir::FieldStatsDir(dir_, biz, name), spec, report_, &retired_, dir_);
  } else {
    slot->Reshape(spec);
  }
  return slot.get();
}

void FieldStats::CloseAllBut(const std::vector<const StatsTable*>& kept) {
  MutexLock lock(&mu_);
  for (auto& [id, table] : tables_)
    if (std::find(kept.begin(), kept.end(), table.get()) == kept.end()) table->CloseDays();
}

bool FieldStats::SplitKey(const KeyShape& cfg, std::string_view key, std::string_view* fields) {
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

namespace {

// The value of `spec`'s group in `fields` (split from a key): a field of the
// key itself, or the by fields joined into `buf`.
std::string_view GroupValue(const KeyShape& cfg, const StatsSpec& spec, const std::string_view* fields, char* buf) {
  if (spec.by.size() == 1) return fields[spec.by[0]];
  size_t len = 0;
  for (size_t k = 0; k < spec.by.size(); ++k) {
    if (k != 0) buf[len++] = cfg.separator;
    const std::string_view f = fields[spec.by[k]];
    std::memcpy(buf + len, f.data(), f.size());
    len += f.size();
  }
  return std::string_view(buf, len);
}

}  // namespace

void FieldStats::Prefetch(const KeyShape& cfg, std::span<StatsTable* const> tables, std::string_view key,
                          uint32_t day) {
  std::string_view fields[kMaxKeyFields];
  if (!SplitKey(cfg, key, fields)) return;
  for (size_t i = 0; i < tables.size() && i < cfg.stats.size(); ++i) {
    const StatsSpec& spec = cfg.stats[i];
    GroupTable* t = tables[i] == nullptr || spec.distinct.empty() ? nullptr : tables[i]->Current(day);
    if (t == nullptr) continue;
    char buf[kMaxKeyBytes];
    uint32_t codes[kMaxDistinctFields] = {};
    for (size_t d = 0; d < spec.distinct.size() && d < kMaxDistinctFields; ++d)
      codes[d] = sketch::CodeOf(fields[spec.distinct[d]]);
    t->Prefetch(GroupValue(cfg, spec, fields, buf), codes);
  }
}

void FieldStats::Count(const KeyShape& cfg, std::span<StatsTable* const> tables, std::string_view key,
                       const GroupCounts& delta, uint32_t day) {
  std::string_view fields[kMaxKeyFields];
  const bool split = SplitKey(cfg, key, fields);
  for (size_t i = 0; i < tables.size() && i < cfg.stats.size(); ++i) {
    if (tables[i] == nullptr) continue;
    GroupTable* t = tables[i]->Day(day);
    if (t != nullptr && t->damaged()) t = tables[i]->Recover(day, t);
    if (t == nullptr) continue;
    if (!split) {
      t->AddFieldError();
      continue;
    }
    const StatsSpec& spec = cfg.stats[i];
    char buf[kMaxKeyBytes];
    const std::string_view value = GroupValue(cfg, spec, fields, buf);
    uint32_t codes[kMaxDistinctFields] = {};
    for (size_t d = 0; d < spec.distinct.size() && d < kMaxDistinctFields; ++d)
      codes[d] = sketch::CodeOf(fields[spec.distinct[d]]);
    // Damage met on the way (an offset outside the file, a truncation): the
    // day goes on in a fresh file, and this decision is counted there.
    if (!t->Add(value, delta, codes) && t->damaged())
      if (GroupTable* fresh = tables[i]->Recover(day, t)) fresh->Add(value, delta, codes);
  }
}

namespace {

// A group's counts of one more file, added without wrapping: each file's
// merges stop at 2^63, so two merged files could add up to 2^64 (read as
// 0, found by an attack with the admin token); a sum stops at 2^64-1.
void AddStopping(uint64_t& a, uint64_t b) { a = a > UINT64_MAX - b ? UINT64_MAX : a + b; }

void AddCounts(GroupCounts* c, const GroupCounts& more) {
  AddStopping(c->requests, more.requests);
  AddStopping(c->allowed, more.allowed);
  AddStopping(c->denied, more.denied);
  AddStopping(c->units, more.units);
}

}  // namespace

GroupStats ReadGroupStats(std::span<const std::shared_ptr<const GroupTable>> tables, const GroupStatsQuery& q) {
  GroupStats out;
  // Counts first, summed over the files; sketches later, for the rows kept.
  std::map<std::string, GroupCounts> counts;
  for (const auto& t : tables) {
    // A received file's field_errors is what its sender said: summed
    // without wrapping, as the counts are.
    AddStopping(out.field_errors, t->field_errors());
    AddStopping(out.lost, t->lost());
    if (!q.value.empty()) {
      GroupRow r;
      if (!t->Row(q.value, &r)) continue;
      // ~other is a row when it counted anything, asked for or not (its
      // record is always there).
      if (r.value == kOtherGroup && r.counts.requests == 0 && r.counts.units == 0) continue;
      AddCounts(&counts[r.value], r.counts);
      continue;
    }
    for (GroupRow& r : t->Rows(/*sketches=*/false)) AddCounts(&counts[r.value], r.counts);
  }
  std::vector<std::pair<std::string, GroupCounts>> rows(counts.begin(), counts.end());
  if (q.value.empty()) {
    out.groups = static_cast<uint32_t>(rows.size());
    for (const auto& r : rows) out.groups -= r.first == kOtherGroup;
  } else {
    for (const auto& t : tables) out.groups = std::max(out.groups, t->groups());
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    if (a.second.requests != b.second.requests) return a.second.requests > b.second.requests;
    return a.first < b.first;
  });
  if (q.top != 0 && rows.size() > q.top) rows.resize(q.top);
  for (auto& [value, c] : rows) {
    GroupStat s;
    s.value = value;
    s.requests = c.requests;
    s.allowed = c.allowed;
    s.denied = c.denied;
    s.units = c.units;
    std::vector<sketch::Sketch> merged;
    for (const auto& t : tables) {
      GroupRow r;
      if (t->shape().distinct == 0 || !t->Row(value, &r)) continue;
      merged.resize(std::max(merged.size(), r.distinct.size()));
      for (size_t d = 0; d < r.distinct.size(); ++d) merged[d].Merge(r.distinct[d]);
    }
    for (const sketch::Sketch& sk : merged) {
      s.distinct.push_back(sk.Count());
      if (q.sketches) s.sketches.push_back(sk.Encode());
    }
    out.rows.push_back(std::move(s));
  }
  return out;
}

}  // namespace frs::stats
