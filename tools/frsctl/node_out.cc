// frsctl/node_out.cc: NodeView rendering shared by the node commands.
#include "node_out.h"

#include <algorithm>
#include <cstdio>

#include "format.h"

namespace frs::ctl {

std::string RuleSummary(const RuleView& r) {
  if (r.algo == Algo::kConcurrency)
    return "concurrency, max " + std::to_string(r.max) + (r.max == 1 ? " lease" : " leases") + " of " +
           std::to_string(r.interval) + " s";
  std::string s = std::string(AlgoName(r.algo)) + " " + std::to_string(r.interval) + " s";
  // A calendar rule's windows are its zone's days: Kolkata's day ends at
  // 18:30 UTC, which the window alone leaves the reader to work out.
  if (r.algo == Algo::kCalendar && !r.zone.empty()) s += r.zone == "epoch" ? " from the epoch" : " in " + r.zone;
  s += ", max " + std::to_string(r.max);
  if (r.algo == Algo::kTokenBucket && r.burst != 0 && r.burst != r.max) s += ", burst " + std::to_string(r.burst);
  if (r.borrow != 0) s += ", borrow " + std::to_string(r.borrow);
  return s;
}

std::string WindowText(const RuleView& r) {
  if (r.window_start_ms == 0 && r.window_end_ms == 0) return "";
  if (r.algo == Algo::kSliding) return "the last " + Duration(r.interval);
  return LocalTime(r.window_start_ms) + " .. " + LocalTime(r.window_end_ms);
}

std::string Position(const NodeInfo& n) {
  std::string s = "file " + std::to_string(n.file) + ", key-node " + std::to_string(n.keynode) + ", slot " +
                  std::to_string(n.slot) + ", span " + std::to_string(n.span);
  if (n.in_alternate) s += " (alternate key-node)";
  return s;
}

void RuleJson(const RuleView& r, JsonOut& j) {
  j.BeginObject();
  j.Key("name").String(r.name);
  j.Key("algo").String(AlgoName(r.algo));
  j.Key("interval").Uint(r.interval);
  if (r.algo == Algo::kCalendar) j.Key("zone").String(r.zone);
  j.Key("max").Int(r.max);
  if (r.algo == Algo::kTokenBucket) j.Key("burst").Int(r.burst);
  j.Key("borrow").Int(r.borrow);
  j.Key("count").Int(r.count);
  j.Key("limit").Int(r.limit);
  j.Key("remaining").Int(r.remaining);
  j.Key("window_start_ms").Int(r.window_start_ms);
  j.Key("window_end_ms").Int(r.window_end_ms);
  j.Key("debt").Int(r.debt);
  if (r.algo == Algo::kTokenBucket) j.Key("tokens").Double(r.tokens);
  j.Key("denies").Bool(r.denies);
  j.Key("next_allowed_ms").Int(r.next_allowed_ms);
  j.EndObject();
}

static void PositionMembers(const NodeInfo& n, JsonOut& j) {
  j.Key("file").Uint(n.file);
  j.Key("keynode").Uint(n.keynode);
  j.Key("slot").Uint(n.slot);
  j.Key("span").Uint(n.span);
  j.Key("compact").Bool(n.compact);
  char fp[17];
  std::snprintf(fp, sizeof fp, "%016llx", static_cast<unsigned long long>(n.fp.lo));
  j.Key("fp").String(fp);
  j.Key("alternate").Bool(n.in_alternate);
  j.Key("expire_s").Uint(n.expire_s);
  j.Key("last_access_s").Uint(n.last_access_s);
}

void NodeMembers(const NodeView& v, JsonOut& j) {
  j.Key("biz").String(v.biz_name);
  j.Key("biz_id").Uint(v.biz_id);
  j.Key("key").String(v.key);
  j.Key("key_truncated").Bool(v.key_truncated);
  j.Key("key_kept").Bool(v.key_kept);
  j.Key("mode").String(ModeName(v.mode));
  j.Key("count").Int(v.count);
  j.Key("rules").BeginArray();
  for (const RuleView& r : v.rules) RuleJson(r, j);
  j.EndArray();
  if (!v.leases.empty() ||
      std::any_of(v.rules.begin(), v.rules.end(), [](const RuleView& r) { return r.algo == Algo::kConcurrency; })) {
    // Held now: the ids release them (GET /release?...&lease=ID).
    j.Key("leases").BeginArray();
    for (const LeaseView& l : v.leases) {
      j.BeginObject();
      j.Key("serial").Uint(l.serial);
      j.Key("id").String(l.id);
      j.Key("expires_s").Int(l.expires_s);
      if (l.other_series) j.Key("other_series").Bool(true);
      j.EndObject();
    }
    j.EndArray();
  }
  if (!v.reservations.empty()) {
    // Held now, their estimates counted: the ids settle them (GET /settle?...&reservation=ID&n=REAL).
    j.Key("reservations").BeginArray();
    for (const ReservationView& r : v.reservations) {
      j.BeginObject();
      j.Key("serial").Uint(r.serial);
      j.Key("id").String(r.id);
      j.Key("estimate").Int(r.estimate);
      j.Key("taken_s").Int(r.taken_s);
      j.Key("expires_s").Int(r.expires_s);
      j.EndObject();
    }
    j.EndArray();
  }
  PositionMembers(v.node, j);
}

namespace {

// Whether this run said that ids are unknown (SayIdsUnknown).
bool g_ids_unknown_said = false;

// An id left empty for a node whose key is known whole: the engine keys no
// id, the store's lease.key being missing or unreadable (frsctl makes none
// beside a store that served). Said once a run, on standard error: the lines keep their
// form.
void SayIdsUnknown(const NodeView& v, const std::string& id) {
  if (g_ids_unknown_said || !id.empty() || !v.key_kept || v.key_truncated) return;
  g_ids_unknown_said = true;
  std::fprintf(stderr,
               "frsctl: no lease.key could be read for this store (missing, or what the line above says): lease and "
               "reservation ids are shown by serial (#N); a missing key is made new at frsd's next start (every id "
               "given out before then answers 409), a damaged one stops that start until it is put back\n");
}

// Leases or reservations in the order they end (the node keeps them by place).
template <typename View>
std::vector<const View*> ByExpiry(const std::vector<View>& views) {
  std::vector<const View*> out;
  for (const View& x : views) out.push_back(&x);
  std::stable_sort(out.begin(), out.end(), [](const View* a, const View* b) { return a->expires_s < b->expires_s; });
  return out;
}

}  // namespace

void ResetRunNotes() { g_ids_unknown_said = false; }

void PrintLeases(const NodeView& v, int64_t now_ms) {
  for (const LeaseView* lp : ByExpiry(v.leases)) {
    const LeaseView& l = *lp;
    if (!l.other_series) SayIdsUnknown(v, l.id);
    // Another holder's (its own nonce): released there, no id of this node's.
    const std::string id = l.other_series ? "of the other holder's series"
                           : l.id.empty() ? "#" + std::to_string(l.serial)
                                          : l.id;
    std::printf("  lease %s held, expires %s\n", id.c_str(), When(l.expires_s * 1000, now_ms).c_str());
  }
}

void PrintReservations(const NodeView& v, int64_t now_ms) {
  for (const ReservationView* rp : ByExpiry(v.reservations)) {
    const ReservationView& r = *rp;
    SayIdsUnknown(v, r.id);
    const std::string id = r.id.empty() ? "#" + std::to_string(r.serial) : r.id;
    std::printf("  reservation %s holds %lld, taken %s, expires %s\n", id.c_str(), static_cast<long long>(r.estimate),
                When(r.taken_s * 1000, now_ms).c_str(), When(r.expires_s * 1000, now_ms).c_str());
  }
}

void RawNodeMembers(const NodeInfo& n, JsonOut& j) {
  j.Key("biz").Null();
  j.Key("biz_id").Uint(n.biz);
  j.Key("key").String(n.key);
  j.Key("key_truncated").Bool(n.key.size() < n.key_len);
  j.Key("key_kept").Bool(n.key_len != 0 || !n.key.empty());
  PositionMembers(n, j);
}

}  // namespace frs::ctl
