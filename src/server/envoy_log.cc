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
    envoy::CounterKey(req.descriptors[i].entries, &key_);
    rule_ = envoy::RuleNameOf(l);
    DecisionRecord rec;
    rec.ts_ms = clock_->NowMs();
    rec.biz = l.biz;
    rec.key = key_;
    rec.rule = rule_;
    rec.allowed = !denied && !st.shadow_over;
    rec.shadow = st.shadow_over;
    rec.n = static_cast<int64_t>(st.hits);
    rec.limit = l.limit.requests_per_unit;
    rec.remaining = st.remaining;
    rec.count = std::max<int64_t>(0, rec.limit - rec.remaining);
    rec.retry_after = rec.allowed ? 0 : st.until_reset_s;
    rec.route = key_;
    rec.client = peer;
    rec.domain = l.domain;
    rec.descriptor = l.path;
    log->Record(rec);
  }
}

}  // namespace frs::server
