// A replica's side of <cluster replicas="1">: changes another shard made,
// folded into this store's nodes with the handoff's merge (frs/change.h).
//
// A key's changes are applied in the order they were made, its adds and its
// rule events (limit/rule_event.h) interleaved as on the sender, so that a
// settle is judged against the window its reservation's estimate was counted
// in. Each add is rebuilt as the block it would have made of a fresh node
// ("n uses at at_ms"), then merged into the node here rule by rule
// (MergeBlock): a node that also holds this shard's own uses (it served the
// key for the other holder during a split) keeps both. Two exceptions. A
// token bucket's merge adds each side's lead over *now*, and a lead drains
// with time, so a change merged later than it was made would give back what
// it drained meanwhile; its uses are recorded at their own instants instead
// (the bucket's TAT moves as it would have on the sender). And a use that
// falls in the fixed window the node holds open at its instant joins that
// window, as it did on the sender: the merge of two open windows keeps the
// later one, so merging each use would move the window's start on to the
// latest use's second, and a reservation taken before it would be judged
// out of its window (its give-back and its overrun lost here). The stream's
// watermark is a receipt node written in the same transaction, so a batch
// sent again after a lost acknowledgement is applied once.
#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "limit/calendar_window.h"
#include "limit/concurrency.h"
#include "limit/engine_impl.h"
#include "limit/fixed_window.h"
#include "limit/rule_event.h"
#include "limit/window_counter.h"

