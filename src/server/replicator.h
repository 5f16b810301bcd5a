// server/replicator.h: a worker's links to the other holders of its routes
// (<cluster replicas="1">, docs/cluster.md "Replicas").
//
// Every change the worker's engine makes (frs/change.h) to a node whose
// route this shard owns goes to the route's successor; one made to a route
// this shard serves as successor goes back to the owner. Per other shard
// the worker keeps one ordered stream: a queue of changes, sent in batches
// of up to kBatch over one keep-alive HTTP connection (POST /replicate),
// one batch in flight at a time, each batch numbered. The receiver applies
// a batch and the stream's new watermark in one store transaction, so a
// batch sent again after a lost acknowledgement is applied once.
//
// Sync mode: a connection whose answer changed a count holds that answer
// (Connection::HoldForReplica) until SafeThrough() passes its ticket, i.e.
// every change noted up to it is acknowledged. A link that does not
// acknowledge within replica_timeout_ms goes down (an episode, logged once):
// with on_replica_down="serve" the answers waiting on it go out, counted as
// unprotected, and its queue is kept for the shard's return (the backlog,
// bounded by kMaxBacklog: its oldest dropped past it); with "refuse" they
// are answered 503 and routes whose other holder it is answer 503 until it
// is back (a live link that reaches kMaxBacklog goes down so, FailOverfull:
// nothing is dropped, and the queue may pass the bound by what one loop
// turn adds). A down link is tried again every second.
//
// The backlog lives in this worker's memory, and from the moment a link
// goes down (async: or its oldest change waits kAsyncJournalMs) until its
// queue holds nothing answered alone (async: nothing older than half of
// that), each of its steps is also written to a journal in the store
// directory (replica_journal.h), which a worker started after a kill -9 of
// this one delivers. A graceful stop writes the backlog to a spool file, in
// the journal's place, that the next start delivers (replica_spool.h,
// Spool, FromSpool).
//
// Thread safety: none; one per worker, driven by its event loop.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frs/change.h"
#include "frs/ring.h"
#include "os/unique_fd.h"
#include "server/event_loop.h"
#include "server/host_resolver.h"
#include "server/log_throttle.h"
#include "server/metrics.h"
#include "server/replica_journal.h"
#include "server/replica_spool.h"

