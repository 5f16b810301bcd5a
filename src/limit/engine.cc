#include <algorithm>
#include <cstring>
#include <memory>

#include "limit/engine_impl.h"

#include <unistd.h>
#include <xxhash.h>

namespace frs {

const char* CmdName(Cmd c) {
  switch (c) {
    case Cmd::kQuery: return "query";
    case Cmd::kUpdate: return "update";
    case Cmd::kAcquire: return "acquire";
    case Cmd::kGet: return "get";
    case Cmd::kSet: return "set";
    case Cmd::kDelete: return "delete";
    case Cmd::kReset: return "reset";
    case Cmd::kStats: return "stats";
    case Cmd::kMerge: return "merge";
  }
  return "?";
}

const char* AlgoName(Algo a) {
  switch (a) {
    case Algo::kFixed: return "fixed";
    case Algo::kCalendar: return "calendar";
    case Algo::kSliding: return "sliding";
    case Algo::kTokenBucket: return "token_bucket";
  }
  return "?";
}

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kEnforce: return "enforce";
    case Mode::kShadow: return "shadow";
    case Mode::kOff: return "off";
  }
  return "?";
}

bool ParseCmd(std::string_view s, Cmd* out) {
  for (Cmd c : {Cmd::kQuery, Cmd::kUpdate, Cmd::kAcquire, Cmd::kGet, Cmd::kSet, Cmd::kDelete, Cmd::kReset,
                Cmd::kStats, Cmd::kMerge}) {
    if (s == CmdName(c)) {
      *out = c;
      return true;
    }
  }
  return false;
}

Result<std::unique_ptr<Engine>> Engine::Open(const EngineOptions& opts) {
  if (opts.store == nullptr) return Status::InvalidArgument("the engine needs a store");
  auto tz = limit::TimeZone::Load(opts.timezone);
  if (!tz.ok()) return tz.status();
  auto map = opts.map_text.empty() ? limit::LoadMapFile(opts.map_path) : limit::ParseMap(opts.map_text, opts.map_path);
  if (!map.ok()) return map.status();
  auto stats = limit::DailyStats::Open(opts.stats_dir, opts.read_only);
  if (!stats.ok()) return stats.status();
  // The table of recent denials is a view for operators: a store where it
  // cannot be made (an old read-only copy) still serves without it.
  auto denials = limit::RecentDenials::Open(opts.stats_dir, opts.read_only);
  auto engine = std::make_unique<limit::EngineImpl>(opts, std::move(tz.value()), std::move(stats.value()),
                                                    denials.ok() ? std::move(denials.value()) : nullptr);
  Status s = engine->Install(std::move(map.value()));
  if (!s.ok()) return s;
  return std::unique_ptr<Engine>(std::move(engine));
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

Decision Error(Status status) {
  Decision d;
  d.status = std::move(status);
  d.allowed = false;
  return d;
}

bool CountsUses(Cmd c) { return c == Cmd::kQuery || c == Cmd::kUpdate || c == Cmd::kAcquire; }

}  // namespace

