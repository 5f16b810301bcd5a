#include <algorithm>
#include <cstring>
#include <memory>

#include "limit/engine_impl.h"
#include "os/path_access.h"
#include "os/store_dir.h"
#include "stats/day_files.h"
#include "stats/recent_denials.h"

#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

namespace frs {

Result<std::unique_ptr<AdminEngine>> AdminEngine::Open(const EngineOptions& opts) {
  if (opts.store == nullptr) return Status::InvalidArgument("the engine needs a store");
  // A process run as root on the store of frsd's service user would make
  // the engine's files root's: frsd, run as that user, then stopped counting
  // its statistics by key field. frsd refuses such a start and frsctl
  // becomes the owner; a program on libfrs is told to do either. A reader
  // makes nothing.
  if (!opts.read_only)
    if (Status s = os::RootOnAnotherUsersStore(opts.stats_dir); !s.ok()) return s;
  auto tz = limit::TimeZone::Load(opts.timezone);
  if (!tz.ok()) return tz.status();
  auto map = opts.map_text.empty() ? limit::LoadMapFile(opts.map_path) : limit::ParseMap(opts.map_text, opts.map_path);
  if (!map.ok()) return map.status();
  // Every process of a store keys lease ids alike. A store whose secret
  // was never made, opened by a reader or an inspecting tool, gets a stand-in
  // of its own: made there, a file would void at frsd's next start every id
  // the running frsd gave out. The stand-in names no id (ids_known false).
  // A damaged or unreadable file is refused whoever opens it.
  // A cluster's key file, when named, keys them alike on every shard.
  // Read (or made) before the statistics: the first engine of a store
  // makes both, and one stopped between the two must leave the secret
  // without stats.frs, never stats.frs without the secret, which would read
  // as a store that served and lost it (LeaseKeyMissingWarning).
  const bool make = !opts.read_only && opts.make_lease_key;
  auto secret = opts.lease_key_file.empty() ? limit::LoadLeaseSecret(opts.stats_dir, make)
                                            : limit::LoadLeaseKeyFile(opts.lease_key_file);
  bool known = true;
  if (!secret.ok() && !make && opts.lease_key_file.empty() &&
      (secret.status().IsNotFound() || opts.statistics_optional)) {
    // A reader of counts alone reads around a secret that does not read,
    // saying so: the nodes do not need it (an export keeps ids by serial).
    if (!secret.status().IsNotFound() && opts.on_problem)
      opts.on_problem(secret.status().message() +
                      ": read without it (lease and reservation ids show by serial only; `frsctl verify` says what "
                      "frsd's start does with the file)");
    secret = limit::LoadLeaseSecret("", false);
    known = false;
  }
  if (!secret.ok()) return secret.status();
  auto statistics = stats::Statistics::Open(opts.statistics_in_memory ? std::string() : opts.stats_dir, opts.read_only,
                                            opts.on_problem);
  if (!statistics.ok() && opts.statistics_optional) {
    if (opts.on_problem)
      opts.on_problem(statistics.status().message() +
                      ": read without the statistics (they show as none; `frsctl verify` names each damaged file "
                      "and what frsd's start does with it)");
    statistics = stats::Statistics::Open("", /*read_only=*/false, opts.on_problem);
  }
  if (!statistics.ok()) return statistics.status();
  auto engine = std::make_unique<limit::EngineImpl>(opts, std::move(tz.value()), std::move(statistics.value()));
  engine->SetLeaseSecret(secret.value(), !opts.lease_key_file.empty(), known);
  if (!opts.lease_key_also_file.empty()) {
    if (opts.lease_key_file.empty())
      return Status::InvalidArgument(
          "<cluster lease_key_also> needs <cluster lease_key>: it is a second key beside it");
    auto also = limit::LoadLeaseKeyFile(opts.lease_key_also_file, "lease_key_also");
    if (!also.ok()) return also.status();
    if (limit::LeaseKeyCheckOf(also.value()) == limit::LeaseKeyCheckOf(secret.value()))
      return Status::InvalidArgument(limit::SameKeyWords(opts.lease_key_file, opts.lease_key_also_file));
    engine->SetLeaseSecretAlso(also.value());
  }
  Status s = engine->Install(std::move(map.value()));
  if (!s.ok()) return s;
  return std::unique_ptr<AdminEngine>(std::move(engine));
}

Result<DeniedKeys> AdminEngine::TopDenied(uint32_t, uint16_t, size_t) const { return DeniedKeys{}; }

Result<GroupStats> AdminEngine::ExportStatsDay(const StatsDayFile& file) const {
  return Status::NotFound(file.path + ": this engine keeps no statistics by key field");
}

Result<std::unique_ptr<Engine>> Engine::Open(const EngineOptions& opts) {
  auto engine = AdminEngine::Open(opts);
  if (!engine.ok()) return engine.status();
  return std::unique_ptr<Engine>(std::move(engine.value()));
}

}  // namespace frs

