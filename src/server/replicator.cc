#include "server/replicator.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "frs/percent_encode.h"
#include "server/logger.h"
#include "server/replica_auth.h"
#include "server/replica_wire.h"
#include "server/snapshot_missed.h"

namespace frs::server {
namespace {

// The line of an answer that starts with `word` and a space ("behind 12"),
// what follows it; empty when no line says it (a shard of an earlier
// version says none).
std::string_view AnswerLine(std::string_view body, std::string_view word) {
  for (size_t at = 0; at < body.size();) {
    const size_t end = std::min(body.find('\n', at), body.size());
    std::string_view line = body.substr(at, end - at);
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.size() > word.size() && line.starts_with(word) && line[word.size()] == ' ')
      return line.substr(word.size() + 1);
    at = end + 1;
  }
  return {};
}

// A non-blocking socket connecting to `to`.
os::UniqueFd StartConnect(const HostResolver::Address& to, std::string* err) {
  os::UniqueFd fd(::socket(to.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    *err = std::string("socket: ") + std::strerror(errno);
    return fd;
  }
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to.addr), to.len) != 0 && errno != EINPROGRESS) {
    *err = std::string("connect: ") + std::strerror(errno);
    fd.reset();
  }
  return fd;
}

// The clock changes are stamped with (the engine's: unix ms).
int64_t MonoNsNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// How long a link's episode lasted, for the line that ends it ("12.3 s",
// "2 min 5 s"): an operator reads from one line whether a blip or an
// outage ended, without finding the line that began it.
std::string DownFor(int64_t down_ns, int64_t now_ns) {
  const int64_t ms = std::max<int64_t>(0, now_ns - down_ns) / 1000000;
  char buf[48];
  if (ms < 60000)
    std::snprintf(buf, sizeof buf, "%lld.%lld s", static_cast<long long>(ms / 1000),
                  static_cast<long long>(ms % 1000 / 100));
  else
    std::snprintf(buf, sizeof buf, "%lld min %lld s", static_cast<long long>(ms / 60000),
                  static_cast<long long>(ms % 60000 / 1000));
  return buf;
}

int64_t RealMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

Replicator::Replicator(ReplicaOptions opts, ReplicaCounters* counters, EventLoop* loop)
    : opts_(std::move(opts)),
      counters_(counters),
      dropped_(counters ? &counters->dropped : nullptr),
      loop_(loop),
      resolver_(opts_.lookup) {
  const auto& shards = opts_.ring->shards();
  link_of_shard_.assign(shards.size(), -1);
  for (size_t i = 0; i < shards.size(); ++i) {
    if (static_cast<long>(i) == opts_.self_index) continue;
    link_of_shard_[i] = static_cast<long>(links_.size());
    Link& l = links_.emplace_back();
    l.shard = static_cast<long>(i);
    l.name = shards[i].name;
    // What was applied before this replicator held anything.
    if (opts_.shared != nullptr && i < kMaxReplicaPeers) {
      for (int side = 0; side < 2; ++side)
        l.alone_applied_seen[side] =
            std::atomic_ref<uint64_t>(opts_.shared->alone_applied[i][side]).load(std::memory_order_acquire);
      l.told_behind_seen = std::atomic_ref<uint64_t>(opts_.shared->told_behind[i]).load(std::memory_order_relaxed);
      l.learnt_behind_seen = std::atomic_ref<uint64_t>(opts_.shared->learnt_behind[i]).load(std::memory_order_relaxed);
    }
  }
  tags_ = std::make_unique<char[]>(std::max<size_t>(links_.size(), 1));
  if (counters_) {
    // A worker started again in this slot begins a new stream: numbers
    // first, then the name a snapshot reads them under. A killed one's
    // gauges go too: what it queued is counted again where a worker
    // delivers its journal (frs_replica_pending read it twice).
    for (size_t i = 0; i < kMaxReplicaPeers; ++i) {
      CounterSet(counters_->queued_no[i], 0);
      CounterSet(counters_->pending[i], 0);
      CounterSet(counters_->down[i], 0);
      CounterSet(counters_->alone[i], 0);  // else a dead worker's would say "behind" for good
      CounterSet(counters_->alone_own[i], 0);
      CounterSet(counters_->alone_peer[i], 0);
    }
    std::atomic_ref<uint64_t>(counters_->inside).store(0);  // a dead worker's, in this slot
    std::atomic_ref<uint64_t>(counters_->stream_hash).store(StreamHash(opts_.stream));
  }
  digest_ = opts_.ring->DigestText();
  for (Link& l : links_) {
    const auto was = std::find_if(opts_.down_at_start.begin(), opts_.down_at_start.end(),
                                  [&](const auto& d) { return d.first == l.name; });
    if (was == opts_.down_at_start.end()) continue;
    // The episode goes on: tried each second from now, its routes refused
    // (refuse) or served alone (serve) until it answers, as before.
    l.down = true;
    l.down_ns = was->second;
    l.failure = "down before <cluster> changed";
    FRS_LOG("replica link to %s: still down after the reload; tried again every second", l.name.c_str());
    Publish(l);
  }
}

void Replicator::FailLink(const std::string& name, const std::string& why, int64_t now_ns) {
  if (retired_) return;
  for (Link& l : links_)
    if (l.name == name && !l.down) Fail(l, why, now_ns);
}

std::vector<std::pair<std::string, int64_t>> Replicator::DownLinks() const {
  std::vector<std::pair<std::string, int64_t>> down;
  for (const Link& l : links_)
    if (l.down) down.emplace_back(l.name, l.down_ns);
  return down;
}

Replicator::~Replicator() {
  for (Link& l : links_) Close(l);
  // A journal with changes stays for the worker that takes it next; one of
  // links down with nothing queued holds nothing to deliver.
  if (journal_.open() && QueuedChanges() == 0) journal_.Remove();
}

long Replicator::OtherHolder(uint32_t pos, bool* as_successor) const {
  const long owner = static_cast<long>(opts_.ring->OwnerOfHash(pos));
  const long successor = opts_.ring->SuccessorOfHash(pos);
  *as_successor = false;
  if (owner == opts_.self_index) return successor;
  if (successor == opts_.self_index) {
    *as_successor = true;
    return owner;
  }
  return -1;
}

bool Replicator::Refusing(long peer, bool as_successor) const {
  if (peer < 0 || static_cast<size_t>(peer) >= link_of_shard_.size()) return false;
  const long li = link_of_shard_[static_cast<size_t>(peer)];
  if (li < 0) return false;
  const Link& l = links_[static_cast<size_t>(li)];
  return Lacks(l, as_successor) || (opts_.refuse && (l.down || l.catching_up));
}

void Replicator::NoteAloneApplied(int64_t now_ns) {
  if (opts_.shared == nullptr || retired_) return;
  for (Link& l : links_) {
    if (l.shard < 0 || static_cast<size_t>(l.shard) >= kMaxReplicaPeers) continue;
    const uint64_t told = std::atomic_ref<uint64_t>(opts_.shared->told_behind[l.shard]).load(std::memory_order_relaxed);
    if (told != l.told_behind_seen) {
      l.told_behind_seen = told;
      if (l.state == LinkState::kClosed && l.down && !l.queue.empty()) l.retry_ns = now_ns;
    }
    // Another worker learnt this copy is behind that shard: an idle link
    // asks now (its answer says so here too); a busy one hears it in its
    // next batch's answer.
    const uint64_t learnt =
        std::atomic_ref<uint64_t>(opts_.shared->learnt_behind[l.shard]).load(std::memory_order_relaxed);
    if (learnt != l.learnt_behind_seen) {
      l.learnt_behind_seen = learnt;
      // 0: not set yet (this turn runs before the worker's first Pump).
      if (!l.behind) l.idle_probe_ns = l.idle_probe_ns == 0 ? now_ns : std::min(l.idle_probe_ns, now_ns);
    }
    // The side whose copy lacked those uses: the answers held on it were
    // judged without them. Those of the other side were not (an owner's
    // uses, answered alone while this shard did not answer, change none of
    // this shard's own routes), and a 503 there would take a healthy shard
    // out of a proxy that counts it a failure, its routes to successors
    // that may hold no copy.
    uint8_t lacking = 0;
    for (int side = 0; side < 2; ++side) {
      const uint64_t v =
          std::atomic_ref<uint64_t>(opts_.shared->alone_applied[l.shard][side]).load(std::memory_order_acquire);
      if (v == l.alone_applied_seen[side]) continue;
      l.alone_applied_seen[side] = v;
      lacking |= side == 0 ? kOwnRoutes : kPeerRoutes;
    }
    if (lacking != 0 && !l.queue.empty() && On(l.queue.front(), l.queue.back(), lacking) != 0)
      l.refused_through = noted();
  }
}

