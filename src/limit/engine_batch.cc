// A batch's one walk. Every member takes the same route: the check of a
// lone request, its key prepared once, then its decision in its place, then
// the same counting. Members differ only in what the store is asked, which
// is a property of the member (its Step), not another route:
//   - a run of reads (query, get) is read through one Store::ReadEach, whose
//     lookups overlap;
//   - the acquires are judged together where the first stands, through one
//     Store::UpdateBatch, all or nothing;
//   - any other member is decided alone (DecideOne), its node prefetched
//     members ahead so that the cache misses of several members overlap.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "limit/engine_impl.h"
#include "limit/rule_state.h"

namespace frs::limit {
namespace {

using Step = BatchMember::Step;

Step StepOf(const Biz& biz, const Request& req) {
  if (req.cmd == Cmd::kAcquire) return Step::kAcquire;
  if ((req.cmd == Cmd::kQuery || req.cmd == Cmd::kGet) && biz.cfg.mode != Mode::kOff) return Step::kRead;
  return Step::kOne;
}

// The members decided alone lie scattered over the store: looked up one
// after another, each would wait for its own cache and TLB misses. At
// member i the store is asked to load member i + kAhead's key-node heads,
// and member i + kAhead / 2's nodes (their heads asked for kAhead / 2
// members ago), so that the misses of several members overlap.
class Prefetcher {
 public:
  static constexpr size_t kAhead = 8;

  Prefetcher(const Store& store, std::span<const BatchMember> members) : store_(store), members_(members) {
    on_ = members.size() > 2 &&
          std::any_of(members.begin(), members.end(), [](const BatchMember& m) { return m.step == Step::kOne; });
    if (!on_) return;
    for (size_t j = 0; j < kAhead; ++j) Ask(j, Store::Prefetching::kHeads);
    for (size_t j = 0; j < kAhead / 2; ++j) Ask(j, Store::Prefetching::kNodes);
  }
  // The walk is at member i.
  void At(size_t i) {
    if (!on_) return;
    Ask(i + kAhead / 2, Store::Prefetching::kNodes);
    Ask(i + kAhead, Store::Prefetching::kHeads);
  }

 private:
  void Ask(size_t j, Store::Prefetching what) {
    if (j < members_.size() && members_[j].step == Step::kOne && members_[j].ref.prepared)
      store_.Prefetch(members_[j].ref, what);
  }

