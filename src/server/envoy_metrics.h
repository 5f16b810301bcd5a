// server/envoy_metrics.h: Envoy's rate limit service, per descriptor, in
// /metrics: envoyproxy/ratelimit's
//
//   ratelimit.service.rate_limit.DOMAIN.KEY_VALUE.{total_hits,over_limit,
//   near_limit,within_limit,shadow_mode}
//
// as one Prometheus counter,
//
//   frs_envoy_descriptor_hits_total{domain="D",descriptor="KEY_VALUE",result="total|over_limit|...|shadow_mode"}
//
// counted in hits (hits_addend) per matched rate-limited descriptor of every
// answer, gRPC and /json alike. total: every hit; over_limit: the hits of a
// descriptor answered over its limit (a shadow_mode one too); shadow_mode:
// those that shadow_mode let through; within_limit: the hits of a descriptor
// within its limit; near_limit: of those, the hits that took its count past
// 80 % of the limit (envoyproxy/ratelimit's near_limit_ratio, counted as it
// counts them: after > floor(0.8 x limit), only the part of hits_addend
// above that threshold). A look (hits_addend 0) counts nothing.
//
// `detailed_metric: true` adds the request's own values, one series per
// counter key (a share_threshold wildcard's pattern in place of the values
// it shares), and `value_to_metric: true` its descriptor path with the
// request's value where the configuration has a wildcard or no value
// ("route_api.path_/users"; envoyproxy/ratelimit puts that path in the
// metric's name), in the same series,
//
//   frs_envoy_descriptor_detailed_hits_total{domain,descriptor,key="remote_address_10.0.0.7",result}
//
// bounded: each worker keeps the first kDetailedKeys distinct keys since
// frsd started apart, and sums any later one into key="~other" (a key of
// bytes a label should not carry has them as '_'; a key past 103 bytes is cut
// and ends in a hash).
//
// The counts live in the shared metrics region (metrics.h), indexed by the
// descriptor's biz id, so any worker's /metrics sums every worker's and a
// respawned worker carries on its predecessor's; names come from the
// current Envoy configuration: a descriptor removed by a reload is no
// longer shown.
//
// Thread safety: one EnvoyMetrics per worker (its slot is single-writer);
// RenderEnvoyMetrics may run while other workers count.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "envoy/rate_limit_service.h"
#include "server/log_throttle.h"
#include "server/metrics.h"

namespace frs::server {

class EnvoyMetrics {
 public:
  // `counters`: this worker's slot (null: nothing is counted);
  // `log_period_ns`: the least time between two unknown-domain lines.
  explicit EnvoyMetrics(WorkerCounters* counters, int64_t log_period_ns = 60'000'000'000)
      : c_(counters), unknown_domain_log_(log_period_ns) {}
  // One answer's descriptors, and its misrouted ones (frs_misrouted_total)
  // whether it was answered or refused.
  void Count(const envoy::RlsRequest& req, const envoy::RlsAnswer& a);
  void CountRefused() {
    if (c_) CounterAdd(c_->envoy_calls[kEnvoyCallError]);
  }

 private:
  // This worker's slot for (biz, key), claimed when new; null: all
  // kDetailedKeys slots hold other keys (the key counts in detailed_other).
  DetailedKeySlot* Slot(uint16_t biz_id, std::string_view key);
  // Indexes the slots a predecessor (a respawned worker's) published.
  void IndexPublished();
  // Counts a call for a domain no configuration has, and logs it at most
  // once a minute: a typo in Envoy's domain turns every limit off.
  void NoteUnknownDomain(std::string_view domain);

  WorkerCounters* c_;
  // The slots are claimed in order, and found through this process's own
  // index (open addressing, at most half full: 1 + slot number; 0 empty):
  // every one of the kDetailedKeys is used before a key goes to ~other. A
  // probe window over the shared slots themselves filled about two thirds.
  std::array<uint16_t, 2 * kDetailedKeys> index_{};
  size_t claimed_ = 0;  // slots [0, claimed_) are taken
  bool indexed_ = false;
  std::string label_;
  LogThrottle unknown_domain_log_;
  // The other domains asked for since the last unknown-domain line (their
  // first 64 bytes, at most kUnknownKept), named in the next one: a second
  // typo must not hide behind the first's line.
  static constexpr size_t kUnknownKept = 4;
  std::array<std::string, kUnknownKept> unknown_seen_;
  size_t unknown_kept_ = 0;
  bool unknown_more_ = false;
};

// Counts a decision's descriptors in `metrics` (may be null): the gRPC and
// /json paths count alike.
void CountEnvoyAnswer(EnvoyMetrics* metrics, const envoy::RlsRequest& req, const envoy::RlsAnswer& a);
// A call refused before it was decided (not a RateLimitRequest, no domain):
// frs_envoy_calls_total{result="error"} too.
void CountEnvoyRefused(EnvoyMetrics* metrics);

// Appends the series above for every limit of `rules`.
void RenderEnvoyMetrics(const Metrics& metrics, const envoy::EnvoyRules& rules, std::string* out);

}  // namespace frs::server