void Replicator::NoteAloneAppliedRetired(const std::vector<std::string>& shards) {
  if (opts_.shared == nullptr || !retired_ || from_spool_) return;
  for (Link& l : links_) {
    const auto at = std::find(shards.begin(), shards.end(), l.name);
    const long now_as = at == shards.end() ? -1 : static_cast<long>(at - shards.begin());
    if (now_as < 0 || static_cast<size_t>(now_as) >= kMaxReplicaPeers) continue;
    uint8_t lacking = 0;
    for (int side = 0; side < 2; ++side) {
      const uint64_t v =
          std::atomic_ref<uint64_t>(opts_.shared->alone_applied[now_as][side]).load(std::memory_order_acquire);
      // Either side: the counters' sides are of the list running now, the
      // queue's stamps of the earlier one, and a route's side may differ
      // between them (the receiver takes an earlier list's batch so too).
      if (v != l.alone_applied_seen[side] && l.alone_seen_as == now_as) lacking = kOwnRoutes | kPeerRoutes;
      l.alone_applied_seen[side] = v;
    }
    l.alone_seen_as = now_as;
    if (lacking != 0 && !l.queue.empty() && On(l.queue.front(), l.queue.back(), lacking) != 0)
      l.refused_through = noted();
  }
}

bool Replicator::IsBehind(long peer, bool as_successor) const {
  if (peer < 0 || static_cast<size_t>(peer) >= link_of_shard_.size()) return false;
  const long li = link_of_shard_[static_cast<size_t>(peer)];
  return li >= 0 && Lacks(links_[static_cast<size_t>(li)], as_successor);
}

bool Replicator::Lacks(const Link& l, bool as_successor) {
  return l.behind && (as_successor ? l.behind_theirs : l.behind_mine);
}

uint64_t Replicator::On(const Queued& first, const Queued& last, uint8_t sides) {
  uint64_t n = 0;
  if (sides & kOwnRoutes)
    n += static_cast<uint32_t>(last.own_through - first.own_through) + ((first.routes & kOwnRoutes) ? 1 : 0);
  if (sides & kPeerRoutes)
    n += static_cast<uint32_t>(last.peer_through - first.peer_through) + ((first.routes & kPeerRoutes) ? 1 : 0);
  return n;
}

void Replicator::Stamp(Link& l, uint8_t routes) {
  Queued& q = l.queue.back();
  q.routes = routes;
  if (routes & kOwnRoutes) ++l.own_queued;
  if (routes & kPeerRoutes) ++l.peer_queued;
  q.own_through = l.own_queued;
  q.peer_through = l.peer_queued;
}

Replicator::Link* Replicator::LinkFor(long shard) {
  if (shard < 0 || static_cast<size_t>(shard) >= link_of_shard_.size()) return nullptr;
  const long li = link_of_shard_[static_cast<size_t>(shard)];
  return li < 0 ? nullptr : &links_[static_cast<size_t>(li)];
}

void Replicator::OnChange(const Change& c) {
  const uint32_t pos = c.route_known ? c.route_pos : Ring::HashRoute(Ring::RouteOf(c.key, {}));
  if (c.kind == Change::Kind::kResetBiz) {
    // A biz's every node: every other shard holds some of them.
    for (Link& l : links_) {
      Queued q{next_id_, l.next_no++, c.kind, c.biz_id, false, 0, c.n, c.at_ms, {}, c.event, c.item, c.nonce, c.until};
      l.queue.push_back(std::move(q));
      Stamp(l, kOwnRoutes | kPeerRoutes);
      if (l.down) l.down_through = l.queue.back().id;
      if (l.journaled) journal_.Queued(IndexOf(l), l.queue.back().AsChange());
      Publish(l);
    }
    touched_ = ~uint64_t{0};
    ++next_id_;
    return;
  }
  bool as_successor = false;
  Link* l = LinkFor(OtherHolder(pos, &as_successor));
  if (l == nullptr) return;  // served for a route this shard does not hold (enforce="0")
  const bool full = l->queue.size() >= MaxBacklog();
  if (full && opts_.refuse && !l->down) {
    // Kept: the link goes down at the turn's end (FailOverfull), or, taken
    // down so already, refuses its routes: only a change that came
    // past that (a reset) is queued, beyond the bound.
    if (!l->catching_up) l->overfull = true;
  } else if (full) {
    // Oldest first: what the other holder misses is the oldest uses, which
    // their windows forget first.
    if (l->inflight > 0) --l->inflight;
    l->queue.pop_front();
    if (l->journaled) journal_.Dropped(IndexOf(*l));
    if (counters_) CounterAdd(counters_->dropped);
    if (uint64_t n = 0; l->dropped_log.Note(MonoNsNow(), &n))
      FRS_LOG(
          "replicas: %zu change(s) kept for %s, the most a link keeps: its oldest are dropped (%llu since the last "
          "such line; frs_replica_dropped_total counts each); %s will lack them",
          l->queue.size(), l->name.c_str(), static_cast<unsigned long long>(n), l->name.c_str());
  }
  if (l->down && counters_) CounterAdd(counters_->unprotected);  // answered alone
  touched_ |= uint64_t{1} << static_cast<size_t>(l - links_.data());
  l->queue.push_back(Queued{next_id_++, l->next_no++, c.kind, c.biz_id, true, pos, c.n, c.at_ms, std::string(c.key),
                            c.event, c.item, c.nonce, c.until});
  Stamp(*l, as_successor ? kPeerRoutes : kOwnRoutes);
  if (l->down) l->down_through = l->queue.back().id;
  // Written before the answer that tells of it goes out (FlushJournal).
  if (l->journaled) journal_.Queued(IndexOf(*l), l->queue.back().AsChange());
  Publish(*l);
}

void Replicator::Enter() {
  if (counters_ == nullptr || opts_.shared == nullptr) return;
  // With the snapshot's reader (handler_replica.cc), a store-then-check
  // handshake on both sides (sequentially consistent): either this worker
  // sees the snapshot's count, or the reader sees `inside` and waits for
  // Leave(). The reader's deadline bounds the wait.
  std::atomic_ref<uint64_t> inside(counters_->inside);
  std::atomic_ref<uint64_t> snapshots(opts_.shared->snapshots);
  std::atomic_ref<uint64_t> until(opts_.shared->snapshot_until_ns);
  for (;;) {
    inside.store(1);
    const int64_t now = MonoNsNow();
    if (snapshots.load() == 0 || now >= static_cast<int64_t>(until.load())) return;
    inside.store(0);
    if (opts_.beat != nullptr) CounterSet(*opts_.beat, static_cast<uint64_t>(now / 1000000));
    timespec ts{0, 100 * 1000};
    nanosleep(&ts, nullptr);
  }
}

void Replicator::Leave() {
  if (counters_ != nullptr) std::atomic_ref<uint64_t>(counters_->inside).store(0);
}

uint64_t Replicator::RefusedThrough(uint64_t mask) const {
  uint64_t refused = 0;
  for (size_t i = 0; i < links_.size(); ++i)
    if (mask >> i & 1) refused = std::max(refused, links_[i].refused_through);
  return refused;
}

bool Replicator::RefusedForDown(uint64_t mask) const {
  if (!opts_.refuse) return false;
  for (size_t i = 0; i < links_.size(); ++i)
    if ((mask >> i & 1) && links_[i].down) return true;
  return false;
}

void Replicator::FailOverfull(int64_t now_ns) {
  for (Link& l : links_) {
    if (!l.overfull) continue;
    l.overfull = false;
    if (l.down || l.queue.size() < MaxBacklog()) continue;
    l.catching_up = true;
    Fail(l,
         "it has not taken " + std::to_string(l.queue.size()) +
             " change(s), the most a link keeps: it does not keep up with this shard; its routes answer 503 until "
             "fewer than " +
             std::to_string(MaxBacklog() / 2) + " are queued",
         now_ns);
  }
}