  const Store& store_;
  std::span<const BatchMember> members_;
  bool on_ = false;
};

}  // namespace

bool EngineImpl::ExecuteBatch(std::span<const Request> reqs, std::span<Decision> out) {
  const ChangeScope scope(sink_);
  if (out.size() < reqs.size()) {
    // Nothing is done; each decision there is says why (out: one per request).
    for (Decision& d : out)
      d = ErrorDecision(Status::InvalidArgument("a batch of " + std::to_string(reqs.size()) +
                                                " requests given room for " + std::to_string(out.size()) +
                                                " decisions: nothing was done"));
    return false;
  }
  // One half of the serials for the whole batch (below): a member in
  // another half was granted serials of the first's, while its events
  // named its own (found by a review; the server's batches route as one).
  for (const Request& r : reqs) {
    if (r.serial_half == reqs[0].serial_half) continue;
    for (size_t i = 0; i < reqs.size(); ++i)
      out[i] = ErrorDecision(Status::InvalidArgument(
          "a batch's members draw their serials from one half (Request::serial_half): nothing was done"));
    return false;
  }
  // A copy of the map pointer: Execute's per-thread cache may move on if a
  // reload lands in the middle of the batch. Every member resolves its biz
  // in this one map; members mostly share their biz, and the cache hashes
  // each run of one name once.
  std::shared_ptr<const Map> map = SharedMap();
  BizCache bizzes(*map);
  stats::StatsTally tally(statistics_->daily());
  // One instant for the whole batch: its members are judged together. And
  // one half of the serials (checked above).
  Now now = NowAt();
  if (!reqs.empty()) now.serial_half = reqs[0].serial_half;
  // Per thread, so that a batch allocates nothing once warm.
  thread_local std::vector<BatchMember> members;
  members.resize(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    // Decided in place: a Decision is ~500 bytes, and building one to move
    // it here cost more than the member's lookup. Reset, since the caller's
    // span is reused from request to request.
    out[i].Reset();
    // Each field written, none cleared first: a KeyRef is most of a
    // member, and clearing 64 of them cost a read run more than its checks.
    BatchMember& m = members[i];
    m.created = false;
    m.step = Step::kNone;
    m.ref.prepared = false;
    m.biz = Check(bizzes, reqs[i], out[i]);
    if (m.biz == nullptr) continue;
    m.step = StepOf(*m.biz, reqs[i]);
    if (reqs[i].cmd != Cmd::kDelete && reqs[i].cmd != Cmd::kReset) m.ref = RefOf(*m.biz, reqs[i]);
  }

  Prefetcher prefetch(*store_, members);
  bool acquired = false;
  for (size_t i = 0; i < reqs.size();) {
    BatchMember& m = members[i];
    if (m.step == Step::kRead) {
      size_t end = i + 1;
      while (end < reqs.size() && members[end].step == Step::kRead) ++end;
      // The prefetches move on past the run before it is read, so that the
      // members after it are on their way meanwhile.
      for (size_t j = i; j < end; ++j) prefetch.At(j);
      DecideReads(reqs, out, members, i, end, now);
      i = end;
      continue;
    }
    if (m.step == Step::kOne) {
      DecideOne(*m.biz, reqs[i], m.ref, now, out[i], &m.created);
    } else if (m.step == Step::kAcquire && !acquired) {
      DecideAcquires(reqs, out, members, now);
      acquired = true;
    }
    prefetch.At(i);
    ++i;
  }

  // Counted once every lock is released; a failed member is not, as alone.
  bool all = true;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const BatchMember& m = members[i];
    if (m.biz != nullptr) {
      out[i].biz_id = m.biz->cfg.id;
      if (out[i].ok() && CountsUses(reqs[i].cmd) && !reqs[i].uncounted)
        Count(*m.biz, reqs[i], out[i], m.created, now.s, &tally);
      if (sink_ != nullptr) Notify(*m.biz, reqs[i], out[i], now);
    }
    if (!out[i].ok()) out[i].allowed = false;  // decision.h: what failed was not done
    all = all && out[i].allowed;
  }
  return all;
}

void EngineImpl::DecideReads(std::span<const Request> reqs, std::span<Decision> out, std::span<BatchMember> members,
                             size_t begin, size_t end, const Now& now) {
  // Per thread, reused: no allocation per batch once warm.
  thread_local std::vector<Store::ReadItem> items;
  thread_local std::vector<uint32_t> need;
  items.clear();
  for (size_t i = begin; i < end; ++i)
    items.push_back(Store::ReadItem{members[i].ref, members[i].biz->cfg.state_bytes});
  need.assign(items.size(), 0);
  // Reset lists Decision's fields one by one (as does the engine test that
  // checks it against Decision{}): a new field must join both.
  static_assert(sizeof(Decision) == 696, "a Decision field was added or removed: see Decision::Reset");
  // What the visitor needs, behind one pointer: it fits std::function's
  // inline room, so the call allocates nothing.
  struct Run {
    std::span<const Request> reqs;
    std::span<Decision> out;
    std::span<BatchMember> members;
    std::span<uint32_t> need;
    size_t begin;
    const Now& now;
    // The second pass: items[j] is the run's member again[j], its first
    // decision overwritten.
    const std::vector<size_t>* again;
  } run{reqs, out, members, need, begin, now, nullptr};
  const Store::ReadVisitor visit = [&run](size_t j, const Status& status, NodeRef& node) {
    const size_t k = run.again != nullptr ? (*run.again)[j] : j;
    const size_t i = run.begin + k;
    const Biz& biz = *run.members[i].biz;
    Decision& d = run.out[i];
    if (run.again != nullptr) d.Reset();
    if (!status.ok()) {
      d = ErrorDecision(Status::Unavailable(status.message()));
      return;
    }
    // As NodeOp::Apply reads: n is clamped for a get (which counts nothing).
    const int64_t n = std::clamp<int64_t>(run.reqs[i].n, 1, kMaxUses);
    run.need[k] = 0;
    if (!ReadRules(biz.cfg, node, run.now, n, &d, &run.need[k])) return;
    d.shadow = biz.cfg.mode == Mode::kShadow;
    d.now_s = run.now.s;
  };
  store_->ReadEach(items, Clamp32(now.s), visit);
  // A node holding more state than its biz's layout (WithWholeNodes says
  // why) is read again whole, alone: reads change nothing, so reading it
  // after the rest of its run answers what reading it in its place would
  // have, and the others' answers (and their reads' heat) stand.
  thread_local std::vector<size_t> again;
  again.clear();
  for (size_t k = 0; k < items.size(); ++k) {
    if (need[k] <= items[k].state_bytes) continue;
    items[again.size()] = Store::ReadItem{items[k].key, need[k]};
    again.push_back(k);
  }
  if (again.empty()) return;
  items.resize(again.size());
  run.again = &again;
  store_->ReadEach(items, Clamp32(now.s), visit);
}

