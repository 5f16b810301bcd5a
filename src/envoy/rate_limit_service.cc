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
    // With replicas the successor holds the key's count too (it is the
    // other holder): it serves it and sends the change back to the owner.
    const bool as_successor = own_.replicas && own_.ring->SuccessorOfHash(pos) == own_.self_index;
    if (static_cast<long>(owner) == own_.self_index || as_successor) {
      // Refused as the HTTP side refuses the route (handler_execute.cc),
      // before anything is counted.
      const long other = as_successor ? static_cast<long>(owner) : own_.ring->SuccessorOfHash(pos);
      if (own_.replicas && own_.refusing && other >= 0 && own_.refusing(other, as_successor)) {
        out->status = Status::Unavailable("descriptor " + std::to_string(i + 1) + ": the other holder of its route (" +
                                          own_.ring->shards()[static_cast<size_t>(other)].name +
                                          ") does not take its changes now (replicas); ask again shortly");
        out->statuses.clear();
        return false;
      }
      continue;
    }
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
  out->passed.clear();
  out->global_shadowed = false;
  out->unknown_domain = false;
  const size_t n = req.descriptors.size();
  if (!FindLimits(req, out) || !rules_) return;
  DropReplaced(n);
  if (!MakeKeys(req, out)) return;
  // Before anything is counted: a refused call leaves no count behind.
  if (!CheckOwnership(req, out)) return;
  // One bound for the engine and the metrics alike: the engine counts at
  // most 2^31-1 per call (kMaxUses).
  hits_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const RlsDescriptor& d = req.descriptors[i];
    hits_[i] = std::min<uint64_t>(d.has_hits ? d.hits : req.hits, static_cast<uint64_t>(kMaxUses));
  }
  if (settings_.stop_increment && !StopIncrement(req, out)) return;
  uint32_t failed_rate_limit = 0, failed_quota = 0, total_quota = 0;
  uint32_t min_remaining = std::numeric_limits<uint32_t>::max();
  for (size_t i = 0; i < n; ++i) {
    RlsStatus& st = out->statuses[i];
    if (EnvoyRules::IsUnlimited(found_[i])) {
      st.remaining = std::numeric_limits<uint32_t>::max();
      continue;
    }
    if (found_[i] < 0) {
      out->passed.push_back(static_cast<uint32_t>(i));
      continue;
    }
    if (!Count(req, i, out)) return;
    // The headers' descriptor, as upstream picks it.
    if (st.remaining < min_remaining) {
      min_remaining = st.remaining;
      out->tightest = static_cast<int32_t>(i);
    }
    if (st.code == Code::kOverLimit) {
      if (st.quota) {
        ++failed_quota;
      } else {
        ++failed_rate_limit;
        out->tightest = static_cast<int32_t>(i);
        min_remaining = 0;
      }
    } else {
      out->passed.push_back(static_cast<uint32_t>(i));
    }
    if (st.quota) ++total_quota;
  }
  if (failed_rate_limit > 0 || (total_quota > 0 && total_quota == failed_quota)) out->overall = Code::kOverLimit;
  // SHADOW_MODE: the statuses as they are, the overall code OK.
  if (out->overall == Code::kOverLimit && settings_.global_shadow) {
    out->overall = Code::kOk;
    out->global_shadowed = true;
  }
}

bool RateLimitService::FindLimits(const RlsRequest& req, RlsAnswer* out) {
  const size_t n = req.descriptors.size();
  // As envoyproxy/ratelimit (service/ratelimit.go): an empty list is an
  // error, not an empty answer.
  if (n == 0) {
    out->status = Status::InvalidArgument("rate limit descriptor list must not be empty");
    return false;
  }
  // Each descriptor is a store operation: the work of one call is bounded.
  if (n > max_descriptors_) {
    out->status = Status::InvalidArgument(std::to_string(n) + " descriptors in one call; at most " +
                                          std::to_string(max_descriptors_) + " are answered");
    return false;
  }
  out->statuses.assign(n, RlsStatus{});
  found_.assign(n, EnvoyRules::kNoLimit);
  if (match_.size() < n) match_.resize(n);
  out->unknown_domain = !rules_ || !rules_->HasDomain(req.domain);
  if (!rules_) {
    for (uint32_t i = 0; i < n; ++i) out->passed.push_back(i);
    return true;
  }
  for (size_t i = 0; i < n; ++i) {
    const RlsDescriptor& d = req.descriptors[i];
    found_[i] = rules_->Find(req.domain, d.entries, &scratch_, &match_[i]);
    // The descriptor's own limit wins over the configuration's, in a
    // configured domain only (envoyproxy/ratelimit's GetLimit, which
    // answers an unknown domain before it reads the limit).
    if (!d.has_limit || out->unknown_domain) continue;
    Unit u;
    if (!UnitFromNumber(d.limit_unit, &u)) {
      out->status = Status::InvalidArgument("descriptor " + std::to_string(i + 1) + ": limit unit " +
                                            std::to_string(d.limit_unit) + " is not SECOND..WEEK (1..7)");
      out->statuses.clear();
      return false;
    }
    found_[i] = rules_->OverrideLimit(u);
    match_[i].Clear(d.entries.size());
    out->statuses[i].own = Limit{u, d.limit_rpu};
  }
  return true;
}