uint64_t Replicator::SafeThrough(uint64_t mask) const {
  uint64_t safe = next_id_ - 1;
  for (size_t i = 0; i < links_.size(); ++i) {
    const Link& l = links_[i];
    if (!(mask >> i & 1) || l.down || l.queue.empty()) continue;
    safe = std::min(safe, l.queue.front().id - 1);
  }
  return safe;
}

bool Replicator::Busy() const {
  for (const Link& l : links_) {
    if ((l.resolving_ns != 0 || l.name_pending) && resolver_.Pending(l.name)) return true;
    if (!l.queue.empty() && !l.down) return true;
  }
  return false;
}

void Replicator::BeginStop(int64_t now_ns) {
  stopping_ = true;
  stop_ns_ = now_ns;
  for (Link& l : links_)
    if (l.state == LinkState::kClosed && !l.queue.empty()) l.retry_ns = now_ns;
}

bool Replicator::Delivering() const {
  for (const Link& l : links_)
    if (!l.queue.empty() && !l.stop_failed) return true;
  return false;
}

size_t Replicator::QueuedChanges() const {
  size_t n = 0;
  for (const Link& l : links_) n += l.queue.size();
  return n;
}

std::string Replicator::QueuedByShard() const {
  std::string out;
  for (const Link& l : links_) {
    if (l.queue.empty()) continue;
    if (!out.empty()) out += "; ";
    out += l.name + ": " + std::to_string(l.queue.size()) + " queued";
    if (!l.failure.empty()) out += ", " + l.failure;
  }
  return out;
}

size_t Replicator::AloneInQueue(const Link& l) const {
  if (opts_.refuse || l.queue.empty() || l.queue.front().id > l.down_through) return 0;
  return static_cast<size_t>(std::upper_bound(l.queue.begin(), l.queue.end(), l.down_through,
                                              [](uint64_t id, const Queued& q) { return id < q.id; }) -
                             l.queue.begin());
}

std::vector<Replicator::LinkView> Replicator::Links() const {
  std::vector<LinkView> out;
  out.reserve(links_.size());
  // A retired link's, as a live link's (SendBatch): only those given while
  // it was down went alone; a spool's are not known, so all are taken.
  for (const Link& l : links_) {
    const size_t alone = from_spool_ ? l.queue.size() : AloneInQueue(l);
    uint64_t own = alone, peer = alone;
    if (!from_spool_ && alone > 0) {
      own = On(l.queue.front(), l.queue[alone - 1], kOwnRoutes);
      peer = On(l.queue.front(), l.queue[alone - 1], kPeerRoutes);
    }
    out.push_back(
        LinkView{l.name, l.queue.size(), l.down, l.queue.empty() ? 0 : l.queue.front().at_ms, alone, own, peer});
  }
  return out;
}

ReplicaSpool Replicator::Spool() const {
  ReplicaSpool s;
  s.stream = opts_.stream;
  s.digest = digest_;
  for (const Link& l : links_) {
    if (l.queue.empty()) continue;
    ReplicaSpoolLink& sl = s.links.emplace_back();
    sl.name = l.name;
    sl.next_seq = l.next_seq;
    sl.inflight = l.inflight;
    sl.inflight_seq = l.inflight_seq;
    sl.first_no = l.queue.front().no;
    sl.changes.reserve(l.queue.size());
    for (const Queued& q : l.queue) sl.changes.push_back(q.AsChange());
  }
  return s;
}

std::unique_ptr<Replicator> Replicator::FromSpool(const ReplicaSpool& spool, ReplicaOptions base, EventLoop* loop) {
  base.stream = spool.stream;
  base.sync = true;          // each batch as soon as the one before is acknowledged
  base.journal_dir.clear();  // its spool file is its record until it is delivered
  auto r = std::make_unique<Replicator>(std::move(base), nullptr, loop);
  r->links_.clear();
  r->link_of_shard_.assign(r->link_of_shard_.size(), -1);
  for (const ReplicaSpoolLink& sl : spool.links) {
    Link& l = r->links_.emplace_back();
    l.name = sl.name;  // shard -1: in no gauge of this worker's
    l.next_seq = sl.next_seq;
    l.inflight = std::min<uint64_t>(sl.inflight, sl.changes.size());  // never past its changes
    l.inflight_seq = sl.inflight_seq;
    l.next_no = sl.first_no + sl.changes.size();
    uint64_t no = sl.first_no;
    for (const Change& c : sl.changes) {
      l.queue.push_back(Queued{r->next_id_++, no++, c.kind, c.biz_id, c.route_known, c.route_pos, c.n, c.at_ms,
                               std::string(c.key), c.event, c.item, c.nonce, c.until});
      Stamp(l, kOwnRoutes | kPeerRoutes);  // whose routes: not kept in a spool
    }
  }
  r->tags_ = std::make_unique<char[]>(std::max<size_t>(r->links_.size(), 1));
  r->digest_ = spool.digest;
  r->retired_ = true;
  r->from_spool_ = true;
  r->from_journal_ = spool.journal;
  return r;
}

void Replicator::DropOwn(Link& l, int64_t now_ns) {
  const size_t n = l.queue.size();
  Close(l);
  l.queue.clear();
  l.inflight = 0;
  l.down = false;
  l.down_through = 0;
  l.behind = false;
  l.stop_failed = false;
  l.failure.clear();
  if (l.journaled) {
    JournalForget(l);
    JournalFlush();
  }
  if (dropped_) CounterAdd(*dropped_, n);
  if (uint64_t times = 0; l.own_log.Note(now_ns, &times))
    FRS_LOG(
        "replicas: %s answered that the changes queued for it are this shard's own (its <cluster> named this shard "
        "so while they were queued: a self or a list put back): %zu dropped, they are in this store already, and "
        "that name's holder lacks them (%llu time(s) since the last such line; docs/cluster.md, \"A list changed "
        "by mistake and put back\")",
        l.name.c_str(), n, static_cast<unsigned long long>(times));
  Publish(l);
}

void Replicator::Retire() {
  if (counters_)
    for (Link& l : links_)
      if (l.shard >= 0 && static_cast<size_t>(l.shard) < kMaxReplicaPeers) {
        CounterSet(counters_->pending[l.shard], 0);
        CounterSet(counters_->down[l.shard], 0);
        CounterSet(counters_->alone[l.shard], 0);
        CounterSet(counters_->alone_own[l.shard], 0);
        CounterSet(counters_->alone_peer[l.shard], 0);
      }
  counters_ = nullptr;
  retired_ = true;
  touched_ = 0;
  // What NoteAloneApplied saw last goes on being compared, where the list
  // running now numbers that shard as the earlier one did.
  for (Link& l : links_) l.alone_seen_as = l.shard;
  // A retired link asks nothing of an idle shard (IdleProbeDue): a probe in
  // flight is dropped, not taken for a failure of a link with nothing to do.
  for (Link& l : links_)
    if (l.idle_probe) {
      Close(l);
      l.idle_probe = false;
    }
}

void Replicator::Publish(Link& l) {
  if (!counters_) return;
  if (l.shard >= 0 && static_cast<size_t>(l.shard) < kMaxReplicaPeers) {
    CounterSet(counters_->pending[l.shard], l.queue.size());
    CounterSet(counters_->down[l.shard], l.down ? 1 : 0);
    // Those answered alone (serve): the queue runs by id, they are its head.
    // down_through stays set after an episode: the search runs only while
    // the queue's head is still among those changes.
    const size_t alone = AloneInQueue(l);
    // Of those, on each side's routes: the stamps of the first and the last.
    uint64_t own = 0, peer = 0;
    if (alone > 0) {
      own = On(l.queue.front(), l.queue[alone - 1], kOwnRoutes);
      peer = On(l.queue.front(), l.queue[alone - 1], kPeerRoutes);
    }
    // Released by `alone`: a reader that loads it first (acquire) reads
    // them as new as it or newer, and takes both sides when they fall
    // short of it (Handler::AheadOf): without resets they sum to it.
    CounterSet(counters_->alone_own[l.shard], own);
    CounterSet(counters_->alone_peer[l.shard], peer);
    std::atomic_ref<uint64_t>(counters_->alone[l.shard]).store(alone, std::memory_order_release);
    // Released after `pending`: a reader that loads this number first (with
    // acquire) and `pending` after it never takes a change for delivered
    // that is not (a returning shard waits on that: replica_catchup.cc).
    std::atomic_ref<uint64_t>(counters_->queued_no[l.shard]).store(l.next_no - 1, std::memory_order_release);
  }
}

