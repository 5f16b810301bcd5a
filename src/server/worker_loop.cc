#include "server/worker_loop.h"

#include <malloc.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <exception>

#include "server/clock_util.h"
#include "server/decision_line.h"
#include "server/logger.h"
#include "server/signals.h"

namespace frs::server {

namespace {

// How long a turn may hold finished answers before it writes them (see
// held_): long enough for the answers of a few batch requests to go out
// together, short against a request's time-out and its p99.
constexpr int64_t kHoldNs = 100 * 1000;

}  // namespace

int Worker::Run(const sigset_t* wait_mask) {
  Status s = loop_.Init();
  if (s.ok()) s = loop_.Add(ctx_.listener.get(), ListenEvents(false), nullptr);
  if (s.ok() && grpc_) s = loop_.Add(ctx_.grpc_listener.get(), ListenEvents(true), &grpc_tag_);
  if (!s.ok()) {
    FRS_LOG("cannot start the event loop: %s", s.ToString().c_str());
    return 1;
  }
  SetOpenGauge();  // a replacement starts from its predecessor's stale value
  SetUpReplicas();
  handler_.TakeParkedChanges();                        // what other shards sent while an earlier map lacked its biz
  if (grpc_) RefreshGrpcHealth(store_->CheckFiles());  // a catch-up under way, a file lost before this start
  reading_.reserve(EventLoop::kMaxEvents);
  FRS_LOG("serving (listen socket %d)", ctx_.listener.get());
  if (counters_) {
    // A turn first: the master judges the slot's loop (stall_watch.h) from
    // the moment it names this worker serving.
    CounterSet(counters_->beat_ms, static_cast<uint64_t>(MonoNs() / kMsNs));
    CounterSet(counters_->serving_pid, static_cast<uint64_t>(getpid()));  // the master's READY=1
  }
  for (;;) {
    int64_t now = MonoNs();
    int64_t due = -1;
    for (int64_t d : {idle_.NextDueIn(now), busy_.NextDueIn(now), brief_.NextDueIn(now)})
      if (d >= 0 && (due < 0 || d < due)) due = d;
    int timeout_ms = due < 0 ? 1000 : static_cast<int>(std::min<int64_t>(1000, due / kMsNs + 1));
    if (stopping_) timeout_ms = std::min(timeout_ms, 50);
    if (accept_paused_) timeout_ms = std::min(timeout_ms, 50);  // look again soon whether to resume
    if (!again_.empty()) timeout_ms = 0;                        // input is waiting on a socket already
    // Replica links time out (replica_timeout_ms) and retry on the loop's turns.
    if (repl_ && (!repl_wait_.empty() || repl_->Busy())) timeout_ms = std::min(timeout_ms, 5);
    if (stopping_ && now < replica_stop_deadline_ && ReplicasDelivering()) timeout_ms = std::min(timeout_ms, 5);
    for (const auto& d : draining_)
      if (d->Busy()) timeout_ms = std::min(timeout_ms, 5);
    auto events = loop_.Wait(timeout_ms, wait_mask);
    now = MonoNs();
    if (counters_) CounterSet(counters_->beat_ms, static_cast<uint64_t>(now / kMsNs));
    // A handler runs only when the wait returns EINTR, with no events: a
    // stop that closes connections here never leaves one in `events`.
    HandleSignals(now);
    // Before this turn's acknowledgements are read: another shard's alone
    // uses applied here before it acknowledged a batch of this worker's are
    // seen first, and the answers held on a copy without them are refused.
    // At every turn, so that uses applied while nothing was held (a
    // return's catch-up) refuse nothing later.
    if (repl_) repl_->NoteAloneApplied(now);
    holding_ = true;
    // Every ready connection is read first, then each is answered: the
    // kernel's receive path runs for all of them in a row, then the parser,
    // engine and store, each phase finding its code (more than its data)
    // still in the cache the previous connection left it in (paired, 3-5 %
    // more GETs per CPU-second and 11-16 % less user CPU; batches, whose
    // members already run in a row, +1 %: docs/performance.md section 10).
    for (const epoll_event& ev : events) {
      if (repl_ && repl_->OwnsTag(ev.data.ptr)) {
        repl_->OnEvent(ev.data.ptr, now);
        continue;
      }
      if (!draining_.empty()) {
        auto d =
            std::find_if(draining_.begin(), draining_.end(), [&](const auto& r) { return r->OwnsTag(ev.data.ptr); });
        if (d != draining_.end()) {
          (*d)->OnEvent(ev.data.ptr, now);
          continue;
        }
      }
      if (ev.data.ptr == nullptr || ev.data.ptr == &grpc_tag_) {
        if (!stopping_) Accept(now, ev.data.ptr == &grpc_tag_);
        continue;
      }
      auto* c = static_cast<Connection*>(ev.data.ptr);
      const size_t idx = static_cast<size_t>(c->fd());
      Guarded(c, [&] { Read(c, ev.events, now); });
      if (idx >= conns_.size() || conns_[idx].get() != c) continue;  // closed by its error
      reading_.push_back(c);                                         // room reserved in Run: cannot throw
      reading_flag_[idx] = 1;
    }
    for (size_t i = 0; i < reading_.size(); ++i) {
      Connection* c = reading_[i];
      if (c == nullptr) continue;  // closed since it was read
      reading_flag_[static_cast<size_t>(c->fd())] = 0;
      Guarded(c, [&] { Settle(c, now); });
      WriteHeldIfDue();
    }
    reading_.clear();
    ServeAgain(now);
    holding_ = false;
    WriteHeld(now);
    if (repl_) ReplicaTurn(now);
    if (!draining_.empty()) DrainTurn(now);
    // A saturating load keeps every wait from sleeping, and only a sleeping
    // wait lets signals in: look for pending ones every 10 ms.
    if (now >= next_signal_check_) {
      next_signal_check_ = now + 10 * kMsNs;
      if (DeliverPendingSignals(wait_mask)) HandleSignals(now);
    }
    Expire(now);
    if (!stopping_) BalanceAccepting();
    // Replica changes still on their way to a reachable other holder go
    // before the spool does (a returning shard waits for them).
    if (stopping_ && (open_ == 0 || now >= stop_deadline_) && !(now < replica_stop_deadline_ && ReplicasDelivering()))
      break;
    if (now >= next_parent_check_) {
      next_parent_check_ = now + 1000 * kMsNs;
      EverySecond();
      // The master died without stopping us (PR_SET_PDEATHSIG covers most
      // cases; this covers a master that died before we set it).
      // Reparenting changes getppid() whoever the new parent is.
      if (getppid() != parent_ && !stopping_) {
        FRS_LOG("the master is gone; stopping");
        BeginShutdown(now);
      }
    }
  }
  if (open_ > 0) FRS_LOG("stopping with %llu connection(s) still busy", static_cast<unsigned long long>(open_));
  KeepUndelivered();
  for (auto& c : conns_)
    if (c) Close(c.get());
  return 0;
}

void Worker::EverySecond() {
  // A store file deleted or truncated under us: said loudly once, and every
  // request of that file is answered 503 from now on. And shown: /metrics
  // still answers while every request of that file (and /health) is a 503,
  // so no scrape failure says it.
  const Status fs = store_->CheckFiles();
  if (counters_) {
    CounterSet(counters_->store_file_lost, fs.ok() ? 0 : 1);
    // Added, not set: the slot carries on across a respawn, as every counter.
    const uint64_t unstored = engine_->FieldStatsUnstored();
    CounterAdd(counters_->stats_unstored, unstored - stats_unstored_published_);
    stats_unstored_published_ = unstored;
  }
  if (!fs.ok() && !store_broken_logged_) {
    FRS_LOG("STORE FILE LOST: %s", fs.message().c_str());
    store_broken_logged_ = true;
  }
  // An idle worker's writer entries go to whoever waits for one.
  store_->ReleaseIdleWriters();
  if (grpc_) {
    SampleGrpcHeld();
    RefreshGrpcHealth(fs);
  }
}

void Worker::RefreshGrpcHealth(const Status& files) {
  const bool healthy = handler_.UnhealthyGiven(files).ok();
  grpc_->set_healthy(healthy);
  // Health watches hear of a lost store file or the end of a catch-up
  // within the second, not only at the next reload.
  if (healthy != grpc_healthy_) PollGrpcWatches();
  grpc_healthy_ = healthy;
}

void Worker::SampleGrpcHeld() {
  size_t held = 0;
  for (const auto& c : conns_)
    if (c) held += c->GrpcHeld();
  if (counters_) CounterSet(counters_->grpc_held_bytes, held);
  grpc_held_peak_ = std::max(grpc_held_peak_, held);
  // glibc keeps what closed connections freed (many small blocks, below
  // the top of the heap): 300 connections of 100 streams left the worker
  // 19 MB larger after they closed. Given back once 4 MB are free.
  if (grpc_held_peak_ - held >= kTrimAfterBytes) {
    ::malloc_trim(0);
    grpc_held_peak_ = held;
  }
}

void Worker::PollGrpcWatches() {
  if (!grpc_) return;
  const int64_t now = MonoNs();
  for (auto& slot : conns_) {
    Connection* c = slot.get();
    if (c == nullptr) continue;
    bool wrote = false;
    Guarded(c, [&] { wrote = c->PollGrpcWatches(); });
    const size_t idx = static_cast<size_t>(c->fd());
    if (wrote && idx < conns_.size() && conns_[idx].get() == c) Guarded(c, [&] { Settle(c, now); });
  }
}

void Worker::KeepUndelivered() {
  // What the links queue is in this worker's memory (and, for those that
  // are down, in its journal): it goes to a spool file for the next start
  // (replica_spool.h), so that the other holder gets those uses however the
  // shard is restarted.
  std::vector<Replicator*> mine;
  if (repl_) mine.push_back(repl_.get());
  for (const auto& d : draining_) mine.push_back(d.get());
  for (Replicator* r : mine) {
    if (r->QueuedChanges() == 0) continue;
    const auto taken =
        std::find_if(spool_files_.begin(), spool_files_.end(), [&](const auto& f) { return f.replicator == r; });
    // A spool this worker took stays as it is (its lock goes with this
    // process), to be delivered again from its start by the next one: the
    // batches taken already are applied once (their seqs), the rest as new.
    if (taken != spool_files_.end()) {
      FRS_LOG("stopping with replica changes %s not delivered (%s): still in %s", r->origin(),
              r->QueuedByShard().c_str(), taken->path.c_str());
      continue;
    }
    // In the place of the journal of its down links when it keeps one: the
    // spool holds every change the journal does, and more.
    std::string path = r->journal_path();
    const bool journal = !path.empty();
    const Status s =
        journal ? ReplaceReplicaSpool(path, r->Spool()) : WriteReplicaSpool(cfg_.store_dir, r->Spool(), &path);
    if (s.ok()) {
      r->CloseJournal();
      FRS_LOG("stopping with replica changes %snot delivered (%s): kept in %s for the next start",
              r == repl_.get() ? "" : "made under the earlier <cluster> ", r->QueuedByShard().c_str(), path.c_str());
    } else if (journal) {
      FRS_LOG("stopping with replica changes not delivered (%s): %s; those of the links that are down are kept in %s",
              r->QueuedByShard().c_str(), s.ToString().c_str(), path.c_str());
    } else {
      FRS_LOG("stopping with replica changes not delivered, lost with this process (%s): %s",
              r->QueuedByShard().c_str(), s.ToString().c_str());
    }
  }
}

void Worker::TakeSpools(const ReplicaOptions& base) {
  // At most one spool per slot of this worker's counters: each is named to
  // the snapshots and the returning shards (handler_replica.cc); the rest
  // wait for a slot (DrainTurn), or for another worker.
  bool used[kMaxSpoolStreams] = {};
  for (const SpoolFile& f : spool_files_) used[f.slot] = true;
  const size_t free = kMaxSpoolStreams - spool_files_.size();
  if (free == 0) return;
  const std::string digest = base.ring->DigestText();
  std::vector<std::string> problems;
  std::vector<TakenReplicaSpool> taken = TakeReplicaSpools(cfg_.store_dir, free, digest, &problems);
  for (const std::string& p : problems) FRS_LOG("replicas: a spool of undelivered changes: %s", p.c_str());
  size_t slot = 0;
  for (TakenReplicaSpool& t : taken) {
    while (used[slot]) ++slot;
    used[slot] = true;
    std::unique_ptr<Replicator> r = Replicator::FromSpool(t.spool, base, &loop_);
    if (counters_) r->set_dropped_counter(&counters_->replica.dropped);
    FRS_LOG("replicas: %zu change(s) %s could not deliver (%s) are being delivered from %s", t.spool.Changes(),
            t.spool.journal ? "a killed worker" : "an earlier stop", r->QueuedByShard().c_str(), t.path.c_str());
    // Named to the snapshots this shard answers (handler_replica.cc): a
    // shard that takes one skips this spool's changes, which it carries.
    // Numbers and holdings first, the hash last: a reader that sees the
    // hash sees them.
    if (counters_) {
      ReplicaCounters& rc = counters_->replica;
      const auto& shards = base.ring->shards();
      for (size_t i = 0; i < kMaxReplicaPeers; ++i) {
        CounterSet(rc.spool_no[slot][i], 0);
        CounterSet(rc.spool_held[slot][i], 0);
        CounterSet(rc.spool_down[slot][i], 0);
      }
      CounterSet(rc.spool_oldest_ms[slot], 0);
      for (const ReplicaSpoolLink& l : t.spool.links)
        for (size_t i = 0; i < shards.size() && i < kMaxReplicaPeers; ++i)
          if (shards[i].name == l.name) {
            CounterSet(rc.spool_no[slot][i], l.first_no + l.changes.size() - 1);
            CounterSet(rc.spool_held[slot][i], l.changes.size());
          }
      std::atomic_ref<uint64_t>(rc.spool_hash[slot]).store(StreamHash(t.spool.stream));
    }
    spool_files_.push_back(SpoolFile{r.get(), t.path, static_cast<long>(slot), std::move(t.lock)});
    draining_.push_back(std::move(r));
  }
  if (counters_ && !taken.empty()) {
    size_t draining = 0;
    for (const auto& d : draining_) draining += d->QueuedChanges();
    CounterSet(counters_->replica.draining, draining);
  }
}

void Worker::SetMapDigest(std::string digest) {
  map_digest_ = std::move(digest);
  handler_.set_map_digest(map_digest_);
  if (repl_) repl_->SetMapDigest(map_digest_);
}

void Worker::SetUpReplicas(bool reload) {
  const ClusterView& c = handler_.options().cluster;
  const bool had_links = repl_ != nullptr;
  std::vector<std::pair<std::string, int64_t>> down;
  if (repl_) {
    down = repl_->DownLinks();
    const size_t queued = repl_->QueuedChanges();
    // The old links' tickets mean nothing to new ones. With nothing queued
    // every change they noted is acknowledged, and what they held goes out
    // now; otherwise it waits on the retired replicator below, which goes on
    // delivering those changes (released as it did before the reload:
    // an answer is never given before the other holder has its change).
    for (Connection* held : repl_wait_) {
      if (held == nullptr) continue;
      if (queued > 0) {
        held->PauseForRetiredReplicator();
        repl_flag_[static_cast<size_t>(held->fd())] = kWaitsOnRetired;
        retired_wait_.push_back(RetiredWait{held, repl_.get()});
        continue;
      }
      repl_flag_[static_cast<size_t>(held->fd())] = 0;
      held->ReleaseReplica();
      held->set_replicator(nullptr);
      Settle(held, MonoNs());
    }
    repl_wait_.clear();
    engine_->SetChangeSink(nullptr);
    handler_.set_replicator(nullptr);
    if (grpc_) grpc_->SetReplicator(nullptr);
    for (auto& conn : conns_)
      if (conn) conn->set_replicator(nullptr);
    // What the old links still queue is not dropped: its other holders'
    // copies would be short of those uses, and a handoff could then move a
    // short copy (docs/cluster.md, "Ring changes with replicas"). The old
    // replicator goes on delivering it to the same shards, under the old
    // list's digest, which they accept; frsctl handoff waits for it.
    if (queued > 0) {
      FRS_LOG(
          "<cluster> changed: the replica links start anew; %zu change(s) queued under the earlier list are "
          "still delivered to their shards (frs_replica_draining)",
          queued);
      repl_->Retire();
      draining_.push_back(std::move(repl_));
      // Before the next question of a returning shard, which waits for them.
      PublishRetired();
    } else {
      FRS_LOG("<cluster> changed: the replica links start anew");
      repl_.reset();
    }
    if (counters_) {
      size_t draining = 0;
      for (const auto& d : draining_) draining += d->QueuedChanges();
      CounterSet(counters_->replica.draining, draining);
    }
  }
  if (!c.ring || !c.replicas || c.self_index < 0) {
    // Spools an earlier stop left are delivered by replica links only:
    // said, so that an operator who turned replicas off knows they wait.
    if (const size_t n = reload ? 0 : ReplicaSpoolNames(cfg_.store_dir).size(); n > 0 && ctx_.index == 0)
      FRS_LOG(
          "replicas: %zu spool file(s) of changes an earlier stop could not deliver are kept in %s, undelivered: "
          "this frsd runs without <cluster replicas=\"1\">",
          n, cfg_.store_dir.c_str());
    return;
  }
  // A shard that had no links (out of the list, or replicas="0" before) and
  // gets them on a reload says so: its owners' changes go out from here on.
  if (!had_links && reload) FRS_LOG("<cluster> changed: this shard is in the list; its replica links start");
  ReplicaOptions o;
  o.ring = c.ring;
  o.self_index = c.self_index;
  o.self = c.self;
  o.sync = cfg_.replica_sync;
  o.refuse = cfg_.replica_refuse;
  o.timeout_ms = cfg_.replica_timeout_ms;
  o.token = cfg_.admin_token;
  o.map_digest = map_digest_;
  if (previous_ring_) {
    o.previous_digest = previous_ring_->DigestText();
  }
  if (const uint64_t check = engine_->LeaseKeyCheck(); check != 0) {
    char hex[20];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(check));
    o.lease_check = hex;
  }
  o.shared = ctx_.metrics ? &ctx_.metrics->master().replica : nullptr;
  o.beat = counters_ ? &counters_->beat_ms : nullptr;
  o.journal_dir = cfg_.store_dir;
  o.down_at_start = std::move(down);
  o.lease_ended = [engine = engine_](const Change& c) { return engine->LeaseEnded(c.biz_id, c.key, c.item, c.until); };
  // A stream per worker process: its seqs start at 1, and the receivers
  // keep a watermark per stream name.
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  o.stream =
      c.self + "/" + std::to_string(getpid()) + "." + std::to_string(int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec);
  // This run's token (metrics.h): a batch of any stream of it is known as
  // this shard's own wherever it comes back from.
  if (ctx_.metrics) o.stream += StreamTokenSuffix(CounterGet(ctx_.metrics->master().stream_token));
  if (!reload) {
    // A predecessor's spools in this slot (a worker that died) are named no
    // more: their files are taken again, below or by another worker.
    if (counters_)
      for (size_t i = 0; i < kMaxSpoolStreams; ++i)
        std::atomic_ref<uint64_t>(counters_->replica.spool_hash[i]).store(0);
    spool_base_ = o;
    TakeSpools(o);
    // A predecessor in this slot (killed while its retired links delivered)
    // leaves no count of them behind: a returning shard would wait for it.
    PublishRetired();
  }
  repl_ = std::make_unique<Replicator>(std::move(o), counters_ ? &counters_->replica : nullptr, &loop_);
  engine_->SetChangeSink(repl_.get());
  handler_.set_replicator(repl_.get());
  if (grpc_) grpc_->SetReplicator(repl_.get());
  for (auto& conn : conns_)
    if (conn) conn->set_replicator(repl_.get());
}