void RateLimitService::DropReplaced(size_t n) {
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
  if (replaced_.empty()) return;
  for (size_t i = 0; i < n; ++i) {
    // An unlimited limit is not dropped (upstream drops only the limits it
    // still checks).
    const std::string* name = found_[i] >= 0 ? &rules_->limits()[static_cast<size_t>(found_[i])].name : nullptr;
    if (name && !name->empty() && replaced_.count(*name)) found_[i] = EnvoyRules::kNoLimit;
  }
}

bool RateLimitService::MakeKeys(const RlsRequest& req, RlsAnswer* out) {
  // Every counter key made and checked before anything is counted: a call
  // is refused whole or answered whole (a store error aside).
  const size_t n = req.descriptors.size();
  if (keys_.size() < n) keys_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (found_[i] < 0) continue;
    const CompiledLimit& l = rules_->limits()[static_cast<size_t>(found_[i])];
    std::span<const Entry> entries = req.descriptors[i].entries;
    const MatchInfo& m = match_[i];
    bool shared = false;
    for (std::string_view p : m.share) shared = shared || !p.empty();
    if (shared) {
      // share_threshold: the wildcard's pattern stands for every value it
      // matches, so they all count in one counter.
      shared_entries_.assign(entries.begin(), entries.end());
      for (size_t k = 0; k < shared_entries_.size() && k < m.share.size(); ++k)
        if (!m.share[k].empty()) shared_entries_[k].value = m.share[k];
      entries = shared_entries_;
    }
    CounterKey(entries, &keys_[i], l.is_override ? req.domain : std::string_view());
    // CounterKey escapes whatever the store refuses; this only guards it,
    // with the check that reads 8 bytes a step (the per-character one, 450
    // instructions a call, only says why).
    if (!KeyIsValid(keys_[i])) {
      out->status = Status::InvalidArgument("descriptor " + std::to_string(i + 1) + ": " + ValidateKeyBytes(keys_[i]));
      out->statuses.clear();
      return false;
    }
  }
  return true;
}

bool RateLimitService::StopIncrement(const RlsRequest& req, RlsAnswer* out) {
  // As envoyproxy/ratelimit does it: every counter read first; when any
  // descriptor would go past its limit, only those that would are counted
  // (the others' hits are not).
  const size_t n = req.descriptors.size();
  bool any = false;
  std::vector<bool> would(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (found_[i] < 0 || hits_[i] == 0 || req.descriptors[i].negative) continue;
    const CompiledLimit& l = rules_->limits()[static_cast<size_t>(found_[i])];
    // An in-flight limit takes a place or notes a denial, always: its
    // give-back comes whatever this call answers.
    if (l.limit.concurrent()) continue;
    Request r;
    r.biz = l.biz;
    r.key = keys_[i];
    // Read as an admin's get: a read of stop_increment_when_over is no
    // decision, and counted as a query it doubled every call in the daily
    // statistics and every denial in frsctl top --denied.
    r.cmd = Cmd::kGet;
    Decision dec = engine_->Execute(r);
    if (!dec.ok()) {
      out->status = dec.status;
      return false;
    }
    const uint64_t limit = l.is_override ? out->statuses[i].own.requests_per_unit : l.limit.requests_per_unit;
    would[i] = static_cast<uint64_t>(dec.rules[0].count) + hits_[i] > limit;
    any = any || would[i];
  }
  if (any)
    for (size_t i = 0; i < n; ++i)
      if (!would[i] && !req.descriptors[i].negative &&
          !(found_[i] >= 0 && rules_->limits()[static_cast<size_t>(found_[i])].limit.concurrent()))
        hits_[i] = 0;
  return true;
}