const Biz* Map::Find(std::string_view biz) const {
  if (!biz.empty() && biz.size() <= 5 && std::all_of(biz.begin(), biz.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    uint32_t id = 0;
    for (char c : biz) id = id * 10 + static_cast<uint32_t>(c - '0');
    return id <= 65535 ? FindId(static_cast<uint16_t>(id)) : nullptr;
  }
  auto it = by_name.find(biz);
  return it == by_name.end() ? nullptr : &bizzes[it->second];
}

EngineImpl::EngineImpl(const EngineOptions& opts, std::shared_ptr<const TimeZone> tz,
                       std::unique_ptr<limit::DailyStats> stats, std::unique_ptr<RecentDenials> denials)
    : id_(next_engine_id.fetch_add(1)),
      store_(opts.store),
      clock_(opts.clock ? opts.clock : SystemClock::Default()),
      tz_(std::move(tz)),
      stats_(std::move(stats)),
      field_stats_(std::make_unique<FieldStats>(opts.stats_dir, opts.read_only)),
      history_(opts.stats_dir, opts.read_only),
      denials_(std::move(denials)),
      map_path_(opts.map_path) {}

EngineImpl::~EngineImpl() = default;

Status EngineImpl::Install(MapConfig config) {
  history_.Apply(&config);
  auto map = std::make_shared<Map>();
  map->by_id.assign(65536, -1);
  std::vector<bool> live(65536, false);
  for (BizConfig& cfg : config.bizzes) {
    Biz b;
    b.stats_slot = stats_->SlotFor(cfg.id);
    b.cfg = cfg;
    for (const StatsSpec& spec : cfg.stats) b.stats_tables.push_back(field_stats_->TableFor(cfg.id, cfg, spec));
    if (std::all_of(b.stats_tables.begin(), b.stats_tables.end(), [](StatsTable* t) { return t == nullptr; }))
      b.stats_tables.clear();
    map->by_id[cfg.id] = static_cast<int32_t>(map->bizzes.size());
    map->by_name.emplace(cfg.name, static_cast<uint32_t>(map->bizzes.size()));
    live[cfg.id] = true;
    map->bizzes.push_back(std::move(b));
  }
  map->config = std::move(config);
  live[kReceiptBiz] = true;  // handoff receipts live until they expire
  // Nodes of a biz the new map lacks become stale: eviction reclaims them.
  store_->SetLiveBizzes(std::move(live));
  std::lock_guard<std::mutex> lock(mu_);
  map_ = std::move(map);
  generation_.fetch_add(1, std::memory_order_release);
  return Status::OK();
}

std::shared_ptr<const Map> EngineImpl::SharedMap() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_;
}

