#include "server/worker.h"

#include <sys/prctl.h>

#include <exception>
#include <optional>

#include "config/service_options.h"
#include "frs/service.h"
#include "frs/store.h"
#include "server/clock_util.h"
#include "server/envoy_map.h"
#include "server/logger.h"
#include "server/metrics.h"
#include "server/signals.h"
#include "server/worker_loop.h"

namespace frs::server {

Worker::Worker(WorkerContext ctx, const Backend& backend)
    : ctx_(std::move(ctx)),
      cfg_(*ctx_.config),
      counters_(ctx_.metrics ? &ctx_.metrics->worker(ctx_.index) : nullptr),
      handler_(backend, HandlerOptionsFor(cfg_), ctx_.metrics, counters_),
      engine_(backend.engine),
      store_(backend.store),
      limits_{cfg_.max_header_bytes, cfg_.max_body_bytes},
      idle_(int64_t{cfg_.idle_timeout_ms} * kMsNs),
      busy_(int64_t{cfg_.request_timeout_ms} * kMsNs),
      brief_(std::min(kBriefLingerNs, int64_t{cfg_.request_timeout_ms} * kMsNs)) {
  if (ctx_.grpc_listener.valid()) {
    grpc_budget_.limit = cfg_.grpc_buffered_bytes;
    grpc_.emplace(backend.engine, GrpcOptionsFor(cfg_));
    // /json decides with the gRPC methods' service: one set of rules, one
    // ownership, one set of per-descriptor counters.
    grpc_->set_metrics(&envoy_metrics_);
    grpc_->SetCluster(handler_.options().cluster);
    handler_.set_envoy(&grpc_->rls(), &envoy_metrics_, &*grpc_);
    tls_ = ctx_.tls;
    PublishTlsExpiry();
  }
}

int RunWorker(WorkerContext ctx) {
  Logger::Get().SetRole("worker " + std::to_string(ctx.index));
  // Die with the master: a worker must never outlive it (a new master could
  // not take the store lock while orphans serve the old map).
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  // A truncated store file answers errors instead of killing the worker.
  sigset_t wait_mask;
  if (!SetUpProcessSignals(/*want_child=*/false, &wait_mask)) return 1;
  const SrvConfig& cfg = *ctx.config;
  const std::vector<RingShard>* previous_cluster = ctx.previous_cluster;
  StoreOptions so = StoreOptionsFor(cfg, /*create_if_missing=*/false);
  so.on_recovery = [](const std::string& what) { FRS_LOG("store: %s", what.c_str()); };
  // A worker keeps its writer entry between requests (a claim less per
  // write): its loop hands it back when idle and someone waits for one.
  so.keep_writer_entries = true;
  // What the master's watch over hung workers reads (server/stall_watch.h):
  // a worker that waits for another's lock is not stuck itself.
  if (ctx.metrics != nullptr) {
    WorkerCounters* c = &ctx.metrics->worker(ctx.index);
    so.on_lock_wait = [c](uint32_t owner_tid) {
      CounterSet(c->lock_wait_since_ms, owner_tid != 0 ? static_cast<uint64_t>(MonoNs() / 1000000) : 0);
      CounterSet(c->lock_wait_tid, owner_tid);
    };
  }
  auto store = Store::Open(so);
  if (!store.ok()) {
    FRS_LOG("cannot open the store: %s", store.status().message().c_str());
    // The master opened it whole before any worker started: a file missing
    // now went while frsd ran (NotFound), which the master weighs.
    return store.status().IsNotFound() ? kExitStoreLost : kExitFatalConfig;
  }
  // The master's current map (a respawned worker too): the bytes it
  // validated, not whatever map.xml holds at this moment.
  EngineOptions eo = EngineOptionsFor(cfg, store.value().get());
  eo.on_problem = [](const std::string& what) { FRS_LOG("%s", what.c_str()); };
  uint64_t generation = 0;
  std::string envoy_bundle;       // <grpc config>, as the master published it
  std::optional<SrvConfig> live;  // srv.xml as last reloaded (a respawned worker)
  std::string map_digest;         // of the map it runs
  std::string previous_list;      // the master's list before its last <cluster> change
  if (ctx.map_channel) {
    Result<MapChannel::Map> m = ctx.map_channel->Read();
    if (!m.ok()) {
      FRS_LOG("cannot read the master's map: %s", m.status().message().c_str());
      return kExitFatalConfig;
    }
    map_digest = RulesDigest(m->text);
    eo.map_text = std::move(m->text);
    envoy_bundle = std::move(m->envoy_text);
    generation = m->generation;
    previous_list = std::move(m->previous_list);
    if (!m->srv_text.empty()) {
      auto parsed = LoadSrvConfigText(cfg.path, &m->srv_text);
      if (parsed.ok()) live = std::move(parsed.value());
    }
  }
  auto engine = AdminEngine::Open(eo);
  if (!engine.ok()) {
    // The map, the statistics' files, the lease key: what the engine opens.
    FRS_LOG("cannot open the engine (map, statistics, lease key): %s", engine.status().message().c_str());
    return kExitFatalConfig;
  }
  int rc = 1;
  try {
    Worker w(std::move(ctx), Backend(engine.value().get(), store.value().get(), eo.clock));
    w.set_map_generation(generation);
    w.SetMapDigest(map_digest);
    w.ApplyEnvoy(envoy_bundle, (live ? *live : cfg).grpc_merge_domains);
    if (live) w.ApplyLive(*live, previous_list);
    else w.ApplyDecisionLog(cfg);
    // Forked after a change of the shard list: the list before it is the
    // master's record, not the start's (which ApplyLive took for it, and
    // which is another after two changes).
    if (previous_cluster != nullptr && !previous_cluster->empty()) w.SetPreviousCluster(*previous_cluster);
    rc = w.Run(&wait_mask);
  } catch (const std::exception& e) {
    FRS_LOG("worker stopped by an internal error: %s", e.what());
  }
  engine.value().reset();
  store.value().reset();
  return rc;
}

}  // namespace frs::server
