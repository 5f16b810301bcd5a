// GET /metrics as the series table says: each row a series's name, type and
// help, and how a scrape reads its samples. docs/protocol.md lists the same
// series; tests/server/metrics_render_test.cc holds the two together.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>
#include <vector>

#include "server/clock_util.h"
#include "server/held_now.h"
#include "server/metrics.h"
#include "server/process_metrics.h"

namespace frs::server {
namespace {

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

// What one scrape reads: the counters, summed over the worker slots as a
// series asks, and what the engine and the store say now.
class Scrape {
 public:
  Scrape(const Metrics& m, Engine& engine, const Store* store)
      : m_(m), engine_(engine), store_(store), bizzes_(engine.Bizzes()) {}

  const Metrics& metrics() const { return m_; }
  Engine& engine() const { return engine_; }
  const std::vector<BizInfo>& bizzes() const { return bizzes_; }
  const MasterCounters& master() const { return m_.master(); }

  // The store's figures, read once (zeros without a store).
  const StoreStats& store() const {
    if (!store_stats_) store_stats_ = store_ != nullptr ? store_->Stats() : StoreStats{};
    return *store_stats_;
  }

  // What `read` gives for each worker slot, summed.
  template <typename Read>
  uint64_t Sum(Read read) const {
    uint64_t total = 0;
    for (uint32_t w = 0; w < m_.workers(); ++w) total += read(m_.worker(w));
    return total;
  }
  uint64_t Sum(uint64_t WorkerCounters::*counter) const {
    return Sum([counter](const WorkerCounters& c) { return CounterGet(c.*counter); });
  }
  // A per-biz array's entry of `biz`, summed.
  uint64_t SumBiz(uint64_t (WorkerCounters::*array)[65536], uint16_t biz) const {
    return Sum([array, biz](const WorkerCounters& c) { return CounterGet((c.*array)[biz]); });
  }