const Map& EngineImpl::CurrentMap() const {
  MapCache& c = tls_map;
  if (c.engine != id_ || c.generation != generation_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mu_);
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

void EngineImpl::Count(const Biz& biz, const Request& req, const Decision& d, bool created, int64_t now_s,
                       StatsTally* tally) {
  // Shadow mode counts what enforce would have denied as denied.
  const bool allowed = d.ok() && d.allowed && !d.would_deny;
  uint64_t delta[limit::DailyStats::kFields] = {1, allowed ? 1u : 0u, allowed ? 0u : 1u, created ? 1u : 0u};
  const uint32_t today = Today(now_s);
  if (tally != nullptr) tally->Add(biz.stats_slot, today, delta);
  else stats_->Add(biz.stats_slot, today, delta);
  if (!allowed && d.ok() && denials_ != nullptr) denials_->Count(biz.cfg.id, req.key, now_s);
  if (!biz.stats_tables.empty()) {
    // Units: the uses this request recorded (an allowed acquire, or an
    // update, which records unconditionally; a shadow denial records too).
    const bool recorded = d.ok() && biz.cfg.mode != Mode::kOff &&
                          (req.cmd == Cmd::kUpdate || (req.cmd == Cmd::kAcquire && d.allowed));
    const GroupCounts counts{1, allowed ? 1u : 0u, allowed ? 0u : 1u,
                             recorded ? static_cast<uint64_t>(std::clamp<int64_t>(req.n, 1, kMaxUses)) : 0u};
    FieldStats::Count(biz.cfg, biz.stats_tables, req.key, counts, today);
  }
}

Status EngineImpl::RunOp(const Biz& biz, const Request& req, NodeOp* op, UpdateResult* result,
                         const KeyRef* given) {
  const KeyRef ref = given != nullptr ? *given : RefOf(biz, req);
  const uint32_t now_s = Clamp32(op->now.s);
  uint32_t bytes = biz.cfg.state_bytes;
  auto fn = [op](NodeRef& node) { return op->Apply(node); };
  Status s = store_->Update(ref, bytes, now_s, fn, result);
  if (s.ok() && op->need_bytes > bytes) {
    bytes = op->need_bytes;
    s = store_->Update(ref, bytes, now_s, fn, result);
  }
  return s;
}

Decision EngineImpl::AnswerOff(const Biz& biz, const Now& now) const {
  Decision d;
  d.nrules = biz.cfg.nrules;
  for (uint32_t i = 0; i < biz.cfg.nrules; ++i) {
    const RuleSpec& spec = biz.cfg.rules[i];
    RuleResult& r = d.rules[i];
    r.algo = spec.algo;
    r.interval = spec.interval;
    r.limit = spec.algo == Algo::kTokenBucket ? spec.burst : spec.max;
    r.remaining = r.limit;
    r.reset = now.s;
    NameRule(spec, &r);
  }
  Summarize(&d, false);
  return d;
}

const Biz* BizCache::Miss(std::string_view name) {
  biz_ = map_.Find(name);
  name_ = name;
  return biz_;
}

Decision EngineImpl::Execute(const Request& req) {
  BizCache bizzes(CurrentMap());
  Decision d;
  ExecuteIn(bizzes, req, {}, d);
  return d;
}

void EngineImpl::ExecuteIn(BizCache& bizzes, const Request& req, const BatchMember& m, Decision& d) {
  if (req.cmd == Cmd::kStats) return;
  if (req.cmd == Cmd::kMerge) {
    d = Error(Status::InvalidArgument("cmd=\"merge\" carries a node: use MergeNodes"));
    return;
  }
  const Biz* biz = bizzes.Find(req.biz);
  if (biz == nullptr) {
    d = Error(Status::NotFound("unknown biz '" + std::string(req.biz) + "'"));
    return;
  }
  ExecuteFor(*biz, req, m, d);
  d.biz_id = biz->cfg.id;
}

void EngineImpl::ExecuteFor(const Biz& biz_ref, const Request& req, const BatchMember& m, Decision& d) {
  const Biz* biz = &biz_ref;
  const KeyRef* ref = m.ref;
  StatsTally* const tally = m.tally;
  if (req.cmd == Cmd::kReset) {
    Store::Filter filter;
    filter.biz = biz->cfg.id;
    auto erased = store_->EraseIf(filter, [](const NodeInfo&) { return true; });
    if (!erased.ok()) {
      d = Error(Status::Unavailable(erased.status().message()));
      return;
    }
    d.erased = erased.value();
    return;
  }
  if (!req.key_checked) {
    if (std::string why = ValidateKeyBytes(req.key); !why.empty()) {
      d = Error(Status::InvalidArgument("bad key: " + why));
      return;
    }
  }
  if (CountsUses(req.cmd) && (req.n < 1 || req.n > kMaxUses)) {
    d = Error(Status::InvalidArgument("n must be 1..2147483647, not " + std::to_string(req.n)));
    return;
  }
  if (req.cmd == Cmd::kSet && (req.count < 0 || req.count > kMaxUses)) {
    d = Error(Status::InvalidArgument("count must be 0..2147483647, not " + std::to_string(req.count)));
    return;
  }
  // Start loading the key's key-node heads and first chain now: the clock,
  // the op and the store's entry run while those lines and their page-table
  // walk are on their way, and the node's line does not wait for the tags
  // (a batch member's were asked for members ago, and it has its ref).
  KeyRef own_ref;
  if (ref == nullptr && req.cmd != Cmd::kDelete && req.key.size() <= kMaxKeyBytes) {
    own_ref = RefOf(*biz, req);
    store_->Prefetch(own_ref, Store::Prefetching::kHeadsAndChain);
    ref = &own_ref;
  }
  const Now now = m.now != nullptr ? *m.now : NowAt();
  // The distinct sketches' registers are the statistics' one cache miss
  // (a register per request, in 32 KB per group): asked for now, they come
  // while the store does its part.
  if (!biz->stats_tables.empty() && CountsUses(req.cmd) && req.key.size() <= kMaxKeyBytes)
    FieldStats::Prefetch(biz->cfg, biz->stats_tables, req.key, Today(now.s));
  if (req.cmd == Cmd::kDelete) {
    Status s = store_->Erase(KeyRef{biz->cfg.id, FingerprintOf(biz->cfg.id, req.key), req.key,
                                    static_cast<uint8_t>(req.key.size())});
    if (s.ok()) d.found = true;
    else if (!s.IsNotFound()) d = Error(Status::Unavailable(s.message()));
    return;
  }
  if (biz->cfg.mode == Mode::kOff && CountsUses(req.cmd)) {
    d = AnswerOff(*biz, now);
    d.now_s = now.s;
    Count(*biz, req, d, false, now.s, tally);
    return;
  }
  NodeOp op;
  op.biz = &biz->cfg;
  op.cmd = req.cmd;
  op.n = CountsUses(req.cmd) || req.cmd == Cmd::kGet ? std::clamp<int64_t>(req.n, 1, kMaxUses) : 1;
  op.count = req.count;
  op.now = now;
  op.d = &d;
  UpdateResult result;
  Status s = RunOp(*biz, req, &op, &result, ref);
  if (!s.ok()) {
    d = Error(Status::Unavailable(s.message()));
    return;
  }
  d.shadow = biz->cfg.mode == Mode::kShadow;
  d.now_s = now.s;
  if (CountsUses(req.cmd)) Count(*biz, req, d, result.created, now.s, tally);
}

const Biz* EngineImpl::PlainRead(BizCache& bizzes, const Request& req) {
  if (req.cmd != Cmd::kQuery && req.cmd != Cmd::kGet) return nullptr;
  if (req.cmd == Cmd::kQuery && (req.n < 1 || req.n > kMaxUses)) return nullptr;
  if (!req.key_checked && !ValidateKeyBytes(req.key).empty()) return nullptr;
  const Biz* biz = bizzes.Find(req.biz);
  if (biz == nullptr || biz->cfg.mode == Mode::kOff) return nullptr;
  return biz;
}

bool EngineImpl::ExecuteBatch(std::span<const Request> reqs, std::span<Decision> out) {
  if (out.size() < reqs.size()) return false;
  // A copy of the map pointer: Execute's per-thread cache may move on if a
  // reload lands in the middle of the batch.
  std::shared_ptr<const Map> map = SharedMap();
  // Every member of the batch resolves its biz in this one map; members
  // mostly share their biz, and the cache hashes each run of one name once.
  BizCache bizzes(*map);
  StatsTally tally(stats_.get());
  // One instant for the whole batch: its members are judged together.
  const Now now = NowAt();
  // Runs of two or more plain reads (an ad server's candidates) are read
  // together (ExecuteReads); the other members one by one, in order. Per
  // thread, so that a batch of reads allocates nothing once warm.
  // in_run[i]: member i's biz when it is read in a run, else null.
  thread_local std::vector<const Biz*> in_run;
  in_run.assign(reqs.size(), nullptr);
  std::vector<size_t> acquires;
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (reqs[i].cmd == Cmd::kAcquire) acquires.push_back(i);
    in_run[i] = PlainRead(bizzes, reqs[i]);
  }
  size_t others = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const bool alone = (i == 0 || !in_run[i - 1]) && (i + 1 == reqs.size() || !in_run[i + 1]);
    if (in_run[i] && alone) in_run[i] = nullptr;
    others += in_run[i] == nullptr;
  }
  // The other members' nodes lie scattered over the store: looked up one
  // after another, each would wait for its own cache and TLB misses. The
  // store is asked to load member i + kAhead's key-node heads, and member i
  // + kAhead / 2's nodes (their heads asked for kAhead / 2 members ago), so
  // that the misses of several members overlap. The refs are kept in a ring.
  // The refs are prepared once (the key's identity) and used again by the
  // member's update.
  constexpr size_t kAhead = 8;
  KeyRef ahead[kAhead];
  const bool prefetching = reqs.size() > 2 && others > 0;
  auto prefetch = [&](size_t j, bool node) {
    if (j >= reqs.size()) return;
    KeyRef& ref = ahead[j % kAhead];
    if (!node) {
      ref = KeyRef{};
      if (in_run[j] || reqs[j].cmd == Cmd::kAcquire || reqs[j].key.empty() || reqs[j].key.size() > kMaxKeyBytes)
        return;
      const Biz* biz = bizzes.Find(reqs[j].biz);
      if (biz == nullptr) return;
      ref = RefOf(*biz, reqs[j]);
    }
    if (ref.prepared) store_->Prefetch(ref, node ? Store::Prefetching::kNodes : Store::Prefetching::kHeads);
  };
  if (prefetching) {
    for (size_t j = 0; j < kAhead; ++j) prefetch(j, false);
    for (size_t j = 0; j < kAhead / 2; ++j) prefetch(j, true);
  }
  // The acquires are judged together, where the first of them stands.
  bool acquired = false;
  for (size_t i = 0; i < reqs.size();) {
    if (in_run[i]) {
      size_t end = i + 1;
      while (end < reqs.size() && in_run[end]) ++end;
      // The ring moves on past the run (its members take no slot in it)
      // before the run is read, so that the members after it are on their
      // way meanwhile.
      for (size_t j = i; prefetching && j < end; ++j) {
        prefetch(j + kAhead / 2, true);
        prefetch(j + kAhead, false);
      }
      ExecuteReads(bizzes, reqs, out, in_run, i, end, &tally, now);
      i = end;
      continue;
    }
    if (reqs[i].cmd != Cmd::kAcquire) {
      // Member i's ref is in the ring until prefetch(i + kAhead) takes its place.
      const KeyRef* ref = prefetching && ahead[i % kAhead].prepared ? &ahead[i % kAhead] : nullptr;
      // Decided in place: a Decision is ~500 bytes, and building one to move
      // it here cost more than the member's lookup. Reset, since the
      // caller's span is reused from request to request.
      Decision& d = out[i];
      d.Reset();
      ExecuteIn(bizzes, reqs[i], BatchMember{ref, &tally, &now}, d);
    } else if (!acquired) {
      ExecuteAcquires(bizzes, reqs, out, acquires, &tally, now);
      acquired = true;
    }
    if (prefetching) {
      prefetch(i + kAhead / 2, true);
      prefetch(i + kAhead, false);
    }
    ++i;
  }
  bool all = true;
  for (size_t i = 0; i < reqs.size(); ++i) all = all && out[i].ok() && out[i].allowed;
  return all;
}