namespace frs::server {

struct ReplicaOptions {
  std::shared_ptr<const Ring> ring;
  long self_index = -1;
  std::string self;
  bool sync = true;
  bool refuse = false;
  uint32_t timeout_ms = 200;
  std::string token;       // srv.xml's admin token: the receivers check it
  std::string map_digest;  // of the map this worker runs (CheckPeerMap)
  // The digest (hex) of the <cluster> list this shard ran before its last
  // change, empty if none: sent beside the current one, a shard that still
  // runs that list takes this one's changes (handler_replica.cc).
  std::string previous_digest;
  // The lease key's check (Engine::LeaseKeyCheck, hex; empty: no
  // <cluster lease_key>): a receiver with another key refuses the batch.
  std::string lease_check;
  std::string stream;  // this worker's stream name: self, pid and start time
  // The shard's shared replica state: Enter() waits while a snapshot is read.
  ReplicaShared* shared = nullptr;
  // The worker's WorkerCounters::beat_ms (or null): Enter()'s wait, for
  // another worker's snapshot, counts as its loop's turns, since the
  // master's watch over hung workers must not take the wait for a hang.
  uint64_t* beat = nullptr;
  // Where the journal of the links that are down is made (the store
  // directory; empty: none is kept).
  std::string journal_dir;
  // The shards (by name) whose links the replicator this one replaces (a
  // reload that changed <cluster>) had down: theirs start down, the same
  // episode, until they answer. A new link reads up until it fails, and
  // under refuse its first change would be counted here, then refused.
  // With when each went down (MonoNs): the episode's length, said when it
  // ends, counts from then, not from the reload.
  std::vector<std::pair<std::string, int64_t>> down_at_start;
  // Whether a lease a kept grant or renewal names has ended here since
  // (AdminEngine::LeaseEnded; unset: never asked). A batch of changes kept
  // while the link was down sends such a one as a grant already over (it
  // holds nothing there, and passes the copy's next serial): the release made
  // on another worker, on its own link, may reach the other holder first,
  // and the grant after it would hold a place there until its expiry.
  std::function<bool(const Change&)> lease_ended;
  // How the shards' names are looked up (unset: getaddrinfo, off the
  // loop: server/host_resolver.h); tests give their own.
  HostResolver::LookupFn lookup;
  // The most changes a link keeps (0: Replicator::kMaxBacklog); tests give
  // fewer.
  size_t max_backlog = 0;
};

class Replicator final : public ChangeSink {
 public:
  static constexpr size_t kBatch = 63;  // AdminEngine::kMaxMergeNodes: one transaction at the receiver
  // Whether `body` (a 200's) is a receiver's acknowledgement of batch `seq`:
  // "applied" or "duplicate", and a line "seq N" of it, if any
  // (Handler::ReplicateReceive).
  static bool AcknowledgesBatch(std::string_view body, uint64_t seq);
  // Whether a probe's or a batch's answer says its shard is catching up
  // after a start (a batch's says it only then; an earlier build's never).
  static bool SaysCatchingUp(std::string_view body);
  // What the other holder says it answered alone for this shard and has
  // not delivered: "WORD N" ("behind" in a batch's answer, "alone" in a
  // question's; none or 0: nothing) and, from a build that tells the sides
  // apart, "WORD_routes T M": of those, T on routes it owns (this shard
  // serves them as their successor), M on routes this shard owns (a reset
  // is on both). Without that line, or with one that accounts for fewer
  // than N, both sides lack them.
  struct Alone {
    uint64_t n = 0;
    bool theirs = false, mine = false;
  };
  static Alone AloneIn(std::string_view body, std::string_view word);
  // Which sides a change queued on a link changes (Queued::routes).
  static constexpr uint8_t kOwnRoutes = 1, kPeerRoutes = 2;
  static constexpr size_t kMaxBacklog = size_t{1} << 20;
  static constexpr int64_t kRetryNs = 1000LL * 1000 * 1000;
  // A behind link asks the other holder this often whether it is still
  // ahead: its routes answer 503 here meanwhile.
  static constexpr int64_t kBehindProbeNs = 100LL * 1000 * 1000;
  // A behind link whose other holder fails this long is given up on (serve).
  static constexpr int64_t kBehindGiveUpNs = 3000LL * 1000 * 1000;
  // A link up and idle this long asks the other shard whether it is there
  // (SendProbe, "idle"): a holder that died while nothing went to it read
  // up (frs_replica_link_up 1) until the next change, so a quiet hour hid
  // a route with one copy. Sooner (kRetryNs) after the idle connection
  // closed: a keep-alive's time-out, or the other shard's death.
  static constexpr int64_t kIdleProbeNs = 5000LL * 1000 * 1000;
  // How long after a shard first answers the advice of snapshot.missed waits
  // for that shard to ask its own snapshot (a new store: nothing missed).
  static constexpr int64_t kMissedAdviceDelayNs = 5000LL * 1000 * 1000;
  // Async: a batch goes when it is full or its oldest change is this old,
  // so that batches carry many changes (each exchange costs more CPU than a
  // decision); the reported lag includes it.
  static constexpr int64_t kAsyncLingerMs = 5;
  // Async: a link whose oldest unacknowledged change is this old (a batch
  // unanswered, a connect that hangs, long before replica_timeout_ms takes
  // the link for down) journals its queue, whose answers went out; and
  // stops once its oldest is younger than half of it again, or none is left.
  static constexpr int64_t kAsyncJournalMs = 20;
  // A journal that could not be made or written is tried again after this.
  static constexpr int64_t kJournalRetryMs = 10000;

  // `loop`: the worker's; each link's socket is added to it with a tag
  // that OwnsTag() knows.
  Replicator(ReplicaOptions opts, ReplicaCounters* counters, EventLoop* loop);
  ~Replicator() override;

  void OnChange(const Change& c) override;
  // While this shard reads a snapshot (handler_replica.cc), a request waits
  // here, before it touches the store, until the reading is done: the
  // snapshot and the changes queued before it then hold the same uses.
  void Enter() override;
  void Leave() override;