bool RateLimitService::Count(const RlsRequest& req, size_t i, RlsAnswer* out) {
  RlsStatus& st = out->statuses[i];
  const RlsDescriptor& d = req.descriptors[i];
  const CompiledLimit& l = rules_->limits()[static_cast<size_t>(found_[i])];
  st.has_limit = true;
  st.limit = &l;
  const Limit& lim = st.limit_value();
  st.hits = std::min<uint64_t>(d.has_hits ? d.hits : req.hits, static_cast<uint64_t>(kMaxUses));
  const uint64_t applied = hits_[i];
  const int64_t limit = lim.requests_per_unit;
  st.negative = d.negative && applied > 0;
  Decision dec;
  bool denied = false;  // unit: concurrent: no place taken
  if (lim.concurrent()) {
    dec = DecideConcurrent(l, keys_[i], applied, d.negative, &st);
    denied = applied > 0 && !d.negative && !st.lease_granted;
  } else if (st.negative) {
    // is_negative_hits, as envoyproxy/ratelimit takes it: the count
    // lowered by the hits, never below 0, and the answer OK.
    dec = Give(l.biz, keys_[i], applied);
  } else {
    Request r;
    r.biz = l.biz;
    r.key = keys_[i];
    // Every hit is counted (an update), past the limit too, as upstream's
    // counter counts them; a look (0) only reads.
    r.cmd = applied == 0 ? Cmd::kQuery : Cmd::kUpdate;
    // A look (hits_addend 0) is no hit, as in upstream's stats; a hit that
    // stop-increment left uncounted still is one (the series count it).
    r.uncounted = st.hits == 0;
    r.n = static_cast<int64_t>(std::max<uint64_t>(applied, 1));
    // The call's own limit: its biz never denies, its statistics must.
    if (l.is_override) r.stats_limit = lim.requests_per_unit;
    engine_->ExecuteInto(r, &dec);  // in place: no copy of the answer
  }
  if (!dec.ok()) {
    // Descriptors before this one stay counted, as envoyproxy/ratelimit's
    // Redis pipeline leaves them (docs/integrations.md).
    out->status = dec.status;
    return false;
  }
  const RuleResult& rule = dec.rules[0];
  st.until_reset_s = std::max<int64_t>(0, rule.reset - dec.now_s);
  // The count after this call (an update re-reads its rule, node_op.cc).
  const int64_t count = rule.count;
  st.after = count;
  // An in-flight limit's denial took no place: the count is as it was.
  // An update's count before it is the engine's: past 2^32 - 1 - hits the
  // count stops at the top, and count - hits split a saturated call's hits
  // wrongly (found from outside: 1 over_limit of 2,147,483,647).
  st.before = st.negative                  ? count + dec.given_back
              : lim.concurrent() && denied ? count
              : applied == 0               ? count
                                           : std::clamp<int64_t>(rule.before, 0, count);
  st.near_threshold = static_cast<uint64_t>(
      std::floor(static_cast<double>(static_cast<float>(limit) * static_cast<float>(settings_.near_limit_ratio))));
  // Past the limit, not at it: a look at a key exactly at its limit is OK,
  // as upstream answers (base_limiter.go: after > limit). A give-back is
  // never over; an in-flight limit is over when it took no place.
  // A window's count stops at 2^32-1, where a limit of 2^32-1 could never
  // be passed: a count at that top is taken for past it (the hit that lands
  // exactly on it is denied, one hit before upstream; any other reading
  // would grant without end).
  const bool over = lim.concurrent() ? denied : !st.negative && (count > limit || count >= int64_t{UINT32_MAX});
  st.remaining = over || count >= limit ? 0 : static_cast<uint32_t>(limit - count);
  st.quota = settings_.global_quota || l.quota_mode;
  if (over) {
    if (l.shadow_mode) {
      st.shadow_over = true;
    } else {
      st.over = true;
      st.code = Code::kOverLimit;
    }
  } else if (applied > 0 && !st.negative && static_cast<uint64_t>(count) > st.near_threshold) {
    st.near = true;
  }
  // The per-key metric label: detailed_metric's counter key, else the
  // value_to_metric path where it differs from the configured one.
  if (l.detailed_metric) st.metric_key = keys_[i];
  else if (match_[i].metric_path_changed) st.metric_key = match_[i].metric_path;
  return true;
}