namespace frs::limit {
namespace {

std::atomic<uint64_t> next_engine_id{1};

struct MapCache {
  uint64_t engine = 0;
  uint64_t generation = 0;
  std::shared_ptr<const Map> map;
};
thread_local MapCache tls_map;

struct DayCache {
  uint64_t engine = 0;
  int64_t from_s = 0, until_s = 0;
  uint32_t day = 0;
};
thread_local DayCache tls_day;

}  // namespace

const Biz* Map::Find(std::string_view biz) const {
  if (biz.size() <= 5) {
    if (!biz.empty() && std::all_of(biz.begin(), biz.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      uint32_t id = 0;
      for (char c : biz) id = id * 10 + static_cast<uint32_t>(c - '0');
      return id <= 65535 ? FindId(static_cast<uint16_t>(id)) : nullptr;
    }
  } else if (std::all_of(biz.begin(), biz.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    // No name is only digits: an id, however many zeros lead it ("01" and
    // "0000001" alike).
    const size_t first = std::min(biz.find_first_not_of('0'), biz.size() - 1);
    return biz.size() - first <= 5 ? Find(biz.substr(first)) : nullptr;
  }
  auto it = by_name.find(biz);
  return it == by_name.end() ? nullptr : &bizzes[it->second];
}

EngineImpl::EngineImpl(const EngineOptions& opts, std::shared_ptr<const TimeZone> tz,
                       std::unique_ptr<stats::Statistics> statistics)
    : id_(next_engine_id.fetch_add(1)),
      store_(opts.store),
      clock_(opts.clock ? opts.clock : SystemClock::Default()),
      tz_(std::move(tz)),
      statistics_(std::move(statistics)),
      history_(opts.stats_dir, opts.read_only || opts.history_read_only, opts.on_problem),
      map_path_(opts.map_path),
      stats_dir_(opts.stats_dir) {}

EngineImpl::~EngineImpl() = default;

Status EngineImpl::Install(MapConfig config) {
  history_.Apply(&config);
  auto map = std::make_shared<Map>();
  map->by_id.assign(65536, -1);
  std::vector<bool> live(65536, false);
  for (BizConfig& cfg : config.bizzes) {
    Biz b;
    b.counters = statistics_->Attach(cfg.id, cfg.Shape());
    b.cfg = cfg;
    map->by_id[cfg.id] = static_cast<int32_t>(map->bizzes.size());
    map->by_name.emplace(cfg.name, static_cast<uint32_t>(map->bizzes.size()));
    live[cfg.id] = true;
    map->bizzes.push_back(std::move(b));
  }
  map->config = std::move(config);
  live[kReceiptBiz] = true;  // handoff receipts live until they expire
  // Nodes of a biz the new map lacks become stale: eviction reclaims them.
  store_->SetLiveBizzes(std::move(live));
  std::vector<const stats::BizCounters*> kept;
  for (const Biz& b : map->bizzes) kept.push_back(&b.counters);
  {
    MutexLock lock(&mu_);
    map_ = std::move(map);
    generation_.fetch_add(1, std::memory_order_release);
  }
  // A table the map no longer keeps closes its day files: they are not in
  // the descriptor need of the new map (server/fd_limit.h).
  statistics_->KeepOnly(kept);
  return Status::OK();
}

std::shared_ptr<const Map> EngineImpl::SharedMap() const {
  MutexLock lock(&mu_);
  return map_;
}

const Map& EngineImpl::CurrentMap() const {
  MapCache& c = tls_map;
  if (c.engine != id_ || c.generation != generation_.load(std::memory_order_acquire)) {
    MutexLock lock(&mu_);
    c.map = map_;
    c.generation = generation_.load(std::memory_order_relaxed);
    c.engine = id_;
  }
  return *c.map;
}

uint32_t EngineImpl::Today(int64_t now_s) const {
  DayCache& c = tls_day;
  if (c.engine != id_ || now_s < c.from_s || now_s >= c.until_s) {
    int64_t day = tz_->LocalDay(now_s);
    c.engine = id_;
    c.day = static_cast<uint32_t>(std::max<int64_t>(day, 0));
    c.from_s = tz_->DayStart(day);
    c.until_s = tz_->DayStart(day + 1);
  }
  return c.day;
}

const Biz* BizCache::Miss(std::string_view name) {
  biz_ = map_.Find(name);
  name_ = name;
  return biz_;
}

Status EngineImpl::Reload(const std::string& path) {
  std::string p;
  {
    MutexLock lock(&mu_);
    p = path.empty() ? map_path_ : path;
  }
  return InstallFrom(LoadMapFile(p), p);
}

Status EngineImpl::ReloadText(std::string_view map_xml, const std::string& path) {
  return InstallFrom(ParseMap(map_xml, path), path);
}

Status EngineImpl::InstallFrom(Result<MapConfig> config, const std::string& path) {
  if (!config.ok()) return config.status();
  if (std::shared_ptr<const Map> running = SharedMap(); running)
    if (Status order = CheckRuleOrder(running->config, config.value()); !order.ok()) return order;
  Status s = Install(std::move(config.value()));
  if (!s.ok()) return s;
  MutexLock lock(&mu_);
  map_path_ = path;
  return Status::OK();
}

std::vector<BizStats> EngineImpl::DailyStats() const {
  std::shared_ptr<const Map> map = SharedMap();
  const uint32_t today = Today(NowAt().s);
  std::vector<BizStats> out;
  out.reserve(map->bizzes.size());
  for (const Biz& b : map->bizzes) {
    BizStats s;
    s.id = b.cfg.id;
    s.name = b.cfg.name;
    s.days = statistics_->Days(b.cfg.id, today);
    out.push_back(std::move(s));
  }
  return out;
}

Result<GroupStats> EngineImpl::StatsBy(const GroupStatsQuery& q) const {
  std::shared_ptr<const Map> map = SharedMap();
  const Biz* biz = map->Find(q.biz);
  if (biz == nullptr) return UnknownBiz(q.biz);
  auto out = statistics_->ReadBy(biz->counters, biz->cfg.name, biz->cfg.Shape(), q, Today());
  if (!out.ok()) return out.status();
  out->biz_id = biz->cfg.id;
  out->biz = biz->cfg.name;
  return out;
}

Status EngineImpl::MergeStatsBy(const GroupStats& in, std::string_view receipt) {
  std::shared_ptr<const Map> map = SharedMap();
  const Biz* biz = in.biz.empty() ? map->FindId(in.biz_id) : map->Find(in.biz);
  if (biz == nullptr) return UnknownBiz(in.biz.empty() ? std::to_string(in.biz_id) : in.biz);
  return statistics_->MergeBy(biz->counters, biz->cfg.name, biz->cfg.Shape(), in, receipt, Today(), clock_->NowMs());
}

Result<DeniedKeys> EngineImpl::TopDenied(uint32_t minutes, uint16_t biz_id, size_t n) const {
  // The file itself, opened read-only, not this engine's own table: what
  // every process of the store wrote up to now. Not through a link: frsd
  // keeps no denials there, and what it leads to is not this store's.
  const std::string path = os::store_dir::In(stats_dir_, os::store_dir::kRecentDenials);
  if (struct stat ls{}; ::lstat(path.c_str(), &ls) == 0 && S_ISLNK(ls.st_mode))
    return Status::IOError(os::store_dir::LinkRefusedWords(path) + " (frsd keeps no recent denials there)");
  auto table = stats::RecentDenials::Open(stats_dir_, /*read_only=*/true);
  if (!table.ok()) return table.status();
  DeniedKeys out;
  for (stats::RecentDenials::Row& r : table.value()->Top(minutes, biz_id, n, clock_->NowMs() / 1000))
    out.keys.push_back(DeniedKey{r.biz, std::move(r.key), r.denied, r.last_minute});
  out.dropped = table.value()->dropped();
  return out;
}

Result<std::vector<StatsDayFile>> EngineImpl::StatsDayFiles() const {
  if (stats_dir_.empty()) return std::vector<StatsDayFile>{};
  return stats::ListDayFiles(stats_dir_);
}

Result<GroupStats> EngineImpl::ExportStatsDay(const StatsDayFile& file) const { return stats::ReadDayFile(file); }

Result<uint16_t> EngineImpl::ResolveBiz(std::string_view biz) const {
  // The per-thread map: no lock on the request path (a batch's members are
  // resolved before any executes).
  const Biz* b = CurrentMap().Find(biz);
  if (b == nullptr) return UnknownBiz(biz);
  return b->cfg.id;
}

namespace {

BizInfo InfoOf(const BizConfig& cfg) {
  BizInfo info{cfg.id, cfg.name, cfg.mode, {}, cfg.fields, cfg.separator, cfg.unit, cfg.lease_rule >= 0};
  info.reservations = cfg.res_explicit && cfg.res_cap > 0;
  for (uint32_t i = 0; i < cfg.nrules; ++i) info.rules.emplace_back(cfg.rules[i].name);
  for (const StatsSpec& s : cfg.stats) info.stats_by.push_back(s.by_text);
  return info;
}

}  // namespace

std::vector<BizInfo> EngineImpl::Bizzes() const {
  std::shared_ptr<const Map> map = SharedMap();
  std::vector<BizInfo> out;
  out.reserve(map->bizzes.size());
  for (const Biz& b : map->bizzes) out.push_back(InfoOf(b.cfg));
  return out;
}

}  // namespace frs::limit

namespace frs {

Result<std::vector<BizInfo>> ReadMapBizzes(const std::string& map_path) {
  Result<limit::MapConfig> map = limit::LoadMapFile(map_path);
  if (!map.ok()) return map.status();
  std::vector<BizInfo> out;
  out.reserve(map->bizzes.size());
  for (const limit::BizConfig& b : map->bizzes) out.push_back(limit::InfoOf(b));
  return out;
}

}  // namespace frs