  bool sync() const { return opts_.sync; }
  // Changes noted so far: a held answer's ticket.
  uint64_t noted() const { return next_id_ - 1; }
  // The links (bit i: link i) that changes were queued for since the last
  // call: a held answer waits for those links only.
  uint64_t TakeTouched() {
    const uint64_t t = touched_;
    touched_ = 0;
    return t;
  }
  // Every change with an id up to this, of the links in `mask`, is
  // acknowledged, or waited for no longer (its link is down: serve).
  uint64_t SafeThrough(uint64_t mask = ~uint64_t{0}) const;
  // Answers waiting on the links in `mask` and holding a ticket up to this
  // are refused: a link went down with their changes unacknowledged
  // (refuse), or they were judged on a copy without the other holder's
  // alone uses (Behind, NoteAloneApplied).
  uint64_t RefusedThrough(uint64_t mask) const;
  // Whether answers refused on the links in `mask` were refused for a link
  // down under refuse, not for a copy behind the other holder (the 503's
  // words).
  bool RefusedForDown(uint64_t mask) const;
  // Under refuse, a live link whose backlog reached the bound
  // (ReplicaOptions::max_backlog) goes down now, as one that does not
  // answer: its held answers are refused, its routes answer 503 until it
  // has taken half its backlog (Link::catching_up). Dropping its oldest change, as serve does, moved
  // SafeThrough past it, and an answer held for it went out as taken by a
  // holder that never gets it. Called once the answers the turn's
  // acknowledgements released have gone out (Worker::ReplicaTurn): those
  // are not refused.
  void FailOverfull(int64_t now_ns);

  // The shard (ring index) that holds route `pos` beside this one: the
  // successor when this shard owns it, the owner when this shard is its
  // successor; -1 when this shard is neither. *as_successor: this shard
  // serves the route for its owner.
  long OtherHolder(uint32_t pos, bool* as_successor) const;
  // A route shared with `peer` answers 503: its link is down under refuse,
  // or (any mode) `peer` answered it is ahead of this shard's copy (Behind)
  // and has not delivered what it answered alone on routes of that side
  // (`as_successor`: the route is `peer`'s, this shard serves it for it).
  bool Refusing(long peer, bool as_successor) const;
  // Whether `peer` said it holds changes it answered alone for this shard
  // on routes of that side, not delivered yet (the 503's reason).
  bool IsBehind(long peer, bool as_successor) const;
  // At the top of each loop turn (Worker::Run): when another shard's batch
  // of changes it answered alone was applied here since the last look
  // (ReplicaShared::alone_applied), the answers held on its link are
  // refused when the link's unacknowledged changes include one on a side
  // those uses changed: judged on a copy without them, and that shard, having
  // delivered them, no longer answers its batch "behind". And when this
  // shard told another it is behind (ReplicaShared::told_behind), a down
  // link to it is tried again now: it answers, and waits for these uses.
  void NoteAloneApplied(int64_t now_ns);
  // The same for a replicator a reload retired while answers wait on it
  // (Worker::RetiredWaitTurn): its links are found by name in the list
  // running now (`shards`, the ring's), whose numbering the counters
  // follow; a link's first look under a numbering only takes the counts.
  void NoteAloneAppliedRetired(const std::vector<std::string>& shards);
  const ReplicaOptions& options() const { return opts_; }
  // A reload's admin token: the links' next requests carry it (the other
  // shards check the token they run, and refuse the old one once reloaded).
  void SetToken(std::string token) { opts_.token = std::move(token); }
  void SetMapDigest(std::string d) { opts_.map_digest = std::move(d); }