Decision RateLimitService::Give(std::string_view biz, std::string_view key, uint64_t n) {
  Request r;
  r.biz = biz;
  r.key = key;
  r.cmd = Cmd::kRelease;
  r.give_back = true;
  r.n = static_cast<int64_t>(std::clamp<uint64_t>(n, 1, static_cast<uint64_t>(kMaxUses)));
  r.serial_half = HalfOf(std::string(key));  // which leases it ends first (Concurrency::SetCount)
  return engine_->Execute(r);
}

// Which serials this shard's grants on `key` draw: a replicated route's two
// holders both grant (Envoy's calls spread over both), each from its half,
// as the HTTP side's (frs/decision.h). Their ids are never given to Envoy,
// but a give-back ends leases by serial on the other holder too: from one
// sequence it ended the other holder's client's lease there.
SerialHalf RateLimitService::HalfOf(const std::string& key) const {
  if (!own_.ring || !own_.replicas) return SerialHalf::kAll;
  const uint32_t pos = Ring::HashRoute(Ring::RouteOf(key, {}));
  return static_cast<long>(own_.ring->OwnerOfHash(pos)) == own_.self_index ? SerialHalf::kOdd : SerialHalf::kEven;
}

Decision RateLimitService::DecideConcurrent(const CompiledLimit& l, const std::string& key, uint64_t applied,
                                            bool negative, RlsStatus* st) {
  Request r;
  r.biz = l.biz;
  r.key = key;
  r.cmd = Cmd::kQuery;
  r.serial_half = HalfOf(key);
  r.uncounted = st->hits == 0;  // a look
  if (applied == 0) return engine_->Execute(r);
  // Where this key's denials wait for their give-back (EnvoyRules::
  // PendingLimit): the limit's biz name leads the key, so two limits never
  // share a count.
  const int32_t pending = rules_->PendingLimit();
  std::string_view pending_biz;
  if (pending >= 0) pending_biz = rules_->limits()[static_cast<size_t>(pending)].biz;
  const Entry e{l.biz, key};
  CounterKey(std::span<const Entry>(&e, 1), &pending_key_);
  if (!negative) {
    // Any hits take one place: a request is in flight or not.
    r.cmd = Cmd::kAcquire;
    Decision d = engine_->Execute(r);
    if (!d.ok()) return d;
    st->lease_granted = d.lease_serial != 0;
    st->leases_expired = d.leases_expired;
    if (st->lease_granted || pending < 0) return d;
    // Denied (or, in shadow mode, no place free): Envoy still sends this
    // request's give-back when its stream ends, and that must end no
    // other request's lease. Noted here, it is taken first.
    Request p;
    p.biz = pending_biz;
    p.key = pending_key_;
    p.cmd = Cmd::kUpdate;
    Decision pd = engine_->Execute(p);
    return pd.ok() ? d : pd;
  }
  // A give-back: the key's noted denials first, then its leases, those
  // that expire first (the oldest), whoever holds them: Envoy carries no
  // lease id (docs/integrations.md). On a replicated route, this holder's
  // half's first, else the other half's that expire last (HalfOf).
  uint64_t left = applied;
  if (pending >= 0) {
    Decision pd = Give(pending_biz, pending_key_, left);
    if (!pd.ok()) return pd;
    left -= std::min<uint64_t>(left, static_cast<uint64_t>(pd.given_back));
  }
  // Only noted denials ended: the key as it stands, read without counting
  // (a give-back is no decision; as a query on a full key it counted a
  // denial).
  if (left == 0) {
    r.cmd = Cmd::kGet;
    return engine_->Execute(r);
  }
  Decision d = Give(l.biz, key, left);
  if (!d.ok()) return d;
  st->leases_given_back = static_cast<uint32_t>(d.given_back);
  st->leases_expired = d.leases_expired;
  d.given_back = static_cast<int64_t>(applied - left) + d.given_back;
  return d;
}

}  // namespace frs::envoy
