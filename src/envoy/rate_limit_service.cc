#include "envoy/rate_limit_service.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace frs::envoy {

void RateLimitService::Decide(const RlsRequest& req, RlsAnswer* out) {
  out->status = Status::OK();
  out->overall = Code::kOk;
  out->tightest = -1;
  out->statuses.assign(req.descriptors.size(), RlsStatus{});
  const size_t n = req.descriptors.size();
  found_.assign(n, EnvoyRules::kNoLimit);
  if (!rules_) return;
  for (size_t i = 0; i < n; ++i) found_[i] = rules_->Find(req.domain, req.descriptors[i].entries, &scratch_);
  // `replaces`: a limit named by another matched limit's replaces is dropped.
  for (size_t i = 0; i < n; ++i) {
    if (found_[i] < 0) continue;
    for (const std::string& name : rules_->limits()[static_cast<size_t>(found_[i])].replaces)
      for (size_t j = 0; j < n; ++j)
        if (j != i && found_[j] >= 0 && rules_->limits()[static_cast<size_t>(found_[j])].name == name)
          found_[j] = EnvoyRules::kNoLimit;
  }
  uint32_t tightest_remaining = std::numeric_limits<uint32_t>::max();
  for (size_t i = 0; i < n; ++i) {
    RlsStatus& st = out->statuses[i];
    const RlsDescriptor& d = req.descriptors[i];
    if (found_[i] == EnvoyRules::kUnlimited) {
      st.remaining = std::numeric_limits<uint32_t>::max();
      continue;
    }
    if (found_[i] < 0) continue;
    const CompiledLimit& l = rules_->limits()[static_cast<size_t>(found_[i])];
    st.has_limit = true;
    st.limit = &l;
    const uint64_t hits = d.has_hits ? d.hits : req.hits;
    st.hits = hits;
    CounterKey(d.entries, &key_);
    Request r;
    r.biz = l.biz;
    r.key = key_;
    r.cmd = hits == 0 ? Cmd::kQuery : Cmd::kAcquire;
    r.n = static_cast<int64_t>(std::clamp<uint64_t>(hits, 1, static_cast<uint64_t>(kMaxUses)));
    Decision dec = engine_->Execute(r);
    if (!dec.ok()) {
      out->status = dec.status;
      return;
    }
    const int64_t limit = l.limit.requests_per_unit;
    const RuleResult& rule = dec.rules[0];
    st.until_reset_s = std::max<int64_t>(0, rule.reset - dec.now_s);
    // The count after this call: an acquire that counted re-reads its rule
    // (node_op.cc RecordRules); a denied one or a query counted nothing.
    const int64_t count = rule.count;
    // requests_per_unit 0 denies every hit (the engine's rule is max 1).
    const bool over = hits == 0 ? count > limit : limit == 0 || (dec.shadow ? dec.would_deny : !dec.allowed);
    st.remaining = static_cast<uint32_t>(std::clamp<int64_t>(limit - count, 0, limit));
    if (over) {
      if (l.shadow_mode) {
        st.shadow_over = true;
      } else {
        st.over = true;
        st.code = Code::kOverLimit;
        out->overall = Code::kOverLimit;
      }
    } else if (hits > 0 && static_cast<double>(count) > std::floor(static_cast<double>(limit) * kNearLimitRatio)) {
      st.near = true;
    }
    if (out->tightest < 0 || st.remaining < tightest_remaining) {
      out->tightest = static_cast<int32_t>(i);
      tightest_remaining = st.remaining;
    }
  }
}

}  // namespace frs::envoy
