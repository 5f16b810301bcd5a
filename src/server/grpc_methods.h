// server/grpc_methods.h: the gRPC methods frsd answers on <grpc>:
//
//   /envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit
//   /grpc.health.v1.Health/Check   ("" or the rate limit service: SERVING,
//                                   NOT_SERVING once stopping; another
//                                   service: NOT_FOUND)
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

#include "envoy/rate_limit_service.h"
#include "server/cluster_view.h"
#include "server/envoy_log.h"
#include "server/envoy_metrics.h"
#include "server/grpc_session.h"

namespace frs::server {

struct GrpcOptions {
  bool headers = false;  // RateLimit-Limit, -Remaining, -Reset in response_headers_to_add
};

class GrpcMethods final : public GrpcService {
 public:
  GrpcMethods(Engine* engine, const GrpcOptions& opts);
  ~GrpcMethods() override;
  void SetRules(std::shared_ptr<const envoy::EnvoyRules> rules) { rls_.SetRules(std::move(rules)); }
  void SetOptions(const GrpcOptions& opts) { opts_ = opts; }
  void set_shutting_down(bool v) { shutting_down_ = v; }
  // <cluster>: which descriptors' counter keys this shard owns.
  void SetCluster(const ClusterView& c);
  // Per-descriptor counters (/metrics); null: not counted.
  void set_metrics(EnvoyMetrics* m) { metrics_ = m; }
  // The worker's decision log (null: none): a line per decided descriptor.
  void set_decision_log(DecisionLog* log) { decision_log_ = log; }
  void set_peer(const IpAddress* peer) override { peer_ = peer; }
  envoy::RateLimitService& rls() { return rls_; }

  int MethodOf(std::string_view path) const override;
  void Call(int method, std::string_view message, Reply* out) override;

 private:
  static constexpr int kShouldRateLimitMethod = 0;
  static constexpr int kHealthCheckMethod = 1;
  void ShouldRateLimit(std::string_view message, Reply* out);
  void HealthCheck(std::string_view message, Reply* out);

  struct Messages;  // the generated protobuf types, kept out of this header
  std::unique_ptr<Messages> m_;
  envoy::RateLimitService rls_;
  GrpcOptions opts_;
  bool shutting_down_ = false;
  EnvoyMetrics* metrics_ = nullptr;
  DecisionLog* decision_log_ = nullptr;
  const IpAddress* peer_ = nullptr;
  EnvoyDecisionLog log_;
  envoy::RlsRequest req_;
  envoy::RlsAnswer answer_;
};

}  // namespace frs::server