namespace {

// The acquires of one batch as the store hands their nodes over: member
// `item_member[k]` is judged on nodes[k]. Members naming one node share
// its buffer.
struct AcquireRun {
  std::span<const Request> reqs;
  std::span<Decision> out;
  std::span<BatchMember> members;
  const std::vector<size_t>& item_member;
  const Now& now;
  const LeaseSecret& lease_secret;
  std::span<NodeRef> nodes;

  const BizConfig& cfg(size_t k) const { return members[item_member[k]].biz->cfg; }
  const Request& req(size_t k) const { return reqs[item_member[k]]; }
  Decision& decision(size_t k) const { return out[item_member[k]]; }
  // Whether nodes[k] is the first to name its node (its layout adopted,
  // its leases swept, its state saved, once).
  bool first_with(size_t k) const {
    for (size_t j = 0; j < k; ++j)
      if (nodes[j].state == nodes[k].state) return false;
    return true;
  }
  // Every member naming nodes[k]'s node sees its length as nodes[k] left it
  // (a reservation table made or grown there): the store writes the first
  // one's.
  void share_length(size_t k) const {
    for (NodeRef& n : nodes)
      if (n.state == nodes[k].state) n.state_bytes = nodes[k].state_bytes;
  }
};

enum class Judged : uint8_t { kAll, kRefused, kReadAgain };

// Member k is denied (after the members before it that name its node
// recorded their uses). A retried batch needs all its members on that node
// again, together, those after k too: a rule that can never grant so many
// at once (their uses past what one window, one bucket ever grants; their
// leases past max) is a denial no wait cures, whatever each asks alone and
// whatever the node holds now.
void MarkIncurableTogether(const AcquireRun& run, size_t k, Decision* d) {
  int64_t together = 0;
  int64_t members = 0;
  for (size_t j = 0; j < run.nodes.size(); ++j) {
    if (run.nodes[j].state != run.nodes[k].state) continue;
    together += run.req(j).n;
    ++members;
  }
  if (members == 1) return;
  const BizConfig& cfg = run.cfg(k);
  for (uint32_t i = 0; i < cfg.nrules; ++i) {
    RuleResult& r = d->rules[i];
    if (r.allowed || r.retry_after == kNeverCurable) continue;
    const RuleSpec& spec = cfg.rules[i];
    const bool never = spec.algo == Algo::kConcurrency ? members > spec.max : together > MostEverGranted(spec);
    if (never) r.retry_after = kNeverCurable;
  }
}

// The batch's members that reserve on member k's node.
uint32_t ReservationsTogether(const AcquireRun& run, size_t k) {
  uint32_t n = 0;
  for (size_t j = 0; j < run.nodes.size(); ++j)
    if (run.nodes[j].state == run.nodes[k].state && run.req(j).reserve > 0) ++n;
  return n;
}

// Member k's wait for its node's reservation table: until it has room for
// every member reserving there. The batch's earlier members took theirs on
// the node already, but those go back with the refused batch: what it waits
// for is the reservations held before it.
int64_t ReservationWait(const AcquireRun& run, size_t k) {
  uint32_t own[Reservations::kMaxPerKey];
  uint32_t n = 0;
  for (size_t j = 0; j < k && n < Reservations::kMaxPerKey; ++j)
    if (run.nodes[j].state == run.nodes[k].state && run.decision(j).res_serial != 0)
      own[n++] = run.decision(j).res_serial;
  const int64_t at = ReservationRoomAt(run.cfg(k), run.nodes[k], run.now.s, {own, n}, ReservationsTogether(run, k));
  return std::max<int64_t>(1, at - run.now.s);
}

// Every acquire judged and recorded in turn, until one is refused (then
// none may stay recorded; *refused is its index, its decision as judged) or
// needs its node read again with room for its reservation table (need[k]
// set).
Judged JudgeAll(const AcquireRun& run, std::span<const uint32_t> asked, std::span<uint32_t> need,
                std::span<const LayoutEnded> ended, size_t* refused) {
  const Now& now = run.now;
  for (size_t k = 0; k < run.nodes.size(); ++k) {
    NodeRef& node = run.nodes[k];
    const BizConfig& cfg = run.cfg(k);
    const bool enforce = cfg.mode == Mode::kEnforce;
    Decision& d = run.decision(k);
    const int64_t n = run.req(k).n;
    // A pass read again (WithWholeNodes) judges afresh: nothing granted by
    // the pass before, which committed nothing, is answered.
    d.leases_expired = 0;
    d.leases_ended_n = 0;
    d.res_expired = 0;
    d.lease_serial = 0;
    d.lease_expires = 0;
    d.res_serial = 0;
    d.res_expires = 0;
    d.reservations_full = false;
    d.found = node.exists;
    // As NodeOp: expired leases are freed (and counted) first, with those
    // the node's conversion ended; put back with the rest when the batch
    // records nothing.
    if (run.first_with(k) && node.exists) {
      d.leases_expired = static_cast<uint16_t>(std::min<uint32_t>(SweepLeases(cfg, node.state, now) + ended[k].leases,
                                                                  std::numeric_limits<uint16_t>::max()));
      d.res_expired =
          static_cast<uint16_t>(std::min<uint32_t>(SweepReservations(cfg, node, now) + ended[k].reservations,
                                                   std::numeric_limits<uint16_t>::max()));
      NoteConversionEnded(ended[k], &d);
    }
    EvaluateRules(cfg, node.state, now, n, &d);
    MarkIncurableTogether(run, k, &d);
    Summarize(&d, enforce);
    const int64_t reserve = run.req(k).reserve;
    const bool room = !(d.allowed && reserve > 0) || HasReservationRoom(cfg, node, asked[k], &need[k], &d);
    run.share_length(k);
    if (!room) {
      if (need[k] != 0) return Judged::kReadAgain;
      // As NodeOp: shadow mode allows and counts it, with no reservation.
      d.reservations_full = true;
      d.would_deny = true;
      if (enforce) {
        d.allowed = false;
        // More members reserving on this node than its table ever holds:
        // the same batch is denied however long it waits.
        d.retry_after = ReservationsTogether(run, k) > cfg.res_cap ? kNeverCurable : ReservationWait(run, k);
      }
    }
    if (!d.allowed) {
      *refused = k;
      return Judged::kRefused;
    }
    const uint32_t next_before = NextLeaseSerial(cfg, node.state);
    RecordRules(cfg, node.state, now, n, &d);
    LeaseGranted(cfg, node.state, now, run.req(k).key, run.lease_secret, next_before, &d);
    if (reserve > 0) GrantReservation(cfg, node, now, run.req(k).key, run.lease_secret, n, reserve, &d);
    Summarize(&d, enforce);
    d.would_deny = d.would_deny || d.reservations_full;  // shadow: the table was full
  }
  return Judged::kAll;
}

// Nothing is recorded (the states already put back): each member is
// reported refused, as it stands, except the one that refused the batch
// (`refused`; none when the batch was not judged): it keeps its verdict as
// judged, after the uses of the members before it, so that the answer
// names the member and the rule that denied, and its wait.
void ReportRefused(const AcquireRun& run, size_t refused) {
  for (size_t k = 0; k < run.nodes.size(); ++k) {
    const BizConfig& cfg = run.cfg(k);
    Decision& d = run.decision(k);
    d.found = run.nodes[k].exists;
    d.leases_expired = 0;
    d.leases_ended_n = 0;
    d.lease_serial = 0;
    d.lease_expires = 0;
    d.res_expired = 0;
    d.res_serial = 0;
    if (k == refused) continue;
    if (!d.reservations_full) d.res_expires = 0;
    EvaluateRules(cfg, run.nodes[k].state, run.now, run.req(k).n, &d);
    Summarize(&d, cfg.mode == Mode::kEnforce);
    // The rules would allow it: its wait is the table's, until the first
    // reservation held expires (as a single acquire answers).
    if (d.reservations_full) d.retry_after = std::max<int64_t>(1, d.res_expires - run.now.s);
    d.allowed = false;
  }
}

}  // namespace

