#include "server/metrics.h"

#include "server/process_metrics.h"

#include <sys/mman.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <ctime>

namespace frs::server {

namespace {

// The commands' labels are their names (frs/decision.h); then the requests
// that are no command.
constexpr size_t kCmds = std::size(kCmdNames);
constexpr const char* kOtherLabels[] = {"batch", "health", "metrics", "json", "none"};
static_assert(kCmds + std::size(kOtherLabels) == static_cast<size_t>(CmdLabel::kCount));

void AppendU64(std::string* out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

void AppendSeconds(std::string* out, uint64_t us) {
  char buf[32];
  int n = std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(us) / 1e6);
  out->append(buf, static_cast<size_t>(n));
}

void Header(std::string* out, const char* name, const char* type, const char* help) {
  out->append("# HELP ")
      .append(name)
      .append(" ")
      .append(help)
      .append("\n# TYPE ")
      .append(name)
      .append(" ")
      .append(type)
      .append("\n");
}

void Simple(std::string* out, const char* name, const char* type, const char* help, uint64_t v) {
  Header(out, name, type, help);
  out->append(name).append(" ");
  AppendU64(out, v);
  out->append("\n");
}

// One sample of a per-biz series: NAME{biz="B",id="ID"} VALUE.
void BizSample(std::string* out, const char* name, std::string_view biz, uint16_t id, uint64_t v) {
  out->append(name).append("{biz=\"");
  AppendLabelValue(out, biz);
  out->append("\",id=\"");
  AppendU64(out, id);
  out->append("\"} ");
  AppendU64(out, v);
  out->append("\n");
}

}  // namespace

void RenderHeldNow(AdminEngine& engine, std::string* out) {
  // Read from the store at each scrape, not counted: a count of grants
  // less releases would start again at 0 with each restart and miss the
  // leases and reservations that expire unseen (they are swept at their
  // key's next write).
  Result<std::vector<AdminEngine::BizHeldNow>> held = engine.HeldNow();
  if (!held.ok() || held->empty()) return;
  bool leases = false, reservations = false;
  for (const AdminEngine::BizHeldNow& b : *held) {
    leases |= b.has_leases;
    reservations |= b.has_reservations;
  }
  if (leases) {
    Header(out, "frs_leases_held", "gauge",
           "Leases held now (granted, neither released nor past their expiry), by biz with a concurrency rule; read "
           "from the store at each scrape.");
    for (const AdminEngine::BizHeldNow& b : *held)
      if (b.has_leases) BizSample(out, "frs_leases_held", b.biz, b.biz_id, b.leases);
  }
  if (reservations) {
    Header(out, "frs_reservations_held", "gauge",
           "Reservations held now (taken, neither settled nor past their expiry), by biz that names "
           "reservations=\"N\"; "
           "read from the store at each scrape.");
    for (const AdminEngine::BizHeldNow& b : *held)
      if (b.has_reservations) BizSample(out, "frs_reservations_held", b.biz, b.biz_id, b.reservations);
  }
}

// Label values are biz names from map.xml: escape what the format demands.
void AppendLabelValue(std::string* out, std::string_view v) {
  for (char c : v) {
    if (c == '\\') out->append("\\\\");
    else if (c == '"') out->append("\\\"");
    else if (c == '\n') out->append("\\n");
    else out->push_back(c);
  }
}

CmdLabel LabelOf(Cmd cmd) {
  switch (cmd) {
    case Cmd::kQuery: return CmdLabel::kQuery;
    case Cmd::kUpdate: return CmdLabel::kUpdate;
    case Cmd::kAcquire: return CmdLabel::kAcquire;
    case Cmd::kGet: return CmdLabel::kGet;
    case Cmd::kSet: return CmdLabel::kSet;
    case Cmd::kDelete: return CmdLabel::kDelete;
    case Cmd::kReset: return CmdLabel::kReset;
    case Cmd::kStats: return CmdLabel::kStats;
    case Cmd::kMerge: return CmdLabel::kMerge;
    case Cmd::kRelease: return CmdLabel::kRelease;
    case Cmd::kRenew: return CmdLabel::kRenew;
    case Cmd::kSettle: return CmdLabel::kSettle;
  }
  return CmdLabel::kNone;
}

const char* LabelName(CmdLabel label) {
  const size_t i = static_cast<size_t>(label);
  return i < kCmds ? kCmdNames[i].data() : kOtherLabels[i - kCmds];
}

size_t StatusSlot(int http_status) {
  for (size_t i = 0; i < kStatusSlots; ++i)
    if (kStatusCodes[i] == http_status) return i;
  return StatusSlot(500);
}

void WorkerCounters::CountRequest(CmdLabel label, int http_status, uint64_t latency_ns) {
  CounterAdd(requests[static_cast<size_t>(label)][StatusSlot(http_status)]);
  uint64_t us = latency_ns / 1000;
  size_t b = 0;
  while (b < kLatencyBuckets - 1 && us > kLatencyBoundsUs[b]) ++b;
  CounterAdd(latency[b]);
  CounterAdd(latency_sum_ns, latency_ns);
}

Result<std::unique_ptr<Metrics>> Metrics::Create(uint32_t workers) {
  size_t bytes = sizeof(MasterCounters) + size_t{workers} * sizeof(WorkerCounters);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return Status::FromErrno("mmap of the metrics region", errno);
  auto m = std::make_unique<Metrics>(Key{});
  m->base_ = p;
  m->bytes_ = bytes;
  m->workers_ = workers;
  m->master_ = static_cast<MasterCounters*>(p);
  m->workers_base_ = reinterpret_cast<WorkerCounters*>(static_cast<char*>(p) + sizeof(MasterCounters));
  CounterSet(m->master_->started_unix, static_cast<uint64_t>(std::time(nullptr)));
  return m;
}

Metrics::~Metrics() {
  if (base_) munmap(base_, bytes_);
}

void Metrics::Render(Engine& engine, const Store* store, std::string* out) const {
  const size_t ncmd = static_cast<size_t>(CmdLabel::kCount);
  // Sum the worker slots once.
  uint64_t req[static_cast<size_t>(CmdLabel::kCount)][kStatusSlots] = {};
  uint64_t lat[kLatencyBuckets] = {};
  uint64_t lat_sum = 0, log_lines = 0, log_dropped = 0;
  for (uint32_t w = 0; w < workers_; ++w) {
    const WorkerCounters& c = workers_base_[w];
    for (size_t i = 0; i < ncmd; ++i)
      for (size_t j = 0; j < kStatusSlots; ++j) req[i][j] += CounterGet(c.requests[i][j]);
    for (size_t b = 0; b < kLatencyBuckets; ++b) lat[b] += CounterGet(c.latency[b]);
    lat_sum += CounterGet(c.latency_sum_ns);
    log_lines += CounterGet(c.decision_log.lines);
    log_dropped += CounterGet(c.decision_log.dropped_full) + CounterGet(c.decision_log.dropped_failed);
  }
  // One counter of WorkerCounters, summed over the workers.
  const auto sum = [this](uint64_t WorkerCounters::*counter) {
    uint64_t total = 0;
    for (uint32_t w = 0; w < workers_; ++w) total += CounterGet(workers_base_[w].*counter);
    return total;
  };

  Header(out, "frs_requests_total", "counter", "Requests answered, by command and HTTP status.");
  for (size_t i = 0; i < ncmd; ++i)
    for (size_t j = 0; j < kStatusSlots; ++j) {
      if (req[i][j] == 0) continue;
      out->append("frs_requests_total{cmd=\"").append(LabelName(static_cast<CmdLabel>(i))).append("\",status=\"");
      AppendU64(out, static_cast<uint64_t>(kStatusCodes[j]));
      out->append("\"} ");
      AppendU64(out, req[i][j]);
      out->append("\n");
    }

  Header(out, "frs_request_duration_seconds", "histogram",
         "Time from a request's first byte read to its response queued.");
  uint64_t cum = 0;
  for (size_t b = 0; b < kLatencyBuckets; ++b) {
    cum += lat[b];
    out->append("frs_request_duration_seconds_bucket{le=\"");
    if (b + 1 < kLatencyBuckets) AppendSeconds(out, kLatencyBoundsUs[b]);
    else out->append("+Inf");
    out->append("\"} ");
    AppendU64(out, cum);
    out->append("\n");
  }
  char buf[48];
  int n = std::snprintf(buf, sizeof buf, "%.9f", static_cast<double>(lat_sum) / 1e9);
  out->append("frs_request_duration_seconds_sum ").append(buf, static_cast<size_t>(n)).append("\n");
  out->append("frs_request_duration_seconds_count ");
  AppendU64(out, cum);
  out->append("\n");

  auto bizzes = engine.Bizzes();
  struct PerBiz {
    const char* name;
    const char* help;
    size_t offset;
    bool leases = false;  // only of a biz with a concurrency rule (or one that had, while nonzero)
  };
  const PerBiz per_biz[] = {
      {"frs_biz_allowed_total", "Decisions that allowed (query, update, acquire), by biz.",
       offsetof(WorkerCounters, biz_allowed)},
      {"frs_biz_denied_total", "Decisions that denied (query, update, acquire), by biz.",
       offsetof(WorkerCounters, biz_denied)},
      {"frs_biz_shadow_denied_total", "Shadow-mode decisions that enforce mode would have denied, by biz.",
       offsetof(WorkerCounters, biz_shadow_denied)},
      {"frs_leases_granted_total", "Leases granted by a concurrency rule, by biz.",
       offsetof(WorkerCounters, leases_granted), true},
      {"frs_leases_released_total", "Leases released by their holder, by biz.",
       offsetof(WorkerCounters, leases_released), true},
      {"frs_leases_renewed_total", "Leases renewed by their holder, by biz.", offsetof(WorkerCounters, leases_renewed),
       true},
      {"frs_leases_expired_total",
       "Leases that reached their expiry unreleased and were freed (at their key's next write), by biz.",
       offsetof(WorkerCounters, leases_expired), true},
  };
  for (const PerBiz& pb : per_biz) {
    Header(out, pb.name, "counter", pb.help);
    for (const BizInfo& b : bizzes) {
      uint64_t sum = 0;
      for (uint32_t w = 0; w < workers_; ++w) {
        const auto* arr =
            reinterpret_cast<const uint64_t*>(reinterpret_cast<const char*>(&workers_base_[w]) + pb.offset);
        sum += CounterGet(arr[b.id]);
      }
      if (pb.leases && !b.leases && sum == 0) continue;
      BizSample(out, pb.name, b.name, b.id, sum);
    }
  }

  RenderReservations(bizzes, out);

  // Per rule: every rule of a biz of the current map that has decided since
  // frsd started (its allowed and denied series, zeros included, so that a
  // denied share has its denominator; shadow_denied instead of denied for a
  // biz in shadow mode), and any other nonzero series of a rule still in
  // the map. Rules
  // are counted by position: a reload that reorders a biz's rules gives
  // their names the counts of the positions they take.
  Header(out, "frs_rule_decisions_total", "counter",
         "Decisions (query, update, acquire) by biz, rule and that rule's own result: allowed, denied, or "
         "shadow_denied (a shadow-mode biz's rule that enforce mode would have denied on).");
  static constexpr const char* kResultNames[kRuleResults] = {"allowed", "denied", "shadow_denied"};
  for (const BizInfo& b : bizzes) {
    uint64_t decided = 0;
    for (uint32_t w = 0; w < workers_; ++w)
      decided += CounterGet(workers_base_[w].biz_allowed[b.id]) + CounterGet(workers_base_[w].biz_denied[b.id]);
    for (size_t i = 0; i < b.rules.size() && i < kMaxRulesPerBiz; ++i)
      for (size_t r = 0; r < kRuleResults; ++r) {
        uint64_t sum = 0;
        for (uint32_t w = 0; w < workers_; ++w) sum += CounterGet(workers_base_[w].rule_decisions[b.id][i][r]);
        const RuleResultLabel denied =
            b.mode == Mode::kShadow ? RuleResultLabel::kShadowDenied : RuleResultLabel::kDenied;
        const bool shown =
            sum != 0 ||
            (decided != 0 && (r == static_cast<size_t>(RuleResultLabel::kAllowed) || r == static_cast<size_t>(denied)));
        if (!shown) continue;
        out->append("frs_rule_decisions_total{biz=\"");
        AppendLabelValue(out, b.name);
        out->append("\",rule=\"");
        AppendLabelValue(out, b.rules[i]);
        out->append("\",result=\"").append(kResultNames[r]).append("\"} ");
        AppendU64(out, sum);
        out->append("\n");
      }
  }

  // Today's per-biz counters from the statistics file: every process on
  // this store counts there, so decisions a program made in-process through
  // libfrs show here too (the frs_biz_*_total above are frsd's own).
  {
    const uint32_t today = engine.Today();
    auto days = engine.DailyStats();
    struct Field {
      const char* name;
      const char* help;
      uint64_t BizStatsDay::*member;
    };
    const Field fields[] = {
        {"frs_biz_today_requests", "Decisions today (local day of <timezone>), by biz, by every process on the store.",
         &BizStatsDay::requests},
        {"frs_biz_today_allowed", "Decisions today that allowed, by biz, by every process on the store.",
         &BizStatsDay::allowed},
        {"frs_biz_today_denied", "Decisions today that denied, by biz, by every process on the store.",
         &BizStatsDay::denied},
        {"frs_biz_today_new_keys", "Keys seen for the first time today, by biz.", &BizStatsDay::new_keys},
    };
    for (const Field& f : fields) {
      Header(out, f.name, "gauge", f.help);
      for (const BizStats& b : days) {
        uint64_t v = 0;
        if (!b.days.empty() && b.days.front().day == today) v = b.days.front().*f.member;
        BizSample(out, f.name, b.name, b.id, v);
      }
    }
  }

  StoreStats st = store != nullptr ? store->Stats() : StoreStats{};
  Simple(out, "frs_store_slots", "gauge", "Node slots in the store (files x keynodes x chain).", st.slots);
  Simple(out, "frs_store_nodes_used", "gauge", "Nodes (keys) resident in the store.", st.total.nodes_used);
  Simple(out, "frs_store_slots_used", "gauge", "Slots occupied by resident nodes.", st.total.slots_used);
  Simple(out, "frs_store_evictions_stale_total", "counter", "Expired or orphaned nodes reused for new keys.",
         st.total.evictions_stale);
  Simple(out, "frs_store_evictions_live_total", "counter",
         "Live nodes evicted to make room (their limits silently restart): size the store up when this grows.",
         st.total.evictions_live);
  Simple(out, "frs_store_cuckoo_moves_total", "counter", "Nodes moved to their alternate key-node to make room.",
         st.total.cuckoo_moves);
  Simple(out, "frs_store_lock_recoveries_total", "counter",
         "Chain locks taken over from dead owners (journal replayed), as recorded in the store files.",
         st.total.lock_recoveries);

  Simple(out, "frs_worker_restarts_total", "counter", "Workers respawned after they died.",
         CounterGet(master_->worker_restarts));
  Simple(out, "frs_store_damaged_nodes_total", "counter",
         "Damaged nodes met by lookups and walks and ignored (their keys count as absent); frsctl verify --repair "
         "clears them.",
         st.total.damaged_nodes);
  Simple(out, "frs_lock_recoveries_total", "counter",
         "Store locks the master released for workers that died holding them.", CounterGet(master_->lock_recoveries));
  Simple(out, "frs_reloads_total", "counter", "map.xml reloads applied by workers (SIGHUP).",
         sum(&WorkerCounters::reloads));
  Simple(out, "frs_reload_failures_total", "counter", "map.xml reloads refused (the old map was kept).",
         sum(&WorkerCounters::reload_failures) + CounterGet(master_->reload_failures));
  Simple(out, "frs_misrouted_total", "counter",
         "Requests for a route that another shard of <cluster> owns (answered 421 when enforce=\"1\").",
         sum(&WorkerCounters::misrouted));
  Simple(out, "frs_handoff_merged_total", "counter", "Nodes received from other shards by frsctl handoff and merged.",
         sum(&WorkerCounters::merged));
  Simple(out, "frs_handoff_duplicates_total", "counter",
         "Handoff nodes received again after an interruption and ignored (their receipt was already here).",
         sum(&WorkerCounters::merge_duplicates));
  Simple(out, "frs_decision_log_lines_total", "counter", "Lines written to the decision log (<decisions file>).",
         log_lines);
  Simple(out, "frs_decision_log_dropped_total", "counter",
         "Decision log lines dropped: a worker's buffer was full (the disk is slower than the decisions), or a write "
         "failed (a full disk, an I/O error).",
         log_dropped);
  Simple(out, "frs_workers", "gauge", "Configured worker processes.", workers_);
  // The connection series: each one counter summed over the workers.
  struct Summed {
    const char* name;
    const char* type;
    const char* help;
    uint64_t WorkerCounters::*counter;
  };
  const Summed connection_series[] = {
      {"frs_connections_open", "gauge", "Client connections open, all workers.", &WorkerCounters::connections_open},
      {"frs_grpc_held_bytes", "gauge",
       "Bytes the gRPC connections make the workers hold (HTTP/2 sessions, streams, bodies, unsent answers), "
       "sampled once a second.",
       &WorkerCounters::grpc_held_bytes},
      {"frs_connections_accepted_total", "counter", "Client connections accepted.",
       &WorkerCounters::connections_accepted},
      {"frs_connections_refused_total", "counter", "Connections closed at accept: the peer is outside <allow>.",
       &WorkerCounters::connections_refused},
      {"frs_connections_overflow_total", "counter",
       "Connections answered 503 and closed: the worker was at its connection limit.",
       &WorkerCounters::connections_overflow},
      {"frs_connections_timed_out_total", "counter", "Connections closed for an idle or request timeout.",
       &WorkerCounters::connections_timed_out},
      {"frs_accept_fd_exhausted_total", "counter",
       "Accepts that failed for want of a file descriptor (EMFILE/ENFILE); the worker stops accepting for 500 ms.",
       &WorkerCounters::accept_fd_exhausted},
  };
  for (const Summed& series : connection_series)
    Simple(out, series.name, series.type, series.help, sum(series.counter));
  Simple(out, "frs_start_time_seconds", "gauge", "Unix time the server started.", CounterGet(master_->started_unix));

  Header(out, "frs_build_info", "gauge", "The frsd build: version and compiler (always 1).");
  out->append("frs_build_info{version=\"" FRS_VERSION "\",compiler=\"");
#if defined(__clang__)
  out->append("clang ").append(__clang_version__);
#elif defined(__GNUC__)
  out->append("gcc ").append(__VERSION__);
#endif
  out->append("\"} 1\n");

  std::vector<ProcessRef> procs;
  procs.push_back({static_cast<pid_t>(CounterGet(master_->master_pid)), -1});
  for (uint32_t w = 0; w < workers_; ++w)
    procs.push_back({static_cast<pid_t>(CounterGet(workers_base_[w].pid)), static_cast<int>(w)});
  AppendProcessMetrics(procs, out);
}

void Metrics::RenderReservations(const std::vector<BizInfo>& bizzes, std::string* out) const {
  struct Sums {
    uint64_t taken = 0, settled = 0, expired = 0;
  };
  std::vector<Sums> sums(bizzes.size());
  for (size_t i = 0; i < bizzes.size(); ++i)
    for (uint32_t w = 0; w < workers_; ++w) {
      const WorkerCounters& c = workers_base_[w];
      sums[i].taken += CounterGet(c.res_taken[bizzes[i].id]);
      sums[i].settled += CounterGet(c.res_settled[bizzes[i].id]);
      sums[i].expired += CounterGet(c.res_expired[bizzes[i].id]);
    }
  auto shown = [&](size_t i) {
    return bizzes[i].reservations || sums[i].taken != 0 || sums[i].settled != 0 || sums[i].expired != 0;
  };
  const struct {
    const char* name;
    const char* help;
    uint64_t Sums::*field;
  } series[] = {
      {"frs_reservations_taken_total", "Reservations taken by an acquire with reserve, by biz.", &Sums::taken},
      {"frs_reservations_settled_total", "Reservations settled with their real amount, by biz.", &Sums::settled},
      {"frs_reservations_expired_total",
       "Reservations that reached their expiry unsettled and were charged their estimate, by biz.", &Sums::expired},
  };
  for (const auto& s : series) {
    Header(out, s.name, "counter", s.help);
    for (size_t i = 0; i < bizzes.size(); ++i)
      if (shown(i)) BizSample(out, s.name, bizzes[i].name, bizzes[i].id, sums[i].*(s.field));
  }
}

}  // namespace frs::server
