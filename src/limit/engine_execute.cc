// One request's way through the engine: its check, its decision against
// its node, and what the statistics count of it. A batch's members take the
// same check and counting, and those that are neither reads nor acquires
// the same DecideOne (engine_batch.cc).
#include <algorithm>
#include <string>

#include "frs/percent_encode.h"
#include "limit/engine_impl.h"
#include "limit/reservation.h"

namespace frs::limit {

namespace {

// Whether a request names or is given a lease or reservation id.
bool UsesLeaseIds(const BizConfig& biz, const Request& req) {
  if (req.cmd == Cmd::kRelease) return !req.give_back;
  return req.cmd == Cmd::kRenew || req.cmd == Cmd::kSettle || req.reserve > 0 ||
         (biz.lease_rule >= 0 && CountsUses(req.cmd));
}

// Whether `id` is well-formed; its parts go to *parsed.
bool LeaseIdIsWellFormed(std::string_view id, ParsedLeaseId* parsed) {
  if (ParseLeaseId(id, &parsed->serial, &parsed->mac)) return true;
  // 24 lowercase hex digits whose serial is 0: well-formed, but no acquire
  // answers one. Left to the node's operation (serial 0: parsed again there,
  // refused), it is the 409 of an id this key never issued, as documented,
  // not a 400 that says "24 lowercase hex digits" of one that is.
  parsed->serial = 0;
  return id.size() == kLeaseIdChars && id.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}
// Why a biz keeps no reservations (res_cap 0), in its map's terms.
std::string NoReservationsWhy(const BizConfig& biz) {
  if (biz.res_explicit) return "its reservations=\"0\"";
  for (uint32_t i = 0; i < biz.nrules; ++i)
    if (biz.rules[i].algo != Algo::kConcurrency)
      return "its rules' " + std::to_string(biz.state_bytes) + " state bytes leave no room in a node (" +
             std::to_string(kMaxStateBytes) + ") for a reservation table";
  return "it has no rate rule: a concurrency rule counts no n";
}

// An id as sent, for a message: its first 64 bytes, every byte but
// printable ASCII as %XX (a NUL would read as '?' in the XML answer, a
// space would not read at all).
std::string ShownId(std::string_view id) {
  static constexpr PercentTable kShown('!', '~', "%", PercentHigh::kEscape);
  return PercentEncoded(id.substr(0, 64), kShown);
}

// A reserve on an acquire, or a settle: well-formed, and of a biz that
// keeps reservations.
Status CheckReservation(const BizConfig& biz, const Request& req, ParsedLeaseId* parsed) {
  if (req.cmd == Cmd::kSettle) {
    if (biz.res_cap == 0)
      return Status::InvalidArgument("biz '" + biz.name + "' keeps no reservations (" + NoReservationsWhy(biz) +
                                     "): nothing to settle");
    if (!LeaseIdIsWellFormed(req.reservation, parsed))
      return Status::InvalidArgument("reservation must be the 24 lowercase hex digits an acquire answered, not '" +
                                     ShownId(req.reservation) + "'");
    if (req.n < 0 || req.n > kMaxUses)
      return Status::InvalidArgument("a settle's n (the real amount) must be 0..2147483647, not " +
                                     std::to_string(req.n));
    return Status::OK();
  }
  if (req.reserve == 0) return Status::OK();
  if (req.cmd != Cmd::kAcquire)
    return Status::InvalidArgument(std::string("reserve is for acquire, not ") + CmdName(req.cmd));
  if (biz.res_cap == 0)
    return Status::InvalidArgument("biz '" + biz.name + "' keeps no reservations (" + NoReservationsWhy(biz) + ")");
  if (req.reserve < 1 || req.reserve > Reservations::kMaxReserveS)
    return Status::InvalidArgument("reserve must be 1.." + std::to_string(Reservations::kMaxReserveS) +
                                   " seconds, not " + std::to_string(req.reserve));
  return Status::OK();
}
}  // namespace

const Biz* EngineImpl::Check(BizCache& bizzes, const Request& req, Decision& d, ParsedLeaseId* id) const {
  ParsedLeaseId unused;
  if (id == nullptr) id = &unused;
  if (static_cast<size_t>(req.cmd) >= std::size(kCmdNames)) {
    d = ErrorDecision(Status::InvalidArgument("cmd " + std::to_string(static_cast<unsigned>(req.cmd)) +
                                              " is not a command (frs/decision.h: Cmd)"));
    return nullptr;
  }
  if (req.cmd == Cmd::kStats) return nullptr;
  if (req.cmd == Cmd::kMerge) {
    d = ErrorDecision(Status::InvalidArgument("cmd=\"merge\" carries a node: use MergeNodes"));
    return nullptr;
  }
  const Biz* biz = bizzes.Find(req.biz);
  if (biz == nullptr) {
    d = ErrorDecision(UnknownBiz(req.biz));
    return nullptr;
  }
  Status bad;
  if (req.cmd == Cmd::kReset) return biz;  // the whole biz: no key, no n
  if (!ids_known_ && UsesLeaseIds(biz->cfg, req)) {
    // A stand-in secret would answer ids the store's frsd cannot verify.
    d = ErrorDecision(Status::Unavailable(
        "this engine opened the store without its lease.key (EngineOptions::make_lease_key is false): it grants "
        "and checks no lease or reservation id"));
    d.biz_id = biz->cfg.id;
    return nullptr;
  }
  if (!KeyIsValid(req.key)) {
    bad = Status::InvalidArgument("bad key: " + ValidateKeyBytes(req.key));
  } else if (Status r = CheckReservation(biz->cfg, req, id); !r.ok()) {
    bad = std::move(r);
  } else if (CountsUses(req.cmd) && (req.n < 1 || req.n > kMaxUses)) {
    bad = Status::InvalidArgument("n must be 1..2147483647, not " + std::to_string(req.n));
  } else if (req.cmd == Cmd::kSet && (req.count < 0 || req.count > kMaxUses)) {
    bad = Status::InvalidArgument("count must be 0..2147483647, not " + std::to_string(req.count));
  } else if (req.cmd == Cmd::kRelease && req.give_back) {
    // Any rule gives back; n is checked as a use count is.
    if (req.n < 1 || req.n > kMaxUses)
      bad = Status::InvalidArgument("n must be 1..2147483647, not " + std::to_string(req.n));
    else return biz;
  } else if ((req.cmd == Cmd::kRelease || req.cmd == Cmd::kRenew) && biz->cfg.lease_rule < 0) {
    bad = Status::InvalidArgument("biz '" + biz->cfg.name + "' has no concurrency rule: it grants no lease to " +
                                  CmdName(req.cmd));
  } else if ((req.cmd == Cmd::kRelease || req.cmd == Cmd::kRenew) && !LeaseIdIsWellFormed(req.lease, id)) {
    bad = Status::InvalidArgument("lease must be the 24 lowercase hex digits an acquire answered, not '" +
                                  ShownId(req.lease) + "'");
  } else {
    return biz;
  }
  d = ErrorDecision(std::move(bad));
  d.biz_id = biz->cfg.id;
  return nullptr;
}

Status EngineImpl::CheckRequest(const Request& req) const {
  BizCache bizzes(CurrentMap());
  Decision d;
  ParsedLeaseId id;
  if (req.cmd == Cmd::kStats || Check(bizzes, req, d, &id) != nullptr) return Status::OK();
  return d.status;
}

Decision EngineImpl::Execute(const Request& req) {
  Decision d;
  ExecuteInto(req, &d);
  return d;
}

void EngineImpl::ExecuteInto(const Request& req, Decision* out) {
  const ChangeScope scope(sink_);
  BizCache bizzes(CurrentMap());
  Decision& d = *out;
  d.Reset();
  ParsedLeaseId id;
  const Biz* biz = Check(bizzes, req, d, &id);
  if (biz == nullptr) return;
  // Start loading the key's key-node heads and first chain now: the clock,
  // the op and the store's entry run while those lines and their page-table
  // walk are on their way, and the node's line does not wait for the tags.
  KeyRef ref;
  if (req.cmd != Cmd::kDelete && req.cmd != Cmd::kReset) {
    ref = RefOf(*biz, req);
    store_->Prefetch(ref, Store::Prefetching::kHeadsAndChain);
  }
  Now now = NowAt();
  now.serial_half = req.serial_half;
  bool created = false;
  DecideOne(*biz, req, ref, now, d, &created, id);
  d.biz_id = biz->cfg.id;
  if (!d.ok()) d.allowed = false;  // decision.h: what failed was not done
  if (d.ok() && CountsUses(req.cmd) && !req.uncounted) Count(*biz, req, d, created, now.s);
  if (sink_ != nullptr) Notify(*biz, req, d, now);
}

void EngineImpl::DecideOne(const Biz& biz, const Request& req, const KeyRef& ref, const Now& now, Decision& d,
                           bool* created, const ParsedLeaseId& id) {
  if (req.cmd == Cmd::kReset) {
    Store::Filter filter;
    filter.biz = biz.cfg.id;
    auto erased = store_->EraseIf(filter, [](const NodeInfo&) { return true; });
    if (!erased.ok()) {
      d = ErrorDecision(Status::Unavailable(erased.status().message()));
      return;
    }
    d.erased = erased.value();
    return;
  }
  if (req.cmd == Cmd::kDelete) {
    Status s = store_->Erase(
        KeyRef{biz.cfg.id, FingerprintOf(biz.cfg.id, req.key), req.key, static_cast<uint8_t>(req.key.size())});
    if (s.ok()) d.found = true;
    else if (!s.IsNotFound()) d = ErrorDecision(Status::Unavailable(s.message()));
    return;
  }
  // The distinct sketches' registers are the statistics' one cache miss
  // (a register per request, in 32 KB per group): asked for now, they come
  // while the store does its part.
  if (CountsUses(req.cmd)) stats::Statistics::Prefetch(biz.counters, biz.cfg.Shape(), req.key, Today(now.s));
  // Off counts nothing. A release, renewal or settle still acts: its id was
  // taken before the switch, and a settle answered 200 while the held
  // estimate stayed charged would lose the client's report for good.
  if (biz.cfg.mode == Mode::kOff && CountsUses(req.cmd)) {
    d = AnswerOff(biz, now);
    d.now_s = now.s;
    return;
  }
  NodeOp op;
  op.biz = &biz.cfg;
  op.cmd = req.cmd;
  op.n = CountsUses(req.cmd) || req.cmd == Cmd::kGet ? std::clamp<int64_t>(req.n, 1, kMaxUses) : 1;
  if (req.cmd == Cmd::kSettle) op.n = std::clamp<int64_t>(req.n, 0, kMaxUses);
  op.reserve = req.reserve;
  op.reservation = req.reservation;
  op.count = req.count;
  op.now = now;
  op.d = &d;
  op.key = req.key;
  op.secret = &lease_secret_;
  op.also = has_also_ ? &lease_secret_also_ : nullptr;
  op.lease = req.lease;
  op.id = id;
  if (req.cmd == Cmd::kRelease && req.give_back) {
    op.give_back = true;
    op.n = req.n;  // checked 1..kMaxUses
  }
  UpdateResult result;
  // A node that may get or holds a reservation is read with room for its table.
  const bool table = req.reserve > 0 || req.cmd == Cmd::kSettle;
  Store::BatchItem item{ref, biz.cfg.state_bytes + (table ? biz.cfg.res_bytes : 0)};
  const auto fn = [&op](NodeRef& node) { return op.Apply(node); };
  Status s = WithWholeNodes(std::span<Store::BatchItem>(&item, 1), std::span<uint32_t>(&op.need_bytes, 1),
                            [&] { return store_->Update(item.key, item.state_bytes, Clamp32(now.s), fn, &result); });
  if (!s.ok()) {
    d = ErrorDecision(Status::Unavailable(s.message()));
    return;
  }
  d.shadow = biz.cfg.mode == Mode::kShadow;
  d.now_s = now.s;
  *created = result.created;
}

void EngineImpl::Count(const Biz& biz, const Request& req, const Decision& d, bool created, int64_t now_s,
                       stats::StatsTally* tally) {
  stats::Counted c;
  // Shadow mode counts what enforce would have denied as denied.
  c.allowed = d.ok() && d.allowed && !d.would_deny;
  if (req.stats_limit >= 0 && d.ok() && d.nrules > 0) c.allowed = d.rules[0].count <= req.stats_limit;
  c.created = created;
  c.denial = !c.allowed && d.ok();
  // Units: the uses this request recorded (an allowed acquire, or an
  // update, which records unconditionally; a shadow denial records too).
  const bool recorded =
      d.ok() && biz.cfg.mode != Mode::kOff && (req.cmd == Cmd::kUpdate || (req.cmd == Cmd::kAcquire && d.allowed));
  c.units = recorded ? static_cast<uint64_t>(std::clamp<int64_t>(req.n, 1, kMaxUses)) : 0u;
  statistics_->Count(biz.counters, biz.cfg.id, biz.cfg.Shape(), req.key, c, Today(now_s), now_s, tally);
}

Decision EngineImpl::AnswerOff(const Biz& biz, const Now& now) const {
  Decision d;
  d.nrules = biz.cfg.nrules;
  for (uint32_t i = 0; i < biz.cfg.nrules; ++i) {
    const RuleSpec& spec = biz.cfg.rules[i];
    RuleResult& r = d.rules[i];
    r.algo = spec.algo;
    r.interval = spec.interval;
    r.limit = spec.algo == Algo::kTokenBucket ? spec.burst : spec.max;
    r.remaining = r.limit;
    r.reset = now.s;
    NameRule(spec, &r);
  }
  Summarize(&d, false);
  return d;
}

}  // namespace frs::limit
