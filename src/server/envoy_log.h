// server/envoy_log.h: Envoy's decisions (gRPC ShouldRateLimit and POST
// /json) in the decision log, one line per rate-limited descriptor, written
// as an HTTP decision is (server/decision_line.h): the descriptor's biz
// (envoy.DOMAIN.PATH), its counter key (also the route), the hits as "n",
// and "domain" and "descriptor" beside. A descriptor that matched no limit,
// or an `unlimited` one, decides nothing and writes nothing; a call refused
// as a whole (another shard's descriptor, the store unavailable) neither.
//
// Thread safety: one per worker and per caller (it owns scratch strings).
#pragma once

#include <string>

#include "envoy/rate_limit_service.h"
#include "frs/clock.h"
#include "server/decision_log.h"

namespace frs::server {

class EnvoyDecisionLog {
 public:
  explicit EnvoyDecisionLog(const Clock* clock = SystemClock::Default()) : clock_(clock) {}
  // Writes the lines `log` wants of answer `a` to `req`; `peer` is the
  // caller's address ("client"), null when unknown. No-op without a log.
  void Record(DecisionLog* log, const IpAddress* peer, const envoy::RlsRequest& req, const envoy::RlsAnswer& a);

 private:
  const Clock* clock_;
  std::string key_, rule_;
};

}  // namespace frs::server
