#include "envoy/rate_limit_service.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace frs::envoy {

bool RateLimitService::CheckOwnership(const RlsRequest& req, RlsAnswer* out) {
  if (!own_.ring) return true;
  for (size_t i = 0; i < req.descriptors.size(); ++i) {
    if (found_[i] < 0) continue;  // nothing counted: any shard answers it alike
    CounterKey(req.descriptors[i].entries, &key_);
    // The route of a counter key as the HTTP side hashes a key without
    // ?route= (a {hash tag} in it included), so that frsctl owner, the
    // clients' rings and nginx's agree on where it lives.
    const size_t owner = own_.ring->OwnerOfHash(Ring::HashRoute(Ring::RouteOf(key_, {})));
    if (static_cast<long>(owner) == own_.self_index) continue;
    ++out->misrouted;
    if (!own_.enforce) continue;
    out->owner = own_.ring->shards()[owner].name;
    out->status = Status::Unavailable("descriptor " + std::to_string(i + 1) + " (counter key '" +
                                      key_.substr(0, 64) + (key_.size() > 64 ? "...'" : "'") +
                                      ") belongs to shard " + out->owner +
                                      "; this shard answers only the descriptors it owns (<cluster enforce=\"1\">)");
    out->statuses.clear();
    return false;
  }
  return true;
}

void RateLimitService::Decide(const RlsRequest& req, RlsAnswer* out) {
  out->status = Status::OK();
  out->overall = Code::kOk;
  out->tightest = -1;
  out->misrouted = 0;
  out->owner.clear();
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
  // Before anything is counted: a refused call leaves no count behind.
  if (!CheckOwnership(req, out)) return;
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