namespace frs::limit {
namespace {

// The receipt node of a stream: bytes 0..4 when it was last written (as a
// handoff receipt's), 8..16 the last applied seq.
constexpr uint32_t kWatermarkBytes = kBlockUnit;

uint64_t LoadSeq(const NodeRef& r) {
  if (!r.exists || r.state_bytes < kWatermarkBytes) return 0;
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | r.state[8 + i];
  return v;
}

void StoreSeq(NodeRef& r, uint64_t seq) {
  for (int i = 0; i < 8; ++i) r.state[8 + i] = static_cast<uint8_t>(seq >> (8 * i));
}

// A fixed window opens at its first use. Uses of one window can reach the
// copy out of order (two of the sender's workers, each its own stream; a
// backlog delivered after a later use): a use older than the copy's window,
// which the owner's window held with the later ones, opens the copy's window
// at its own second, so that the two windows end together. Left later, the
// copy's window (and every window after it) ended a second or more after the
// owner's, with fewer uses: found from outside, a failover then granted 7 of
// 5. Only while every use the copy holds lies within a window opened there
// (now before u + interval), which a window opened at u must hold.
void OpenAtTheFirstUse(const RuleSpec& spec, uint8_t* block, int64_t u, int64_t now_s) {
  CounterBlock b = CounterBlock::Load(block);
  if (b.start_s == 0 || u >= int64_t{b.start_s} || u <= 0) return;
  if (!FixedWindow::FrameAt(spec, b, now_s).open || now_s >= u + int64_t{spec.interval}) return;
  b.start_s = static_cast<uint32_t>(u);
  b.Store(block);
}

}  // namespace

void EngineImpl::ApplyAdd(const BizConfig& cfg, uint8_t* state, const Change& c, const Now& now) const {
  const Now at = Now::At(c.at_ms, tz_.get());
  std::array<uint8_t, kMaxStateBytes> fresh{};
  bool made = false;
  for (uint32_t r = 0; r < cfg.nrules; ++r) {
    const RuleSpec& spec = cfg.rules[r];
    uint8_t* block = state + spec.offset;
    if (spec.algo == Algo::kConcurrency) continue;  // its leases come as events, each with its id and expiry
    if (spec.algo == Algo::kFixed) OpenAtTheFirstUse(spec, block, at.s, now.s);
    // A calendar use is recorded in its own window as the sender recorded
    // it (a window the copy holds, or the next one, its debt carried in),
    // unless the copy's block is in a later window already: merged with
    // "n uses at at_ms" summed after their window's end, a late use of a
    // window that borrowed lost the debt it carries on (found by a review).
    if (spec.algo == Algo::kTokenBucket ||
        (spec.algo == Algo::kFixed && FixedWindow::FrameAt(spec, CounterBlock::Load(block), at.s).open) ||
        (spec.algo == Algo::kCalendar && !CalendarWindow::Ahead(spec, block, at))) {
      Record(spec, block, at, c.n);
      continue;
    }
    if (!made) {
      // The block "n uses at at_ms" makes of a fresh node.
      Decision scratch;
      RecordRules(cfg, fresh.data(), at, c.n, &scratch);
      made = true;
    }
    MergeBlock(spec, block, fresh.data() + spec.offset, now);
  }
}

void EngineImpl::Notify(const Biz& biz, const Request& req, const Decision& d, const Now& now) {
  Change c;
  c.biz_id = biz.cfg.id;
  c.key = req.key;
  c.route_pos = req.route_pos;
  c.route_known = req.route_known;
  c.at_ms = now.ms;
  // A lease rule's own events go around the count's change, in the order
  // they happened (limit/rule_event.h).
  SendRuleEvents(biz.cfg, req, d, c, EventPhase::kBefore, sink_);
  if (CountChange(biz, req, d, &c)) sink_->OnChange(c);
  SendRuleEvents(biz.cfg, req, d, c, EventPhase::kAfter, sink_);
}

bool EngineImpl::CountChange(const Biz& biz, const Request& req, const Decision& d, Change* out) {
  if (!d.ok()) return false;
  Change& c = *out;
  switch (req.cmd) {
    case Cmd::kAcquire:
    case Cmd::kUpdate:
      // As Count says "recorded": an allowed acquire, any update, a shadow
      // denial (shadow answers allowed); nothing of a biz that is off.
      if (biz.cfg.mode == Mode::kOff || (req.cmd == Cmd::kAcquire && !d.allowed)) return false;
      c.kind = Change::Kind::kAdd;
      c.n = std::clamp<int64_t>(req.n, 1, kMaxUses);
      return true;
    case Cmd::kSet:
      c.kind = Change::Kind::kSet;
      c.n = req.count;
      return true;
    case Cmd::kDelete:
      if (!d.found) return false;
      c.kind = Change::Kind::kErase;
      return true;
    case Cmd::kReset:
      c.kind = Change::Kind::kResetBiz;
      c.key = {};
      return true;
    default: return false;
  }
}

namespace {

// One key of a batch of changes, with its changes in the order they were
// made.
struct ChangedNode {
  const BizConfig* cfg;
  std::string_view key;
  std::vector<const Change*> ops;  // its adds and rule events (rule_event.h), in order; after the set if any
  size_t ops_before_set = 0;       // ops[0, this) came before the set (events only: its adds were dropped)
  bool creates = false;            // something here makes the node (not only a release or sweep)
  uint32_t table_events = 0;       // reservations taken (or settles kept ahead): the table is read and kept
  bool erase = false;
  // Erased earlier in this batch and changed since (the owner deleted the
  // key, then counted it again): the stored state goes, the later changes
  // make the node anew.
  bool fresh = false;
  bool set = false;
  int64_t set_count = 0;
  int64_t set_ms = 0;
};

// The latest instant a change may name: the last millisecond of year 9999.
// Far below where the clock arithmetic of a rule (a token bucket's lead,
// 2^40 past it) overflows; a sender's clock is never there.
constexpr int64_t kMaxChangeMs = 253402300799999;

// A change's times in range, as the sender wrote them (before AsOfNow).
Status CheckTimes(const Change& c, size_t i) {
  if (c.at_ms < 0 || c.at_ms > kMaxChangeMs || c.until < 0 || c.until > kMaxChangeMs / 1000)
    return Status::InvalidArgument("change " + std::to_string(i + 1) + ": its time is unix milliseconds 0.." +
                                   std::to_string(kMaxChangeMs) + " (an until, seconds, as far)");
  return Status::OK();
}

// What a change must be to be applied; change `i` (0-based) in the error.
Status CheckChange(const Change& c, size_t i) {
  // A key no request can make now (U+FFFE) an earlier peer may still send.
  if (!KeyIsValid(c.key) && !KeyIsStorable(c.key))
    return Status::InvalidArgument("change " + std::to_string(i + 1) + ": bad key: " + ValidateKeyBytes(c.key));
  if (c.kind == Change::Kind::kEvent && (c.n < 0 || c.n > kMaxUses))
    return Status::InvalidArgument("change " + std::to_string(i + 1) + ": an event's n must be 0..2147483647");
  if (c.kind == Change::Kind::kAdd && (c.n < 1 || c.n > kMaxUses))
    return Status::InvalidArgument("change " + std::to_string(i + 1) + ": n must be 1..2147483647");
  if (c.kind == Change::Kind::kEvent && c.event == Change::Event::kNone)
    return Status::InvalidArgument("change " + std::to_string(i + 1) + ": an event names what happened");
  if (c.kind == Change::Kind::kSet && (c.n < 0 || c.n > kMaxUses))
    return Status::InvalidArgument("change " + std::to_string(i + 1) + ": count must be 0..2147483647");
  return Status::OK();
}

// Change `c` noted in what the batch holds for its key.
void Fold(const Change& c, ChangedNode* node) {
  ChangedNode& it = *node;
  switch (c.kind) {
    case Change::Kind::kAdd:
      it.fresh |= it.erase;
      it.erase = false;
      it.ops.push_back(&c);
      it.creates = true;
      break;
    case Change::Kind::kEvent:
      it.fresh |= it.erase;
      it.erase = false;
      it.ops.push_back(&c);
      it.creates |= RuleEventCreates(c);
      it.table_events += RuleEventNeedsTable(c) ? 1 : 0;
      break;
    case Change::Kind::kSet:
      // A set replaces what was counted before it: uses of this batch
      // before it are dropped with the rest (its events still apply).
      std::erase_if(it.ops, [](const Change* op) { return op->kind == Change::Kind::kAdd; });
      it.set = true;
      it.creates = true;
      it.ops_before_set = it.ops.size();
      it.fresh |= it.erase;
      it.erase = false;
      it.set_count = c.n;
      it.set_ms = c.at_ms;
      break;
    case Change::Kind::kErase:
      it.erase = true;
      it.table_events = 0;
      it.ops.clear();
      it.ops_before_set = 0;
      it.creates = false;
      it.set = false;
      break;
    case Change::Kind::kResetBiz: break;
  }
}

// The entries ref's table needs for `it`'s reservation events: the most in
// use at once (held, or kept ahead of a take) while they are applied in
// their order, found by applying them to a copy of the node whose table has
// the biz's bound. Short of it, Adopt would push out a held reservation and
// SettledAhead drop a settle; beyond it, the copy's table would outgrow the
// owner's.
uint32_t TableDemand(const ChangedNode& it, const NodeRef& ref, const Now& now) {
  const BizConfig& cfg = *it.cfg;
  std::array<uint8_t, kMaxStateBytes> scratch{};
  NodeRef copy = ref;
  copy.state = scratch.data();
  std::memcpy(scratch.data(), ref.state, std::min<size_t>(ref.state_bytes, scratch.size()));
  uint32_t unused = 0;
  MakeReservationRoom(cfg, copy, cfg.state_bytes + cfg.res_bytes, cfg.res_cap, &unused);
  uint32_t most = ReservationEntriesUsed(cfg, copy);
  for (const Change* c : it.ops) {
    const bool table = c->event == Change::Event::kResTake || c->event == Change::Event::kResSettle ||
                       c->event == Change::Event::kResSweep;
    if (c->kind != Change::Kind::kEvent || !table) continue;
    ApplyRuleEvent(cfg, copy, *c, now);
    most = std::max(most, ReservationEntriesUsed(cfg, copy));
  }
  return most;
}

// Each node of `items` made ready for its changes: the layout adopted, a
// node erased before its later changes emptied (existed: it was stored),
// the reservation table made or grown for what the changes hold in it at
// once. False: a node must be read again with need[i] bytes.
bool PrepareNodes(std::span<const ChangedNode> items, std::span<const Store::BatchItem> batch, const Now& now,
                  std::span<NodeRef> refs, std::span<uint32_t> need, std::span<char> existed) {
  bool whole = true;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].erase) continue;
    existed[i] = refs[i].exists;
    if (items[i].fresh) {
      // As the owner's delete left it: no node, whatever was stored.
      std::memset(refs[i].state, 0, refs[i].state_bytes);
      refs[i].exists = false;
      refs[i].stored_state_bytes = 0;
    }
    // A reservation taken needs the table after the rules, with room for
    // what this batch holds in it at once (made or grown as the sender's
    // acquires did), once the node is read whole.
    if (!AdoptLayout(*items[i].cfg, refs[i], now, &need[i]) ||
        (items[i].table_events > 0 && !MakeReservationRoom(*items[i].cfg, refs[i], batch[i].state_bytes,
                                                           TableDemand(items[i], refs[i], now), &need[i])))
      whole = false;
  }
  return whole;
}