void Worker::DrainTurn(int64_t now) {
  size_t left = 0;
  // Whose changes these are, for the log: a ring change's, or a stop's too.
  const bool spooled = std::any_of(draining_.begin(), draining_.end(), [](const auto& d) { return d->from_spool(); });
  const char* what =
      spooled ? "the changes kept from an earlier stop or a killed worker, or queued under the earlier <cluster>"
              : "the changes queued under the earlier <cluster>";
  for (auto& d : draining_) {
    d->Pump(now);
    left += d->QueuedChanges();
    // A link of the earlier list that failed: the live one to that shard
    // takes it for down too (a reload kept one down already, down_at_start).
    for (const auto& [name, why] : d->TakeNewlyDown())
      if (repl_) repl_->FailLink(name, "its link under the earlier <cluster> failed: " + why, now);
  }
  if (counters_) CounterSet(counters_->replica.draining, left);
  // Nothing new is queued on a retired replicator: `left` only falls, until
  // another ring change adds one (a new start for the stall's clock).
  if (drain_moved_ns_ == 0 || left > drain_left_) {
    // Another ring change's changes: the stall's clock starts again, and so
    // does what it said (a fall after this was logged as a stall of 0 s).
    drain_left_ = left;
    drain_moved_ns_ = now;
    drain_stalled_ = false;
  } else if (left < drain_left_) {
    if (drain_stalled_)
      FRS_LOG("replicas: %s drain again after %lld s stalled; %zu left", what,
              static_cast<long long>((now - drain_moved_ns_) / 1000000000), left);
    drain_stalled_ = false;
    drain_left_ = left;
    drain_moved_ns_ = now;
  } else if (!drain_stalled_ && now - drain_moved_ns_ >= kDrainStallNs) {
    // The links log their own failures, but a link that was down before
    // the change is not logged again: this says why frsctl handoff waits.
    drain_stalled_ = true;
    std::string where;
    for (const auto& d : draining_) {
      const std::string w = d->QueuedByShard();
      if (w.empty()) continue;
      if (!where.empty()) where += "; ";
      where += w;
    }
    FRS_LOG(
        "replicas: %s have not drained for %lld s: %zu left (%s); they go once those shards answer, and a "
        "handoff after a change of the shard list waits for them (frs_replica_draining)",
        what, static_cast<long long>(kDrainStallNs / 1000000000), left, where.c_str());
  }
  // What each spool still holds, for the gauges and the returning shards
  // (replica_metrics.cc, handler_replica.cc): as the live links say theirs.
  if (counters_ && !spool_files_.empty() && handler_.options().cluster.ring) {
    const auto& shards = handler_.options().cluster.ring->shards();
    ReplicaCounters& rc = counters_->replica;
    for (const SpoolFile& f : spool_files_) {
      int64_t oldest = 0;
      for (const Replicator::LinkView& v : f.replicator->Links()) {
        for (size_t i = 0; i < shards.size() && i < kMaxReplicaPeers; ++i) {
          if (shards[i].name != v.name) continue;
          CounterSet(rc.spool_held[f.slot][i], v.queued);
          CounterSet(rc.spool_down[f.slot][i], v.down ? 1 : 0);
        }
        if (v.oldest_ms > 0 && (oldest == 0 || v.oldest_ms < oldest)) oldest = v.oldest_ms;
      }
      CounterSet(rc.spool_oldest_ms[f.slot], static_cast<uint64_t>(oldest));
    }
  }
  PublishRetired();
  // Before any replicator goes: one with nothing queued releases them all.
  RetiredWaitTurn(now);
  // A spool delivered whole is done with (before remove_if: the replicators
  // it removes are destroyed on the way).
  bool freed = false;
  for (auto f = spool_files_.begin(); f != spool_files_.end();) {
    if (f->replicator->QueuedChanges() != 0) {
      ++f;
      continue;
    }
    if (counters_) std::atomic_ref<uint64_t>(counters_->replica.spool_hash[f->slot]).store(0);
    ::unlink(f->path.c_str());  // under its lock: no other worker takes it meanwhile
    FRS_LOG("replicas: every change of %s is delivered", f->path.c_str());
    f = spool_files_.erase(f);
    freed = true;
  }
  // A slot freed: more spools may wait for one.
  if (freed && spool_base_) TakeSpools(*spool_base_);
  const auto done =
      std::remove_if(draining_.begin(), draining_.end(), [](const auto& d) { return d->QueuedChanges() == 0; });
  if (done != draining_.end()) {
    draining_.erase(done, draining_.end());
    PublishRetired();
    if (draining_.empty()) {
      if (!spooled) FRS_LOG("replicas: every change queued under the earlier <cluster> is delivered");
      drain_left_ = 0;
      drain_moved_ns_ = 0;
      drain_stalled_ = false;
    }
  }
}

