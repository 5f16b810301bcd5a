#include "server/handler.h"

#include <string>

#include "frs/store.h"
#include "server/admin_auth.h"
#include "server/clock_util.h"
#include "server/logger.h"
#include "server/replica_metrics.h"

namespace frs::server {

namespace {

std::string Quoted(std::string_view s) {
  return "\"" + std::string(s.substr(0, 64)) + (s.size() > 64 ? "...\"" : "\"");
}

// A member that carries a lease or reservation id, or asks for one: the
// checks of those are the engine's (the decoder sees only their syntax as
// text). Plain members are left out: a batch of 64 queries pays nothing.
bool UsesIds(const WireRequest& r) {
  return r.cmd == Cmd::kRelease || r.cmd == Cmd::kRenew || r.cmd == Cmd::kSettle || r.reserve != 0;
}

}  // namespace

bool Handler::RouteRequests(std::span<WireRequest> reqs, std::string_view route_param, int* status) {
  const ClusterView& c = opts_.cluster;
  if (!c.ring) {
    // A lone server owns every route: members may route apart (as batches
    // did before clusters), each node keeping its own route's position.
    // When the route is the one the key itself implies (no route given, the
    // key as sent is the key), it stays unknown: the store gives a node it
    // creates that very position (StoreImpl::RouteFor), so the CRC-32 of
    // every key (5-7 % of a request) is only computed when a node is made.
    for (WireRequest& r : reqs) {
      if (!IsRouted(r.cmd)) continue;
      const std::string_view route = route_param.empty() ? r.route : route_param;
      if (route.empty() && (r.route_key.empty() || r.route_key == r.key)) continue;
      r.route_pos = Ring::HashRoute(Ring::RouteOf(r.route_key.empty() ? r.key : r.route_key, route));
      r.route_known = true;
    }
    return true;
  }
  std::string_view route;
  size_t first = 0;
  bool any = false;
  for (size_t i = 0; i < reqs.size(); ++i) {
    WireRequest& r = reqs[i];
    if (!IsRouted(r.cmd)) continue;
    std::string_view mine =
        Ring::RouteOf(r.route_key.empty() ? r.key : r.route_key, route_param.empty() ? r.route : route_param);
    if (!any) {
      route = mine;
      first = i;
      any = true;
    } else if (mine != route) {
      ErrorBody(400,
                "batch members route differently: " + Quoted(route) + " (member " + std::to_string(first + 1) +
                    ") and " + Quoted(mine) + " (member " + std::to_string(i + 1) +
                    "); give their keys one {hash tag} or send POST /frs?route=R",
                status);
      return false;
    }
  }
  if (!any) return true;
  const uint32_t pos = Ring::HashRoute(route);
  for (WireRequest& r : reqs) {
    if (!IsRouted(r.cmd)) continue;
    r.route_pos = pos;
    r.route_known = true;
  }
  const size_t owner = c.ring->OwnerOfHash(pos);
  if (c.replicas) {
    // A shard taking back its nodes after an absence answers none of its
    // routes: nginx sends them to their successors meanwhile.
    if (metrics_ != nullptr && CounterGet(metrics_->master().replica.catching_up) != 0) {
      ErrorBody(503, "this shard is taking back its nodes from the other shards after a start; ask again shortly",
                status);
      return false;
    }
    bool as_successor = false;
    const long other = repl_ != nullptr ? repl_->OtherHolder(pos, &as_successor) : -1;
    if (static_cast<long>(owner) == c.self_index || as_successor) {
      if (repl_ != nullptr && repl_->Refusing(other, as_successor)) {
        const std::string& name = c.ring->shards()[static_cast<size_t>(other)].name;
        ErrorBody(503,
                  repl_->IsBehind(other, as_successor)
                      ? "the other holder of this route (" + name +
                            ") served it alone while this shard did not take its uses (a pause, a partition, or the "
                            "two on different shard lists in a ring change), and this shard's copy lacks those uses "
                            "until they arrive; ask again shortly"
                      : "the other holder of this route (" + name +
                            ") does not acknowledge changes (or has not yet taken the backlog it fell behind by), "
                            "and <cluster on_replica_down=\"refuse\">",
                  status);
        return false;
      }
      if (as_successor && counters_) CounterAdd(counters_->replica.served_for_owner);
      // Both holders may grant on one key at once: their leases' and
      // reservations' serials come from halves of the key's (decision.h).
      const SerialHalf half = as_successor ? SerialHalf::kEven : SerialHalf::kOdd;
      for (WireRequest& r : reqs) r.serial_half = half;
      return true;
    }
  }
  if (static_cast<long>(owner) == c.self_index) return true;
  if (counters_) CounterAdd(counters_->misrouted);
  if (!c.enforce) return true;
  const std::string& name = c.ring->shards()[owner].name;
  body_.clear();
  AppendMisrouted(route, name, &body_);
  *status = 421;
  return false;
}

// This shard's replica links for the stats answer, summed over its
// workers (empty without replicas).
ReplicaLinksView Handler::LinksView() const {
  ReplicaLinksView links;
  std::vector<ReplicaPeerView>& peers = links.peers;
  if (!opts_.cluster.ring || !opts_.cluster.replicas || metrics_ == nullptr) return links;
  peers.resize(std::min(opts_.cluster.ring->shards().size(), kMaxReplicaPeers));
  for (size_t i = 0; i < peers.size(); ++i)
    for (uint32_t w = 0; w < metrics_->workers(); ++w) {
      const ReplicaCounters& rc = metrics_->worker(w).replica;
      peers[i].pending += CounterGet(rc.pending[i]) + SpoolHeld(rc, i);
      peers[i].up = peers[i].up && CounterGet(rc.down[i]) == 0 && !SpoolDown(rc, i);
    }
  for (size_t i = 0; i < peers.size(); ++i)
    peers[i].up = peers[i].up && CounterGet(metrics_->master().replica.unreached[i]) == 0;
  links.lag_ms = ReplicaLagMs(*metrics_);  // as frs_replica_lag_seconds
  return links;
}

bool Handler::HandlePost(char* body, size_t len, std::string_view query, std::string_view bearer, CmdLabel* label,
                         int* status) {
  ProtocolError err;
  bool is_batch = false;
  std::string_view route_param;
  if (!DecodePostQuery(query, &route_param, &err)) {
    ErrorBody(err.status, err.msg, status);
    return false;
  }
  route_param_ = route_param;
  if (!decoder_.Decode(body, len, opts_.max_batch, &wire_, &is_batch, &err)) {
    // Counted under what it asked, as a GET form's error is.
    if (is_batch) *label = CmdLabel::kBatch;
    else if (std::optional<Cmd> cmd = decoder_.failed_cmd()) *label = LabelOf(*cmd);
    ErrorBody(err.status, err.msg, status);
    return false;
  }
  *label = is_batch ? CmdLabel::kBatch : LabelOf(wire_[0].cmd);
  size_t merges = 0;
  for (const WireRequest& r : wire_) merges += r.cmd == Cmd::kMerge;
  if (merges != 0 && merges != wire_.size()) {
    ErrorBody(400, "cmd=\"merge\" cannot share a batch with other commands", status);
    return false;
  }
  // Authorization and biz resolution first, for every member: a refused
  // or unknown member fails the whole request before anything executes.
  // Members mostly share their biz: each run of one name is looked up once.
  std::string_view known_biz;
  bool have_known = false;
  for (size_t i = 0; i < wire_.size(); ++i) {
    const WireRequest& r = wire_[i];
    if (IsAdmin(r.cmd)) {
      // Its own token attribute, else the request's Authorization: Bearer
      // (as /stats and /replicate take it): one that names a wrong token is
      // refused whatever the header says.
      AdminAuth a = CheckAdminToken(opts_.admin_token, r.token.empty() ? bearer : r.token);
      if (a != AdminAuth::kOk) {
        std::string msg =
            a == AdminAuth::kDisabled
                ? std::string("admin commands are disabled: srv.xml sets no <admin token>")
                : std::string("cmd=\"") + CmdName(r.cmd) + "\" needs the admin token, and it is missing or wrong";
        if (is_batch) msg = "batch member " + std::to_string(i + 1) + ": " + msg;
        ErrorBody(403, msg, status);
        return false;
      }
    }
    if (is_batch && r.cmd != Cmd::kMerge && !(have_known && r.biz == known_biz)) {
      auto id = engine_->ResolveBiz(r.biz);
      if (!id.ok()) {
        ErrorBody(id.status().IsNotFound() ? 404 : 400,
                  "batch member " + std::to_string(i + 1) + ": " + id.status().message(), status);
        return false;
      }
      known_biz = r.biz;
      have_known = true;
    }
    // What only the engine judges (a lease or reservation id that is not
    // one, a biz whose rules grant no lease or keep no reservation): run,
    // the batch's other members would be counted beside this one's 400.
    if (is_batch && UsesIds(r)) {
      if (Status bad = engine_->CheckRequest(r.ToEngine()); !bad.ok()) {
        ErrorBody(HttpStatusFor(bad), "batch member " + std::to_string(i + 1) + ": " + bad.message(), status);
        return false;
      }
    }
  }

  // The acquires of a batch are judged in one store transaction, which
  // holds at most Store::kMaxBatch nodes: more refuse the whole batch before
  // anything runs, as any bad member does (run, its other members would
  // have been counted while its acquires were not).
  for (size_t i = 0, acquires = 0; is_batch && i < wire_.size(); ++i) {
    if (wire_[i].cmd != Cmd::kAcquire || ++acquires <= Store::kMaxBatch) continue;
    ErrorBody(400,
              "batch member " + std::to_string(i + 1) + ": a batch holds at most " + std::to_string(Store::kMaxBatch) +
                  " acquires (they are judged together)",
              status);
    return false;
  }

  if (!RouteRequests(wire_, route_param, status)) return false;

  body_.clear();
  if (merges != 0) return HandleMerges(status);
  if (!is_batch) {
    const WireRequest& r = wire_[0];
    if (r.cmd == Cmd::kStats) {
      const ReplicaLinksView links = LinksView();
      AppendStats(store_ != nullptr ? store_->Stats() : StoreStats{}, engine_->DailyStats(), &opts_.cluster, &body_,
                  links.peers.empty() ? nullptr : &links);
      *status = 200;
      return true;
    }
    return ExecuteOne(r, status);
  }

  reqs_.clear();
  for (const WireRequest& r : wire_) reqs_.push_back(r.ToEngine());
  // ExecuteBatch writes every decision: no clearing of ~500 bytes each first.
  std::span<Decision> out(decisions_.data(), reqs_.size());
  bool allowed = engine_->ExecuteBatch(reqs_, out);
  for (size_t i = 0; i < wire_.size(); ++i) {
    CountLeases(wire_[i], out[i]);
    NoteUnknownBiz(out[i]);
    CountDecision(wire_[i], out[i]);
  }
  if (decoder_.compact()) AppendBatchCompact(allowed, wire_, out, &body_);
  else AppendBatch(allowed, wire_, out, &body_);
  *status = 200;
  return true;
}

bool Handler::ExecuteOne(const WireRequest& r, int* status) {
  Decision& d = decisions_[0];
  engine_->ExecuteInto(r.ToEngine(), &d);
  CountLeases(r, d);
  if (!d.ok()) {
    NoteUnknownBiz(d);
    ErrorBody(HttpStatusFor(d.status), d.status.message(), status);
    return false;
  }
  CountDecision(r, d);
  decision_ = std::string_view(decision_buf_, WriteDecision(r.cmd, d, decision_buf_));
  *status = 200;
  return true;
}

void Handler::CountLeases(const WireRequest& r, const Decision& d) {
  // A failed release still counts the leases its node found expired.
  if (!counters_ || d.biz_id == 0) return;
  const uint16_t biz = d.biz_id;
  CountReservations(d);  // a failed settle too: it may have found expiries
  if (d.leases_expired != 0) CounterAdd(counters_->leases_expired[biz], d.leases_expired);
  if (!d.ok()) return;
  if (d.released) CounterAdd(counters_->leases_released[biz]);
  if (d.lease_serial != 0)
    CounterAdd(r.cmd == Cmd::kRenew ? counters_->leases_renewed[biz] : counters_->leases_granted[biz]);
}

void Handler::NoteUnknownBiz(const Decision& d) {
  // The engine's one NotFound of a request that names no biz it has.
  if (d.ok() || d.biz_id != 0 || !d.status.IsNotFound() || !d.status.message().starts_with("unknown biz '")) return;
  if (counters_) CounterAdd(counters_->unknown_biz);
  uint64_t count = 0;
  if (!unknown_biz_log_.Note(MonoNs(), &count)) return;
  FRS_LOG(
      "%s (%llu such request(s) since this worker's last such line; frs_unknown_biz_total counts each): a client "
      "calls a biz the running map lacks (a reload removed it, or a typo)",
      d.status.message().c_str(), static_cast<unsigned long long>(count));
}

void Handler::CountReservations(const Decision& d) {
  const uint16_t biz = d.biz_id;
  if (d.res_expired != 0) CounterAdd(counters_->res_expired[biz], d.res_expired);
  if (d.res_serial != 0) CounterAdd(counters_->res_taken[biz]);
  if (d.settled) CounterAdd(counters_->res_settled[biz]);
}

void Handler::CountDecision(const WireRequest& r, const Decision& d) {
  if (!d.ok() || d.biz_id == 0) return;
  if (r.cmd != Cmd::kQuery && r.cmd != Cmd::kUpdate && r.cmd != Cmd::kAcquire) return;
  if (counters_) {
    const uint16_t biz = d.biz_id;
    CounterAdd(d.allowed ? counters_->biz_allowed[biz] : counters_->biz_denied[biz]);
    if (d.shadow && d.would_deny) CounterAdd(counters_->biz_shadow_denied[biz]);
    // Each rule by its own verdict: which rule of a biz denies is what an
    // operator tunes.
    const size_t denied = static_cast<size_t>(d.shadow ? RuleResultLabel::kShadowDenied : RuleResultLabel::kDenied);
    const uint32_t nrules = std::min<uint32_t>(d.nrules, kMaxRulesPerBiz);
    for (uint32_t i = 0; i < nrules; ++i)
      CounterAdd(counters_->rule_decisions[biz][i][d.rules[i].allowed ? static_cast<size_t>(RuleResultLabel::kAllowed)
                                                                      : denied]);
  }
  // No log: this one branch. A log: a line is formatted only for the
  // decisions it records (denied ones by default) and samples.
  if (decision_log_ != nullptr && decision_log_->Wants(!d.allowed || (d.shadow && d.would_deny))) LogDecision(r, d);
}

}  // namespace frs::server