// The key's changes written into its node (its layout adopted): the events
// before a set, the set, then its adds (`add`: EngineImpl::ApplyAdd) and
// events in the order they were made.
template <class AddFn>
void WriteNode(const ChangedNode& it, const Now& now, const TimeZone* tz, NodeRef& ref, AddFn&& add) {
  const BizConfig& cfg = *it.cfg;
  size_t e = 0;
  if (it.set) {
    for (; e < it.ops_before_set; ++e) ApplyRuleEvent(cfg, ref, *it.ops[e], now);
    const Now at = Now::At(it.set_ms, tz);
    for (uint32_t r = 0; r < cfg.nrules; ++r) {
      uint8_t* block = ref.state + cfg.rules[r].offset;
      // The leases the set ended and granted come as its release and grant
      // events, after it, by serial: a copy that kept the count's latest
      // ones itself dropped another worker's grant that came first.
      if (cfg.rules[r].algo != Algo::kConcurrency) SetCount(cfg.rules[r], block, at, it.set_count);
    }
  }
  for (; e < it.ops.size(); ++e) {
    const Change& c = *it.ops[e];
    if (c.kind == Change::Kind::kAdd) {
      add(cfg, ref.state, c);
    } else {
      ApplyRuleEvent(cfg, ref, c, now);
    }
  }
  ref.expire_s = NodeExpireS(cfg, ref, now);
}