void Worker::PublishRetired() {
  if (!counters_) return;
  ReplicaCounters& rc = counters_->replica;
  uint64_t held[kMaxReplicaPeers] = {}, alone[kMaxReplicaPeers] = {}, own[kMaxReplicaPeers] = {},
           peer[kMaxReplicaPeers] = {};
  bool down[kMaxReplicaPeers] = {};
  int64_t oldest = 0;
  if (const auto& ring = handler_.options().cluster.ring) {
    const auto& shards = ring->shards();
    const std::string digest = ring->DigestText();
    for (const auto& d : draining_) {
      if (d->from_spool()) continue;  // a spool's have slots of their own
      // Its changes' sides are of its own list: the same routes' only when
      // the list is the one running now (a reload of another option).
      const bool same_list = d->digest() == digest;
      for (const Replicator::LinkView& v : d->Links()) {
        if (v.oldest_ms > 0 && (oldest == 0 || v.oldest_ms < oldest)) oldest = v.oldest_ms;
        for (size_t i = 0; i < shards.size() && i < kMaxReplicaPeers; ++i)
          if (shards[i].name == v.name) {
            held[i] += v.queued;
            alone[i] += v.alone;
            own[i] += same_list ? v.alone_own : v.alone;
            peer[i] += same_list ? v.alone_peer : v.alone;
            down[i] = down[i] || (v.down && v.queued > 0);
          }
      }
    }
  }
  CounterSet(rc.retired_oldest_ms, static_cast<uint64_t>(oldest));
  for (size_t i = 0; i < kMaxReplicaPeers; ++i) {
    CounterSet(rc.retired_held[i], held[i]);
    CounterSet(rc.retired_alone_own[i], own[i]);
    CounterSet(rc.retired_alone_peer[i], peer[i]);
    // After its sides (release): a reader that loads it first and finds
    // them short of it read them mid-update (Handler::AheadOf).
    std::atomic_ref<uint64_t>(rc.retired_alone[i]).store(alone[i], std::memory_order_release);
    CounterSet(rc.retired_down[i], down[i] ? 1 : 0);
  }
}