void EngineImpl::ExecuteReads(BizCache& bizzes, std::span<const Request> reqs, std::span<Decision> out,
                              std::span<const Biz* const> bizs, size_t begin, size_t end, StatsTally* tally,
                              const Now& now) {
  // Per thread, reused: no allocation per batch once warm.
  thread_local std::vector<Store::ReadItem> items;
  thread_local std::vector<size_t> again;
  items.clear();
  again.clear();
  for (size_t i = begin; i < end; ++i) {
    items.push_back(Store::ReadItem{RefOf(*bizs[i], reqs[i]), bizs[i]->cfg.state_bytes});
    // Reset lists Decision's fields one by one (as does the engine test
    // that checks it against Decision{}): a new field must join both.
    static_assert(sizeof(Decision) == 512, "a Decision field was added or removed: see Decision::Reset");
    out[i].Reset();
  }
  // What the visitor needs, behind one pointer: it fits std::function's
  // inline room, so the call allocates nothing.
  struct Run {
    std::span<const Request> reqs;
    std::span<Decision> out;
    std::span<const Biz* const> bizs;
    size_t begin;
    const Now& now;
  } run{reqs, out, bizs, begin, now};
  store_->ReadEach(items, Clamp32(now.s), [&run](size_t k, const Status& status, NodeRef& node) {
    const size_t i = run.begin + k;
    const Biz& biz = *run.bizs[i];
    const Now& now = run.now;
    const std::span<const Request> reqs = run.reqs;
    Decision& d = run.out[i];
    if (!status.ok()) {
      d = Error(Status::Unavailable(status.message()));
      d.biz_id = biz.cfg.id;  // as ExecuteIn leaves a failed member
      return;
    }
    // As NodeOp::Apply reads: n is clamped for a get (which counts nothing).
    const int64_t n = std::clamp<int64_t>(reqs[i].n, 1, kMaxUses);
    uint32_t need_bytes = 0;
    if (!ReadRules(biz.cfg, node, now, n, &d, &need_bytes)) {
      again.push_back(i);  // a node that holds more state than the layout: read it whole below
      return;
    }
    d.shadow = biz.cfg.mode == Mode::kShadow;
    d.now_s = now.s;
    d.biz_id = biz.cfg.id;
  });
  // Counted once every lock is released; a failed member is not, as alone.
  // A member in `again` (in order, as pushed) is counted by ExecuteIn below.
  size_t next_again = 0;
  for (size_t i = begin; i < end; ++i) {
    if (next_again < again.size() && again[next_again] == i) {
      ++next_again;
      continue;
    }
    if (out[i].ok() && CountsUses(reqs[i].cmd)) Count(*bizs[i], reqs[i], out[i], false, now.s, tally);
  }
  // Reads change no count: reading these after the rest of their run
  // answers what reading them in their place would have.
  for (size_t i : again) {
    out[i].Reset();
    ExecuteIn(bizzes, reqs[i], BatchMember{nullptr, tally, &now}, out[i]);
  }
}