// `*changes`, their times checked (CheckTimes), and those stamped after
// this shard's clock (the sender's clock ahead of it, or stepped) applied as
// of now: at its own instant a change would open a window in this shard's
// future and hold the key there (a 429 whose reset is that far off). Moved
// back by whole seconds, as few as bring it to now or before, its until as
// much: an item's life (until less at_ms's second) stays what the sender
// gave it, so a sweep the sender made frees here what it freed there.
// `storage` holds the copy when one is made.
Status AsOfNow(std::span<const Change>* changes, const Now& now, std::vector<Change>* storage) {
  for (size_t i = 0; i < changes->size(); ++i)
    if (Status s = CheckTimes((*changes)[i], i); !s.ok()) return s;
  if (std::none_of(changes->begin(), changes->end(), [&](const Change& c) { return c.at_ms > now.ms; }))
    return Status::OK();
  storage->assign(changes->begin(), changes->end());
  for (Change& c : *storage)
    if (c.at_ms > now.ms) {
      const int64_t ahead_s = (c.at_ms - now.ms + 999) / 1000;
      c.at_ms -= ahead_s * 1000;
      if (c.until > 0) c.until = std::max<int64_t>(0, c.until - ahead_s);
    }
  *changes = *storage;
  return Status::OK();
}

// Each biz's resets in a batch, once, with the place of the last: a walk of
// the whole store erases what a second would, and the biz's changes before
// it are what it erases. Those before skip_first a snapshot carried.
std::vector<std::pair<uint16_t, size_t>> LastResets(std::span<const Change> changes, size_t skip_first,
                                                    const Map& map) {
  std::vector<std::pair<uint16_t, size_t>> last;
  for (size_t i = skip_first; i < changes.size(); ++i) {
    const Change& c = changes[i];
    if (c.kind != Change::Kind::kResetBiz || map.FindId(c.biz_id) == nullptr) continue;
    auto it = std::find_if(last.begin(), last.end(), [&](const auto& r) { return r.first == c.biz_id; });
    if (it == last.end()) last.emplace_back(c.biz_id, i);
    else it->second = i;
  }
  return last;
}