bool Worker::StillHeld(Connection* c, const Replicator& r) {
  const uint64_t ticket = c->ReplicaTicket();
  const uint64_t safe = r.SafeThrough(c->ReplicaLinks());
  const uint64_t refused = r.RefusedThrough(c->ReplicaLinks());
  if (ticket > safe && ticket > refused) return true;
  repl_flag_[static_cast<size_t>(c->fd())] = 0;
  if (ticket <= refused) {
    std::string answer;
    Handler::AppendReplicaRefused(r.RefusedForDown(c->ReplicaLinks()), &answer);
    c->RefuseReplica(answer);
    if (counters_) CounterAdd(counters_->replica.refused);
  } else {
    c->ReleaseReplica();
  }
  return false;
}

void Worker::ReplicaTurn(int64_t now) {
  repl_->Pump(now);
  ReleaseHeld(now);
  // Once the answers this turn's acknowledgements released are out: a link
  // failed before would have refused them too.
  repl_->FailOverfull(now);
}

void Worker::ReleaseHeld(int64_t now) {
  if (repl_wait_.empty()) return;
  size_t kept = 0;
  for (size_t i = 0; i < repl_wait_.size(); ++i) {
    Connection* c = repl_wait_[i];
    if (c == nullptr) continue;
    if (StillHeld(c, *repl_)) {
      repl_wait_[kept++] = c;
      continue;
    }
    // Settle may hold it again (more answers noted): it is appended anew,
    // and this loop, which runs to the list's end, keeps it.
    repl_wait_[i] = nullptr;
    Guarded(c, [&] { Settle(c, now); });
  }
  repl_wait_.resize(kept);
}

