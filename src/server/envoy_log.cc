#include "server/envoy_log.h"

#include <algorithm>

namespace frs::server {

void EnvoyDecisionLog::Record(DecisionLog* log, const IpAddress* peer, const envoy::RlsRequest& req,
                              const envoy::RlsAnswer& a) {
  if (log == nullptr || !a.status.ok()) return;
  for (size_t i = 0; i < a.statuses.size() && i < req.descriptors.size(); ++i) {
    const envoy::RlsStatus& st = a.statuses[i];
    if (!st.has_limit || st.limit == nullptr) continue;
    const bool denied = st.code == envoy::Code::kOverLimit;
    // shadow_mode: answered OK; the line says what enforcing would have.
    if (!log->Wants(denied || st.shadow_over)) continue;
    const envoy::CompiledLimit& l = *st.limit;
    // The key the engine counted: an override's is led by its domain, since
    // its biz is shared by every domain (RateLimitService::Decide).
    envoy::CounterKey(req.descriptors[i].entries, &key_, l.is_override ? req.domain : std::string_view());
    rule_ = envoy::RuleNameOf(l);
    DecisionRecord rec;
    rec.ts_ms = clock_->NowMs();
    rec.biz = l.biz;
    rec.key = key_;
    rec.rule = rule_;
    rec.allowed = !denied && !st.shadow_over;
    rec.shadow = st.shadow_over;
    rec.n = static_cast<int64_t>(st.hits);
    // The descriptor's own limit for an override (the biz's is only a cap),
    // and the engine's count after the call: past the limit it goes on
    // counting, which limit - remaining (0 there) would not show.
    rec.limit = st.limit_value().requests_per_unit;
    rec.remaining = st.remaining;
    rec.count = st.after;
    rec.retry_after = rec.allowed ? 0 : st.until_reset_s;
    rec.route = key_;
    rec.client = peer;
    rec.domain = l.is_override ? req.domain : std::string_view(l.domain);
    rec.descriptor = l.path;  // an override's: "override_UNIT", as its metrics say
    log->Record(rec);
  }
}

}  // namespace frs::server