  // An epoll event's data pointer that is one of the links' tags.
  bool OwnsTag(const void* p) const { return links_.size() > 0 && p >= tags_.get() && p < tags_.get() + links_.size(); }
  void OnEvent(const void* tag, int64_t now_ns);
  // Connects, sends what is queued, times out; once per loop turn.
  void Pump(int64_t now_ns);
  // Whether anything is queued or in flight (the loop should not sleep long).
  bool Busy() const;
  // A graceful stop (Worker::BeginShutdown): each link that queues changes
  // tries once more at once, a down one included, since its other holder
  // may be back (returning, and waiting for exactly these changes: a
  // returning shard serves once they arrive, or once this shard is gone);
  // a link that fails from here on is not tried again.
  void BeginStop(int64_t now_ns);
  // While stopping: whether a link still queues changes it may deliver (its
  // last try has not failed). The worker goes on turning its loop meanwhile,
  // within kStopDeliverMs, and spools what is left.
  bool Delivering() const;
  static constexpr int64_t kStopDeliverMs = 2000;
  // Writes the journal's steps buffered since the last call: before any
  // answer of the worker goes out (Worker::Flush), so that no answer tells
  // of a change a kill -9 could take from the other holder.
  void FlushJournal() {
    if (journal_.pending()) JournalFlush();
  }
  // The journal's file while one is kept ("" otherwise): a graceful stop's
  // spool takes its place.
  const std::string& journal_path() const { return journal_.path(); }
  // The changes went to a spool at journal_path(): the journal is closed.
  void CloseJournal() { journal_.Close(); }

  // After a ring change (Worker::SetUpReplicas): this replicator takes no
  // more changes, and its links go on delivering what they queued, to the
  // same shards, under the earlier list's digest (the receivers take it:
  // handler_replica.cc), until nothing is left. Its per-shard gauges are
  // cleared and left to the replicator of the new list.
  void Retire();
  // What this replicator still queues, as a spool (replica_spool.h) for a
  // graceful stop to keep; links with nothing queued are left out. Its
  // changes' keys point into this replicator's queues.
  ReplicaSpool Spool() const;
  // A replicator that delivers `spool` as the worker that wrote it would
  // have: its stream, its digest, its batches' seqs. Retired from the start
  // (it takes no change of this worker's). `base`: this shard's options
  // (self, token, lease key check, timeout); its stream is the spool's.
  static std::unique_ptr<Replicator> FromSpool(const ReplicaSpool& spool, ReplicaOptions base, EventLoop* loop);
  // Whose changes these are, for log lines: made under an earlier <cluster>
  // (Retire), or kept from a stop or a killed worker (FromSpool).
  const char* origin() const {
    if (!from_spool_) return "made under the earlier <cluster>";
    return from_journal_ ? "kept from a killed worker" : "kept from an earlier stop";
  }
  bool from_spool() const { return from_spool_; }
  // The digest of the list its links were made under (Ring::DigestText).
  const std::string& digest() const { return digest_; }
  // The stream its batches carry (a spool's: the worker's that wrote it).
  const std::string& stream() const { return opts_.stream; }
  // Where changes it drops are counted (a spool's replicator has no
  // counters of its own: the worker's that delivers it).
  void set_dropped_counter(uint64_t* dropped) { dropped_ = dropped; }

  // Each link as the gauges see it.
  struct LinkView {
    std::string_view name;
    size_t queued;
    bool down;
    int64_t oldest_ms;  // the oldest queued change's at_ms (0: none)
    // Of those queued, how many were answered alone: a spool's all (not
    // kept); else those answered while the link was down under serve. And
    // of those, how many on this shard's own routes and on that shard's
    // (by the stamps of this replicator's list; a spool's: all on both).
    size_t alone;
    uint64_t alone_own, alone_peer;
  };
  std::vector<LinkView> Links() const;

  // Changes queued and not acknowledged, over every link.
  size_t QueuedChanges() const;
  // The names of the shards whose links are down (ReplicaOptions::
  // down_at_start of the replicator that takes over after a reload).
  std::vector<std::pair<std::string, int64_t>> DownLinks() const;
  // A retired replicator's links that went down since the last call, each
  // with why (not for a 4xx answer, a refusal of the earlier list's own).
  std::vector<std::pair<std::string, std::string>> TakeNewlyDown() { return std::exchange(newly_down_, {}); }
  // The live link to `name` goes down for `why` (its earlier list's link to
  // the same shard failed): as a failure of its own, so that the requests
  // after it are refused (or served alone) at once, not after a timeout of
  // its own with their uses counted. Tried again each second, as any.
  void FailLink(const std::string& name, const std::string& why, int64_t now_ns);
  // For a log line: "SHARD: N queued, LAST FAILURE" of each link that
  // queues any, joined by "; " ("" when none does).
  std::string QueuedByShard() const;