void Replicator::Close(Link& l) {
  if (l.fd.valid()) {
    loop_->Remove(l.fd.get());
    l.fd.reset();
  }
  l.state = LinkState::kClosed;
  l.probing = false;
  l.out.clear();
  l.in.clear();
  l.out_sent = 0;
}

void Replicator::Connect(Link& l, int64_t now_ns) {
  const HostResolver::Answer to = resolver_.Resolve(l.name, now_ns);
  if (to.state == HostResolver::State::kPending) {
    // The name is looked up off the loop; the link is tried on a later turn
    // (Busy), and one whose name finds no answer in time fails as a link
    // that does not connect does: in replica_timeout_ms when changes wait,
    // in at least a second for a probe (as its answer gets).
    if (l.resolving_ns == 0) l.resolving_ns = now_ns;
    const int64_t timeout_ns = int64_t{opts_.timeout_ms} * 1000 * 1000;
    const int64_t limit_ns = l.queue.empty() ? std::max(timeout_ns, kRetryNs) : timeout_ns;
    if (now_ns - l.resolving_ns > limit_ns) {
      l.sent_ns = l.resolving_ns;  // the try began with the lookup (Fail: a stop's last try or not)
      l.resolving_ns = 0;
      l.name_pending = true;  // tried again as soon as the lookup answers (Pump)
      Fail(l, "cannot resolve: no answer within " + std::to_string(limit_ns / 1000000) + " ms", now_ns);
    }
    return;
  }
  l.resolving_ns = 0;
  l.name_pending = false;
  // A try that fails at once began now: during a stop, one begun after it
  // is the last (Fail), not tried again at every 5 ms turn of the stop.
  const auto failed = [&](const std::string& why) {
    l.sent_ns = now_ns;
    Fail(l, why, now_ns);
  };
  if (to.state == HostResolver::State::kFailed) return failed(to.error);
  std::string err;
  os::UniqueFd fd = StartConnect(to.address, &err);
  if (!fd.valid()) {
    resolver_.Stale(l.name);  // its next address, and the name looked up again
    return failed(err);
  }
  const size_t idx = static_cast<size_t>(&l - links_.data());
  if (Status s = loop_->Add(fd.get(), EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP, &tags_[idx]); !s.ok())
    return failed(s.message());
  l.fd = std::move(fd);
  l.state = LinkState::kConnecting;
  l.exchanges = 0;
  l.sent_ns = now_ns;
}

void Replicator::SendBatch(Link& l, int64_t now_ns) {
  // A batch sent before and not acknowledged goes again as it was (same
  // changes, same seq): the receiver's watermark applies it once.
  const bool again = l.inflight > 0;
  l.probing = false;
  l.idle_probe = false;
  if (!again) {
    l.inflight = std::min(l.queue.size(), kBatch);
    l.inflight_seq = l.next_seq++;
  }
  // On file before the other holder can apply it: a worker that delivers
  // the journal after a kill sends this batch again as it was, which the
  // receiver's watermark then applies once.
  if (l.journaled) {
    if (!again) journal_.Sent(IndexOf(l), l.inflight_seq, l.inflight);
    JournalFlush();
  }
  std::string body;
  // Kept while the link was down (or by a spool, a retired link): a grant
  // or renewal of a lease that ended here since goes as a grant already
  // over (held until its own second), so that its release, kept by another
  // worker and perhaps delivered first, is not undone, while the copy's
  // next serial still passes it (a serial is never granted twice).
  const bool kept = l.inflight > 0 && (from_spool_ || retired_ || l.queue.front().id <= l.down_through);
  for (size_t i = 0; i < l.inflight; ++i) {
    Change c = l.queue[i].AsChange();
    if (kept && opts_.lease_ended && c.kind == Change::Kind::kEvent &&
        (c.event == Change::Event::kLeaseGrant || c.event == Change::Event::kLeaseRenew) && opts_.lease_ended(c)) {
      c.event = Change::Event::kLeaseGrant;
      c.until = c.at_ms / 1000;
    }
    AppendChangeLine(c, &body);
  }
  std::string target = "/replicate?from=";
  AppendPercentEncoded(opts_.self, kPercentQueryValue, &target);
  target += "&stream=";
  AppendPercentEncoded(opts_.stream, kPercentQueryValue, &target);
  target += "&seq=" + std::to_string(l.inflight_seq);
  if (l.inflight > 0) target += "&first=" + std::to_string(l.queue.front().no);
  target += "&digest=" + digest_;
  AppendPrevious(l, &target);
  if (!opts_.lease_check.empty()) target += "&lease_key=" + opts_.lease_check;
  l.out.clear();
  l.out_sent = 0;
  l.out += "POST " + target + " HTTP/1.1\r\nHost: ";
  l.out += l.name;
  Sign(l, "POST", target, body);
  // Changes answered alone (the link was down, serve): the receiver's
  // answers held meanwhile were judged without them (NoteAloneApplied).
  // A spool's: which were answered alone is not kept, so all are taken for
  // it. A retired link's are known as a live one's: a sync link's answers
  // held at the reload wait for it, and an async link's unacknowledged
  // changes are no more alone than a live async link's (taken so, the
  // other shard refused its own keys after every reload: found from
  // outside); down_through says what went out while the link was down.
  if (!opts_.refuse && l.inflight > 0 && (from_spool_ || l.queue.front().id <= l.down_through))
    l.out += "\r\nFRS-Replica-Alone: 1";
  l.out += "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  l.out += body;
  l.in.clear();
  l.state = LinkState::kInFlight;
  l.sent_ns = now_ns;
  if (counters_) {
    CounterAdd(counters_->batches);
    if (again) CounterAdd(counters_->retries);
    else CounterAdd(counters_->sent, l.inflight);
  }
  Write(l, now_ns);
}

// A retired link's batches are of the earlier list itself, and a spool's of
// the list it was written under: only a live link names a previous one.
void Replicator::AppendPrevious(const Link& l, std::string* target) const {
  if (retired_ || from_spool_ || l.no_previous || opts_.previous_digest.empty()) return;
  *target += "&previous=";
  *target += opts_.previous_digest;
}

// The request's Authorization line: signed under the admin token, never
// the token itself (replica_auth.h); its nonce kept for the answer's proof.
void Replicator::Sign(Link& l, std::string_view method, std::string_view target, std::string_view body) {
  l.nonce.clear();
  if (opts_.token.empty()) return;
  l.out += "\r\nAuthorization: ";
  l.out += SignReplicaRequest(opts_.token, l.name, method, target, body, RealMs() / 1000, &l.nonce);
}

void Replicator::SendProbe(Link& l, int64_t now_ns) {
  std::string target = "/replicate?for=";
  AppendPercentEncoded(opts_.self, kPercentQueryValue, &target);
  target += "&digest=" + digest_;
  AppendPrevious(l, &target);
  // Asked with the lease key's check, as a batch is sent: a shard keyed
  // otherwise answers 409, and the link reads down for it at its first
  // probe, not at its first change.
  if (!opts_.lease_check.empty()) target += "&lease_key=" + opts_.lease_check;
  l.out.clear();
  l.out_sent = 0;
  l.out += "GET " + target + " HTTP/1.1\r\nHost: ";
  l.out += l.name;
  Sign(l, "GET", target, {});
  l.out += "\r\n\r\n";
  l.in.clear();
  l.probing = true;
  l.state = LinkState::kInFlight;
  l.sent_ns = now_ns;
  Write(l, now_ns);
}

bool Replicator::IdleProbeDue(const Link& l, int64_t now_ns) const {
  if (stopping_ || retired_ || l.down || l.behind || !l.queue.empty() || Unreached(l)) return false;
  return l.idle_probe_ns != 0 && now_ns >= l.idle_probe_ns;
}