void Worker::RetiredWaitTurn(int64_t now) {
  if (retired_wait_.empty()) return;
  // The other holders' alone uses applied here since: the answers waiting
  // on the earlier links were judged without them too (NoteAloneApplied).
  if (const auto& ring = handler_.options().cluster.ring) {
    std::vector<std::string> names;
    for (const auto& shard : ring->shards()) names.push_back(shard.name);
    for (const auto& d : draining_) d->NoteAloneAppliedRetired(names);
  }
  // Settle below holds a released connection again only on the live
  // replicator (repl_wait_), never here: this list only shrinks.
  std::vector<RetiredWait> waiting;
  waiting.swap(retired_wait_);
  for (const RetiredWait& w : waiting) {
    if (w.c == nullptr) continue;  // closed while it waited
    if (StillHeld(w.c, *w.r)) {
      retired_wait_.push_back(w);
      continue;
    }
    Guarded(w.c, [&] { Settle(w.c, now); });
  }
}

bool Worker::ReplicasDelivering() const {
  if (repl_ && repl_->Delivering()) return true;
  for (const auto& d : draining_)
    if (d->Delivering()) return true;
  return false;
}

void Worker::BeginShutdown(int64_t now) {
  stopping_ = true;
  stop_deadline_ = now + int64_t{kDrainMs} * kMsNs;
  // Within the master's grace (kStopGraceNs), whatever the connections take.
  replica_stop_deadline_ = now + std::min<int64_t>(Replicator::kStopDeliverMs, kDrainMs) * kMsNs;
  if (repl_) repl_->BeginStop(now);
  for (const auto& d : draining_) d->BeginStop(now);
  handler_.set_shutting_down(true);
  if (grpc_) grpc_->set_shutting_down(true);
  if (!accept_paused_) RemoveListeners();
  ctx_.listener.reset();
  ctx_.grpc_listener.reset();
  // A kill -9 of the master reaches the workers as SIGTERM (PR_SET_DEATHSIG):
  // said, or the log would tell of an ordinary stop with no master's line.
  FRS_LOG(::getppid() != master_pid_ ? "stopping, the master is gone (killed?): %llu connection(s) open"
                                     : "stopping: %llu connection(s) open",
          static_cast<unsigned long long>(open_));
  for (auto& slot : conns_) {
    Connection* c = slot.get();
    if (!c) continue;
    c->BeginShutdown();
    Settle(c, now);
  }
}

