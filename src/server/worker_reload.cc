#include "server/worker_loop.h"

#include <optional>

#include "envoy/envoy_rules.h"
#include "frs/service.h"
#include "server/envoy_map.h"
#include "server/logger.h"
#include "server/signals.h"

namespace frs::server {

void Worker::HandleSignals(int64_t now) {
  SignalFlags& f = Signals();
  if (f.reopen) {
    f.reopen = 0;
    Status s = Logger::Get().Reopen();
    // Said either way, as the master does: each process's line in the new
    // file is how one knows it writes there now.
    if (!s.ok()) FRS_LOG("cannot reopen the log file: %s", s.ToString().c_str());
    else FRS_LOG("log file reopened");
    if (counters_) CounterSet(counters_->log_reopen_failed, s.ok() ? 0 : 1);
    // Its writer thread writes out what it holds to the old file first.
    if (decision_log_) decision_log_->Reopen();
  }
  if (f.reload) {
    f.reload = 0;
    // The map the master validated and published, never the file itself.
    Status s;
    uint64_t generation = map_generation_;
    if (ctx_.map_channel) {
      Result<MapChannel::Map> m = ctx_.map_channel->Read();
      std::optional<SrvConfig> next;
      if (!m.ok()) {
        s = m.status();
      } else if (m->generation != map_generation_) {
        if (!m->srv_text.empty()) {
          auto parsed = LoadSrvConfigText(cfg_.path, &m->srv_text);
          if (parsed.ok()) next = std::move(parsed.value());
          else s = parsed.status();
        }
        if (s.ok()) s = engine_->ReloadText(m->text, next ? next->map_path : cfg_.map_path);
        if (s.ok()) SetMapDigest(RulesDigest(m->text));
        if (s.ok()) ApplyEnvoy(m->envoy_text, next ? next->grpc_merge_domains : cfg_.grpc_merge_domains);
        if (s.ok() && next) ApplyLive(*next, m->previous_list);
      }
      if (m.ok()) generation = m->generation;
    } else {
      s = engine_->Reload(cfg_.map_path);
    }
    if (s.ok()) {
      // Before the "reloaded" line: whoever waits for it (an operator, a
      // test) finds the new certificate serving.
      ReloadTls();
      if (generation != map_generation_ || !ctx_.map_channel) {
        handler_.MapReloaded();
        handler_.TakeParkedChanges();
        // A reload may have been of Envoy's files alone (inotify): both named.
        FRS_LOG("reloaded %s%s%s (map generation %llu)", cfg_.map_path.c_str(),
                cfg_.grpc_config.empty() ? "" : " and the <grpc config> files in ", cfg_.grpc_config.c_str(),
                static_cast<unsigned long long>(generation));
        if (counters_) CounterAdd(counters_->reloads);
      }
      map_generation_ = generation;
    } else {
      FRS_LOG("reload refused, the old map stays: %s", s.message().c_str());
      if (counters_) CounterAdd(counters_->reload_failures);
    }
  }
  if (f.terminate && !stopping_) BeginShutdown(now);
}

void Worker::ApplyLive(const SrvConfig& next, std::string_view previous_list) {
  if (next.allow != cfg_.allow) {
    auto parsed = AllowList::Parse(next.allow);
    if (!parsed.ok()) {
      FRS_LOG("the reloaded <allow> list is refused, the old one stays: %s", parsed.status().message().c_str());
    } else {
      allow_.emplace(std::move(parsed.value()));
      cfg_.allow = next.allow;
    }
  }
  if (next.logfile != cfg_.logfile) {
    if (Status s = Logger::Get().UseFile(next.logfile); !s.ok())
      FRS_LOG("cannot switch the log file, logging here still: %s", s.message().c_str());
    else cfg_.logfile = next.logfile;
  }
  if (next.admin_token != cfg_.admin_token) {
    // The replica links send the token the other shards check from their
    // own reload on: links left on the old one were refused by every shard
    // that reloaded, so its owners' changes reached no other holder, and a
    // failover granted them again.
    if (repl_) repl_->SetToken(next.admin_token);
    for (auto& d : draining_) d->SetToken(next.admin_token);
    if (spool_base_) spool_base_->token = next.admin_token;
  }
  cfg_.admin_token = next.admin_token;
  cfg_.grpc_headers = next.grpc_headers;
  cfg_.grpc_max_streams = next.grpc_max_streams;
  cfg_.grpc_buffered_bytes = next.grpc_buffered_bytes;
  grpc_budget_.limit = next.grpc_buffered_bytes;  // the connections open take it too: they share the budget
  cfg_.grpc_shadow = next.grpc_shadow;
  cfg_.grpc_quota = next.grpc_quota;
  cfg_.grpc_metadata = next.grpc_metadata;
  cfg_.grpc_limit_header = next.grpc_limit_header;
  cfg_.grpc_remaining_header = next.grpc_remaining_header;
  cfg_.grpc_reset_header = next.grpc_reset_header;
  cfg_.grpc_near_limit_ratio = next.grpc_near_limit_ratio;
  cfg_.grpc_stop_increment = next.grpc_stop_increment;
  cfg_.grpc_healthy_with_config = next.grpc_healthy_with_config;
  cfg_.grpc_merge_domains = next.grpc_merge_domains;
  // TLS on or off, and mTLS on or off, need a restart (the master says so);
  // the files' paths and the allowed names apply from the next reload of them.
  if (next.grpc_tls_cert.empty() == cfg_.grpc_tls_cert.empty() &&
      next.grpc_tls_client_ca.empty() == cfg_.grpc_tls_client_ca.empty()) {
    cfg_.grpc_tls_cert = next.grpc_tls_cert;
    cfg_.grpc_tls_key = next.grpc_tls_key;
    cfg_.grpc_tls_client_ca = next.grpc_tls_client_ca;
    cfg_.grpc_tls_client_names = next.grpc_tls_client_names;
  }
  if (grpc_) {
    grpc_->SetOptions(GrpcOptionsFor(cfg_));
    PollGrpcWatches();  // healthy_with_config may change the status
  }
  cfg_.max_header_bytes = next.max_header_bytes;
  cfg_.max_body_bytes = next.max_body_bytes;
  cfg_.max_connections = next.max_connections;
  cfg_.idle_timeout_ms = next.idle_timeout_ms;
  cfg_.request_timeout_ms = next.request_timeout_ms;
  cfg_.max_batch = next.max_batch;
  cfg_.ratelimit_fields = next.ratelimit_fields;
  cfg_.map_path = next.map_path;
  cfg_.grpc_config = next.grpc_config;  // what the "reloaded" line names: the files it read
  cfg_.cluster_shards = next.cluster_shards;
  // A self that follows <listen> follows the port really bound (port="0").
  const std::string next_self = next.cluster_self_derived ? ListenName(cfg_.host, cfg_.port) : next.cluster_self;
  // The links know this shard by its name: a self spelled anew by a reload
  // (a typo fixed) sets them up anew, as a change of the list does.
  const bool self_changed = next_self != cfg_.cluster_self;
  cfg_.cluster_self = next_self;
  cfg_.cluster_enforce = next.cluster_enforce;
  const bool replicas_changed = next.cluster_replicas != cfg_.cluster_replicas ||
                                next.replica_sync != cfg_.replica_sync || next.replica_refuse != cfg_.replica_refuse ||
                                next.replica_timeout_ms != cfg_.replica_timeout_ms;
  cfg_.cluster_replicas = next.cluster_replicas;
  cfg_.replica_sync = next.replica_sync;
  cfg_.replica_refuse = next.replica_refuse;
  cfg_.replica_timeout_ms = next.replica_timeout_ms;
  ApplyDecisionLog(next);
  limits_ = ConnectionLimits{cfg_.max_header_bytes, cfg_.max_body_bytes};
  idle_.set_timeout(int64_t{cfg_.idle_timeout_ms} * kMsNs);
  busy_.set_timeout(int64_t{cfg_.request_timeout_ms} * kMsNs);
  brief_.set_timeout(std::min(kBriefLingerNs, int64_t{cfg_.request_timeout_ms} * kMsNs));
  const std::shared_ptr<const Ring> old_ring = handler_.options().cluster.ring;
  const uint32_t old_digest = old_ring ? old_ring->Digest() : 0;
  HandlerOptions hopts = HandlerOptionsFor(cfg_);
  const uint32_t new_digest = hopts.cluster.ring ? hopts.cluster.ring->Digest() : 0;
  if (old_ring && new_digest != old_digest) {
    // Changes queued under the old list are still delivered (SetUpReplicas),
    // and the shards that run the new one take them under the old digest.
    // The master's record of the list before the change, when it published
    // one: after two changes before this worker's turn, its own list is
    // two changes back, a list no shard runs.
    previous_ring_ = old_ring;
    if (!previous_list.empty())
      if (auto listed = Ring::ParseList(previous_list); listed.ok())
        previous_ring_ = std::make_shared<const Ring>(std::move(listed.value()));
    // Until frsctl handoff reports this change finished here, this shard
    // answers no snapshot (handler_replica.cc).
    if (new_digest != 0 && cfg_.cluster_replicas != 0 && ctx_.metrics != nullptr)
      CounterSet(ctx_.metrics->master().replica.ring_changed_to, new_digest);
  }
  hopts.cluster.previous_ring = previous_ring_;
  handler_.SetOptions(hopts);
  if (grpc_) grpc_->SetCluster(handler_.options().cluster);
  // Any change of the list sets the links up anew, also on a shard that had
  // none: one taken out of the ring (no links while it is not in it) and put
  // back must replicate again, and follow its owners, from this reload on.
  if (replicas_changed || self_changed || new_digest != old_digest) SetUpReplicas(/*reload=*/true);
}

void Worker::SetPreviousCluster(const std::vector<RingShard>& shards) {
  auto ring = Ring::Make(shards);  // the master read it from a valid srv.xml
  if (!ring.ok()) return;
  previous_ring_ = std::make_shared<const Ring>(std::move(ring.value()));
  HandlerOptions hopts = handler_.options();
  hopts.cluster.previous_ring = previous_ring_;
  handler_.SetOptions(hopts);
  if (grpc_) grpc_->SetCluster(handler_.options().cluster);
}

void Worker::ApplyDecisionLog(const SrvConfig& next) {
  if (next.decisions_file.empty()) {
    if (decision_log_) {
      handler_.set_decision_log(nullptr);
      if (grpc_) grpc_->set_decision_log(nullptr);
      decision_log_.reset();  // writes out what it holds
      FRS_LOG("decision log stopped");
    }
    cfg_.decisions_file.clear();
    return;
  }
  DecisionLogOptions o;
  o.file = next.decisions_file;
  o.record_all = next.decisions_all;
  o.sample = next.decisions_sample;
  if (decision_log_) {
    decision_log_->SetOptions(o);
  } else {
    decision_log_ = DecisionLog::Start(o, counters_ ? &counters_->decision_log : &own_log_counters_);
    handler_.set_decision_log(decision_log_.get());
    if (grpc_) grpc_->set_decision_log(decision_log_.get());
  }
  cfg_.decisions_file = next.decisions_file;
  cfg_.decisions_all = next.decisions_all;
  cfg_.decisions_sample = next.decisions_sample;
}

void Worker::ApplyEnvoy(const std::string& bundle, bool merge_domains) {
  if (!grpc_ || bundle == envoy_bundle_) return;
  auto rules = envoy::EnvoyRules::FromBundle(bundle, merge_domains);
  if (!rules.ok()) {
    FRS_LOG("the Envoy configuration is refused, the old one stays: %s", rules.status().message().c_str());
    return;
  }
  grpc_->SetRules(std::move(rules.value()));
  envoy_bundle_ = bundle;
  PollGrpcWatches();
}

}  // namespace frs::server
