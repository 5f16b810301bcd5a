#include "envoy/rate_limit_service.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include <limits>
#include "frs/key.h"

namespace frs::envoy {

bool RateLimitService::CheckOwnership(const RlsRequest& req, RlsAnswer* out) {
  if (!own_.ring) return true;
  if (own_.replicas && own_.catching_up != nullptr &&
      std::atomic_ref<uint64_t>(const_cast<uint64_t&>(*own_.catching_up)).load(std::memory_order_relaxed) != 0) {
    for (size_t i = 0; i < req.descriptors.size(); ++i) {
      if (found_[i] < 0) continue;
      out->status = Status::Unavailable(
          "this shard is taking back its nodes from the other shards after a start (replicas); ask again shortly");
      out->statuses.clear();
      return false;
    }
  }
  for (size_t i = 0; i < req.descriptors.size(); ++i) {
    if (found_[i] < 0) continue;  // nothing counted: any shard answers it alike
    const std::string& key = keys_[i];
    // The route of a counter key as the HTTP side hashes a key without
    // ?route= (a {hash tag} in it included), so that frsctl owner, the
    // clients' rings and nginx's agree on where it lives.
    const uint32_t pos = Ring::HashRoute(Ring::RouteOf(key, {}));
    const size_t owner = own_.ring->OwnerOfHash(pos);
    if (static_cast<long>(owner) == own_.self_index) continue;
    // With replicas the successor holds the key's count too (it is the
    // other holder): it serves it and sends the change back to the owner.
    if (own_.replicas && own_.ring->SuccessorOfHash(pos) == own_.self_index) continue;
    ++out->misrouted;
    if (!own_.enforce) continue;
    out->owner = own_.ring->shards()[owner].name;
    out->status = Status::Unavailable("descriptor " + std::to_string(i + 1) + " (counter key '" + key.substr(0, 64) +
                                      (key.size() > 64 ? "...'" : "'") + ") belongs to shard " + out->owner +
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
  out->statuses.clear();
  const size_t n = req.descriptors.size();
  // As envoyproxy/ratelimit (service/ratelimit.go): an empty list is an
  // error, not an empty answer.
  if (n == 0) {
    out->status = Status::InvalidArgument("rate limit descriptor list must not be empty");
    return;
  }
  // Each descriptor is a store operation: the work of one call is bounded.
  if (n > max_descriptors_) {
    out->status = Status::InvalidArgument(std::to_string(n) + " descriptors in one call; at most " +
                                          std::to_string(max_descriptors_) + " are answered");
    return;
  }
  out->statuses.assign(n, RlsStatus{});
  found_.assign(n, EnvoyRules::kNoLimit);
  if (!rules_) return;
  for (size_t i = 0; i < n; ++i) found_[i] = rules_->Find(req.domain, req.descriptors[i].entries, &scratch_);
  // `replaces` in two passes, as envoyproxy/ratelimit: every name that any
  // matched limit (unlimited ones included) replaces, then every matched
  // limit of such a name dropped; the outcome does not depend on order.
  replaced_.clear();
  for (size_t i = 0; i < n; ++i) {
    if (found_[i] >= 0)
      for (const std::string& name : rules_->limits()[static_cast<size_t>(found_[i])].replaces) replaced_.insert(name);
    else if (EnvoyRules::IsUnlimited(found_[i]))
      for (const std::string& name : rules_->unlimited(found_[i]).replaces) replaced_.insert(name);
  }
  if (!replaced_.empty())
    for (size_t i = 0; i < n; ++i) {
      const std::string* name = found_[i] >= 0 ? &rules_->limits()[static_cast<size_t>(found_[i])].name
                                : EnvoyRules::IsUnlimited(found_[i]) ? &rules_->unlimited(found_[i]).name
                                                                     : nullptr;
      if (name && !name->empty() && replaced_.count(*name)) found_[i] = EnvoyRules::kNoLimit;
    }
  // Every counter key made and checked before anything is counted: a call
  // is refused whole or answered whole (a store error aside).
  if (keys_.size() < n) keys_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (found_[i] < 0) continue;
    CounterKey(req.descriptors[i].entries, &keys_[i]);
    // CounterKey escapes whatever the store refuses; this only guards it.
    if (std::string why = ValidateKeyBytes(keys_[i]); !why.empty()) {
      out->status = Status::InvalidArgument("descriptor " + std::to_string(i + 1) + ": " + why);
      out->statuses.clear();
      return;
    }
  }
  // Before anything is counted: a refused call leaves no count behind.
  if (!CheckOwnership(req, out)) return;
  for (size_t i = 0; i < n; ++i) {
    RlsStatus& st = out->statuses[i];
    const RlsDescriptor& d = req.descriptors[i];
    if (EnvoyRules::IsUnlimited(found_[i])) {
      st.remaining = std::numeric_limits<uint32_t>::max();
      continue;
    }
    if (found_[i] < 0) continue;
    const CompiledLimit& l = rules_->limits()[static_cast<size_t>(found_[i])];
    st.has_limit = true;
    st.limit = &l;
    // One bound for the engine and the metrics alike: the engine counts at
    // most 2^31-1 per acquire (kMaxUses), and a limit is at most that.
    const uint64_t hits = std::min<uint64_t>(d.has_hits ? d.hits : req.hits, static_cast<uint64_t>(kMaxUses));
    st.hits = hits;
    const int64_t limit = l.limit.requests_per_unit;
    Request r;
    r.biz = l.biz;
    r.key = keys_[i];
    // A limit of 0 is never acquired on (its biz's rule is max 1, which an
    // acquire would pass): a query gives the window's reset, nothing counted.
    r.cmd = hits == 0 || limit == 0 ? Cmd::kQuery : Cmd::kAcquire;
    r.n = static_cast<int64_t>(std::max<uint64_t>(hits, 1));
    Decision dec = engine_->Execute(r);
    if (!dec.ok()) {
      // Descriptors before this one stay counted, as envoyproxy/ratelimit's
      // Redis pipeline leaves them (docs/integrations.md).
      out->status = dec.status;
      return;
    }
    const RuleResult& rule = dec.rules[0];
    st.until_reset_s = std::max<int64_t>(0, rule.reset - dec.now_s);
    // The count after this call: an acquire that counted re-reads its rule
    // (node_op.cc RecordRules); a denied one or a query counted nothing.
    const int64_t count = rule.count;
    // A look (hits 0) at an exhausted key is over its limit: FRS never counts
    // a denied hit, so "exhausted" is count == limit, where envoyproxy/
    // ratelimit's counter has run past it after the first denial.
    bool over;
    if (limit == 0) over = true;
    else if (hits == 0) over = count >= limit;
    else over = dec.shadow ? dec.would_deny : !dec.allowed;
    // Over the limit: 0 remaining, as envoyproxy/ratelimit (base_limiter.go).
    st.remaining = over ? 0 : static_cast<uint32_t>(std::clamp<int64_t>(limit - count, 0, limit));
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
    // The headers' descriptor: the fewest remaining, and of those an
    // OVER_LIMIT one first.
    if (out->tightest < 0) {
      out->tightest = static_cast<int32_t>(i);
    } else {
      const RlsStatus& t = out->statuses[static_cast<size_t>(out->tightest)];
      if (st.remaining < t.remaining ||
          (st.remaining == t.remaining && st.code == Code::kOverLimit && t.code != Code::kOverLimit))
        out->tightest = static_cast<int32_t>(i);
    }
  }
}

}  // namespace frs::envoy