void Replicator::IdleProbed(Link& l, int64_t now_ns, bool open) {
  ++l.exchanges;
  l.answered_ns = now_ns;
  l.probing = false;
  l.idle_probe = false;
  l.state = open ? LinkState::kIdle : LinkState::kClosed;
  l.idle_probe_ns = now_ns + kIdleProbeNs;
  if (open && !l.queue.empty() && Due(l, RealMs())) SendBatch(l, now_ns);
}

void Replicator::CheckPeerMap(Link& l, std::string_view body, int64_t now_ns) {
  const size_t at = body.find("\nmap ");
  if (at == std::string_view::npos || opts_.map_digest.empty()) return;  // an earlier build's answer
  std::string_view theirs = body.substr(at + 5);
  theirs = theirs.substr(0, std::min(theirs.find('\n'), size_t{32}));
  if (theirs == opts_.map_digest) return;
  // Into the log as hex digits only (the answer is the other end's bytes).
  if (theirs.find_first_not_of("0123456789abcdef") != std::string_view::npos) theirs = "(not a digest)";
  if (uint64_t n = 0; l.map_log.Note(now_ns, &n))
    FRS_LOG(
        "replicas: %s runs another map (its rules' digest %.*s, this shard's %s: map.xml and the Envoy descriptors' "
        "bizzes, comments aside): every shard must run the same map.xml and <grpc config> files; until then its copy "
        "of this shard's keys counts by other rules, and a failover there grants by them (logged once a minute)",
        l.name.c_str(), static_cast<int>(theirs.size()), theirs.data(), opts_.map_digest.c_str());
}

void Replicator::ProbeAnswered(Link& l, std::string_view body, int64_t now_ns) {
  l.peer_catching_up = SaysCatchingUp(body);
  CheckPeerMap(l, body, now_ns);
  Behind(l, AloneIn(body, "alone"), /*batch=*/false, now_ns);
}

void Replicator::BatchAnswered(Link& l, std::string_view body, int64_t now_ns) {
  // Before Acked: the batch's ids say which held answers to refuse.
  Behind(l, AloneIn(body, "behind"), /*batch=*/true, now_ns);
  // Said by the receiver while it catches up (an earlier build's never):
  // under traffic no probe goes, and the advice waiting on the end of that
  // catch-up waited for good (found by a review).
  l.peer_catching_up = SaysCatchingUp(body);
}

void Replicator::Probed(Link& l, std::string_view body, int64_t now_ns, bool send_next) {
  ProbeAnswered(l, body, now_ns);
  ++l.exchanges;
  l.probing = false;
  l.idle_probe_ns = now_ns + kIdleProbeNs;
  l.answered_ns = now_ns;
  l.state = LinkState::kIdle;
  l.failure.clear();
  Reached(l, now_ns);
  if (l.down) {
    l.down = false;
    FRS_LOG("replica link to %s is back after %s; %zu change(s)%s%s still queued for it", l.name.c_str(),
            DownFor(l.down_ns, now_ns).c_str(), l.queue.size(), retired_ ? " " : "", retired_ ? origin() : "");
    JournalEnd(l, RealMs());
    Publish(l);
  }
  if (send_next && !l.queue.empty() && Due(l, RealMs())) SendBatch(l, now_ns);
}

void Replicator::Write(Link& l, int64_t now_ns) {
  while (l.out_sent < l.out.size()) {
    ssize_t n = ::send(l.fd.get(), l.out.data() + l.out_sent, l.out.size() - l.out_sent, MSG_NOSIGNAL);
    if (n > 0) {
      l.out_sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    Ended(l, std::string("send: ") + std::strerror(errno), now_ns);
    return;
  }
}

bool Replicator::ReadAnswer(Link& l, int* status, std::string* body, std::string* proof, bool* failed) {
  *failed = false;
  proof->clear();
  for (;;) {
    const size_t head_end = l.in.find("\r\n\r\n");
    if (head_end == std::string::npos) return false;
    std::string_view head(l.in.data(), head_end);
    // "HTTP/1.x NNN", then the reason after a space, or the line's end.
    const auto digit = [&](size_t i) { return head[i] >= '0' && head[i] <= '9'; };
    if (head.size() < 12 || head.substr(0, 5) != "HTTP/" || head[8] != ' ' || !digit(9) || !digit(10) || !digit(11) ||
        (head.size() > 12 && head[12] != ' ' && head[12] != '\r')) {
      *failed = true;
      return false;
    }
    *status = (head[9] - '0') * 100 + (head[10] - '0') * 10 + (head[11] - '0');
    // An interim answer (100 Continue from something between the shards)
    // comes before the answer: skipped, as HTTP says (101 switches
    // protocols: no answer of a shard's).
    if (*status >= 100 && *status < 200 && *status != 101) {
      l.in.erase(0, head_end + 4);
      continue;
    }
    size_t length = 0;
    for (size_t p = head.find("\r\n"); p != std::string_view::npos; p = head.find("\r\n", p + 2)) {
      std::string_view line = head.substr(p + 2, head.find("\r\n", p + 2) - (p + 2));
      if (line.size() > 15 && strncasecmp(line.data(), "content-length:", 15) == 0) {
        std::string_view v = line.substr(15);
        while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
        auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), length);
        if (ec != std::errc() || end != v.data() + v.size() || v.empty()) {
          *failed = true;
          return false;
        }
      } else if (line.size() > kReplicaProofHeader.size() + 1 && line[kReplicaProofHeader.size()] == ':' &&
                 strncasecmp(line.data(), kReplicaProofHeader.data(), kReplicaProofHeader.size()) == 0) {
        std::string_view v = line.substr(kReplicaProofHeader.size() + 1);
        while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
        proof->assign(v);
      }
    }
    if (l.in.size() < head_end + 4 + length) return false;
    body->assign(l.in, head_end + 4, length);
    l.in.erase(0, head_end + 4 + length);
    return true;
  }
}

bool Replicator::Proven(Link& l, int status, const std::string& body, const std::string& proof, int64_t now_ns) {
  if (opts_.token.empty() || ReplicaAnswerProven(proof, opts_.token, l.nonce, status, body)) return true;
  // Something at the shard's address took a signed request and answered
  // as a shard would, without the token: its acknowledgement would drop
  // changes the real shard never got, its state would steer this link.
  Fail(l,
       "answered " + std::to_string(status) +
           (proof.empty() ? " without proof that it holds this cluster's admin token (FRS-Replica-Proof): "
                            "not a shard of this cluster (another program at its address?)"
                          : " with a proof that does not verify under this shard's admin token: another "
                            "token, or the answer was changed on the way"),
       now_ns);
  return false;
}

Replicator::Alone Replicator::AloneIn(std::string_view body, std::string_view word) {
  Alone a;
  const std::string_view n = AnswerLine(body, word);
  std::from_chars(n.data(), n.data() + n.size(), a.n);
  if (a.n == 0) return a;
  a.theirs = a.mine = true;
  char routes[32];  // WORD_routes, WORD one of the two short words
  if (word.size() + 7 > sizeof routes) return a;
  std::memcpy(routes, word.data(), word.size());
  std::memcpy(routes + word.size(), "_routes", 7);
  const std::string_view sides = AnswerLine(body, std::string_view(routes, word.size() + 7));
  uint64_t theirs = 0, mine = 0;
  const char* end = sides.data() + sides.size();
  auto [p, ec] = std::from_chars(sides.data(), end, theirs);
  if (ec != std::errc() || p == end || *p != ' ') return a;
  auto [q, ec2] = std::from_chars(p + 1, end, mine);
  // Each change is on one side at least: fewer than N is no account of them.
  if (ec2 != std::errc() || q != end || theirs + mine < a.n) return a;
  a.theirs = theirs != 0;
  a.mine = mine != 0;
  return a;
}

bool Replicator::SaysCatchingUp(std::string_view body) {
  return body.find("\ncatching_up 1\n") != std::string_view::npos;
}