 private:
  struct Queued {
    uint64_t id;
    uint64_t no;  // its number in the link's stream (1, 2, ...): a snapshot names the last it carried
    Change::Kind kind;
    uint16_t biz_id;
    bool route_known;
    uint32_t route_pos;
    int64_t n, at_ms;
    std::string key;
    // Change::Kind::kEvent's fields.
    Change::Event event = Change::Event::kNone;
    uint32_t item = 0, nonce = 0;
    int64_t until = 0;
    // Whose routes it changes (kOwnRoutes, kPeerRoutes; a reset both), and
    // the link's count of changes on each side queued up to it (Stamp):
    // Publish tells apart what was answered alone on each side without a
    // walk of the queue. 32 bits: differences within a queue of at most
    // kMaxBacklog are exact modulo 2^32.
    uint8_t routes = 0;
    uint32_t own_through = 0, peer_through = 0;

    // The change it is, its key pointing into this.
    Change AsChange() const {
      Change c;
      c.kind = kind;
      c.biz_id = biz_id;
      c.key = key;
      c.route_pos = route_pos;
      c.route_known = route_known;
      c.n = n;
      c.at_ms = at_ms;
      c.event = event;
      c.item = item;
      c.nonce = nonce;
      c.until = until;
      return c;
    }
  };
  enum class LinkState : uint8_t { kClosed, kConnecting, kIdle, kInFlight };
  struct Link {
    long shard = -1;  // ring index
    std::string name;
    // Its shard refused previous= (a build before it, 400): not sent to it.
    bool no_previous = false;
    os::UniqueFd fd;
    LinkState state = LinkState::kClosed;
    std::deque<Queued> queue;
    LogThrottle dropped_log;    // the backlog full: its oldest changes dropped
    LogThrottle map_log;        // it runs another map (CheckPeerMap)
    LogThrottle own_log;        // its shard is this one (DropOwn)
    size_t inflight = 0;        // queue[0, inflight) is the batch in flight
    uint64_t inflight_seq = 0;  // its seq (sent again unchanged after a lost link)
    uint64_t next_seq = 1;
    uint64_t next_no = 1;  // Queued::no of the next change
    int64_t sent_ns = 0;   // the batch in flight was sent (or the connect began)
    int64_t retry_ns = 0;  // a closed link is tried again from here
    bool down = false;     // an episode: the other holder does not acknowledge
    int64_t down_ns = 0;   // the episode began (monotonic), for the line that ends it
    // Its shard's name is being looked up since (0: it is not); the link
    // failed for want of that lookup's answer, and waits for it.
    int64_t resolving_ns = 0;
    bool name_pending = false;
    // The connection or request in flight is a probe's (SendProbe), not a
    // batch's: a failure of a link not down keeps it unreached, quietly.
    bool probing = false;
    // The probe is an up link's check that the other shard is there: only
    // its connection failing (refused, reset, no answer in time) takes the
    // link down; any answer says the shard lives.
    bool idle_probe = false;
    int64_t idle_probe_ns = 0;  // an up, idle link probes from here (0: not set yet)
    int64_t answered_ns = 0;    // the other shard's last answer (a batch's or a probe's)
    int64_t probe_ns = 0;       // a never reached link is probed again from here
    // Reached put off the advice of snapshot.missed to here (0: none due):
    // a shard on a new store asks its snapshot just after it answers.
    int64_t missed_advice_ns = 0;
    // Its last probe's answer said `catching_up 1`: the advice waits for
    // that shard's catch-up to end (a new store asks this one's snapshot in
    // it, which takes the mark back; with three shards or more, after a
    // slow peer's ask, later than the 5 s).
    bool peer_catching_up = false;
    std::string failure;  // why the link last failed ("" since it was acknowledged)
    std::string out, in;
    size_t out_sent = 0;
    std::string nonce;  // the request in flight's (Sign): its answer's proof is bound to it
    // Batches acknowledged on this connection: one sent on a connection
    // that carried others may meet the close of a keep-alive the other side
    // ended while it was idle, and goes again on a new connection.
    uint64_t exchanges = 0;
    // Its steps go to the journal (JournalLink, JournalEnd).
    bool journaled = false;
    // It failed after BeginStop: its queue goes to the stop's spool.
    bool stop_failed = false;
    // The last change queued while the link was down: answered alone
    // (serve) or refused after its count, so kept on file until it is
    // acknowledged, whatever the mode.
    uint64_t down_through = 0;
    uint32_t own_queued = 0, peer_queued = 0;  // changes queued on each side's routes, ever (Stamp)
    // The other holder answered that it holds changes it answered alone
    // for routes shared with this shard, not delivered yet: this copy is
    // behind it (a pause of this shard, a partition). Its routes answer 503
    // here, and it is asked each kBehindProbeNs, until it says none is left.
    bool behind = false;
    // On whose routes (it says so: AloneIn): the other holder's, which this
    // shard serves as their successor, and this shard's own. Both when it
    // does not say.
    bool behind_theirs = false, behind_mine = false;
    int64_t behind_since_ms = 0;
    int64_t behind_fail_ns = 0;               // behind, it has failed since then (0: it answered last)
    uint64_t alone_applied_seen[2] = {0, 0};  // ReplicaShared::alone_applied[shard] at the last look
    long alone_seen_as = -2;                  // retired: the number of its last look (NoteAloneAppliedRetired)
    uint64_t told_behind_seen = 0;            // ReplicaShared::told_behind[shard] at the last look
    uint64_t learnt_behind_seen = 0;          // ReplicaShared::learnt_behind[shard] at the last look
    // Under refuse, its backlog reached the bound while it was up
    // (FailOverfull).
    bool overfull = false;
    // Under refuse, since FailOverfull took it down: its routes refuse
    // (Refusing), up or down, until fewer than half the bound are queued.
    // Back at its first acknowledgement with the queue still full, it was
    // made full again in the same turn and went down each second.
    bool catching_up = false;
    // Held answers waiting on this link with a ticket up to this are
    // refused (RefusedThrough).
    uint64_t refused_through = 0;
  };

