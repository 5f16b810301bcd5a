// server/grpc_methods.h: the gRPC methods frsd answers on <grpc>:
//
//   /envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit
//   /grpc.health.v1.Health/Watch   (the same status, streamed: sent at
//                                   once, then each change; an unknown
//                                   service: SERVICE_UNKNOWN, as gRPC's own
//                                   health servers answer it)
//   /grpc.health.v1.Health/Check   ("", "ratelimit" or the rate limit
//                                   service's full name: SERVING, NOT_SERVING
//                                   once stopping, while a store file is lost
//                                   or a replica catches up, or (the
//                                   service's names) while no domain is
//                                   loaded under healthy_with_config;
//                                   another service: NOT_FOUND)
//
// Anything else is UNIMPLEMENTED; a message protobuf cannot parse is
// INVALID_ARGUMENT; the store unable to answer is UNAVAILABLE (Envoy's
// failure_mode_deny decides what that means for the route), and so is, in a
// <cluster enforce="1">, a call with a descriptor another shard owns (the
// message names that shard).
//
// Thread safety: one per worker (it reuses its messages).
#pragma once

#include <memory>
#include <string>

#include "config/srv_config.h"
#include "envoy/rate_limit_service.h"
#include "server/cluster_view.h"
#include "server/envoy_log.h"
#include "server/envoy_metrics.h"
#include "server/grpc_session.h"

namespace frs::server {

struct GrpcOptions {
  bool headers = false;                          // RateLimit-Limit, -Remaining, -Reset in response_headers_to_add
  std::string limit_header = "RateLimit-Limit";  // LIMIT_LIMIT_HEADER
  std::string remaining_header = "RateLimit-Remaining";
  std::string reset_header = "RateLimit-Reset";
  bool metadata = false;  // RESPONSE_DYNAMIC_METADATA
  // HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: NOT_SERVING while the Envoy
  // configuration has no domain.
  bool healthy_with_config = false;
  envoy::RlsSettings rls;
};

// The options of a <grpc> (srv.xml).
GrpcOptions GrpcOptionsFor(const SrvConfig& cfg);

class Replicator;

class GrpcMethods final : public GrpcService {
 public:
  GrpcMethods(Engine* engine, const GrpcOptions& opts);
  ~GrpcMethods() override;
  void SetRules(std::shared_ptr<const envoy::EnvoyRules> rules) { rls_.SetRules(std::move(rules)); }
  void SetOptions(const GrpcOptions& opts) {
    opts_ = opts;
    rls_.SetSettings(opts.rls);
  }
  // The service's own part of health (what /healthcheck adds to the
  // worker's): false while stopping or (healthy_with_config) without a
  // domain. Check answers SERVING for the service's names when this and
  // set_healthy both say so.
  bool Serving() const;
  void set_shutting_down(bool v) { shutting_down_ = v; }
  // Whether the worker is in rotation (Handler::Unhealthy, as the worker
  // judged it last: at its start and each second): out of it (a store file
  // lost, a replica's catch-up), health answers NOT_SERVING for every name,
  // as /health says 503 and /healthcheck 500. Set, not asked per call: a
  // check looks at every store file, and Envoy's probes come often.
  void set_healthy(bool v) { healthy_ = v; }
  // <cluster>: which descriptors' counter keys this shard owns.
  void SetCluster(const ClusterView& c);
  // The worker's replicator (null: none): a route it refuses
  // (Replicator::Refusing) is refused to Envoy too.
  void SetReplicator(const Replicator* r);
  // Per-descriptor counters (/metrics); null: not counted.
  void set_metrics(EnvoyMetrics* m) { metrics_ = m; }
  // The worker's decision log (null: none): a line per decided descriptor.
  void set_decision_log(DecisionLog* log) { decision_log_ = log; }
  void set_peer(const IpAddress* peer) override { peer_ = peer; }
  envoy::RateLimitService& rls() { return rls_; }

  int MethodOf(std::string_view path) const override;
  bool Streaming(int method) const override { return method == kHealthWatchMethod; }
  void Call(int method, std::string_view message, Reply* out) override;
  void Refused(int method) override;

 private:
  static constexpr int kShouldRateLimitMethod = 0;
  static constexpr int kHealthCheckMethod = 1;
  static constexpr int kHealthWatchMethod = 2;
  void ShouldRateLimit(std::string_view message, Reply* out);
  void HealthCheck(std::string_view message, Reply* out, bool watch);
  void AddDynamicMetadata();

  struct Messages;  // the generated protobuf types, kept out of this header
  std::unique_ptr<Messages> m_;
  envoy::RateLimitService rls_;
  ClusterView cluster_;
  const Replicator* repl_ = nullptr;
  GrpcOptions opts_;
  bool shutting_down_ = false;
  bool healthy_ = true;
  EnvoyMetrics* metrics_ = nullptr;
  DecisionLog* decision_log_ = nullptr;
  const IpAddress* peer_ = nullptr;
  EnvoyDecisionLog log_;
  envoy::RlsRequest req_;
  envoy::RlsAnswer answer_;
};

}  // namespace frs::server