void EngineImpl::ExecuteAcquires(BizCache& bizzes, std::span<const Request> reqs, std::span<Decision> out,
                                 const std::vector<size_t>& members, StatsTally* tally, const Now& now) {
  if (members.size() > Store::kMaxBatch) {
    for (size_t i : members) {
      out[i] = Error(Status::InvalidArgument("a batch holds at most " + std::to_string(Store::kMaxBatch) + " acquires"));
    }
    return;
  }
  struct Acq {
    size_t req;
    const Biz* biz;
    int item;  // into items, -1 for mode off
  };
  std::vector<Acq> ms;
  std::vector<Store::BatchItem> items;
  std::vector<const Acq*> item_member;
  bool valid = true;
  ms.reserve(members.size());
  for (size_t i : members) {
    const Request& req = reqs[i];
    const Biz* biz = bizzes.Find(req.biz);
    if (biz == nullptr) {
      out[i] = Error(Status::NotFound("unknown biz '" + std::string(req.biz) + "'"));
      valid = false;
      continue;
    }
    if (std::string why = req.key_checked ? std::string() : ValidateKeyBytes(req.key); !why.empty()) {
      out[i] = Error(Status::InvalidArgument("bad key: " + why));
      valid = false;
      continue;
    }
    if (req.n < 1 || req.n > kMaxUses) {
      out[i] = Error(Status::InvalidArgument("n must be 1..2147483647, not " + std::to_string(req.n)));
      valid = false;
      continue;
    }
    out[i] = Decision{};
    Acq m{i, biz, -1};
    if (biz->cfg.mode != Mode::kOff) {
      m.item = static_cast<int>(items.size());
      items.push_back(Store::BatchItem{RefOf(*biz, req), biz->cfg.state_bytes});
    } else {
      out[i] = AnswerOff(*biz, now);
    }
    ms.push_back(m);
  }
  for (const Acq& m : ms) {
    if (m.item >= 0) item_member.push_back(&m);
  }

  std::vector<uint32_t> need(items.size(), 0);
  std::vector<UpdateResult> results;
  auto fn = [&](std::span<NodeRef> nodes, std::span<Commit> commits) {
    std::fill(commits.begin(), commits.end(), Commit::kNone);
    std::fill(need.begin(), need.end(), 0);
    // Members naming one node share its buffer: adopt the layout once.
    auto first_with = [&](size_t k) {
      for (size_t j = 0; j < k; ++j) {
        if (nodes[j].state == nodes[k].state) return false;
      }
      return true;
    };
    bool short_read = false;
    for (size_t k = 0; k < nodes.size(); ++k) {
      if (first_with(k) && !AdoptLayout(item_member[k]->biz->cfg, nodes[k], now, &need[k])) short_read = true;
    }
    if (short_read) return;
    std::vector<std::vector<uint8_t>> backup(nodes.size());
    for (size_t k = 0; k < nodes.size(); ++k) {
      if (first_with(k)) backup[k].assign(nodes[k].state, nodes[k].state + nodes[k].state_bytes);
    }
    bool all = valid;
    for (size_t k = 0; all && k < nodes.size(); ++k) {
      const BizConfig& cfg = item_member[k]->biz->cfg;
      const bool enforce = cfg.mode == Mode::kEnforce;
      Decision& d = out[item_member[k]->req];
      const int64_t n = reqs[item_member[k]->req].n;
      d.found = nodes[k].exists;
      EvaluateRules(cfg, nodes[k].state, now, n, &d);
      Summarize(&d, enforce);
      if (!d.allowed) {
        all = false;
        break;
      }
      RecordRules(cfg, nodes[k].state, now, n, &d);
      Summarize(&d, enforce);
    }
    if (all) {
      for (size_t k = 0; k < nodes.size(); ++k) {
        commits[k] = Commit::kWrite;
        nodes[k].expire_s = NodeExpireS(item_member[k]->biz->cfg, nodes[k].state, now);
      }
      return;
    }
    // Nothing is recorded: put the states back and report each member as it stands.
    for (size_t k = 0; k < nodes.size(); ++k) {
      if (!backup[k].empty()) std::memcpy(nodes[k].state, backup[k].data(), backup[k].size());
    }
    for (size_t k = 0; k < nodes.size(); ++k) {
      const BizConfig& cfg = item_member[k]->biz->cfg;
      Decision& d = out[item_member[k]->req];
      d.found = nodes[k].exists;
      EvaluateRules(cfg, nodes[k].state, now, reqs[item_member[k]->req].n, &d);
      Summarize(&d, cfg.mode == Mode::kEnforce);
      d.allowed = false;
    }
  };

  Status s = Status::OK();
  if (!items.empty()) {
    s = store_->UpdateBatch(items, Clamp32(now.s), fn, &results);
    bool again = false;
    for (size_t k = 0; s.ok() && k < items.size(); ++k) {
      if (need[k] > items[k].state_bytes) {
        items[k].state_bytes = need[k];
        again = true;
      }
    }
    if (again) s = store_->UpdateBatch(items, Clamp32(now.s), fn, &results);
  }
  for (const Acq& m : ms) {
    Decision& d = out[m.req];
    d.biz_id = m.biz->cfg.id;
    if (!s.ok() && m.item >= 0) {
      d = Error(Status::Unavailable(s.message()));
      continue;
    }
    if (!s.ok()) d.allowed = false;
    d.shadow = m.biz->cfg.mode == Mode::kShadow;
    d.now_s = now.s;
    bool created = m.item >= 0 && static_cast<size_t>(m.item) < results.size() && results[m.item].created;
    Count(*m.biz, reqs[m.req], d, created, now.s, tally);
  }
}

