#include "server/envoy_metrics.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

#include "frs/json_writer.h"
#include "frs/percent_encode.h"
#include "server/clock_util.h"
#include "server/logger.h"

namespace frs::server {

static_assert(kFirstEnvoyDescriptorId == envoy::kFirstEnvoyBizId && kEnvoyDescriptorIds == envoy::kEnvoyBizIds,
              "the metrics region is indexed by the ids envoy_rules.h gives descriptors");

namespace {

constexpr const char* kResultNames[kEnvoyResults] = {"total", "over_limit", "near_limit", "within_limit",
                                                     "shadow_mode"};
using Counts = std::array<uint64_t, kEnvoyResults>;

// What one status adds to each result, as envoyproxy/ratelimit's
// base_limiter.go counts them from the count before and after the hits:
// over_limit the hits past the limit (all of them when the count already
// was), near_limit those between the near threshold and the limit.
Counts HitsOf(const envoy::RlsStatus& st) {
  Counts c{};
  // unit: concurrent takes one place whatever hits_addend says: one hit.
  const uint64_t hits = st.limit_value().concurrent() ? std::min<uint64_t>(st.hits, 1) : st.hits;
  c[static_cast<size_t>(EnvoyResult::kTotal)] = hits;
  // A count stops at 2^32-1 and a count there is past a limit of 2^32-1
  // (rate_limit_service.cc): for the split, that limit is one lower, so
  // that a hit landing on the top is over, not near as well.
  const uint64_t limit = std::min<uint64_t>(st.limit_value().requests_per_unit, uint64_t{UINT32_MAX} - 1);
  const auto before = static_cast<uint64_t>(st.before), after = static_cast<uint64_t>(st.after);
  const uint64_t near = st.near_threshold;
  if (st.over || st.shadow_over) {
    // An over answer that counted nothing (stop_increment_when_over, a
    // denial of hits that were not recorded) is all past the limit.
    const uint64_t past = before >= limit || after <= limit ? hits : std::min(hits, after - limit);
    c[static_cast<size_t>(EnvoyResult::kOverLimit)] = past;
    if (before < limit) c[static_cast<size_t>(EnvoyResult::kNearLimit)] = limit - std::max(near, before);
    if (st.shadow_over) c[static_cast<size_t>(EnvoyResult::kShadowMode)] = past;
    return c;
  }
  c[static_cast<size_t>(EnvoyResult::kWithinLimit)] = hits;
  if (after > near) c[static_cast<size_t>(EnvoyResult::kNearLimit)] = before >= near ? hits : after - near;
  return c;
}

void Add(uint64_t (&to)[kEnvoyResults], const Counts& c) {
  for (size_t r = 0; r < kEnvoyResults; ++r)
    if (c[r] != 0) CounterAdd(to[r], c[r]);
}

// The label text of a counter key: printable ASCII but for '_' in place of
// anything else (a label value must be UTF-8, and a key may hold any byte);
// past kDetailedKeyBytes - 17 a prefix of that length, '~' and the hash of
// the whole (kDetailedKeyBytes in all).
void LabelOf(std::string_view key, std::string* out) {
  out->clear();
  // Cut past the prefix's length, not past the slot's: a cut label is then
  // longer than any uncut one, and no key can be written to equal another's
  // prefix and hash (a 120-byte key ending in "~" and 16 hex digits did).
  const bool cut = key.size() > kDetailedKeyBytes - 17;
  const std::string_view kept = cut ? key.substr(0, kDetailedKeyBytes - 17) : key;
  for (char c : kept) out->push_back(c >= 0x20 && c < 0x7f ? c : '_');
  if (cut) {
    char hex[18];
    std::snprintf(hex, sizeof hex, "~%016zx", std::hash<std::string_view>{}(key));
    out->append(hex);
  }
}

void Series(std::string* out, const char* name, const envoy::CompiledLimit& l, const std::string* key, size_t r,
            uint64_t v) {
  out->append(name).append("{domain=\"");
  AppendLabelValue(out, l.domain);
  out->append("\",descriptor=\"");
  AppendLabelValue(out, l.path);
  if (key) {
    out->append("\",key=\"");
    AppendLabelValue(out, *key);
  }
  out->append("\",result=\"").append(kResultNames[r]).append("\"} ");
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, res.ptr).append("\n");
}

}  // namespace

void EnvoyMetrics::IndexPublished() {
  indexed_ = true;
  constexpr size_t kMask = 2 * kDetailedKeys - 1;
  for (size_t i = 0; i < kDetailedKeys; ++i) {
    const uint64_t h = std::atomic_ref<uint64_t>(c_->detailed[i].published).load(std::memory_order_acquire);
    if (h == 0) continue;
    size_t at = h & kMask;
    while (index_[at] != 0) at = (at + 1) & kMask;
    index_[at] = static_cast<uint16_t>(i + 1);
    claimed_ = i + 1;  // a predecessor claimed in order too: what follows is free
  }
}