// A batch's resets (`resets`: the biz ids), applied before its nodes (the
// changes of a biz before its reset were dropped already). Not part of the
// batch's transaction, so applied only to a batch the stream's watermark
// (`watermark`, its receipt) says is new: a batch sent again (a lost
// acknowledgement, a spool delivered again after a stop) would otherwise
// erase what was counted since its first delivery. The stream's second
// receipt keeps the last seq whose resets were applied: a batch that failed
// after them (a store error, a node that kept growing) is sent again, and its
// resets must not erase twice what was counted in between. Written after
// the erase, in a transaction of its own: a death between the two, or a
// failed write of it, still erases twice when the batch comes again (the
// other order would lose a reset that failed).
Status ApplyResetsOnce(Store& store, const Store::BatchItem& watermark, std::string_view stream, uint64_t seq,
                       const std::vector<std::pair<uint16_t, size_t>>& resets, const Now& now) {
  if (resets.empty()) return Status::OK();
  const std::string reset_receipt = "repl-reset/" + std::string(stream);
  const Store::BatchItem reset_mark{KeyRef{kReceiptBiz, FingerprintOf(kReceiptBiz, reset_receipt), reset_receipt,
                                           static_cast<uint8_t>(std::min<size_t>(reset_receipt.size(), kMaxKeyBytes))},
                                    kWatermarkBytes};
  uint64_t mark = 0, resets_done = 0;
  std::vector<Store::BatchItem> receipts{watermark, reset_mark};
  Status read = store.UpdateBatch(receipts, Clamp32(now.s), [&](std::span<NodeRef> refs, std::span<Commit> c) {
    c[0] = c[1] = Commit::kNone;
    mark = LoadSeq(refs[0]);
    resets_done = LoadSeq(refs[1]);
  });
  if (!read.ok()) return read;
  if (mark >= seq || resets_done >= seq) return Status::OK();
  for (const auto& reset : resets) {
    Store::Filter filter;
    filter.biz = reset.first;
    auto erased = store.EraseIf(filter, [](const NodeInfo&) { return true; });
    if (!erased.ok()) return erased.status();
  }
  receipts.assign(1, reset_mark);
  return store.UpdateBatch(receipts, Clamp32(now.s), [&](std::span<NodeRef> refs, std::span<Commit> c) {
    std::memset(refs[0].state, 0, refs[0].state_bytes);
    Store32(refs[0].state, Clamp32(now.s));
    StoreSeq(refs[0], seq);
    refs[0].expire_s = Clamp32(now.s + kReceiptSeconds);
    c[0] = Commit::kWrite;
  });
}

}  // namespace