 private:
  const Metrics& m_;
  Engine& engine_;
  const Store* store_;
  std::vector<BizInfo> bizzes_;
  mutable std::optional<StoreStats> store_stats_;
};

// A series: its header, then what `samples` appends. A series of one
// unlabelled sample gives `value` instead.
struct SeriesRow {
  const char* name;
  const char* type;
  const char* help;
  uint64_t (*value)(const Scrape&);
  void (*samples)(const Scrape&, const char* name, std::string* out);
};

// Requests by command and status: the pairs that occurred.
void RequestSamples(const Scrape& s, const char* name, std::string* out) {
  for (size_t i = 0; i < static_cast<size_t>(CmdLabel::kCount); ++i)
    for (size_t j = 0; j < kStatusSlots; ++j) {
      const uint64_t v = s.Sum([i, j](const WorkerCounters& c) { return CounterGet(c.requests[i][j]); });
      if (v == 0) continue;
      out->append(name).append("{cmd=\"").append(LabelName(static_cast<CmdLabel>(i))).append("\",status=\"");
      AppendU64(out, static_cast<uint64_t>(kStatusCodes[j]));
      out->append("\"} ");
      AppendU64(out, v);
      out->append("\n");
    }
}

void LatencySamples(const Scrape& s, const char* name, std::string* out) {
  uint64_t cum = 0;
  for (size_t b = 0; b < kLatencyBuckets; ++b) {
    cum += s.Sum([b](const WorkerCounters& c) { return CounterGet(c.latency[b]); });
    out->append(name).append("_bucket{le=\"");
    if (b + 1 < kLatencyBuckets) AppendSeconds(out, kLatencyBoundsUs[b]);
    else out->append("+Inf");
    out->append("\"} ");
    AppendU64(out, cum);
    out->append("\n");
  }
  char buf[48];
  const uint64_t sum_ns = s.Sum(&WorkerCounters::latency_sum_ns);
  int n = std::snprintf(buf, sizeof buf, "%.9f", static_cast<double>(sum_ns) / 1e9);
  out->append(name).append("_sum ").append(buf, static_cast<size_t>(n)).append("\n");
  out->append(name).append("_count ");
  AppendU64(out, cum);
  out->append("\n");
}

// The earliest notAfter among the certificates the workers serve (after a
// reload one that refused the new files serves the old one); no sample
// without TLS.
void TlsExpirySamples(const Scrape& s, const char* name, std::string* out) {
  uint64_t earliest = 0;
  for (uint32_t w = 0; w < s.metrics().workers(); ++w) {
    const uint64_t v = CounterGet(s.metrics().worker(w).tls_not_after);
    if (v != 0 && (earliest == 0 || v < earliest)) earliest = v;
  }
  if (earliest == 0) return;
  out->append(name).append(" ");
  AppendU64(out, earliest);
  out->append("\n");
}

// A per-biz counter of every biz of the map.
template <uint64_t (WorkerCounters::*kArray)[65536]>
void BizSamples(const Scrape& s, const char* name, std::string* out) {
  for (const BizInfo& b : s.bizzes()) BizSample(out, name, b.name, b.id, s.SumBiz(kArray, b.id));
}

// A lease counter: of a biz with a concurrency rule, or one that had one
// while any of its lease series is not zero, all four together: a rule
// removed hides none (its leases' expiries come at their keys' next
// writes), so that frs_leases_expired_total goes from 0 to what those
// count, which rate() sees, instead of appearing at that count.
template <uint64_t (WorkerCounters::*kArray)[65536]>
void LeaseSamples(const Scrape& s, const char* name, std::string* out) {
  for (const BizInfo& b : s.bizzes()) {
    const bool shown = b.leases || s.SumBiz(&WorkerCounters::leases_granted, b.id) != 0 ||
                       s.SumBiz(&WorkerCounters::leases_released, b.id) != 0 ||
                       s.SumBiz(&WorkerCounters::leases_renewed, b.id) != 0 ||
                       s.SumBiz(&WorkerCounters::leases_expired, b.id) != 0;
    if (shown) BizSample(out, name, b.name, b.id, s.SumBiz(kArray, b.id));
  }
}

// A reservation counter: of a biz that names its reservations, or whose
// reservation series (any of the three) are not zero.
template <uint64_t (WorkerCounters::*kArray)[65536]>
void ReservationSamples(const Scrape& s, const char* name, std::string* out) {
  for (const BizInfo& b : s.bizzes()) {
    const bool shown = b.reservations || s.SumBiz(&WorkerCounters::res_taken, b.id) != 0 ||
                       s.SumBiz(&WorkerCounters::res_settled, b.id) != 0 ||
                       s.SumBiz(&WorkerCounters::res_expired, b.id) != 0;
    if (shown) BizSample(out, name, b.name, b.id, s.SumBiz(kArray, b.id));
  }
}

// Per rule: every rule of a biz of the current map that has decided since
// frsd started (its allowed and denied series, zeros included, so that a
// denied share has its denominator; shadow_denied instead of denied for a
// biz in shadow mode), and any other nonzero series of a rule still in the
// map. Rules are counted by position: a reload that reorders a biz's rules
// gives their names the counts of the positions they take.
void RuleSamples(const Scrape& s, const char* name, std::string* out) {
  static constexpr const char* kResultNames[kRuleResults] = {"allowed", "denied", "shadow_denied"};
  for (const BizInfo& b : s.bizzes()) {
    const uint64_t decided = s.SumBiz(&WorkerCounters::biz_allowed, b.id) + s.SumBiz(&WorkerCounters::biz_denied, b.id);
    const RuleResultLabel denied = b.mode == Mode::kShadow ? RuleResultLabel::kShadowDenied : RuleResultLabel::kDenied;
    for (size_t i = 0; i < b.rules.size() && i < kMaxRulesPerBiz; ++i)
      for (size_t r = 0; r < kRuleResults; ++r) {
        const uint64_t v = s.Sum([&](const WorkerCounters& c) { return CounterGet(c.rule_decisions[b.id][i][r]); });
        const bool shown =
            v != 0 ||
            (decided != 0 && (r == static_cast<size_t>(RuleResultLabel::kAllowed) || r == static_cast<size_t>(denied)));
        if (!shown) continue;
        out->append(name).append("{biz=\"");
        AppendLabelValue(out, b.name);
        out->append("\",rule=\"");
        AppendLabelValue(out, b.rules[i]);
        out->append("\",result=\"").append(kResultNames[r]).append("\"} ");
        AppendU64(out, v);
        out->append("\n");
      }
  }
}

// Today's per-biz counters from the statistics file: every process on this
// store counts there, so decisions a program made in-process through libfrs
// show here too (the frs_biz_*_total series are frsd's own).
template <uint64_t BizStatsDay::*kField>
void TodaySamples(const Scrape& s, const char* name, std::string* out) {
  const uint32_t today = s.engine().Today();
  for (const BizStats& b : s.engine().DailyStats()) {
    const uint64_t v = !b.days.empty() && b.days.front().day == today ? b.days.front().*kField : 0;
    BizSample(out, name, b.name, b.id, v);
  }
}

void BuildSamples(const Scrape&, const char* name, std::string* out) {
  out->append(name).append("{version=\"" FRS_VERSION "\",compiler=\"");
#if defined(__clang__)
  out->append("clang ").append(__clang_version__);
#elif defined(__GNUC__)
  out->append("gcc ").append(__VERSION__);
#endif
  out->append("\"} 1\n");
}

void EnvoyCallSamples(const Scrape& s, const char* name, std::string* out) {
  for (size_t r = 0; r < kEnvoyCallResults; ++r) {
    const uint64_t v = s.Sum([r](const WorkerCounters& c) { return CounterGet(c.envoy_calls[r]); });
    out->append(name).append("{result=\"").append(kEnvoyCallResultNames[r]).append("\"} ").append(std::to_string(v));
    out->push_back('\n');
  }
}

// 0 while the master or a worker failed its last reopen of <log file>, or
// a worker its last open of <decisions file>.
uint64_t LogReopened(const Scrape& s) {
  const bool failed = CounterGet(s.master().log_reopen_failed) != 0 || s.Sum(&WorkerCounters::log_reopen_failed) != 0 ||
                      s.Sum([](const WorkerCounters& c) { return CounterGet(c.decision_log.open_failed); }) != 0;
  return failed ? 0 : 1;
}

uint64_t LongestStall(const Scrape& s) {
  const uint64_t now_ms = static_cast<uint64_t>(MonoNs() / 1000000);
  uint64_t longest = 0;
  for (uint32_t w = 0; w < s.metrics().workers(); ++w) {
    const WorkerCounters& c = s.metrics().worker(w);
    // A slot's worker, serving or still starting (the master wrote its start).
    const uint64_t beat = CounterGet(c.beat_ms);
    if (CounterGet(c.pid) == 0 || beat > now_ms) continue;
    longest = std::max(longest, (now_ms - beat) / 1000);
  }
  return longest;
}

// A counter of WorkerCounters, summed over the workers.
template <uint64_t WorkerCounters::*kCounter>
uint64_t Summed(const Scrape& s) {
  return s.Sum(kCounter);
}

constexpr SeriesRow kSeries[] =
    {
        {"frs_requests_total", "counter", "Requests answered, by command and HTTP status.", nullptr, RequestSamples},
        {"frs_request_duration_seconds", "histogram", "Time from a request's first byte read to its response queued.",
         nullptr, LatencySamples},
        {"frs_biz_allowed_total", "counter", "Decisions that allowed (query, update, acquire), by biz.", nullptr,
         BizSamples<&WorkerCounters::biz_allowed>},
        {"frs_biz_denied_total", "counter", "Decisions that denied (query, update, acquire), by biz.", nullptr,
         BizSamples<&WorkerCounters::biz_denied>},
        {"frs_biz_shadow_denied_total", "counter", "Shadow-mode decisions that enforce mode would have denied, by biz.",
         nullptr, BizSamples<&WorkerCounters::biz_shadow_denied>},
        {"frs_leases_granted_total", "counter", "Leases granted by a concurrency rule, by biz.", nullptr,
         LeaseSamples<&WorkerCounters::leases_granted>},
        {"frs_leases_released_total", "counter", "Leases released by their holder, by biz.", nullptr,
         LeaseSamples<&WorkerCounters::leases_released>},
        {"frs_leases_renewed_total", "counter", "Leases renewed by their holder, by biz.", nullptr,
         LeaseSamples<&WorkerCounters::leases_renewed>},
        {"frs_leases_expired_total", "counter",
         "Leases that reached their expiry unreleased and were freed (at their key's next write), by biz.", nullptr,
         LeaseSamples<&WorkerCounters::leases_expired>},
        {"frs_reservations_taken_total", "counter", "Reservations taken by an acquire with reserve, by biz.", nullptr,
         ReservationSamples<&WorkerCounters::res_taken>},
        {"frs_reservations_settled_total", "counter", "Reservations settled with their real amount, by biz.", nullptr,
         ReservationSamples<&WorkerCounters::res_settled>},
        {"frs_reservations_expired_total", "counter",
         "Reservations that reached their expiry unsettled and were charged their estimate, by biz.", nullptr,
         ReservationSamples<&WorkerCounters::res_expired>},
        {"frs_rule_decisions_total", "counter",
         "Decisions (query, update, acquire) by biz, rule and that rule's own result: allowed, denied, or "
         "shadow_denied (a shadow-mode biz's rule that enforce mode would have denied on).",
         nullptr, RuleSamples},
        {"frs_biz_today_requests", "gauge",
         "Decisions today (local day of <timezone>), by biz, by every process on the store.", nullptr,
         TodaySamples<&BizStatsDay::requests>},
        {"frs_biz_today_allowed", "gauge", "Decisions today that allowed, by biz, by every process on the store.",
         nullptr, TodaySamples<&BizStatsDay::allowed>},
        {"frs_biz_today_denied", "gauge", "Decisions today that denied, by biz, by every process on the store.",
         nullptr, TodaySamples<&BizStatsDay::denied>},
        {"frs_biz_today_new_keys", "gauge",
         "Nodes created today, by biz: keys seen for the first time, or again after their node was evicted.", nullptr,
         TodaySamples<&BizStatsDay::new_keys>},
        {"frs_store_slots", "gauge", "Node slots in the store (files x keynodes x chain).",
         [](const Scrape& s) { return s.store().slots; }, nullptr},
        {"frs_store_nodes_used", "gauge", "Nodes (keys) resident in the store.",
         [](const Scrape& s) { return s.store().total.nodes_used; }, nullptr},
        {"frs_store_slots_used", "gauge", "Slots occupied by resident nodes.",
         [](const Scrape& s) { return s.store().total.slots_used; }, nullptr},
        {"frs_store_evictions_stale_total", "counter", "Expired or orphaned nodes reused for new keys.",
         [](const Scrape& s) { return s.store().total.evictions_stale; }, nullptr},
        {"frs_store_evictions_live_total", "counter",
         "Live nodes evicted to make room (their limits silently restart): size the store up when this grows.",
         [](const Scrape& s) { return s.store().total.evictions_live; }, nullptr},
        {"frs_store_cuckoo_moves_total", "counter", "Nodes moved to their alternate key-node to make room.",
         [](const Scrape& s) { return s.store().total.cuckoo_moves; }, nullptr},
        {"frs_store_lock_recoveries_total", "counter",
         "Chain locks taken over from dead owners (journal replayed), as recorded in the store files.",
         [](const Scrape& s) { return s.store().total.lock_recoveries; }, nullptr},
        {"frs_worker_restarts_total", "counter", "Workers respawned after they died.",
         [](const Scrape& s) { return CounterGet(s.master().worker_restarts); }, nullptr},
        {"frs_worker_stall_kills_total", "counter",
         "Workers the master killed because their event loop had not turned for <limits worker_stall_ms>.",
         [](const Scrape& s) { return CounterGet(s.master().stall_kills); }, nullptr},
        {"frs_worker_loop_stalled_seconds", "gauge",
         "The longest time, in whole seconds, that a worker's event loop has gone without a turn (an idle loop "
         "turns every second; a worker waiting for a store lock counts; one still starting counts from its "
         "start).",
         LongestStall, nullptr},
        {"frs_store_damaged_nodes_total", "counter",
         "Damaged nodes met by lookups and walks and ignored (their keys count as absent); frsctl verify --repair "
         "clears them.",
         [](const Scrape& s) { return s.store().total.damaged_nodes; }, nullptr},
        {"frs_lock_recoveries_total", "counter", "Store locks the master released for workers that died holding them.",
         [](const Scrape& s) { return CounterGet(s.master().lock_recoveries); }, nullptr},
        {"frs_reloads_total", "counter",
         "Configuration reloads applied by workers (SIGHUP, or a change of <grpc config>'s files), "
         "each counted by every worker.",
         Summed<&WorkerCounters::reloads>, nullptr},
        {"frs_reload_failures_total", "counter",
         "Configuration reloads refused (map.xml, srv.xml or <grpc config>'s files; the old "
         "configuration was kept).",
         [](const Scrape& s) {
  return s.Sum(&WorkerCounters::reload_failures) + CounterGet(s.master().reload_failures);
         },
         nullptr},
        {"frs_config_last_reload_successful", "gauge",
         "0 from a refused reload, or one whose <grpc> TLS files were refused (the configuration on disk is broken; a "
         "restart would fail), until one is applied whole.",
         [](const Scrape& s) { return CounterGet(s.master().last_reload_refused) == 0 ? uint64_t{1} : uint64_t{0}; },
         nullptr},
        {"frs_log_last_reopen_successful", "gauge",
         "0 from a failed reopen of <log file> or <decisions file> (SIGUSR1, after logrotate renamed it) by the "
         "master or a worker until one succeeds: it logs on into the renamed file meanwhile.",
         LogReopened, nullptr},
        {"frs_config_restart_pending", "gauge",
         "1 while srv.xml, as last applied, changes what only a restart applies (workers, listen, store, ...).",
         [](const Scrape& s) {
  return CounterGet(s.master().restart_pending);
         },
         nullptr},
                    {"frs_misrouted_total", "counter",
                     "Requests for a route that another shard of <cluster> owns (answered 421 when enforce=\"1\").",
                     Summed<&WorkerCounters::misrouted>, nullptr},
                    {"frs_handoff_merged_total", "counter",
                     "Nodes received from other shards by frsctl handoff and merged.", Summed<&WorkerCounters::merged>,
                     nullptr},
                    {"frs_handoff_duplicates_total", "counter",
                     "Handoff nodes received again after an interruption and ignored (their receipt was already here).",
                     Summed<&WorkerCounters::merge_duplicates>, nullptr},
                    {"frs_decision_log_lines_total", "counter", "Lines written to the decision log (<decisions file>).",
                     [](const Scrape& s) {
  return s.Sum([](const WorkerCounters& c) { return CounterGet(c.decision_log.lines); });
                     },
                     nullptr},
    {"frs_decision_log_dropped_total", "counter",
     "Decision log lines dropped: a worker's buffer was full (the disk is slower than the decisions), a write "
     "failed (a full disk, an I/O error), or a worker died with them not yet written.",
     [](const Scrape& s) {
  return s.Sum([](const WorkerCounters& c) {
    return CounterGet(c.decision_log.dropped_full) + CounterGet(c.decision_log.dropped_failed);
  });
     },
     nullptr},
    {"frs_workers", "gauge", "Worker processes of the running configuration.",
     [](const Scrape& s) { return uint64_t{s.metrics().workers()}; }, nullptr},
    {"frs_connections_open", "gauge", "Client connections open, all workers.",
     Summed<&WorkerCounters::connections_open>, nullptr},
    {"frs_grpc_held_bytes", "gauge",
     "Bytes the gRPC connections make the workers hold (HTTP/2 sessions, streams, bodies, unsent answers), "
     "sampled once a second.",
     Summed<&WorkerCounters::grpc_held_bytes>, nullptr},
    {"frs_connections_accepted_total", "counter", "Client connections accepted.",
     Summed<&WorkerCounters::connections_accepted>, nullptr},
    {"frs_connections_refused_total", "counter", "Connections closed at accept: the peer is outside <allow>.",
     Summed<&WorkerCounters::connections_refused>, nullptr},
    {"frs_connections_overflow_total", "counter",
     "Connections answered 503 and closed: the worker was at its connection limit.",
     Summed<&WorkerCounters::connections_overflow>, nullptr},
    {"frs_connections_timed_out_total", "counter", "Connections closed for an idle or request timeout.",
     Summed<&WorkerCounters::connections_timed_out>, nullptr},
    {"frs_grpc_tls_refused_total", "counter",
     "TLS handshakes of the <grpc> listener that began and did not finish: a client certificate refused or "
     "missing, no h2 in ALPN, not TLS at all, or given up by the client.",
     Summed<&WorkerCounters::grpc_tls_refused>, nullptr},
    {"frs_store_file_lost", "gauge",
     "1 while a worker finds a store file deleted or truncated under the running server (checked each second): "
     "that file's keys and /health answer 503; a restart refuses the store until the file is restored, or "
     "removed and recreated empty (frsctl init --recreate-missing).",
     [](const Scrape& s) {
  uint64_t lost = 0;
  for (uint32_t w = 0; w < s.metrics().workers(); ++w) lost |= CounterGet(s.metrics().worker(w).store_file_lost);
  return lost;
     },
     nullptr},
    {"frs_stats_unstored_total", "counter",
     "Decisions whose statistics by key field were not stored: a day file that could not be made (a full disk, "
     "permissions; logged once, and again when it opens). Its daily totals and the counts are kept.",
     Summed<&WorkerCounters::stats_unstored>, nullptr},
    {"frs_tls_certificate_expiry_timestamp_seconds", "gauge",
     "Unix time the <grpc> listener's certificate expires (its notAfter; the earliest of those the workers "
     "serve); absent without TLS. frsd serves an expired one and warns: alert on it.",
     nullptr, TlsExpirySamples},
    {"frs_envoy_calls_total", "counter",
     "Envoy ShouldRateLimit calls (gRPC and POST /json) by answer: ok, over_limit, error (refused: a malformed "
     "call, a descriptor of another shard, the store unavailable).",
     nullptr, EnvoyCallSamples},
    {"frs_envoy_unknown_domain_total", "counter",
     "ShouldRateLimit calls for a domain no <grpc config> file names, answered OK with no limit (as upstream): "
     "a typo in Envoy's domain turns every limit off; logged once a minute too.",
     Summed<&WorkerCounters::envoy_unknown_domain>, nullptr},
    {"frs_unknown_biz_total", "counter",
     "Requests and batch members that named a biz the running map lacks, answered 404 (a client still calling a "
     "biz a reload removed, or a typo); logged once a minute too.",
     Summed<&WorkerCounters::unknown_biz>, nullptr},
    {"frs_accept_fd_exhausted_total", "counter",
     "Accepts that failed for want of a file descriptor (EMFILE/ENFILE); the worker stops accepting for 500 ms.",
     Summed<&WorkerCounters::accept_fd_exhausted>, nullptr},
    {"frs_start_time_seconds", "gauge", "Unix time the server started.",
     [](const Scrape& s) { return CounterGet(s.master().started_unix); }, nullptr},
    {"frs_build_info", "gauge", "The frsd build: version and compiler (always 1).", nullptr, BuildSamples},
    };

}  // namespace

void Metrics::Render(Engine& engine, const Store* store, std::string* out) const {
  const Scrape scrape(*this, engine, store);
  for (const SeriesRow& s : kSeries) {
    Header(out, s.name, s.type, s.help);
    if (s.samples != nullptr) {
      s.samples(scrape, s.name, out);
      continue;
    }
    out->append(s.name).append(" ");
    AppendU64(out, s.value(scrape));
    out->append("\n");
  }
  // The processes' own series (server/process_metrics.h), read from /proc.
  std::vector<ProcessRef> procs;
  procs.push_back({static_cast<pid_t>(CounterGet(master_->master_pid)), -1});
  for (uint32_t w = 0; w < workers_; ++w)
    procs.push_back({static_cast<pid_t>(CounterGet(workers_base_[w].pid)), static_cast<int>(w)});
  AppendProcessMetrics(procs, out);
}

void RenderHeldNow(const HeldNowScrape& held, const Metrics& metrics, std::string* out) {
  // Read from the store, not counted: a count of grants less releases
  // would start again at 0 with each restart and miss the leases and
  // reservations that expire unseen (they are swept at their key's next
  // write). Who walked, and how long ago: server/held_now.h.
  if (held.bizzes.empty()) return;
  bool leases = false, reservations = false;
  for (const AdminEngine::BizHeldNow& b : held.bizzes) {
    leases |= b.has_leases;
    reservations |= b.has_reservations;
  }
  if (leases) {
    Header(out, "frs_leases_held", "gauge",
           "Leases held now (granted, neither released nor past their expiry), by biz with a concurrency rule; "
           "read from the store, frs_held_age_seconds ago.");
    for (const AdminEngine::BizHeldNow& b : held.bizzes)
      if (b.has_leases) BizSample(out, "frs_leases_held", b.biz, b.biz_id, b.leases);
  }
  if (reservations) {
    Header(out, "frs_reservations_held", "gauge",
           "Reservations held now (taken, neither settled nor past their expiry), by biz that names "
           "reservations=\"N\"; read from the store, frs_held_age_seconds ago.");
    for (const AdminEngine::BizHeldNow& b : held.bizzes)
      if (b.has_reservations) BizSample(out, "frs_reservations_held", b.biz, b.biz_id, b.reservations);
  }
  Header(out, "frs_held_age_seconds", "gauge",
         "How old the figures of frs_leases_held and frs_reservations_held in this answer are: 0 when this "
         "scrape walked the store, else the age of the master's last walk.");
  out->append("frs_held_age_seconds ");
  AppendSeconds(out, held.age_ms * 1000);
  out->append("\n");
  const HeldNowShared& shared = metrics.master().held;
  uint64_t by_scrapes = 0;
  for (uint32_t w = 0; w < metrics.workers(); ++w) by_scrapes += CounterGet(metrics.worker(w).held_walks);
  Header(out, "frs_held_walks_total", "counter",
         "Walks over the store for frs_leases_held and frs_reservations_held: by the master for the scrapes, or "
         "by a scrape that found no fresh figures of the master's.");
  out->append("frs_held_walks_total{by=\"master\"} ");
  AppendU64(out, CounterGet(shared.walks));
  out->append("\nfrs_held_walks_total{by=\"scrape\"} ");
  AppendU64(out, by_scrapes);
  out->append("\n");
  Header(out, "frs_held_walk_seconds", "gauge", "How long the master's last walk over the store took.");
  out->append("frs_held_walk_seconds ");
  AppendSeconds(out, CounterGet(shared.walk_us));
  out->append("\n");
}

}  // namespace frs::server