bool Replicator::AcknowledgesBatch(std::string_view body, uint64_t seq) {
  const std::string_view first = body.substr(0, body.find('\n'));
  if (first != "applied" && first != "duplicate") return false;
  // Its "seq N" line names this batch. A receiver of an earlier build
  // writes none: taken (a rolling upgrade runs two builds a while).
  const size_t p = body.find("\nseq ");
  if (p == std::string_view::npos) return true;
  std::string_view v = body.substr(p + 5);
  v = v.substr(0, v.find('\n'));
  if (!v.empty() && v.back() == '\r') v.remove_suffix(1);
  return v == std::to_string(seq);
}

void Replicator::Read(Link& l, int64_t now_ns) {
  char buf[4096];
  std::string closed;  // why the connection ended ("": it is open)
  for (;;) {
    ssize_t n = ::recv(l.fd.get(), buf, sizeof buf, 0);
    if (n > 0) {
      l.in.append(buf, static_cast<size_t>(n));
      if (l.in.size() > 65536) {
        Fail(l, "an answer larger than 64 KiB", now_ns);
        return;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    closed = n == 0 ? std::string("closed by the other side") : std::string("recv: ") + std::strerror(errno);
    break;
  }
  // An answer that came whole before the close counts (a receiver that
  // stops answers its last batch with Connection: close).
  if (l.state == LinkState::kInFlight) {
    int status = 0;
    std::string body, proof;
    bool failed = false;
    if (ReadAnswer(l, &status, &body, &proof, &failed)) {
      // Requests go one at a time: bytes past the answer are no answer to
      // anything this side sent (an answer sent twice by something between
      // the shards). The connection goes once this answer is taken.
      if (closed.empty() && !l.in.empty()) closed = "bytes after the answer that no request asked for";
      // A shard of a build before previous= (a rolling upgrade) refuses
      // the parameter: this link names no previous list to it from now on,
      // and asks again at once without it, as that build was asked.
      if (status == 400 && !l.no_previous && body.find("parameter 'previous'") != std::string::npos) {
        l.no_previous = true;
        Close(l);
        Connect(l, now_ns);
        return;
      }
      if (l.idle_probe) {
        // A shard's own answer says it is there: its state, or its refusal
        // of /replicate (another list during a ring change: a batch's answer
        // judges that). A proxy's page with no shard behind it (a 502) is no
        // shard's.
        if (!body.starts_with("/replicate") && !(status == 200 && body.starts_with("pending "))) {
          while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
          Fail(l, "answered " + std::to_string(status) + " that is not a shard's (" + body.substr(0, 60) + ")", now_ns);
          return;
        }
        // Keyed otherwise (restarted with another <cluster lease_key>): it
        // is there, but it will refuse every change, so the link is down
        // now, not at the next change (before, it read up while idle).
        // So is one that refuses this shard's signature (another <admin
        // token>, or a self the lists spell otherwise): every batch would be
        // refused alike (before, the link read up until the first change).
        if ((status == 409 && body.find("<cluster lease_key>") != std::string::npos) || status == 403 ||
            (status == 400 && body.find("was signed for shard") != std::string::npos)) {
          while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
          Fail(l, "answered " + std::to_string(status) + ": " + body.substr(0, 300), now_ns);
          return;
        }
        // What it answered alone for this shard makes this copy behind, as
        // a probe's answer does (Probed).
        if (status == 200) {
          if (!Proven(l, status, body, proof, now_ns)) return;
          ProbeAnswered(l, body, now_ns);
        }
        IdleProbed(l, now_ns, closed.empty());
        if (!closed.empty()) Close(l);
        return;
      }
      if (status == 409 && body.find(kOwnBatchWords) != std::string::npos) {
        if (Proven(l, status, body, proof, now_ns)) DropOwn(l, now_ns);
        return;
      }
      if (status != 200) {
        while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
        Fail(l, "answered " + std::to_string(status) + ": " + body.substr(0, 300), now_ns);
        return;
      }
      // A probe's answer is the shard's own ("pending N ..."), not any 200
      // (a proxy's page before no shard).
      if (l.probing && !body.starts_with("pending ")) {
        Fail(l, "answered 200 that is not a shard's (" + body.substr(0, 60) + ")", now_ns);
        return;
      }
      // A batch's answer is the receiver's own, for this batch's seq: a
      // proxy's 200 page, or an answer of another batch, acknowledges
      // nothing (before, any 200 did, and a sync answer went out for a
      // change no other holder had).
      if (!l.probing && !AcknowledgesBatch(body, l.inflight_seq)) {
        while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
        Fail(l,
             "answered 200 that is not a shard's acknowledgement of batch " + std::to_string(l.inflight_seq) + " (" +
                 body.substr(0, 60) + ")",
             now_ns);
        return;
      }
      // A shard's answer in form: from the shard only with its proof.
      if (!Proven(l, status, body, proof, now_ns)) return;
      // Acknowledged; the next batch goes on this connection, or, closed,
      // on the next one (Pump).
      if (l.probing) {
        Probed(l, body, now_ns, /*send_next=*/closed.empty());
      } else {
        BatchAnswered(l, body, now_ns);
        Acked(l, now_ns, /*send_next=*/closed.empty());
      }
    } else if (failed) {
      Fail(l, "a malformed answer", now_ns);
      return;
    }
  }
  // Between requests nothing is owed: what comes is dropped with the
  // connection, not kept to be read as the next request's answer.
  if (closed.empty() && l.state != LinkState::kInFlight && !l.in.empty())
    closed = "bytes between requests that no request asked for";
  if (!closed.empty()) Ended(l, closed, now_ns);
}

void Replicator::Ended(Link& l, const std::string& why, int64_t now_ns) {
  // Between batches: the other side ended a keep-alive connection idle past
  // its idle_timeout_ms (or its request timeout after a reconnect). Nothing
  // waits on it; the next batch opens another.
  if (l.state == LinkState::kIdle) {
    Close(l);
    // A close long after the last answer may be the other shard's death:
    // asked sooner. One right after an answer is a relay or a keep-alive
    // that closes each time, and would make every probe a second apart.
    if (!l.down && now_ns - l.answered_ns >= kRetryNs)
      l.idle_probe_ns = std::min(l.idle_probe_ns == 0 ? INT64_MAX : l.idle_probe_ns, now_ns + kRetryNs);
    return;
  }
  // A batch sent on a connection that had carried others, and no byte of
  // its answer back: the other side may have closed it, idle, as the batch
  // went. It goes again on a new connection, once (that one has carried
  // none); its seq makes it applied once.
  if (l.state == LinkState::kInFlight && l.in.empty() && l.exchanges > 0 && !l.down) {
    Close(l);
    Connect(l, now_ns);
    return;
  }
  Fail(l, why, now_ns);
}

void Replicator::Reached(Link& l, int64_t now_ns) {
  if (!Unreached(l)) return;
  // The workers share the mark; the one that clears it closes what each
  // logged at the start ("not reached since this shard's start"), once.
  if (std::atomic_ref<uint64_t>(opts_.shared->unreached[l.shard]).exchange(0, std::memory_order_relaxed) != 0) {
    FRS_LOG("replicas: %s answers: reached for the first time since this shard's start", l.name.c_str());
    // A shard this store, new, took no snapshot from: the remedy is due,
    // unless that shard is on a new store too, which it says by asking this
    // one for its snapshot as it starts (the mark then goes). Said at once,
    // a new cluster's first shard told the operator to move its store aside
    // a millisecond before it took the advice back (found from outside).
    l.missed_advice_ns = now_ns + kMissedAdviceDelayNs;
  }
}

void Replicator::AdviseMissedSnapshot(Link& l, int64_t now_ns) {
  if (l.missed_advice_ns == 0 || now_ns < l.missed_advice_ns || l.peer_catching_up) return;
  l.missed_advice_ns = 0;
  auto missed = opts_.journal_dir.empty() ? Result<std::vector<MissedSnapshot>>(std::vector<MissedSnapshot>{})
                                          : ReadMissedSnapshots(opts_.journal_dir);
  if (missed.ok())
    for (const MissedSnapshot& m : *missed)
      if (m.shard == l.name) {
        FRS_LOG("replicas: %s answers again: %s", l.name.c_str(),
                MissedSnapshotWords(opts_.journal_dir, m, ::time(nullptr)).c_str());
        break;  // said once, however often an edited file names it
      }
}

bool Replicator::Unreached(const Link& l) const {
  // A retired replicator's shard numbers are the earlier list's.
  return !retired_ && opts_.shared != nullptr && l.shard >= 0 && static_cast<size_t>(l.shard) < kMaxReplicaPeers &&
         CounterGet(opts_.shared->unreached[l.shard]) != 0;
}

void Replicator::Acked(Link& l, int64_t now_ns, bool send_next) {
  ++l.exchanges;
  if (counters_) CounterAdd(counters_->acked, l.inflight);
  if (l.journaled) journal_.Acked(IndexOf(l), l.inflight_seq);
  l.queue.erase(l.queue.begin(), l.queue.begin() + static_cast<long>(l.inflight));
  l.inflight = 0;
  l.state = LinkState::kIdle;
  l.idle_probe_ns = now_ns + kIdleProbeNs;
  l.answered_ns = now_ns;
  l.failure.clear();
  Reached(l, now_ns);
  if (l.down) {
    l.down = false;
    FRS_LOG("replica link to %s is back after %s; %zu change(s)%s%s still queued for it", l.name.c_str(),
            DownFor(l.down_ns, now_ns).c_str(), l.queue.size(), retired_ ? " " : "", retired_ ? origin() : "");
  }
  if (l.catching_up && l.queue.size() < MaxBacklog() / 2) {
    l.catching_up = false;
    FRS_LOG("replica link to %s has taken its backlog down to %zu change(s): its routes are served again",
            l.name.c_str(), l.queue.size());
  }
  JournalEnd(l, RealMs());
  Publish(l);
  if (send_next && !l.queue.empty() && Due(l, RealMs())) SendBatch(l, now_ns);
}

void Replicator::Behind(Link& l, const Alone& alone, bool batch, int64_t now_ns) {
  l.behind_fail_ns = 0;  // it answered
  if (alone.n == 0) {
    if (l.behind)
      FRS_LOG(
          "replica link to %s: it holds no change it answered alone for this shard any more; the routes this "
          "shard shares with it are served again (%lld ms after it said so)",
          l.name.c_str(), static_cast<long long>(RealMs() - l.behind_since_ms));
    l.behind = false;
    return;
  }
  // The batch's held answers were judged on a copy without the other
  // holder's alone uses: refused (their uses stay counted on both), as
  // on_replica_down="refuse" refuses.
  // Every answer held on this link so far, whatever its newest change's
  // link (its ticket), was judged on that copy, when a use it counted is on
  // a side that lacks them. Such a use is still queued here (refused now),
  // or went in an earlier batch, judged by that batch's answer, or reached
  // the other holder before it answered alone. A queue with no change on
  // those sides holds no answer that granted on them. (An answer that
  // counted nothing there, a look held with a use of the other side, is
  // not refused: it granted nothing.)
  const uint8_t lacking = (alone.theirs ? kPeerRoutes : 0) | (alone.mine ? kOwnRoutes : 0);
  if (batch && !l.queue.empty() && On(l.queue.front(), l.queue.back(), lacking) != 0) l.refused_through = noted();
  l.probe_ns = now_ns + kBehindProbeNs;
  // Only the side whose routes lack uses refuses: an owner that answered
  // its own routes alone (its link timed out) leaves this shard's own
  // routes whole here, and a 503 on them would take a healthy shard out
  // of a proxy that counts it a failure.
  const bool widened = l.behind && ((alone.theirs && !l.behind_theirs) || (alone.mine && !l.behind_mine));
  l.behind_theirs = alone.theirs;
  l.behind_mine = alone.mine;
  const char* side = alone.theirs && alone.mine ? "those routes"
                     : alone.theirs             ? "those of its routes (this shard serves them for it)"
                                                : "those of this shard's routes";
  if (widened)
    FRS_LOG("replica link to %s: it now holds %llu change(s) answered alone for this shard: %s answer 503 here",
            l.name.c_str(), static_cast<unsigned long long>(alone.n), side);
  if (l.behind) return;
  l.behind = true;
  l.behind_since_ms = RealMs();
  if (counters_) CounterAdd(counters_->behind);
  if (opts_.shared != nullptr && !retired_ && l.shard >= 0 && static_cast<size_t>(l.shard) < kMaxReplicaPeers) {
    // The other workers ask too (NoteAloneApplied); this one's own bump is
    // not news to it.
    l.learnt_behind_seen =
        std::atomic_ref<uint64_t>(opts_.shared->learnt_behind[l.shard]).fetch_add(1, std::memory_order_relaxed) + 1;
  }
  FRS_LOG(
      "replica link to %s: it answered %llu change(s) alone for routes it shares with this shard while this "
      "shard did not take them (a pause, a partition, or the two running different shard lists in a ring change), and "
      "this shard's copy lacks them: %s answer 503 here until "
      "they arrive (frs_replica_behind_total)",
      l.name.c_str(), static_cast<unsigned long long>(alone.n), side);
}

bool Replicator::Due(const Link& l, int64_t now_ms) const {
  if (l.queue.empty()) return false;
  return opts_.sync || l.queue.size() >= kBatch || now_ms - l.queue.front().at_ms >= kAsyncLingerMs;
}

void Replicator::Fail(Link& l, const std::string& why, int64_t now_ns) {
  // Behind a holder that stopped answering for kBehindGiveUpNs: what it
  // answered alone cannot come now (it may be gone for good), so serve
  // gives these routes back to this shard's copy, as for any down link;
  // refuse keeps refusing them. One slow answer or reset connection is not
  // that: the holder may be busy delivering its backlog. Its probe's
  // failure is a down link's, not an unreached shard's.
  const bool was_behind = l.behind;
  if (l.behind && !opts_.refuse && l.behind_fail_ns == 0) l.behind_fail_ns = now_ns;
  if (l.behind && !opts_.refuse && now_ns - l.behind_fail_ns >= kBehindGiveUpNs) {
    l.behind = false;
    l.behind_fail_ns = 0;
    FRS_LOG(
        "replica link to %s: it does not answer (%s) while it holds changes it answered alone for this shard; "
        "serving the routes shared with it from this shard's copy (on_replica_down=serve)",
        l.name.c_str(), why.c_str());
  }
  if (l.probing && !l.idle_probe && !l.down && !was_behind) {
    // A probe of a shard never reached since the start: it reads down
    // already (unreached); nothing waits on it, so no episode begins. A new
    // reason is said once (a shard that answers, but refuses: its token or
    // its list differs), not each second.
    Close(l);
    if (why != l.failure)
      FRS_LOG("replicas: %s, not reached since this shard's start, does not answer yet: %s", l.name.c_str(),
              why.c_str());
    l.failure = why;
    l.probe_ns = now_ns + kRetryNs;
    return;
  }
  const bool was_down = l.down;
  Close(l);
  l.failure = why;
  l.probing = l.idle_probe = false;

  l.retry_ns = now_ns + kRetryNs;
  // While stopping: a try begun before the stop (a down link's, a batch in
  // flight) is not the last try; one begun after it is.
  l.stop_failed = stopping_ && l.sent_ns >= stop_ns_;
  if (stopping_ && !l.stop_failed) l.retry_ns = now_ns;
  if (!l.down) l.down_ns = now_ns;
  if (!l.down && retired_) {
    l.down = true;
    // Answers a <cluster> reload left waiting on this link (a worker's
    // RetiredWaitTurn) are refused as the live link's would be.
    if (opts_.refuse && !from_spool_ && !l.queue.empty()) l.refused_through = noted();
    // The live link to that shard learns of it (Worker::DrainTurn), unless
    // the shard answered a refusal of this list's own (4xx: its digest, a
    // token), which says nothing of the live link.
    if (!from_spool_ && !why.starts_with("answered 4")) newly_down_.emplace_back(l.name, why);
    FRS_LOG("replica link to %s is down (%s): %zu change(s) %s %s, tried again every second", l.name.c_str(),
            why.c_str(), l.queue.size(), origin(), from_spool_ ? "wait for it" : "kept for it");
  } else if (!l.down) {
    l.down = true;
    if (counters_) CounterAdd(counters_->episodes);
    FRS_LOG("replica link to %s is down (%s): %s; %zu change(s) kept for its return", l.name.c_str(), why.c_str(),
            opts_.refuse ? "its routes answer 503 (on_replica_down=refuse)" : "serving alone (on_replica_down=serve)",
            l.queue.size());
    // Every answer held on this link: its ticket (its newest change) may
    // be another link's, above this link's last change.
    if (opts_.refuse && !l.queue.empty()) l.refused_through = noted();
    if (!opts_.refuse && counters_) CounterAdd(counters_->unprotected, l.queue.size());
  }
  if (!l.queue.empty()) l.down_through = std::max(l.down_through, l.queue.back().id);  // answered alone or refused
  if (!was_down) JournalLink(l);
  Publish(l);
}

void Replicator::OnEvent(const void* tag, int64_t now_ns) {
  Link& l = links_[static_cast<size_t>(static_cast<const char*>(tag) - tags_.get())];
  if (!l.fd.valid()) return;
  if (l.state == LinkState::kConnecting) {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(l.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      resolver_.Stale(l.name);  // its next address, and the name looked up again
      Fail(l, std::string("connect: ") + std::strerror(err), now_ns);
      return;
    }
    l.state = LinkState::kIdle;
    // A link back (or new) sends what waited at once; with nothing to
    // send, a down or never reached one asks whether the shard is back.
    if (!l.queue.empty()) SendBatch(l, now_ns);
    else if (l.down || Unreached(l) || l.idle_probe) SendProbe(l, now_ns);
    return;
  }
  if (l.state == LinkState::kInFlight) Write(l, now_ns);
  if (l.fd.valid()) Read(l, now_ns);
}

void Replicator::Pump(int64_t now_ns) {
  const int64_t timeout_ns = int64_t{opts_.timeout_ms} * 1000 * 1000;
  const int64_t now_ms = RealMs();
  int64_t oldest_ms = -1;
  for (Link& l : links_) {
    if (l.idle_probe_ns == 0) l.idle_probe_ns = now_ns + kIdleProbeNs;
    AdviseMissedSnapshot(l, now_ns);
    switch (l.state) {
      case LinkState::kClosed:
        // A link that failed for want of its name's address is tried again
        // once the lookup answers, not a second later.
        if (l.name_pending && !resolver_.Pending(l.name)) {
          l.name_pending = false;
          l.retry_ns = l.probe_ns = now_ns;
        }
        // A down link is tried again each second even with nothing to
        // send: refuse answers 503 for its routes until it is back. One to a
        // shard this one's start could not reach is probed each second
        // too, so that it reads up once that shard answers, used or not.
        if (stopping_ ? !l.queue.empty() && !l.stop_failed && now_ns >= l.retry_ns
                      : (!l.queue.empty() || l.down) && now_ns >= l.retry_ns) {
          // Not a probe (whose try a pending lookup may have left marked).
          l.probing = l.idle_probe = false;
          Connect(l, now_ns);
        } else if (!stopping_ && l.queue.empty() && !l.down && now_ns >= l.probe_ns && (Unreached(l) || l.behind)) {
          l.probing = true;
          Connect(l, now_ns);
        } else if (IdleProbeDue(l, now_ns)) {
          l.probing = l.idle_probe = true;
          Connect(l, now_ns);
        }
        break;
      case LinkState::kConnecting:
      case LinkState::kInFlight:
        if (l.probing && !l.down && !l.queue.empty()) {
          // A change came: it goes now, on a connection of its own, not
          // after the probe's answer.
          l.idle_probe = false;
          Close(l);
          Connect(l, now_ns);
          break;
        }
        // An idle probe holds no answer: a loaded shard gets at least a
        // second before the link is taken for down.
        if (l.idle_probe ? now_ns - l.sent_ns > std::max(timeout_ns, kRetryNs) : now_ns - l.sent_ns > timeout_ns) {
          if (l.state == LinkState::kConnecting) resolver_.Stale(l.name);  // its next address
          Fail(l,
               l.idle_probe ? std::string("no answer to a probe within a second")
                            : "no answer within replica_timeout_ms=" + std::to_string(opts_.timeout_ms),
               now_ns);
        }
        break;
      case LinkState::kIdle:
        if (Due(l, now_ms)) SendBatch(l, now_ns);
        else if (l.behind && l.queue.empty() && now_ns >= l.probe_ns) SendProbe(l, now_ns);
        else if (IdleProbeDue(l, now_ns)) {
          l.idle_probe = true;
          SendProbe(l, now_ns);
        }
        break;
    }
    if (!l.queue.empty() && (oldest_ms < 0 || l.queue.front().at_ms < oldest_ms)) oldest_ms = l.queue.front().at_ms;
    // A down link not on file (its journal failed: tried again after
    // kJournalRetryMs); async answers went out, so changes that wait long (a
    // batch unanswered, long before the timeout takes the link for down) go
    // on file too.
    if (!l.journaled &&
        (l.down || (!opts_.sync && !l.queue.empty() && now_ms - l.queue.front().at_ms >= kAsyncJournalMs)))
      JournalLink(l);
    else if (l.journaled) JournalEnd(l, now_ms);
  }
  if (counters_)
    CounterSet(counters_->lag_ms, static_cast<uint64_t>(oldest_ms < 0 ? 0 : std::max<int64_t>(0, now_ms - oldest_ms)));
  FlushJournal();  // steps no answer has carried out yet (a lease's sweep, an acknowledgement)
}

void Replicator::JournalLink(Link& l) {
  if (opts_.journal_dir.empty() || l.journaled || RealMs() < journal_retry_ms_) return;
  JournalState(l);
  if (!journal_.open()) {
    // A new file is made with that state in it, whole: a kill while it is
    // written leaves no file of that name, or all of it.
    if (Status s = journal_.Start(opts_.journal_dir, opts_.stream, digest_); !s.ok()) {
      journal_retry_ms_ = RealMs() + kJournalRetryMs;
      FRS_LOG(
          "replicas: no journal of the changes queued for %s (%s): they are in this worker's memory only, and a "
          "kill -9 of it would lose them",
          l.name.c_str(), s.message().c_str());
      return;
    }
  }
  l.journaled = true;
  JournalFlush();
}

void Replicator::JournalState(const Link& l) {
  const unsigned i = IndexOf(l);
  journal_.Link(i, l.name, l.next_seq, l.inflight, l.inflight_seq, l.queue.empty() ? l.next_no : l.queue.front().no);
  for (const Queued& q : l.queue) journal_.Queued(i, q.AsChange());
}

void Replicator::JournalEnd(Link& l, int64_t now_ms) {
  if (!l.journaled || l.down) return;
  // Kept while it holds a change queued while the link was down (answered
  // alone, whatever the mode); past those, sync holds its answers, and
  // async's bound is kAsyncJournalMs.
  if (!l.queue.empty() &&
      (l.queue.front().id <= l.down_through || (!opts_.sync && now_ms - l.queue.front().at_ms >= kAsyncJournalMs / 2)))
    return;
  JournalForget(l);
}

void Replicator::JournalForget(Link& l) {
  l.journaled = false;
  if (std::none_of(links_.begin(), links_.end(), [](const Link& o) { return o.journaled; })) {
    journal_.Remove();  // nothing in it is left to deliver
    return;
  }
  journal_.Ended(IndexOf(l));
}

void Replicator::JournalFlush() {
  if (!journal_.open()) return;
  Status s = journal_.Flush();
  if (s.ok()) {
    uint64_t queued = 0;
    for (const Link& l : links_)
      if (l.journaled) queued += l.queue.size();
    if (!journal_.Oversized(queued)) return;
    // A long episode: the file holds mostly changes delivered or dropped
    // since. Written again with what the queues hold now.
    s = journal_.Restart([&] {
      for (const Link& l : links_)
        if (l.journaled) JournalState(l);
    });
    if (s.ok()) return;
  }
  FRS_LOG(
      "replicas: %s: the journal is removed, and the changes queued for the links that are down are in this "
      "worker's memory only (a kill -9 of it would lose them); tried again in 10 s",
      s.message().c_str());
  journal_.Remove();
  journal_retry_ms_ = RealMs() + kJournalRetryMs;
  for (Link& l : links_) l.journaled = false;
}

}  // namespace frs::server