Result<bool> EngineImpl::ApplyChanges(std::span<const Change> changes, std::string_view stream, uint64_t seq,
                                      size_t skip_first) {
  if (stream.empty() || stream.size() > 200) return Status::InvalidArgument("a stream name is 1..200 bytes");
  if (seq == 0) return Status::InvalidArgument("a stream's seq starts at 1");
  std::shared_ptr<const Map> map = SharedMap();
  const Now now = NowAt();
  std::vector<Change> clamped;
  if (Status s = AsOfNow(&changes, now, &clamped); !s.ok()) return s;
  // The nodes: one item per distinct key, with its changes in their order.
  std::vector<ChangedNode> items;
  std::vector<Store::BatchItem> batch;
  std::vector<std::pair<uint16_t, size_t>> last_reset = LastResets(changes, skip_first, *map);
  items.reserve(changes.size());
  for (size_t i = 0; i < changes.size(); ++i) {
    const Change& c = changes[i];
    const Biz* biz = map->FindId(c.biz_id);
    // A biz this map has not (taken out of it, or not yet reloaded in): its
    // node could be neither read nor served here, and a refusal would stop
    // the link for every other biz's changes until the maps agree. Skipped
    // here; the server keeps them aside for the reload that brings the biz
    // (Handler::KeepChangesOfNoBiz).
    if (biz == nullptr || c.kind == Change::Kind::kResetBiz) continue;
    if (Status s = CheckChange(c, i); !s.ok()) return s;
    if (i < skip_first) continue;  // a snapshot carried it
    // The resets go first, so a change its biz's reset came after is
    // erased already: applied, it would count on this copy what the
    // sender's reset took off its own.
    auto reset = std::find_if(last_reset.begin(), last_reset.end(), [&](const auto& r) { return r.first == c.biz_id; });
    if (reset != last_reset.end() && i < reset->second) continue;
    size_t k = 0;
    while (k < items.size() && !(items[k].cfg->id == c.biz_id && items[k].key == c.key)) ++k;
    if (k == items.size()) {
      if (items.size() == kMaxMergeNodes)
        return Status::InvalidArgument("a batch of changes names at most " + std::to_string(kMaxMergeNodes) + " keys");
      ChangedNode& it = items.emplace_back();
      it.cfg = &biz->cfg;
      it.key = c.key;
      Request r;
      r.key = c.key;
      r.route_pos = c.route_pos;
      r.route_known = c.route_known;
      batch.push_back({RefOf(*biz, r), biz->cfg.state_bytes});
    }
    Fold(c, &items[k]);
  }
  // A node whose table this batch uses is read with room for the biz's
  // bound: a table made or grown meanwhile on another link never leaves the
  // second pass short (which would drop the whole batch as a duplicate).
  for (size_t k = 0; k < items.size(); ++k)
    if (items[k].table_events > 0) batch[k].state_bytes = items[k].cfg->state_bytes + items[k].cfg->res_bytes;
  const std::string receipt = "repl/" + std::string(stream);
  batch.push_back({KeyRef{kReceiptBiz, FingerprintOf(kReceiptBiz, receipt), receipt,
                          static_cast<uint8_t>(std::min<size_t>(receipt.size(), kMaxKeyBytes))},
                   kWatermarkBytes});
  const size_t n = items.size();
  bool applied = false;
  std::vector<uint32_t> need(n + 1, 0);
  auto fn = [&](std::span<NodeRef> refs, std::span<Commit> commits) {
    std::fill(commits.begin(), commits.end(), Commit::kNone);
    std::fill(need.begin(), need.end(), 0);
    applied = false;
    if (LoadSeq(refs[n]) >= seq) return;  // applied before
    std::vector<char> existed(n, 0);
    if (!PrepareNodes(items, batch, now, refs, need, existed)) return;
    for (size_t i = 0; i < n; ++i) {
      if (items[i].erase) {
        commits[i] = refs[i].exists ? Commit::kErase : Commit::kNone;
        continue;
      }
      if (!refs[i].exists && !items[i].creates) {
        // A release or sweep of a node not here (or erased before it).
        if (existed[i]) commits[i] = Commit::kErase;
        continue;
      }
      WriteNode(items[i], now, tz_.get(), refs[i],
                [&](const BizConfig& cfg, uint8_t* state, const Change& c) { ApplyAdd(cfg, state, c, now); });
      commits[i] = Commit::kWrite;
    }
    std::memset(refs[n].state, 0, refs[n].state_bytes);
    Store32(refs[n].state, Clamp32(now.s));
    StoreSeq(refs[n], seq);
    refs[n].expire_s = Clamp32(now.s + kReceiptSeconds);
    commits[n] = Commit::kWrite;
    applied = true;
  };
  if (Status r = ApplyResetsOnce(*store_, batch.back(), stream, seq, last_reset, now); !r.ok()) return r;
  // A pass that finds a node short writes nothing; `applied` false after
  // the last pass means the stream's watermark had this batch (a duplicate).
  Status s = WithWholeNodes(std::span<Store::BatchItem>(batch).first(n), std::span<uint32_t>(need).first(n),
                            [&] { return store_->UpdateBatch(batch, Clamp32(now.s), fn); });
  if (!s.ok()) return s;
  return applied;
}

}  // namespace frs::limit