void EngineImpl::DecideAcquires(std::span<const Request> reqs, std::span<Decision> out, std::span<BatchMember> members,
                                const Now& now) {
  std::vector<size_t> acquires;
  bool valid = true;  // every acquire passed its check: else none is recorded
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (reqs[i].cmd != Cmd::kAcquire) continue;
    acquires.push_back(i);
    valid = valid && members[i].step == Step::kAcquire;
  }
  // A member the store did not judge answers with no biz (biz_id 0) and is
  // not counted: `biz` is cleared for the walk's last loop.
  if (acquires.size() > Store::kMaxBatch) {
    for (size_t i : acquires) {
      out[i] = ErrorDecision(
          Status::InvalidArgument("a batch holds at most " + std::to_string(Store::kMaxBatch) + " acquires"));
      members[i].biz = nullptr;
    }
    return;
  }
  // The members the store is asked for (a biz that is off answers alone).
  std::vector<Store::BatchItem> items;
  std::vector<size_t> item_member;
  for (size_t i : acquires) {
    const BatchMember& m = members[i];
    if (m.step != Step::kAcquire) continue;
    if (m.biz->cfg.mode == Mode::kOff) {
      out[i] = AnswerOff(*m.biz, now);
      continue;
    }
    // Room for the reservation table of a member that takes one.
    const uint32_t table = reqs[i].reserve > 0 ? m.biz->cfg.res_bytes : 0;
    items.push_back(Store::BatchItem{m.ref, m.biz->cfg.state_bytes + table});
    item_member.push_back(i);
  }

  std::vector<uint32_t> need(items.size(), 0);
  std::vector<UpdateResult> results;
  auto fn = [&](std::span<NodeRef> nodes, std::span<Commit> commits) {
    std::fill(commits.begin(), commits.end(), Commit::kNone);
    std::fill(need.begin(), need.end(), 0);
    const AcquireRun run{reqs, out, members, item_member, now, lease_secret_, nodes};
    bool short_read = false;
    std::vector<uint32_t> asked(nodes.size());
    std::vector<LayoutEnded> ended(nodes.size());
    for (size_t k = 0; k < nodes.size(); ++k) {
      asked[k] = nodes[k].state_bytes;
      if (run.first_with(k) && !AdoptLayout(run.cfg(k), nodes[k], now, &need[k], nullptr, &ended[k])) short_read = true;
    }
    if (short_read) return;
    std::vector<std::vector<uint8_t>> backup(nodes.size());
    for (size_t k = 0; k < nodes.size(); ++k)
      if (run.first_with(k)) backup[k].assign(nodes[k].state, nodes[k].state + nodes[k].state_bytes);
    size_t refused = nodes.size();
    const Judged judged = valid ? JudgeAll(run, asked, need, ended, &refused) : Judged::kRefused;
    if (judged == Judged::kReadAgain) return;
    if (judged == Judged::kAll) {
      for (size_t k = 0; k < nodes.size(); ++k) {
        commits[k] = Commit::kWrite;
        nodes[k].expire_s = NodeExpireS(run.cfg(k), nodes[k], now);
      }
      return;
    }
    // Nothing is recorded: put the states back and report each member as it stands.
    for (size_t k = 0; k < nodes.size(); ++k)
      if (!backup[k].empty()) std::memcpy(nodes[k].state, backup[k].data(), backup[k].size());
    ReportRefused(run, refused);
  };

  Status s = Status::OK();
  if (!items.empty()) {
    s = WithWholeNodes(std::span<Store::BatchItem>(items), std::span<uint32_t>(need),
                       [&] { return store_->UpdateBatch(items, Clamp32(now.s), fn, &results); });
  }
  for (size_t i : acquires) {
    BatchMember& m = members[i];
    if (m.step != Step::kAcquire) continue;
    Decision& d = out[i];
    const bool stored = m.biz->cfg.mode != Mode::kOff;
    if (!s.ok() && stored) {
      d = ErrorDecision(Status::Unavailable(s.message()));
      m.biz = nullptr;
      continue;
    }
    if (!s.ok()) d.allowed = false;
    d.shadow = m.biz->cfg.mode == Mode::kShadow;
    d.now_s = now.s;
  }
  for (size_t k = 0; k < item_member.size() && k < results.size(); ++k)
    members[item_member[k]].created = results[k].created;
}

}  // namespace frs::limit