Status EngineImpl::Reload(const std::string& path) {
  std::string p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    p = path.empty() ? map_path_ : path;
  }
  return InstallFrom(LoadMapFile(p), p);
}

Status EngineImpl::ReloadText(std::string_view map_xml, const std::string& path) {
  return InstallFrom(ParseMap(map_xml, path), path);
}

Status EngineImpl::InstallFrom(Result<MapConfig> config, const std::string& path) {
  if (!config.ok()) return config.status();
  Status s = Install(std::move(config.value()));
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  map_path_ = path;
  return Status::OK();
}

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
  const uint32_t day = q.day < 0 ? Today() : static_cast<uint32_t>(q.day);
  auto tables = biz->stats_tables[i]->ReadDay(day);
  if (!tables.ok()) return tables.status();
  GroupStats out = ReadGroupStats(tables.value(), q);
  if (day == Today()) out.lost += biz->stats_tables[i]->unstored();
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
  if (biz == nullptr) return Status::NotFound("unknown biz '" + (in.biz.empty() ? std::to_string(in.biz_id) : in.biz) + "'");
  const int i = FindStatsSpec(biz->cfg, in.by);
  if (i < 0) return NoSuchStats(biz->cfg, in.by);
  if (biz->stats_tables.empty() || biz->stats_tables[i] == nullptr)
    return Status::Unavailable("statistics by field are kept only with a store directory");
  const StatsSpec& spec = biz->cfg.stats[i];
  // Only days this table keeps, and none after today: a day in the future
  // would never be pruned and would hide the days before it.
  const uint32_t today = Today();
  if (in.day > today || in.day + spec.days <= today)
    return Status::InvalidArgument("day " + DayText(in.day) + " is not one this table keeps (the " +
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
        return Status::InvalidArgument("group '" + g.value + "': its " + in.distinct_fields[from[d]] + " sketch is not one this server reads");
      r.distinct.push_back(std::move(sk));
    }
    rows.push_back(std::move(r));
  }
  // Without a receipt the merge cannot be recognized again: each is its own.
  std::string id(receipt);
  if (id.empty()) id = "unnamed/" + std::to_string(clock_->NowMs()) + "/" + std::to_string(::getpid()) + "/" +
                       std::to_string(next_engine_id.fetch_add(1));
  bool duplicate = false;
  return biz->stats_tables[i]->WriteReceived(in.day, id, rows, in.field_errors, &duplicate);
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
    s.days = stats_->Days(b.cfg.id, today);
    out.push_back(std::move(s));
  }
  return out;
}

Result<uint16_t> EngineImpl::ResolveBiz(std::string_view biz) const {
  // The per-thread map: no lock on the request path (a batch's members are
  // resolved before any executes).
  const Biz* b = CurrentMap().Find(biz);
  if (b == nullptr) return Status::NotFound("unknown biz '" + std::string(biz) + "'");
  return b->cfg.id;
}

std::vector<BizInfo> EngineImpl::Bizzes() const {
  std::shared_ptr<const Map> map = SharedMap();
  std::vector<BizInfo> out;
  out.reserve(map->bizzes.size());
  for (const Biz& b : map->bizzes) {
    BizInfo info{b.cfg.id, b.cfg.name, b.cfg.mode, {}};
    for (uint32_t i = 0; i < b.cfg.nrules; ++i) info.rules.emplace_back(b.cfg.rules[i].name);
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace frs::limit
