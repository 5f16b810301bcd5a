#include "limit/node_op.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "limit/concurrency.h"
#include "limit/reservation.h"

namespace frs::limit {

namespace {

// Leases and reservations a state holds, expired or not, walking its tags.
LayoutEnded TakenIn(std::span<const uint8_t> state) {
  LayoutEnded t;
  ForEachTaggedBlock(state, [&](uint32_t off, uint32_t tag, uint32_t bytes) {
    if (Reservations::IsTag(tag)) {
      t.reservations += Reservations::Held(state.data() + off, bytes, 0, {});
    } else if (TagIsConcurrency(tag)) {
      t.leases += Concurrency::Taken(state.subspan(off, bytes));
    }
    return true;
  });
  return t;
}

// The leases `old` held at `now` that `state` holds no more (a conversion
// ended them), into ended->held, with their series.
void HeldEnded(std::span<const uint8_t> old, std::span<const uint8_t> state, const Now& now, LayoutEnded* ended) {
  uint32_t kept[Concurrency::kMaxLeases];
  size_t nkept = 0;
  ForEachTaggedBlock(state, [&](uint32_t off, uint32_t tag, uint32_t bytes) {
    if (TagIsConcurrency(tag))
      nkept += std::min(Concurrency::HeldSerials(state.subspan(off, bytes), now,
                                                 std::span<uint32_t>(kept + nkept, std::size(kept) - nkept)),
                        std::size(kept) - nkept);
    return true;
  });
  ForEachTaggedBlock(old, [&](uint32_t off, uint32_t tag, uint32_t bytes) {
    if (!TagIsConcurrency(tag)) return true;
    uint32_t was[Concurrency::kMaxLeases];
    const size_t n = std::min(Concurrency::HeldSerials(old.subspan(off, bytes), now, was), std::size(was));
    for (size_t i = 0; i < n && ended->held_n < Decision::kMaxLeasesEnded; ++i)
      if (std::find(kept, kept + nkept, was[i]) == kept + nkept) ended->held_serial[ended->held_n++] = was[i];
    ended->nonce = Concurrency::Nonce(old.data() + off);
    return true;
  });
}

}  // namespace

bool AdoptLayout(const BizConfig& biz, NodeRef& ref, const Now& now, uint32_t* need_bytes, bool* converted,
                 LayoutEnded* ended) {
  if (!ref.exists) return true;
  // Read whole: past the rules' blocks may be a reservation table
  // (limit/reservation.h), which a write of fewer bytes would drop.
  if (ref.stored_state_bytes > ref.state_bytes) {
    // With room for the table in this biz's place (a rule that grew).
    *need_bytes = std::min(std::max(ref.stored_state_bytes, biz.state_bytes + biz.res_bytes), kMaxStateBytes);
    return false;
  }
  const uint32_t have = ref.stored_state_bytes;
  bool same = have >= biz.state_bytes;
  for (uint32_t i = 0; same && i < biz.nrules; ++i)
    same = BlockIsCurrent(biz.rules[i], ref.state + biz.rules[i].offset);
  // A rule removed from the end of the biz leaves its block after the
  // current ones: not the same layout, so that the conversion below counts
  // the leases it held as ended (dropped with the tail, they went uncounted).
  if (same && have >= biz.state_bytes + kBlockUnit) {
    const uint32_t next = Load32(ref.state + biz.state_bytes);
    same = next == 0 || Reservations::IsTag(next);
  }
  if (same && ReservationsInPlace(biz, ref)) return true;
  uint8_t old[kMaxStateBytes];
  std::memcpy(old, ref.state, have);
  bool started = false;
  if (!same) started = MigrateState(biz, std::span<const uint8_t>(old, have), ref.state, now);
  if (!PlaceReservations(biz, std::span<const uint8_t>(old, have), ref, need_bytes, started)) return false;
  if (converted) *converted = true;
  if (ended) {
    const LayoutEnded was = TakenIn(std::span<const uint8_t>(old, have));
    const LayoutEnded is = TakenIn(std::span<const uint8_t>(ref.state, ref.state_bytes));
    ended->leases = was.leases > is.leases ? was.leases - is.leases : 0;
    ended->reservations = was.reservations > is.reservations ? was.reservations - is.reservations : 0;
    if (ended->leases > 0)
      HeldEnded(std::span<const uint8_t>(old, have), std::span<const uint8_t>(ref.state, ref.state_bytes), now, ended);
  }
  return true;
}

bool MigrateState(const BizConfig& biz, std::span<const uint8_t> old_state, uint8_t* state, const Now& now,
                  std::span<const int64_t> written_max) {
  struct OldBlock {
    uint32_t offset, bytes, tag;
    bool used;
    int64_t max;  // the max it was written under, when its sender said (0: not said)
  };
  OldBlock blocks[kMaxStateBytes / kBlockUnit];
  size_t nblocks = 0;
  ForEachTaggedBlock(old_state, [&](uint32_t off, uint32_t tag, uint32_t bytes) {
    const int64_t said = nblocks < written_max.size() ? written_max[nblocks] : 0;
    blocks[nblocks++] = {off, bytes, tag, false, said};
    return nblocks < std::size(blocks);
  });
  std::memset(state, 0, biz.state_bytes);
  // First the blocks of each rule's own (algo, interval): a rule whose
  // interval did not change, wherever it moved. Then, for a rule left
  // without one, a block of an identity its name had in an earlier map (a
  // reload changed its interval): its counts go on under the new interval.
  bool matched[kMaxRulesPerBiz] = {};
  bool started = false;
  auto take = [&](uint32_t i, OldBlock& b, int64_t old_max) {
    const RuleSpec& spec = biz.rules[i];
    b.used = true;
    matched[i] = true;
    if (!ConvertBlock(spec, old_state.subspan(b.offset, b.bytes), state + spec.offset, now, old_max)) {
      std::memset(state + spec.offset, 0, spec.bytes);
      started |= spec.algo != Algo::kConcurrency;
    }
  };
  for (uint32_t i = 0; i < biz.nrules; ++i) {
    for (size_t k = 0; k < nblocks && !matched[i]; ++k)
      if (!blocks[k].used && TagIdentity(blocks[k].tag) == TagIdentity(biz.rules[i].tag))
        take(i, blocks[k], blocks[k].max);
  }
  for (uint32_t i = 0; i < biz.nrules; ++i) {
    const RuleSpec& spec = biz.rules[i];
    for (uint32_t p = 0; p < spec.npast && !matched[i]; ++p)
      for (size_t k = 0; k < nblocks && !matched[i]; ++k)
        if (!blocks[k].used && TagIdentity(blocks[k].tag) == spec.past[p].identity)
          take(i, blocks[k], blocks[k].max > 0 ? blocks[k].max : spec.past[p].max);
    started |= !matched[i] && spec.algo != Algo::kConcurrency;
  }
  return started;
}

void NameRule(const RuleSpec& spec, RuleResult* r) {
  std::memcpy(r->name, spec.name, sizeof r->name);
  r->quota = spec.max;
}

void EvaluateRules(const BizConfig& biz, const uint8_t* state, const Now& now, int64_t n, Decision* d) {
  d->nrules = biz.nrules;
  for (uint32_t i = 0; i < biz.nrules; ++i) {
    Evaluate(biz.rules[i], state + biz.rules[i].offset, now, n, &d->rules[i]);
  }
}

void Summarize(Decision* d, bool enforce) {
  uint32_t pick = 0;
  bool denied = false;
  for (uint32_t i = 0; i < d->nrules; ++i) {
    const RuleResult& r = d->rules[i];
    const RuleResult& p = d->rules[pick];
    if (!r.allowed) {
      // The denial that lasts longest decides; one no wait cures lasts forever.
      const bool longer = r.retry_after == kNeverCurable
                              ? p.retry_after != kNeverCurable
                              : p.retry_after != kNeverCurable && r.retry_after > p.retry_after;
      if (!denied || longer) pick = i;
      denied = true;
    } else if (!denied && r.remaining < p.remaining) {
      pick = i;
    }
  }
  const RuleResult& top = d->rules[pick];
  d->top = pick;
  d->count = top.count;
  d->limit = top.limit;
  d->remaining = top.remaining;
  d->reset = top.reset;
  d->would_deny = denied;
  d->allowed = !denied || !enforce;
  d->retry_after = d->allowed ? 0 : top.retry_after;
}

uint32_t NodeExpireS(const BizConfig& biz, const uint8_t* state, const Now& now) {
  int64_t e = 0;
  for (uint32_t i = 0; i < biz.nrules; ++i) {
    e = std::max(e, ExpireS(biz.rules[i], state + biz.rules[i].offset, now));
  }
  // No rule holds anything (each untouched: a replicated set of 0, or a
  // replicated use, of a biz with a concurrency rule only): the node keeps
  // nothing and may go at once. 0 is "never": such a node stayed for good
  // (found by an attack with the admin token).
  constexpr int64_t kGoneAlready = 1;
  return Clamp32(e == 0 ? kGoneAlready : e);
}

void RecordRules(const BizConfig& biz, uint8_t* state, const Now& now, int64_t n, Decision* d) {
  for (uint32_t i = 0; i < biz.nrules; ++i) {
    const RuleSpec& spec = biz.rules[i];
    RuleResult& r = d->rules[i];
    const bool allowed = r.allowed;
    const int64_t retry = r.retry_after;
    const int64_t before = r.count;
    Record(spec, state + spec.offset, now, n);
    Evaluate(spec, state + spec.offset, now, n, &r);
    r.allowed = allowed;
    r.retry_after = allowed ? 0 : retry;
    r.before = before;
  }
}

bool ReadRules(const BizConfig& biz, NodeRef& ref, const Now& now, int64_t n, Decision* d, uint32_t* need_bytes) {
  if (!AdoptLayout(biz, ref, now, need_bytes)) return false;
  d->found = ref.exists;
  EvaluateRules(biz, ref.state, now, n, d);
  Summarize(d, biz.mode == Mode::kEnforce);
  return true;
}

uint32_t SweepLeases(const BizConfig& biz, uint8_t* state, const Now& now) {
  if (biz.lease_rule < 0) return 0;
  const RuleSpec& spec = biz.rules[biz.lease_rule];
  return Concurrency::Sweep(spec, state + spec.offset, now);
}

uint32_t NextLeaseSerial(const BizConfig& biz, const uint8_t* state) {
  if (biz.lease_rule < 0) return 0;
  return Concurrency::NextSerial(state + biz.rules[biz.lease_rule].offset);
}

void NoteLeasesEnded(const BizConfig& biz, const uint8_t* state, const Concurrency::Ended& ended, Decision* d) {
  if (biz.lease_rule < 0 || ended.total == 0) return;
  static_assert(Concurrency::Ended::kMax == Decision::kMaxLeasesEnded);
  // After those a conversion of this call ended (NoteConversionEnded).
  for (uint32_t i = 0; i < ended.n && d->leases_ended_n < Decision::kMaxLeasesEnded; ++i)
    d->leases_ended[d->leases_ended_n++] = ended.serial[i];
  d->lease_nonce = Concurrency::Nonce(state + biz.rules[biz.lease_rule].offset);
}

void NoteConversionEnded(const LayoutEnded& ended, Decision* d) {
  if (ended.held_n == 0) return;
  std::copy(ended.held_serial, ended.held_serial + ended.held_n, d->leases_ended);
  d->leases_ended_n = static_cast<uint8_t>(ended.held_n);
  d->lease_nonce = ended.nonce;
}

void LeasesSet(const BizConfig& biz, const uint8_t* state, const Now& now, uint32_t next_before, Decision* d) {
  if (biz.lease_rule < 0) return;
  const RuleSpec& spec = biz.rules[biz.lease_rule];
  const uint8_t* block = state + spec.offset;
  const uint32_t next = Concurrency::NextSerial(block);
  if (next == next_before) return;  // it granted none
  // Grant's serials: from next_before (1 for a new node), each the next of
  // the request's half (one after another for a lone holder): the last
  // one's next is the block's.
  const uint32_t from = next_before == 0 || next_before > Concurrency::kMaxSerial ? 1 : next_before;
  const uint32_t first = SerialInHalf(from, now.serial_half, Concurrency::AfterSerial);
  Concurrency::Lease lease;
  if (Concurrency::Find(spec, block, now, first, &lease) != Concurrency::Found::kHeld) return;
  uint16_t n = 0;
  for (uint32_t s = first; n < Concurrency::kMaxLeases; s = Concurrency::NextInHalf(s, now.serial_half)) {
    ++n;
    if (Concurrency::AfterSerial(s) == next) break;
  }
  d->set_lease_first = first;
  d->set_leases = n;
  d->lease_nonce = Concurrency::Nonce(block);
  d->lease_expires = lease.expires;
}

void LeaseGranted(const BizConfig& biz, const uint8_t* state, const Now& now, std::string_view key,
                  const LeaseSecret& secret, uint32_t next_before, Decision* d) {
  if (biz.lease_rule < 0) return;
  const RuleSpec& spec = biz.rules[biz.lease_rule];
  const uint8_t* block = state + spec.offset;
  const uint32_t next = Concurrency::NextSerial(block);
  if (next == next_before) return;  // no place was free
  const uint32_t serial = next == 1 ? Concurrency::kMaxSerial : next - 1;
  Concurrency::Lease lease;
  if (Concurrency::Find(spec, block, now, serial, &lease) != Concurrency::Found::kHeld) return;
  d->lease_serial = serial;
  d->lease_nonce = Concurrency::Nonce(block);
  d->lease_mac = LeaseMac(secret, biz.id, d->lease_nonce, serial, key);
  d->lease_expires = lease.expires;
}

Commit NodeOp::Apply(NodeRef& ref) {
  need_bytes = 0;
  recorded = false;
  const uint32_t asked = ref.state_bytes;
  d->leases_expired = 0;
  // A pass read again after another worker converted the node sends only
  // what this pass ended (the serials the first noted were sent again).
  d->leases_ended_n = 0;
  d->lease_serial = 0;
  d->lease_expires = 0;
  d->released = false;
  d->res_serial = 0;
  d->res_expires = 0;
  d->settled = false;
  d->reservations_full = false;
  d->res_returned = 0;
  d->res_overrun = 0;
  if (cmd == Cmd::kQuery || cmd == Cmd::kGet) {
    ReadRules(*biz, ref, now, n, d, &need_bytes);
    return Commit::kNone;
  }
  bool converted = false;
  LayoutEnded ended;
  if (!AdoptLayout(*biz, ref, now, &need_bytes, &converted, &ended)) return Commit::kNone;
  const bool enforce = biz->mode == Mode::kEnforce;
  d->found = ref.exists;
  // Leases past their expiry are freed and counted at the node's first
  // write after it (a read sees them as free already); so are those a
  // conversion ended (every write path below stores a conversion).
  const uint32_t expired = (ref.exists ? SweepLeases(*biz, ref.state, now) : 0) + ended.leases;
  d->leases_expired = static_cast<uint16_t>(std::min<uint32_t>(expired, UINT16_MAX));
  NoteConversionEnded(ended, d);
  d->res_expired = static_cast<uint16_t>(
      std::min<uint32_t>((ref.exists ? SweepReservations(*biz, ref, now) : 0) + ended.reservations, UINT16_MAX));
  if (cmd == Cmd::kRelease && give_back) return ApplyGiveBack(ref, converted, expired + d->res_expired);
  if (cmd == Cmd::kRelease || cmd == Cmd::kRenew) return ApplyLease(ref, converted, expired + d->res_expired);
  if (cmd == Cmd::kSettle) return ApplySettle(ref, converted || expired + d->res_expired > 0);
  switch (cmd) {
    case Cmd::kUpdate:
    case Cmd::kAcquire: {
      EvaluateRules(*biz, ref.state, now, n, d);
      Summarize(d, enforce);
      // A denied acquire records nothing (and never creates a node). It
      // stores a conversion to a reloaded rule all the same: converted again
      // at each later touch, a narrowed window would carry the old window's
      // uses into each new window until the old one ends (ConvertBlock);
      // and leases it found expired, counted once.
      if (reserve > 0 && d->allowed && !HasReservationRoom(*biz, ref, asked, &need_bytes, d)) {
        if (need_bytes != 0) return Commit::kNone;  // read again with room for the table
        // The key holds all it may: d says until when. In shadow mode the
        // acquire is allowed and counted all the same, with no reservation
        // (as a concurrency rule past max grants no lease there).
        d->reservations_full = true;
        d->would_deny = true;
        if (enforce) {
          d->allowed = false;
          d->retry_after = std::max<int64_t>(1, d->res_expires - now.s);
        }
      }
      if (cmd == Cmd::kAcquire && !d->allowed) {
        if (!converted && expired + d->res_expired == 0) return Commit::kNone;
        ref.expire_s = NodeExpireS(*biz, ref, now);
        return Commit::kWrite;
      }
      const uint32_t next_before = NextLeaseSerial(*biz, ref.state);
      RecordRules(*biz, ref.state, now, n, d);
      if (secret != nullptr) LeaseGranted(*biz, ref.state, now, key, *secret, next_before, d);
      if (reserve > 0 && secret != nullptr) GrantReservation(*biz, ref, now, key, *secret, n, reserve, d);
      // The rules keep their verdicts from before recording, so an update
      // still answers whether its uses were within every rule.
      Summarize(d, enforce);
      d->would_deny = d->would_deny || d->reservations_full;  // shadow: the table was full
      recorded = true;
      break;
    }
    case Cmd::kSet: {
      const uint32_t next_before = NextLeaseSerial(*biz, ref.state);
      Concurrency::Ended ended;
      for (uint32_t i = 0; i < biz->nrules; ++i) {
        uint8_t* block = ref.state + biz->rules[i].offset;
        if (biz->rules[i].algo == Algo::kConcurrency) Concurrency::SetCount(biz->rules[i], block, now, count, &ended);
        else SetCount(biz->rules[i], block, now, count);
      }
      NoteLeasesEnded(*biz, ref.state, ended, d);
      LeasesSet(*biz, ref.state, now, next_before, d);
      EvaluateRules(*biz, ref.state, now, 1, d);
      Summarize(d, enforce);
      break;
    }
    default: return Commit::kNone;
  }
  ref.expire_s = NodeExpireS(*biz, ref, now);
  return Commit::kWrite;
}

Commit NodeOp::ApplyLease(NodeRef& ref, bool converted, uint32_t expired) {
  d->status = Status::OK();
  if (!ref.exists || biz->lease_rule < 0) {
    // No node: never granted here, erased since (an operator's reset or
    // delete, as rules.md says), or evicted for room (a store too full frees
    // the leases of the node it evicts): each said, so that the operator
    // looks at what was done and at frs_store_evictions_live_total before
    // at the client.
    d->status = Status::Conflict(
        "lease " + std::string(lease) +
        " is unknown: this key holds no lease (none granted, the key's node erased since by an operator's reset or "
        "delete, or evicted for room, which frees its leases: frs_store_evictions_live_total)");
    return Commit::kNone;
  }
  const RuleSpec& spec = biz->rules[biz->lease_rule];
  uint8_t* block = ref.state + spec.offset;
  uint32_t serial = id.serial;
  uint64_t mac = id.mac;
  bool changed = converted || expired > 0;
  Concurrency::Lease held;
  // Checked against the id's hash before anything else: an id of another
  // key or a forged one learns nothing, and frees nothing.
  // Made under the key, or during a rotation the other one.
  auto made_under = [&](const LeaseSecret* s) {
    return s != nullptr && LeaseMac(*s, biz->id, Concurrency::Nonce(block), serial, key) == mac;
  };
  if ((serial == 0 && !ParseLeaseId(lease, &serial, &mac)) || !(made_under(secret) || made_under(also))) {
    d->status = Status::Conflict("lease " + std::string(lease) +
                                 " is unknown: it was never granted for this key in biz '" + biz->name +
                                 "' (another biz's or key's id, a reservation's, a forged one, one of a node an "
                                 "operator's reset or delete erased since, or one granted "
                                 "by another frsd keyed otherwise: shards without one <cluster lease_key>)");
  } else if (Concurrency::Find(spec, block, now, serial, &held) != Concurrency::Found::kHeld) {
    // The sweep above freed (and counted) an expired one already.
    d->status =
        Status::Gone("lease " + std::string(lease) +
                     " is no longer held: released, or expired, or ended by an operator's set of the key, or by "
                     "a reload that lowered the rule's max into a block with fewer places (logged then), or "
                     "granted after the export a restore of this store went back to");
  } else if (cmd == Cmd::kRelease) {
    d->released = Concurrency::Free(spec, block, now, serial);
    d->lease_nonce = Concurrency::Nonce(block);  // for the other holder (rule_event.cc)
    changed = true;
  } else {
    d->lease_serial = serial;
    d->lease_nonce = Concurrency::Nonce(block);
    d->lease_mac = mac;
    d->lease_expires = Concurrency::Extend(spec, block, now, serial);
    changed = true;
  }
  EvaluateRules(*biz, ref.state, now, 1, d);
  Summarize(d, biz->mode == Mode::kEnforce);
  // A release or renew that took effect reports, as a settle does: it is
  // never denied (a renew of one of three leases held on a full key must
  // not read as refused). Each rule's own verdict stays in its answer.
  if (d->status.ok()) {
    d->allowed = true;
    d->retry_after = 0;
  }
  if (!changed) return Commit::kNone;
  ref.expire_s = NodeExpireS(*biz, ref, now);
  return Commit::kWrite;
}

int64_t GiveBackUses(const BizConfig& biz, uint8_t* state, const Now& now, int64_t n, Decision* d, bool leases) {
  EvaluateRules(biz, state, now, 1, d);
  int64_t given = 0;
  Concurrency::Ended ended;
  for (uint32_t i = 0; i < biz.nrules; ++i) {
    const int64_t before = d->rules[i].count;
    if (before <= 0) continue;
    const int64_t after = std::max<int64_t>(0, before - n);
    uint8_t* block = state + biz.rules[i].offset;
    if (biz.rules[i].algo != Algo::kConcurrency) SetCount(biz.rules[i], block, now, after);
    else if (leases) Concurrency::SetCount(biz.rules[i], block, now, after, &ended);
    else continue;
    given = std::max(given, before - after);
  }
  NoteLeasesEnded(biz, state, ended, d);
  return given;
}

Commit NodeOp::ApplyGiveBack(NodeRef& ref, bool converted, uint32_t expired) {
  d->status = Status::OK();
  if (!ref.exists) {
    // A key never counted: nothing to give back, no node made.
    EvaluateRules(*biz, ref.state, now, 1, d);
    Summarize(d, biz->mode == Mode::kEnforce);
    return Commit::kNone;
  }
  const int64_t given = GiveBackUses(*biz, ref.state, now, n, d);
  d->given_back = given;
  EvaluateRules(*biz, ref.state, now, 1, d);
  Summarize(d, biz->mode == Mode::kEnforce);
  if (given == 0 && !converted && expired == 0) return Commit::kNone;
  ref.expire_s = NodeExpireS(*biz, ref, now);  // the reservations' expiries too
  return Commit::kWrite;
}

}  // namespace frs::limit