inline bool Worker::Flush(Connection* c) {
  // The replica journal first: an answer goes out only once the changes it
  // tells of are on file for the other holder (replica_journal.h).
  if (repl_) repl_->FlushJournal();
  while (c->WantsWrite()) {
    std::string_view out = c->PendingOutput();
    ssize_t n = send(c->fd(), out.data(), out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c->Consumed(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    c->Abort();
    return false;
  }
  return true;
}

inline void Worker::OnEvent(Connection* c, uint32_t events, int64_t now) {
  Read(c, events, now);
  Settle(c, now);
}

void Worker::Read(Connection* c, uint32_t events, int64_t now) {
  const size_t idx = static_cast<size_t>(c->fd());
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) unread_[idx] = 1;
  if (events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) ended_[idx] = 1;
  if (unread_[idx]) {
    std::span<char> room = c->ReadSpace();
    if (!room.empty()) {
      ssize_t n;
      do {
        n = recv(c->fd(), room.data(), room.size(), 0);
      } while (n < 0 && errno == EINTR);
      if (n > 0) {
        c->Produced(static_cast<size_t>(n), now);
        // A short read took all there was; input that arrives later is
        // reported again. A full one may have left some, and the peer's
        // end is seen only by a read that returns 0 or an error.
        unread_[idx] = static_cast<size_t>(n) == room.size() || ended_[idx];
      } else if (n == 0) {
        c->PeerClosed();
        unread_[idx] = ended_[idx] = 0;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        unread_[idx] = ended_[idx];
      } else {
        c->Abort();
      }
    } else if (c->WantsRead() || (events & (EPOLLERR | EPOLLHUP))) {
      // No room although it wants input: the buffer holds more than any
      // legal request (the parser would have refused it), so never spin on
      // a readable socket we cannot read.
      c->Abort();
    }
  }
}

template <class Fn>
inline void Worker::Guarded(Connection* c, Fn fn) {
  const int fd = c->fd();
  // Nothing thrown while serving one connection (an allocation failure) may
  // take the worker and its other clients down; that connection is closed
  // instead.
  try {
    fn();
  } catch (const std::exception& e) {
    FRS_LOG("closing a connection after an internal error: %s", e.what());
    size_t idx = static_cast<size_t>(fd);
    if (idx < conns_.size() && conns_[idx].get() == c) Close(c);
  }
}

inline void Worker::Serve(Connection* c, uint32_t events, int64_t now) {
  Guarded(c, [&] { OnEvent(c, events, now); });
}

inline void Worker::ServeAgain(int64_t now) {
  // Serve the connections left with input on their sockets (or requests in
  // their buffers) after this turn's events: one read each per turn, so a
  // client that keeps sending cannot starve the others. Close takes a
  // closed connection out of again_.
  turn_.swap(again_);
  for (size_t i = 0; i < turn_.size(); ++i) {
    Connection* c = turn_[i];
    if (c == nullptr) continue;  // closed while waiting its turn
    queued_[static_cast<size_t>(c->fd())] = 0;
    Serve(c, 0, now);
    WriteHeldIfDue();
  }
  turn_.clear();
}

inline void Worker::Hold(Connection* c) {
  const size_t idx = static_cast<size_t>(c->fd());
  if (held_flag_[idx]) return;
  if (held_.empty()) held_since_ = MonoNs();
  held_flag_[idx] = 1;
  held_.push_back(c);
}

inline void Worker::WriteHeldIfDue() {
  if (held_.empty()) return;
  const int64_t now = MonoNs();
  if (now - held_since_ >= kHoldNs) WriteHeld(now);
}

void Worker::WriteHeld(int64_t now) {
  const bool holding = holding_;
  holding_ = false;
  for (size_t i = 0; i < held_.size(); ++i) {
    Connection* c = held_[i];
    if (c == nullptr) continue;  // closed while held
    held_flag_[static_cast<size_t>(c->fd())] = 0;
    Guarded(c, [&] { Settle(c, now); });
  }
  held_.clear();
  holding_ = holding;
}

// Runs the state machine to a resting point: answer what is buffered, write
// what can be written (which may unblock more buffered requests), then close,
// or queue the connection for the next turn and set its deadline.
void Worker::Settle(Connection* c, int64_t now) {
  bool more = false;  // four rounds and still answering: the rest next turn
  for (int round = 0;; ++round) {
    const uint64_t progress = c->progress();
    c->Process();
    if (c->HoldsForReplica()) {
      const size_t fd = static_cast<size_t>(c->fd());
      if (!repl_flag_[fd]) {
        repl_flag_[fd] = 1;
        repl_wait_.push_back(c);
      }
    }
    if (holding_ && c->WantsWrite()) {
      // Written with the turn's other answers; WriteHeld settles it then.
      Hold(c);
      return;
    }
    if (!Flush(c)) break;
    if (c->NeedsLinger()) {
      shutdown(c->fd(), SHUT_WR);
      c->StartLinger();
    }
    // Stop unless draining output made room for more buffered requests.
    if (c->WantsWrite() || !c->WantsRead() || c->state() != Connection::State::kOpen) break;
    if (!c->Busy()) break;
    if (round == 3) {
      // Only while requests are being answered: a partial request left in
      // the buffer waits for its bytes, not for another turn.
      more = c->progress() != progress;
      break;
    }
  }
  if (c->Done()) {
    Close(c);
    return;
  }
  size_t idx = static_cast<size_t>(c->fd());
  // Input left on the socket while the connection could not take it (a
  // full buffer, output past the high-water mark), or complete requests
  // left in its buffer after four rounds, are taken up next turn: no epoll
  // event is due for either.
  // gRPC calls received whole and left unanswered (a bounded number per
  // Process) are answered next turn too, unless the socket is full (its
  // EPOLLOUT comes first).
  if ((((unread_[idx] || more) && c->WantsRead()) || (c->HasBacklog() && !c->WantsWrite())) && !queued_[idx]) {
    queued_[idx] = 1;
    again_.push_back(c);
  }
  if (c->LingersBriefly()) {
    if (c->list() != &brief_) brief_.Append(c, now);
  } else if (c->Busy()) {
    // A fresh request deadline only for progress (a request answered, output
    // drained), never for a trickle of bytes: a slow client cannot hold a
    // connection forever. gRPC: due request_timeout after its oldest
    // unanswered stream began, however many others were answered since.
    if (c->list() != &busy_ || c->progress() != progress_seen_[idx]) {
      const int64_t since = c->BusySinceNs();
      if (since >= 0 && since < now) busy_.AppendSince(c, since);
      else busy_.Append(c, now);
    }
    progress_seen_[idx] = c->progress();
  } else if (c->progress() == 0) {
    // Not one request answered yet: the deadline set at accept stands.
    if (c->list() != &busy_) busy_.Append(c, now);
  } else {
    idle_.Append(c, now);
  }
}

void Worker::NoteTlsRefused(const std::string& why, const IpAddress* peer) {
  if (counters_) CounterAdd(counters_->grpc_tls_refused);
  uint64_t count = 0;
  if (!tls_refused_log_.Note(MonoNs(), &count)) return;
  char buf[64];
  const std::string_view from = ClientText(peer, buf, sizeof buf);
  FRS_LOG("TLS handshake refused%s%.*s: %s (%llu since the last such line; frs_grpc_tls_refused_total counts each)",
          from.empty() ? "" : " from ", static_cast<int>(from.size()), from.data(),
          why.empty() ? "it did not finish (the peer closed it, or its time ran out)" : why.c_str(),
          static_cast<unsigned long long>(count));
}

void Worker::Close(Connection* c) {
  // A handshake that began and did not finish: refused here, or given up by
  // the client (one that refused this server's certificate may close with
  // no alert: gRPC's does). Not one this worker's stop cuts short.
  if (const TlsStream* t = c->tls(); t && !t->handshake_done() && (t->failed() || (t->began() && !stopping_)))
    NoteTlsRefused(t->error(), c->peer());
  size_t idx = static_cast<size_t>(c->fd());
  idle_.Remove(c);
  busy_.Remove(c);
  brief_.Remove(c);
  loop_.Remove(c->fd());
  if (held_flag_[idx]) {
    std::replace(held_.begin(), held_.end(), c, static_cast<Connection*>(nullptr));
    held_flag_[idx] = 0;
  }
  if (idx < repl_flag_.size() && repl_flag_[idx] == kWaitsOnRetired) {
    for (RetiredWait& w : retired_wait_)
      if (w.c == c) w.c = nullptr;
    repl_flag_[idx] = 0;
  } else if (idx < repl_flag_.size() && repl_flag_[idx]) {
    std::replace(repl_wait_.begin(), repl_wait_.end(), c, static_cast<Connection*>(nullptr));
    repl_flag_[idx] = 0;
  }
  if (reading_flag_[idx]) {
    std::replace(reading_.begin(), reading_.end(), c, static_cast<Connection*>(nullptr));
    reading_flag_[idx] = 0;
  }
  if (queued_[idx]) {
    for (std::vector<Connection*>* list : {&again_, &turn_})
      std::replace(list->begin(), list->end(), c, static_cast<Connection*>(nullptr));
    queued_[idx] = 0;
  }
  unread_[idx] = ended_[idx] = 0;
  conns_[idx].reset();  // closes the fd
  --open_;
  SetOpenGauge();
}

inline void Worker::Expire(int64_t now) {
  for (DeadlineList* list : {&idle_, &busy_, &brief_}) {
    while (DeadlineNode* n = list->Expired(now)) {
      auto* c = static_cast<Connection*>(n);
      if (list == &busy_) {
        // gRPC: the stream the deadline was set for may have been reset by
        // the client since; the oldest one left may still have time.
        const int64_t since = c->BusySinceNs();
        if (since >= 0 && since + list->timeout_ns() > now) {
          list->AppendSince(c, since);
          continue;
        }
      }
      list->Remove(c);
      // A 408 or GOAWAY's linger ending is the same timeout, counted once.
      if (c->OnTimeout() && counters_) CounterAdd(counters_->connections_timed_out);
      Settle(c, now);
      // Settle re-listed it (a 408 still being written, lingering): its next
      // deadline is a full timeout away, so the loop ends.
    }
  }
}

}  // namespace frs::server
