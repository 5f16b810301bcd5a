#include "server/handler.h"

#include <algorithm>
#include <cstring>

namespace frs::server {

std::string_view Handler::BizName(const WireRequest& r, uint16_t id) {
  // A name is never all digits (map.xml refuses it): anything else sent is the name.
  if (!r.biz.empty() && r.biz.find_first_not_of("0123456789") != std::string_view::npos) return r.biz;
  const BizInfo* b = BizOf(id);
  return b != nullptr ? std::string_view(b->name) : r.biz;
}

void Handler::LoadBizzes() {
  bizzes_.clear();
  for (BizInfo& b : engine_->Bizzes()) {
    if (b.id >= bizzes_.size()) bizzes_.resize(size_t{b.id} + 1);
    bizzes_[b.id] = std::move(b);
  }
  bizzes_loaded_ = true;
}

void Handler::LogDecision(const WireRequest& r, const Decision& d) {
  DecisionRecord rec;
  rec.ts_ms = clock_->NowMs();
  rec.biz = BizName(r, d.biz_id);
  rec.key = r.key;
  if (const BizInfo* b = BizOf(d.biz_id); b != nullptr) {
    rec.fields = b->fields;
    rec.separator = b->separator;
  }
  const RuleResult& top = d.rules[d.top < d.nrules ? d.top : 0];
  rec.rule = std::string_view(top.name, strnlen(top.name, sizeof top.name));
  // Shadow mode answers allowed; the line says what enforce mode would have.
  const bool shadow_denied = d.shadow && d.would_deny;
  rec.allowed = d.allowed && !shadow_denied;
  rec.shadow = shadow_denied;
  rec.reservations_full = d.reservations_full;
  rec.n = r.n;
  rec.count = d.count;
  rec.limit = d.limit;
  rec.remaining = d.remaining;
  rec.retry_after = shadow_denied ? top.retry_after : d.retry_after;
  // A full reservation table denies with no rule past its limit: enforce
  // mode's wait is the table's, until its first reservation ends.
  if (shadow_denied && d.reservations_full && rec.retry_after == 0 && d.res_expires > 0)
    rec.retry_after = std::max<int64_t>(1, d.res_expires - rec.ts_ms / 1000);
  // What the request was (or, on a lone server, would be) routed by: the
  // ?route= of POST /frs, else the request's route, else the key's hash tag,
  // else the key (a GET's as sent, still %-encoded).
  rec.route = Ring::RouteOf(r.route_key.empty() ? r.key : r.route_key, route_param_.empty() ? r.route : route_param_);
  rec.client = peer_;
  decision_log_->Record(rec);
}

}  // namespace frs::server