  std::vector<std::pair<std::string, std::string>> newly_down_;  // TakeNewlyDown
  Link* LinkFor(long shard);
  size_t MaxBacklog() const { return opts_.max_backlog != 0 ? opts_.max_backlog : kMaxBacklog; }
  // The head of l's queue answered while it was down (serve): up to
  // down_through.
  size_t AloneInQueue(const Link& l) const;
  void Connect(Link& l, int64_t now_ns);
  void SendBatch(Link& l, int64_t now_ns);
  // With nothing to send, a down or never reached link asks the other shard
  // what it holds for this one (GET /replicate?for=): its answer, not a
  // connection (a proxy's or a relay's may have no shard behind it), says
  // the shard is back (Probed).
  void SendProbe(Link& l, int64_t now_ns);
  void Sign(Link& l, std::string_view method, std::string_view target, std::string_view body);
  // "&previous=D" onto a batch's or a question's target (ReplicaOptions::previous_digest).
  void AppendPrevious(const Link& l, std::string* target) const;
  // Whether the up, idle link `l` asks now whether its other shard is there
  // (kIdleProbeNs); and what it does with any answer.
  bool IdleProbeDue(const Link& l, int64_t now_ns) const;
  void IdleProbed(Link& l, int64_t now_ns, bool open);
  void Probed(Link& l, std::string_view body, int64_t now_ns, bool send_next);
  // A probe's answer says the map its shard runs ("map D"): another than
  // this worker's is logged (once a minute), never refused (a map rolled out
  // by SIGHUP differs between shards for a while).
  void CheckPeerMap(Link& l, std::string_view body, int64_t now_ns);
  // After a batch's answer or a probe's: `alone` is what the other holder
  // says it answered alone for this shard and has not delivered (AloneIn).
  // A batch answered so was applied there, but its held answers are
  // refused here: their uses were judged against a copy that lacks those.
  void Behind(Link& l, const Alone& alone, bool batch, int64_t now_ns);
  // Whether `l`'s other holder said this copy lacks uses on that side's
  // routes (`as_successor`: its own, which this shard serves for it).
  static bool Lacks(const Link& l, bool as_successor);
  // Numbers the change just queued on `l` by the sides it changes.
  static void Stamp(Link& l, uint8_t routes);
  // How many of the changes queued from `first` to `last` (one link's)
  // change routes of `sides`.
  static uint64_t On(const Queued& first, const Queued& last, uint8_t sides);
  // The other side proved (its answer's proof) that the batch is its own
  // stream's: this very shard, reached under a name a <cluster> gave another
  // shard. What the link queues is in this store already: dropped, counted
  // in `dropped`, logged.
  void DropOwn(Link& l, int64_t now_ns);
  // The journal holds nothing of `l` any more (the whole file goes when no
  // link is journaled).
  void JournalForget(Link& l);
  void Fail(Link& l, const std::string& why, int64_t now_ns);
  void Acked(Link& l, int64_t now_ns, bool send_next = true);
  // The other shard answered a batch: it reads down no more for having been
  // unreachable at the start (ReplicaShared::unreached).
  void Reached(Link& l, int64_t now_ns);
  // A probe's answer in form: the other shard's catch-up, map and what it
  // answered alone.
  void ProbeAnswered(Link& l, std::string_view body, int64_t now_ns);
  // What a batch's acknowledgement says beside it (behind, catching_up).
  void BatchAnswered(Link& l, std::string_view body, int64_t now_ns);
  // The missed-snapshot advice Reached put off, said if still due.
  void AdviseMissedSnapshot(Link& l, int64_t now_ns);
  // Whether this shard's start could not reach the other shard of `l` and
  // nothing has reached it since (ReplicaShared::unreached).
  bool Unreached(const Link& l) const;
  void Publish(Link& l);
  // Reads the answer; false: not whole yet.
  // *proof: its FRS-Replica-Proof value ("": none).
  bool ReadAnswer(Link& l, int* status, std::string* body, std::string* proof, bool* failed);
  // Whether an answer (a 200, or the 409 that refuses a shard's own
  // changes) comes from a shard that holds this cluster's admin token
  // (replica_auth.h); said as the link's failure if not.
  bool Proven(Link& l, int status, const std::string& body, const std::string& proof, int64_t now_ns);
  void Write(Link& l, int64_t now_ns);
  void Read(Link& l, int64_t now_ns);
  // The connection of `l` ended (`why`): quietly when nothing was in flight
  // or a reused connection's batch can go again on a new one; else Fail().
  void Ended(Link& l, const std::string& why, int64_t now_ns);
  void Close(Link& l);
  // Whether the idle link `l` sends its queue now (sync: at once; async:
  // full, or lingered long enough).
  bool Due(const Link& l, int64_t now_ms) const;
  unsigned IndexOf(const Link& l) const { return static_cast<unsigned>(&l - links_.data()); }
  // The journal (replica_journal.h): `l` went down (or, async, its oldest
  // change waits too long), so its steps are written from now on; it is up
  // and its queue is empty or young, so they end; a write failed, so none is
  // kept for kJournalRetryMs.
  void JournalLink(Link& l);
  void JournalEnd(Link& l, int64_t now_ms);
  void JournalFlush();
  // `l`'s state and queue as journal steps (its journal's start).
  void JournalState(const Link& l);

  ReplicaOptions opts_;
  ReplicaCounters* counters_;
  // The worker's frs_replica_dropped_total, which outlives Retire() (its
  // gauges go to the next replicator; changes dropped here count still).
  uint64_t* dropped_ = nullptr;
  EventLoop* loop_;
  HostResolver resolver_;         // the shards' names, looked up off the loop
  std::unique_ptr<char[]> tags_;  // tags_[i] is link i's epoll tag
  std::vector<Link> links_;
  std::vector<long> link_of_shard_;  // ring index -> index into links_ (-1)
  uint64_t next_id_ = 1;
  uint64_t touched_ = 0;  // TakeTouched()
  std::string digest_;    // the ring's, in hex: a receiver on another ring refuses
  bool retired_ = false;
  bool stopping_ = false;  // BeginStop, at stop_ns_
  int64_t stop_ns_ = 0;
  bool from_spool_ = false;
  bool from_journal_ = false;  // the spool was a killed worker's journal
  ReplicaJournal journal_;
  int64_t journal_retry_ms_ = 0;  // a failed journal: none before this (real ms)
};

}  // namespace frs::server