DetailedKeySlot* EnvoyMetrics::Slot(uint16_t biz_id, std::string_view key) {
  if (!indexed_) IndexPublished();
  // Never 0: 0 marks a free slot.
  const uint64_t h = (std::hash<std::string_view>{}(key) ^ (uint64_t{biz_id} * 0x9E3779B97F4A7C15ull)) | 1;
  constexpr size_t kMask = 2 * kDetailedKeys - 1;
  size_t at = h & kMask;
  // At most half full: an empty entry ends every search within a few steps.
  for (; index_[at] != 0; at = (at + 1) & kMask) {
    DetailedKeySlot& s = c_->detailed[index_[at] - 1];
    if (s.published == h && s.biz_id == biz_id && std::string_view(s.key, s.len) == key) return &s;
  }
  if (claimed_ == kDetailedKeys) return nullptr;
  DetailedKeySlot& s = c_->detailed[claimed_];
  // This worker is the slot's only writer: its own stores need no order.
  s.biz_id = biz_id;
  s.len = static_cast<uint16_t>(key.size());
  std::memcpy(s.key, key.data(), key.size());
  // Readers in other workers see the key whole once they see this.
  std::atomic_ref<uint64_t>(s.published).store(h, std::memory_order_release);
  index_[at] = static_cast<uint16_t>(++claimed_);
  return &s;
}

void EnvoyMetrics::Count(const envoy::RlsRequest& req, const envoy::RlsAnswer& a) {
  if (!c_) return;
  if (a.misrouted != 0) CounterAdd(c_->misrouted, a.misrouted);
  CounterAdd(c_->envoy_calls[!a.status.ok()                         ? kEnvoyCallError
                             : a.overall == envoy::Code::kOverLimit ? kEnvoyCallOverLimit
                                                                    : kEnvoyCallOk]);
  if (!a.status.ok()) return;
  if (a.unknown_domain) NoteUnknownDomain(req.domain);
  for (size_t i = 0; i < a.statuses.size() && i < req.descriptors.size(); ++i) {
    const envoy::RlsStatus& st = a.statuses[i];
    if (!st.has_limit || st.limit == nullptr) continue;
    const uint16_t biz = st.limit->biz_id;
    // Each limited descriptor is a decision of its biz, as an update of the
    // HTTP side is (frs_biz_*_total): denied when over its limit, unless a
    // shadow mode (its own, or SHADOW_MODE's for the whole answer) let it
    // through. A give-back decides nothing.
    if (!st.negative) {
      const bool shadowed = st.shadow_over || (st.over && a.global_shadowed);
      // quota_mode: over its limit, but the answer stays OK unless every
      // quota descriptor of the call is over: let through, not denied.
      const bool quota_through = st.over && st.quota && a.overall == envoy::Code::kOk;
      const bool denied = st.over && !shadowed && !quota_through;
      CounterAdd(denied ? c_->biz_denied[biz] : c_->biz_allowed[biz]);
      if (shadowed) CounterAdd(c_->biz_shadow_denied[biz]);
      // Its biz's one rule, by the same verdict (frs_rule_decisions_total
      // counts every decision of a biz, an Envoy descriptor's too).
      const RuleResultLabel rule = denied     ? RuleResultLabel::kDenied
                                   : shadowed ? RuleResultLabel::kShadowDenied
                                              : RuleResultLabel::kAllowed;
      CounterAdd(c_->rule_decisions[biz][0][static_cast<size_t>(rule)]);
    }
    if (st.hits == 0) continue;
    // unit: concurrent's leases count as /acquire's and /release's do.
    if (st.lease_granted) CounterAdd(c_->leases_granted[biz]);
    if (st.leases_given_back != 0) CounterAdd(c_->leases_released[biz], st.leases_given_back);
    if (st.leases_expired != 0) CounterAdd(c_->leases_expired[biz], st.leases_expired);
    // A give-back is not a hit (envoyproxy/ratelimit counts it apart).
    if (st.negative) continue;
    const uint32_t idx = st.limit->biz_id - kFirstEnvoyDescriptorId;
    if (st.limit->biz_id < kFirstEnvoyDescriptorId || idx >= kEnvoyDescriptorIds) continue;
    const Counts hits = HitsOf(st);
    Add(c_->envoy_descriptor[idx], hits);
    if (st.metric_key.empty()) continue;
    LabelOf(st.metric_key, &label_);
    if (DetailedKeySlot* s = Slot(st.limit->biz_id, label_)) Add(s->counts, hits);
    else Add(c_->detailed_other[idx], hits);
  }
}

namespace {
// A domain as the log shows it, in quotes: a byte that is not UTF-8, a
// control character, '%', '"' and '\\' written %XX, as Envoy's keys are
// (integrations.md); JSON's \u00ff named a character the client never sent.
constexpr PercentTable kShownDomain(' ', '~', "%\"\\", PercentHigh::kKeyChars);
void AppendShownDomain(std::string_view d, std::string* out) {
  out->push_back('"');
  AppendPercentEncoded(d, kShownDomain, out);
  out->push_back('"');
}
}  // namespace

void EnvoyMetrics::NoteUnknownDomain(std::string_view domain) {
  CounterAdd(c_->envoy_unknown_domain);
  const std::string_view head = domain.substr(0, 64);
  uint64_t count = 0;
  if (!unknown_domain_log_.Note(MonoNs(), &count)) {
    const auto end = unknown_seen_.begin() + static_cast<long>(unknown_kept_);
    if (std::find(unknown_seen_.begin(), end, head) != end) return;
    if (unknown_kept_ < kUnknownKept) unknown_seen_[unknown_kept_++] = head;
    else unknown_more_ = true;
    return;
  }
  // The domains are the client's text: escaped, and cut short.
  std::string quoted, also;
  AppendShownDomain(head, &quoted);
  for (size_t i = 0; i < unknown_kept_; ++i) {
    if (unknown_seen_[i] == head) continue;
    also += also.empty() ? "; also asked for since: " : ", ";
    AppendShownDomain(unknown_seen_[i], &also);
  }
  if (unknown_more_) also += also.empty() ? "; also asked for since: others" : ", and others";
  unknown_kept_ = 0;
  unknown_more_ = false;
  FRS_LOG(
      "Envoy asked for domain %s%s, which no <grpc config> file names: answered OK with no limit (%llu since "
      "the last such line%s; frs_envoy_unknown_domain_total counts each)",
      quoted.c_str(), domain.size() > 64 ? " (cut)" : "", static_cast<unsigned long long>(count), also.c_str());
}

void CountEnvoyAnswer(EnvoyMetrics* metrics, const envoy::RlsRequest& req, const envoy::RlsAnswer& a) {
  if (metrics) metrics->Count(req, a);
}

void CountEnvoyRefused(EnvoyMetrics* metrics) {
  if (metrics) metrics->CountRefused();
}

void RenderEnvoyMetrics(const Metrics& metrics, const envoy::EnvoyRules& rules, std::string* out) {
  const uint32_t workers = metrics.workers();
  static constexpr const char* kName = "frs_envoy_descriptor_hits_total";
  out->append("# HELP ").append(kName).append(
      " Envoy rate limit service: hits (hits_addend) of each rate-limited descriptor, by result: total, over_limit, "
      "near_limit (past 80 % of the limit), within_limit, shadow_mode (over, let through).\n");
  out->append("# TYPE ").append(kName).append(" counter\n");
  bool any_detailed = false;
  for (const envoy::CompiledLimit& l : rules.limits()) {
    const uint32_t idx = l.biz_id - kFirstEnvoyDescriptorId;
    if (l.biz_id < kFirstEnvoyDescriptorId || idx >= kEnvoyDescriptorIds) continue;
    any_detailed = any_detailed || l.detailed_metric || l.value_to_metric;
    for (size_t r = 0; r < kEnvoyResults; ++r) {
      uint64_t sum = 0;
      for (uint32_t w = 0; w < workers; ++w) sum += CounterGet(metrics.worker(w).envoy_descriptor[idx][r]);
      Series(out, kName, l, nullptr, r, sum);
    }
  }
  if (!any_detailed) return;

  static constexpr const char* kDetailed = "frs_envoy_descriptor_detailed_hits_total";
  out->append("# HELP ").append(kDetailed).append(
      " Envoy rate limit service: hits of each counter key of a detailed_metric descriptor, by result (at most 1024 "
      "keys per worker since start; later ones are summed in key=\"~other\").\n");
  out->append("# TYPE ").append(kDetailed).append(" counter\n");
  // Every worker's published slots, by descriptor and key label: two
  // workers that met one key hold one slot each, shown as one series.
  std::map<uint16_t, std::map<std::string, Counts>> by_biz;
  for (uint32_t w = 0; w < workers; ++w) {
    const WorkerCounters& c = metrics.worker(w);
    for (const DetailedKeySlot& s : c.detailed) {
      if (std::atomic_ref<uint64_t>(const_cast<uint64_t&>(s.published)).load(std::memory_order_acquire) == 0) continue;
      const size_t len = std::min<size_t>(s.len, kDetailedKeyBytes);
      Counts& to = by_biz[s.biz_id][std::string(s.key, len)];
      for (size_t r = 0; r < kEnvoyResults; ++r) to[r] += CounterGet(s.counts[r]);
    }
  }
  const std::string other = "~other";
  for (const envoy::CompiledLimit& l : rules.limits()) {
    if (!l.detailed_metric && !l.value_to_metric) continue;
    const uint32_t idx = l.biz_id - kFirstEnvoyDescriptorId;
    if (l.biz_id < kFirstEnvoyDescriptorId || idx >= kEnvoyDescriptorIds) continue;
    if (auto it = by_biz.find(l.biz_id); it != by_biz.end())
      for (const auto& [key, counts] : it->second)
        for (size_t r = 0; r < kEnvoyResults; ++r) Series(out, kDetailed, l, &key, r, counts[r]);
    Counts rest{};
    for (uint32_t w = 0; w < workers; ++w)
      for (size_t r = 0; r < kEnvoyResults; ++r) rest[r] += CounterGet(metrics.worker(w).detailed_other[idx][r]);
    if (rest[0] != 0)
      for (size_t r = 0; r < kEnvoyResults; ++r) Series(out, kDetailed, l, &other, r, rest[r]);
  }
}

}  // namespace frs::server
