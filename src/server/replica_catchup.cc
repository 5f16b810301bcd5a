#include "server/replica_catchup.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/http_client.h"
#include "frs/percent_encode.h"
#include "frs/ring.h"
#include "frs/store_dir.h"
#include "frs/whole_file.h"
#include "os/text_file.h"
#include "os/whole_file.h"
#include "server/clock_util.h"
#include "server/logger.h"
#include "server/replica_auth.h"
#include "server/replica_park.h"
#include "server/replicator.h"
#include "server/signals.h"
#include "server/snapshot_merge.h"
#include "server/snapshot_missed.h"

namespace frs::server {
namespace {

// An answer's text for a log line: its first 200 bytes, without the line
// break that ends it (a log line shows one as a space before its ")").
std::string AnswerWords(const std::string& body) {
  // Long enough for frsd's own longest refusal (the lease key's, 300
  // bytes); an answer cut short says so.
  constexpr size_t kMax = 400;
  std::string w = body.substr(0, kMax);
  while (!w.empty() && (w.back() == '\n' || w.back() == ' ' || w.back() == '\r')) w.pop_back();
  if (body.size() > kMax) w += "...";
  return w;
}

constexpr int64_t kMsNs = 1000 * 1000;
// A shard that answered and then stopped answering is waited for this long
// (a stopping shard delivers its queues within Replicator::kStopDeliverMs),
// past the catch-up's bound too.
constexpr int64_t kStopDeliverGraceNs = (Replicator::kStopDeliverMs + 1000) * kMsNs;
// No question is sent with less time left than this, but a shard's first,
// which has this much at least.
constexpr int64_t kLastQuestionMs = 50;
constexpr int64_t kFirstQuestionMs = 1000;
// A snapshot answered 503 (the other shard could not read its store within
// the hold, or is catching up itself) is asked again after this, doubled
// each time up to kSnapshotRetryMaxMs, within the catch-up (CatchUp::LimitNs).
constexpr int kSnapshotRetryFirstMs = 100;
constexpr int kSnapshotRetryMaxMs = 5000;

// A stop asked (SIGTERM, SIGINT) during the catch-up: the master blocks
// those signals outside its wait, so they are pending here. The catch-up
// ends at its next step then, rather than after its bound: a new store's
// mark stays, and the next start begins it again.
bool StopAsked() {
  sigset_t pending;
  if (Signals().terminate) return true;
  if (sigpending(&pending) != 0) return false;
  return sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1;
}

// Sleeps `ms`, in slices of at most 100 ms, ending at a stop.
void SleepMs(int ms) {
  for (int left = ms; left > 0 && !StopAsked(); left -= 100) {
    const int slice = std::min(left, 100);
    timespec ts{0, slice * kMsNs};
    nanosleep(&ts, nullptr);
  }
}

// What every question of one catch-up carries, and when it began.
struct CatchUp {
  const SrvConfig& cfg;
  AdminEngine* engine;
  ReplicaShared* shared;
  std::string self;    // this shard's name, as a query value
  std::string digest;  // the <cluster> list's, Ring::DigestText()
  std::string token;   // the admin token, which signs every question (replica_auth.h)
  int64_t start;       // MonoNs()
  // "&lease_key=CHECK" (empty: no <cluster lease_key>): a shard keyed
  // otherwise refuses the question (409), so the start says so at once.
  std::string lease_key;

  std::string StateQuery() const { return "/replicate?for=" + self + "&digest=" + digest + lease_key; }
  // The whole catch-up (<cluster catchup_timeout_ms>, 60 s): past it the
  // shard serves with what it has (said).
  int64_t LimitNs() const { return int64_t{cfg.catchup_timeout_ms} * kMsNs; }
  // A new store's snapshots are asked again within this, 60 s at least
  // whatever the bound: a node a snapshot did not bring is never sent
  // later, and its two holders stay apart (docs/cluster.md).
  int64_t SnapshotLimitNs() const { return std::max<int64_t>(LimitNs(), 60 * 1000 * kMsNs); }
  // The wait for the changes queued for this shard (WaitForQueued) ends by
  // the bound, or a bound's length after it began when a new store's
  // snapshots took longer: the changes queued while they were taken come
  // after them, and were cut short at once, said as missing.
  int64_t queue_start = 0;
  int64_t QueueUntilNs() const { return std::max(start, queue_start) + LimitNs(); }
  // Its length for a log line: "60 s", "1.5 s".
  std::string LimitWords() const {
    char w[32];
    std::snprintf(w, sizeof w, "%g s", cfg.catchup_timeout_ms / 1000.0);
    return w;
  }
};

// Whether snapshots may be taken: not when a ring change's handoff is
// pending on any shard of this list. The nodes of moved routes reach their
// new holders by the handoff, and one snapshot (of the shard that
// finished, say) would give them the same counts again; this shard's nodes
// then come from the handoff and from the changes queued for it
// (docs/cluster.md).
// Each question has `replica_timeout_ms`, 1 to 5 s (a shard that does not
// answer it is asked for its snapshot all the same); one taken and not
// answered notes when in *stalled_since.
bool SnapshotsWanted(const CatchUp& c, const Ring& ring, const std::vector<size_t>& peers,
                     std::vector<int64_t>* stalled_since) {
  for (size_t i : peers) {
    const std::string& name = ring.shards()[i].name;
    client::HttpClient http(name, static_cast<int>(std::clamp<uint32_t>(c.cfg.replica_timeout_ms, 1000, 5000)));
    ReplicaSigner signer(c.token, name);
    signer.Attach(&http);
    http.SetStop(StopAsked);
    const int64_t asked_ns = MonoNs();
    auto r = http.Get(c.StateQuery());
    if (!r.ok() && http.Unanswered() && (*stalled_since)[i] == 0) (*stalled_since)[i] = asked_ns;
    if (r.ok() && r->status == 200 && signer.Proven(*r) && r->body.find("handoff_pending 1") != std::string::npos) {
      FRS_LOG(
          "replicas: a <cluster> change's handoff is pending on %s: no snapshot taken from any shard (the "
          "nodes of this shard's routes come by frsctl handoff and by the changes queued for it)",
          name.c_str());
      return false;
    }
  }
  return true;
}

// A snapshot's head: "snapshot T files N\n", then "carried STREAM_HASH N\n"
// per stream of the sender (its changes 1..N to this shard are in the
// nodes), noted in shared->carried[i]; *body is left at the nodes. False
// without the first line.
bool ReadSnapshotHead(std::string_view* body, size_t i, ReplicaShared* shared, long long* t) {
  const size_t nl = body->find('\n');
  std::string_view first = body->substr(0, nl);
  body->remove_prefix(nl == std::string_view::npos ? body->size() : nl + 1);
  unsigned long long files = 0;
  if (std::sscanf(std::string(first).c_str(), "snapshot %lld files %llu", t, &files) != 2) return false;
  size_t streams = 0;
  while (body->starts_with("carried ")) {
    const size_t end = body->find('\n');
    unsigned long long h = 0, through = 0;
    if (std::sscanf(std::string(body->substr(0, end)).c_str(), "carried %llx %llu", &h, &through) == 2 && h != 0 &&
        streams < kMaxSnapshotStreams) {
      CounterSet(shared->carried[i][streams][1], through);
      CounterSet(shared->carried[i][streams][0], h);
      ++streams;
    }
    body->remove_prefix(end == std::string_view::npos ? body->size() : end + 1);
  }
  return true;
}

// Whether shard `name`, which took a snapshot's request and did not answer,
// answers a question again (asked each 200 ms, within the catch-up's bound,
// until a stop): only then is the snapshot asked again. Each request it
// took is a whole reading of its store, made when it resumes however many
// were sent, answered to a connection long closed.
bool AnswersAgain(const CatchUp& c, const std::string& name) {
  client::HttpClient http(name, 1000);
  ReplicaSigner signer(c.token, name);
  signer.Attach(&http);
  http.SetStop(StopAsked);
  while (!StopAsked() && MonoNs() - c.start < c.SnapshotLimitNs()) {
    if (http.Get(c.StateQuery()).ok()) return true;
    SleepMs(200);
  }
  return false;
}

// A SIGHUP during the wait on a shard that refuses this one's admin token
// (403): the master applies the reload once the catch-up ends, but the
// token srv.xml says now is taken at once (a typo fixed), so that the wait
// ends when that shard answers, not at the bound. Read at most once a second.
void TakeReloadedToken(const CatchUp& c, ReplicaSigner* signer, int64_t* read_ns) {
  sigset_t pending;
  const bool hup = Signals().reload || (sigpending(&pending) == 0 && sigismember(&pending, SIGHUP) == 1);
  if (!hup || (*read_ns != 0 && MonoNs() - *read_ns < 1000 * kMsNs)) return;
  *read_ns = MonoNs();
  Result<SrvConfig> next = LoadSrvConfig(c.cfg.path);
  if (!next.ok() || next.value().admin_token.empty()) return;
  signer->SetToken(next.value().admin_token);
}

// A snapshot's nodes of bizzes this map lacks (the other shard a step of
// a map rollout ahead or behind), kept aside in the store directory and
// merged by the take after the reload that brings their biz, each batch's
// of a biz under a receipt of their own (its batch's was written when the
// rest merged); returns how many. Left out for good, this copy was short of
// their uses, and a failover after the rollout granted them again.
size_t KeepAsideLeftOut(const CatchUp& c, const std::string& name, const std::vector<SnapshotMerged::LeftOut>& left) {
  const std::string path = store_dir::In(c.cfg.store_dir, store_dir::kReplicaParked);
  auto fd = LockParked(path);
  size_t kept = 0;
  std::string why;
  // One record per batch and biz, whatever their order in the batch (two
  // records under one receipt: the take merged the first and took the
  // second for the first sent again, and its nodes were lost).
  std::map<std::pair<std::string_view, uint32_t>, std::vector<std::string_view>> records;
  for (const SnapshotMerged::LeftOut& l : left) records[{l.receipt, l.biz}].push_back(l.line);
  for (const auto& [id, lines] : records) {
    const std::string biz = std::to_string(id.second);
    // A receipt is at most 255 bytes: a batch's of long shard names is
    // named by its hash.
    std::string receipt = std::string(id.first) + "/left/" + biz;
    if (receipt.size() > 255) receipt = "snap-left/" + Hex16(StreamHash(id.first)) + "/" + biz;
    const Status s = !fd.ok() ? fd.status() : ParkNodes(*fd, path, id.second, receipt, lines, ::time(nullptr));
    if (s.ok()) kept += lines.size();
    else if (why.empty()) why = s.message();
  }
  if (kept > 0)
    FRS_LOG(
        "replicas: %zu node(s) of the snapshot of %s are of bizzes this map.xml lacks: kept aside in %s until a "
        "reload brings them (a map change not yet made on every shard?); after a day without it they are dropped",
        kept, name.c_str(), path.c_str());
  if (kept < left.size())
    FRS_LOG(
        "replicas: %zu node(s) of the snapshot of %s are of bizzes this map.xml lacks and could not be kept aside: "
        "%s; their uses are missing from this copy until their windows end",
        left.size() - kept, name.c_str(), why.c_str());
  return kept;
}

// The changes shard `name` kept aside for this shard's routes, carried by
// its snapshot: applied now for a biz this map has, kept aside here for the
// others (as that shard's own take would, each under the receipt a take
// uses: replica_park.h).
void TakeCarriedParked(const CatchUp& c, const std::string& name, std::string_view records) {
  const std::string path = store_dir::In(c.cfg.store_dir, store_dir::kReplicaParked);
  auto known = [&](uint32_t biz) { return c.engine->ResolveBiz(std::to_string(biz)).ok(); };
  // Change records only: a snapshot never carries node records
  // (ParkedRecordsFor), and TakeParkedRecords reads none.
  auto apply = [&](const ParkedBatch& b) -> Result<bool> {
    return c.engine->ApplyChanges(b.changes, ParkReceiptStream(b.biz, b.stream), b.seq, 0);
  };
  auto taken = TakeParkedRecords(records, name, path, known, apply, ::time(nullptr));
  if (!taken.ok()) {
    FRS_LOG("replicas: the changes %s kept aside for this shard's routes could not be taken: %s", name.c_str(),
            taken.status().message().c_str());
    return;
  }
  for (const std::string& p : taken->problems) FRS_LOG("replicas: %s", p.c_str());
  FRS_LOG(
      "replicas: the snapshot of %s carried %zu change(s) it kept aside for a biz its map lacks: %zu applied here, %zu "
      "kept aside in %s for a biz this map lacks too",
      name.c_str(), taken->applied + taken->duplicates + taken->kept + taken->held + taken->dropped, taken->applied,
      taken->kept + taken->held, path.c_str());
}

// A snapshot's nodes (`body`, read at `t`) merged into this store; returns
// how many, those kept aside for a biz this map lacks included (the
// catch-up's count said 0 of a snapshot all of whose nodes were), those of
// the batches merged before an error too: their receipts are written.
uint64_t MergeSnapshotOf(const CatchUp& c, const std::string& name, std::string_view body, long long t) {
  SnapshotMerged merged =
      MergeSnapshot(body, c.engine, "snap/" + c.cfg.cluster_self + "/" + name + "/" + std::to_string(t));
  if (!merged.status.ok())
    FRS_LOG("replicas: the snapshot of %s could not be merged whole (%llu node(s) merged before): %s", name.c_str(),
            static_cast<unsigned long long>(merged.nodes), merged.status.message().c_str());
  std::vector<SnapshotMerged::LeftOut> lacked;
  size_t refused = 0;
  const SnapshotMerged::LeftOut* first_refused = nullptr;
  for (SnapshotMerged::LeftOut& l : merged.left_out) {
    if (l.why.empty()) {
      lacked.push_back(std::move(l));
    } else if (refused++ == 0) {
      first_refused = &l;
    }
  }
  if (refused > 0)
    FRS_LOG(
        "replicas: %zu node(s) of the snapshot of %s were refused here and not taken (the first, of biz id %u: %s); "
        "their uses are missing from this copy until their windows end",
        refused, name.c_str(), first_refused->biz, first_refused->why.c_str());
  return merged.nodes + (lacked.empty() ? 0 : KeepAsideLeftOut(c, name, lacked));
}

// The bound of a snapshot's answer: every node this store can hold, at
// 2 KiB a line (about 280 bytes with a key not kept; a kept key of 255
// bytes and a reservation table make one longer), the changes kept aside
// that follow them, and the client's default besides. At the default alone
// (64 MiB) a store of about 250,000 nodes had its snapshot refused whole.
uint64_t SnapshotBodyLimit(const StoreGeometry& g) {
  return g.slots() * 2048 + kMaxParkedBytes + client::HttpClient::kDefaultBodyLimit;
}

// The snapshot of shard `i` (`name`) asked and merged; the nodes merged.
// Its changes are taken from then on (hold_off[i] released), whatever
// became of the snapshot, unless a stop was asked meanwhile (the catch-up
// ends; nothing is taken any more). *missed: no snapshot came from a shard
// that may hold this one's nodes (a 409, another list or a pending
// handoff, is not missed: those nodes come by the handoff).
// *stalled_ns: when it was first asked, if it took the ask and never
// answered (the wait for its queued changes goes on from there).
uint64_t TakeSnapshot(const CatchUp& c, const std::string& name, size_t i, const std::string& lease_key, bool* missed,
                      int64_t* stalled_ns) {
  client::HttpClient http(name, static_cast<int>(std::max<uint32_t>(c.cfg.replica_timeout_ms, 15000)));
  ReplicaSigner signer(c.token, name);
  signer.Attach(&http);
  http.SetStop(StopAsked);
  http.SetBodyLimit(SnapshotBodyLimit(c.cfg.geometry));
  // Every store file in one answer: one reading of the sender's store,
  // so one set of stream numbers holds for all of it. A 503 is asked
  // again (bounded, logged): this shard keeps answering 503 meanwhile.
  const std::string plain_ask = "/replicate?for=" + c.self + "&digest=" + c.digest + "&snapshot=1" + lease_key;
  std::string ask = plain_ask + "&parked=1";
  // An frsd before parked= refuses it: asked again without (the changes it
  // kept aside for a biz its map lacks then stay there).
  auto get = [&]() {
    auto got = http.Get(ask);
    if (got.ok() && got->status == 400 && got->body.find("parameter 'parked'") != std::string::npos) {
      FRS_LOG("replicas: %s takes no parked= (an older frsd): its snapshot is asked without the changes it kept aside",
              name.c_str());
      ask = plain_ask;
      got = http.Get(ask);
    }
    return got;
  };
  // So is one that took the request and did not answer, and from then on
  // whatever becomes of the attempts: that shard is alive (a pause, a
  // stalled disk) and holds what this one lacks; given up after one
  // time-out, the nodes only it had sent were missing here for good. One
  // that refuses or closes the connection at once is gone: not waited for.
  FRS_LOG("replicas: asking %s for its snapshot of this shard's routes", name.c_str());
  const int64_t first_ask_ns = MonoNs();
  auto r = get();
  bool alive = r.ok() || http.Unanswered();
  bool ever_answered = r.ok();
  // A 403 (this shard's admin token refused) is asked again too, with the
  // token a SIGHUP brings meanwhile: given up at once, the nodes only that
  // shard had were missing here for good.
  int64_t token_read_ns = 0;
  for (int wait_ms = kSnapshotRetryFirstMs, attempt = 1;
       ((r.ok() && (r->status == 503 || r->status == 403)) || (!r.ok() && alive)) && !StopAsked() &&
       MonoNs() - c.start + int64_t{wait_ms} * kMsNs < c.SnapshotLimitNs();
       wait_ms = std::min(wait_ms * 2, kSnapshotRetryMaxMs), ++attempt) {
    std::string why = r.ok() ? std::to_string(r->status) + " " + AnswerWords(r->body) : r.status().message();
    if (r.ok() && r->status == 403) TakeReloadedToken(c, &signer, &token_read_ns);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    FRS_LOG("replicas: no snapshot from %s yet (%s); asking again in %d ms (attempt %d)", name.c_str(), why.c_str(),
            wait_ms, attempt + 1);
    CounterAdd(c.shared->snapshot_retries);
    SleepMs(wait_ms);
    if (!r.ok() && !AnswersAgain(c, name)) break;
    r = get();
    alive = alive || r.ok() || http.Unanswered();
    ever_answered = ever_answered || r.ok();
  }
  if (StopAsked()) return 0;
  if (ever_answered) *stalled_ns = 0;
  else if (alive && *stalled_ns == 0) *stalled_ns = first_ask_ns;
  if (r.ok() && r->status == 200 && !signer.Proven(*r)) {
    *missed = true;
    FRS_LOG(
        "replicas: %s answered its snapshot without proof that it holds this cluster's admin token "
        "(FRS-Replica-Proof): not a shard of this cluster (another program at its address?); not taken",
        name.c_str());
    CounterSet(c.shared->hold_off[i], 0);
    return 0;
  }
  if (!r.ok() || r->status != 200) {
    // A 409 for the lease key is no ring change: what it holds is missed.
    const bool other_key = r.ok() && r->status == 409 && r->body.find("<cluster lease_key>") != std::string::npos;
    *missed = !r.ok() || r->status != 409 || other_key;
    // A 409 is a ring change under way (a handoff pending there, or two
    // lists): expected on a shard the change adds, whose nodes the handoff
    // brings; said so, as the bare line read like a loss.
    FRS_LOG("replicas: no snapshot from %s (%s): what only it held of this shard's routes is not taken back%s",
            name.c_str(),
            r.ok() ? (std::to_string(r->status) + " " + AnswerWords(r->body)).c_str() : r.status().message().c_str(),
            r.ok() && r->status == 409 && !other_key
                ? " by a snapshot (a ring change is under way: on a shard it adds, expected; frsctl handoff brings "
                  "its nodes)"
                : "");
    CounterSet(c.shared->hold_off[i], 0);
    return 0;
  }
  std::string_view body = r->body;
  long long t = 0;
  if (!ReadSnapshotHead(&body, i, c.shared, &t)) {
    FRS_LOG("replicas: %s answered a snapshot without its first line; skipped", name.c_str());
    CounterSet(c.shared->hold_off[i], 0);
    return 0;
  }
  // After the nodes, the changes that shard kept aside for this one's
  // routes (replica_park.h), if any.
  std::string_view parked;
  if (body.starts_with(kParkedFirstLine)) {
    parked = body.substr(kParkedFirstLine.size());
    body = {};
  } else if (const size_t at = body.find("\n" + std::string(kParkedFirstLine)); at != std::string_view::npos) {
    parked = body.substr(at + 1 + kParkedFirstLine.size());
    body = body.substr(0, at + 1);
  }
  const uint64_t nodes = MergeSnapshotOf(c, name, body, t);
  if (!parked.empty()) TakeCarriedParked(c, name, parked);
  // Release: a worker that sees the changes taken sees `carried` too.
  std::atomic_ref<uint64_t>(c.shared->hold_off[i]).store(0, std::memory_order_release);
  return nodes;
}

// A worker stream's mark: the stream (its process) and how many changes
// it had queued for this shard at the first answer.
struct QueueMark {
  unsigned long long hash = 0, queued = 0;
};

// The changes a peer's answer to the question says are still to come of
// those queued before the first answer (its streams' marks, taken from
// that answer into *marks, *marked then set), with what its spools and the
// links of an earlier <cluster> still hold.
unsigned long long ChangesBehind(const std::string& body, std::vector<QueueMark>* marks, bool* marked) {
  unsigned long long behind = 0;
  for (size_t at = body.find("\nworker "); at != std::string::npos; at = body.find("\nworker ", at + 1)) {
    unsigned long long w = 0, hash = 0, queued = 0, held = 0;
    if (std::sscanf(body.c_str() + at + 1, "worker %llu %llu %llu %llu", &w, &hash, &queued, &held) != 4 ||
        w >= kMaxSnapshotStreams)
      continue;
    if (!*marked) {
      if (marks->size() <= w) marks->resize(w + 1);
      (*marks)[w] = QueueMark{hash, queued};
    }
    if (w >= marks->size() || (*marks)[w].hash != hash) continue;
    const unsigned long long delivered = queued >= held ? queued - held : 0;
    if (delivered < (*marks)[w].queued) behind += (*marks)[w].queued - delivered;
  }
  *marked = true;
  // A spool of an earlier stop (replica_spool.h): every change it still
  // holds was made before the question, made for this shard while it was
  // away; waited for whole.
  for (size_t at = body.find("\nspool "); at != std::string::npos; at = body.find("\nspool ", at + 1)) {
    unsigned long long w = 0, hash = 0, held = 0;
    if (std::sscanf(body.c_str() + at + 1, "spool %llu %llu %llu", &w, &hash, &held) == 3) behind += held;
  }
  // What its links of an earlier <cluster> still deliver (a reload there
  // while this shard was away): made before the question, waited for whole.
  for (size_t at = body.find("\ndraining "); at != std::string::npos; at = body.find("\ndraining ", at + 1)) {
    unsigned long long w = 0, held = 0;
    if (std::sscanf(body.c_str() + at + 1, "draining %llu %llu", &w, &held) == 2) behind += held;
  }
  return behind;
}

// One other shard's part of the wait for what it queued for this one
// (AskOnce): its question's client, and what its answers said so far.
struct PeerWait {
  PeerWait(const CatchUp& c, std::string peer, size_t index)
      : name(std::move(peer)),
        i(index),
        http(name, static_cast<int>(std::max<uint32_t>(c.cfg.replica_timeout_ms, 1000))),
        signer(c.token, name) {
    signer.Attach(&http);
    http.SetStop(StopAsked);
  }
  const std::string name;
  const size_t i;  // its index in the ring's list
  client::HttpClient http;
  ReplicaSigner signer;
  std::vector<QueueMark> marks;   // by worker index, from the first answer that says them
  bool marked = false;            // that answer came (a refusal, 409, says none)
  bool asked = false;             // a question was sent
  bool answered = false;          // one was answered
  bool refused = false;           // its last answer was a refusal (403, or 409 for the lease key)
  bool refused_key = false;       // that refusal was of the lease key
  bool refusal_said = false;      // a refusal was logged and its link marked (once)
  unsigned long long behind = 0;  // the last answer's changes still to come
  int64_t lost_ns = 0;            // it answered, then stopped answering, at this time
  int64_t stalled_ns = 0;         // it took a question and sent no answer, since the question at this time
  int64_t token_read_ns = 0;      // srv.xml last read for a token a SIGHUP brought
  int64_t next_ns = 0;            // not asked again before this
};

enum class Waited { kAll, kShort };

// The catch-up's time is over while `p` was still waited for: said in
// the words of what it was waited for, and its link read down where it
// did not answer.
Waited WaitOver(const CatchUp& c, PeerWait& p) {
  const char* without = "serving without what it may hold for this shard";
  if (p.stalled_ns != 0) {
    FRS_LOG("replicas: %s has sent no answer for %.1f s; the catch-up's %s are over: %s", p.name.c_str(),
            static_cast<double>(MonoNs() - p.stalled_ns) / 1e9, c.LimitWords().c_str(), without);
  } else if (p.lost_ns != 0) {
    FRS_LOG("replicas: %s stopped answering %.1f s ago; the catch-up's %s are over: %s", p.name.c_str(),
            static_cast<double>(MonoNs() - p.lost_ns) / 1e9, c.LimitWords().c_str(), without);
  } else if (p.refused) {
    FRS_LOG("replicas: %s still refuses this shard's %s after %s; %s", p.name.c_str(),
            p.refused_key ? "lease key" : "admin token", c.LimitWords().c_str(), without);
    return Waited::kShort;  // its link reads down since the first refusal
  } else {
    FRS_LOG("replicas: %s still holds %llu change(s) made for this shard while it was away, after %s; serving now",
            p.name.c_str(), p.behind, c.LimitWords().c_str());
    return Waited::kShort;
  }
  CounterSet(c.shared->unreached[p.i], 1);  // its link reads down until it answers
  return Waited::kShort;
}

// A refusal of this shard (403 for its admin token, 409 for its lease key)
// by `p`: waited for as changes still coming, or the end of the wait.
std::optional<Waited> Refused(const CatchUp& c, PeerWait& p, const HttpResponse& r, bool other_key) {
  // Keyed otherwise (its words say so; another list is answered 409 too,
  // and served as before), or refusing this shard's admin token (a typo, a
  // token changed on one shard only): what it holds for this shard is
  // refused here too, and how much that is goes unsaid. Waited for as
  // changes still coming, so that the routes stay with the other holder
  // until the operator mends it, or the limit.
  const bool over = MonoNs() > c.QueueUntilNs();
  // Its link reads down from the first refusal (it read up for the 5 s
  // before the link's own first question, refused alike); marked once, so
  // that a link that reached the shard since is not marked again.
  if (!p.refusal_said) CounterSet(c.shared->unreached[p.i], 1);
  if (!p.refusal_said && !over)
    FRS_LOG("replicas: %s answered %d: %s; waiting for the changes it may hold for this shard (up to %s)",
            p.name.c_str(), r.status, AnswerWords(r.body).c_str(), c.LimitWords().c_str());
  if (r.status == 403) TakeReloadedToken(c, &p.signer, &p.token_read_ns);
  if (over && !p.refusal_said) {
    // A shard asked first after the bound is said once, in one line (it
    // said "waiting" and "after 60 s" in one millisecond).
    FRS_LOG("replicas: %s answered %d: %s; the catch-up's %s are over: serving without what it may hold for this shard",
            p.name.c_str(), r.status, AnswerWords(r.body).c_str(), c.LimitWords().c_str());
    return Waited::kShort;
  }
  p.refused = p.refusal_said = true;
  p.refused_key = other_key;
  if (over) return WaitOver(c, p);
  p.next_ns = MonoNs() + 200 * kMsNs;
  return std::nullopt;
}

// One question to shard `p` of what it still holds for this one: whether
// every change it queued for this shard before its first answer (its
// marks) is delivered: those made for its routes while it was away (a link
// down retries once a second, so they may not have come yet). Per worker
// stream of the peer, "worker W HASH QUEUED HELD": QUEUED - HELD changes
// of it are delivered. Changes queued later are new traffic, sent in step
// with it (sync) or within the lag (async), and not waited for, so a
// loaded peer cannot hold this shard off. A stream that restarted (another
// HASH) lost its queue with its process: nothing of it to wait for, unless
// a graceful stop kept it in a spool, which the answer lists ("spool W
// HASH HELD") until it is delivered. No answer yet: asked again from
// p.next_ns. Every question ends by the catch-up's bound but a shard's
// first, which has a second at least (a shard asked late still gets one).
std::optional<Waited> AskOnce(const CatchUp& c, PeerWait& p) {
  // The bound, or the end of the grace of one that went quiet (below).
  int64_t until_ns = c.QueueUntilNs();
  if (p.lost_ns != 0) until_ns = std::max(until_ns, p.lost_ns + kStopDeliverGraceNs);
  const int64_t left_ms = (until_ns - MonoNs()) / kMsNs;
  // A question with less time than an answer takes would fail by this
  // shard's own deadline and be blamed on the other.
  if (p.asked && left_ms < kLastQuestionMs) return WaitOver(c, p);
  // A shard's first question has a second at least, past the bound too (a
  // shard asked late still gets one); every other ends by the bound.
  p.http.SetDeadlineIn(static_cast<int>(p.asked ? left_ms : std::max<int64_t>(left_ms, kFirstQuestionMs)));
  const int64_t asked_ns = MonoNs();
  auto r = p.http.Get(c.StateQuery());
  p.asked = true;
  if (StopAsked()) return Waited::kShort;
  // Less time left than a question needs is over too (it would say "asking
  // again" with none left).
  const bool past = MonoNs() + kLastQuestionMs * kMsNs >= until_ns;
  // One that took the question and sent no answer is alive (paused, a
  // stalled disk) and holds what this shard lacks: asked again within the
  // catch-up's bound, the routes here 503 meanwhile, as for a snapshot, while the
  // others are asked in turn. Taken for gone after one time-out, a
  // successor paused for seconds had its uses for this shard granted again
  // (from outside: 109 grants of a limit of 100).
  if (!r.ok() && p.http.Unanswered()) {
    // Cut by the bound: over, in the words of what it was waited for (one
    // that was answering is still behind, not stalled).
    if (past) {
      if (p.stalled_ns == 0 && !p.answered) p.stalled_ns = asked_ns;
      return WaitOver(c, p);
    }
    if (p.stalled_ns == 0) {
      p.stalled_ns = asked_ns;
      FRS_LOG(
          "replicas: %s took this shard's question and sent no answer (%s): alive but paused or stalled; asking "
          "again, this shard's routes answered 503 meanwhile, for the catch-up's %.1f s left",
          p.name.c_str(), r.status().message().c_str(),
          static_cast<double>(std::max<int64_t>(c.QueueUntilNs() - MonoNs(), 0)) / 1e9);
    }
    p.next_ns = MonoNs() + 100 * kMsNs;
    return std::nullopt;
  }
  if (r.ok() && p.stalled_ns != 0) {
    FRS_LOG("replicas: %s answers again after %.1f s without an answer", p.name.c_str(),
            static_cast<double>(MonoNs() - p.stalled_ns) / 1e9);
    p.stalled_ns = 0;
  }
  // A shard seen alive that then went quiet may be stopping: its workers
  // deliver what they queue for this one before they exit (within
  // Replicator::kStopDeliverMs), so the wait goes on a little longer.
  const bool seen_alive = p.answered || p.stalled_ns != 0;
  if (!r.ok() && seen_alive && (p.lost_ns == 0 || MonoNs() - p.lost_ns < kStopDeliverGraceNs)) {
    if (p.lost_ns == 0) p.lost_ns = MonoNs();
    p.next_ns = MonoNs() + 20 * kMsNs;
    return std::nullopt;
  }
  if (!r.ok()) {
    FRS_LOG("replicas: %s cannot be reached (%s)%s; serving without what it may hold for this shard", p.name.c_str(),
            r.status().message().c_str(),
            p.answered ? ", since it answered" : (seen_alive ? ", since it took a question" : ""));
    CounterSet(c.shared->unreached[p.i], 1);  // its link reads down until it answers
    return Waited::kShort;
  }
  p.answered = true;
  p.lost_ns = 0;
  const bool other_key = r->status == 409 && r->body.find("<cluster lease_key>") != std::string::npos;
  if (other_key || r->status == 403) return Refused(c, p, *r, other_key);
  p.refused = false;
  unsigned long long pending = 0;
  if (r->status == 200 && !p.signer.Proven(*r)) {
    FRS_LOG(
        "replicas: %s answered without proof that it holds this cluster's admin token (FRS-Replica-Proof): not a "
        "shard of this cluster (another program at its address?); serving without what it may hold for this "
        "shard",
        p.name.c_str());
    CounterSet(c.shared->unreached[p.i], 1);  // its link reads down until it answers
    return Waited::kShort;
  }
  if (r->status != 200 || std::sscanf(r->body.c_str(), "pending %llu", &pending) != 1) {
    FRS_LOG("replicas: %s answered %d: %s", p.name.c_str(), r->status, AnswerWords(r->body).c_str());
    return Waited::kShort;
  }
  p.behind = ChangesBehind(r->body, &p.marks, &p.marked);
  if (p.behind == 0) return Waited::kAll;
  if (MonoNs() > c.QueueUntilNs()) return WaitOver(c, p);
  p.next_ns = MonoNs() + 20 * kMsNs;
  return std::nullopt;
}

// Waits for what every other shard queued for this one (AskOnce), asking
// them in turn, so that one that does not answer (paused, stalled) does
// not spend the catch-up's time before the others are waited for. Returns
// how many are short of theirs (or were `missed` already).
size_t WaitForQueued(const CatchUp& c, const Ring& ring, const std::vector<size_t>& peers,
                     const std::vector<bool>& missed, const std::vector<int64_t>& stalled_since) {
  std::vector<std::unique_ptr<PeerWait>> waits;  // held by address: each signer holds its client's
  for (size_t i : peers) {
    waits.push_back(std::make_unique<PeerWait>(c, ring.shards()[i].name, i));
    waits.back()->stalled_ns = stalled_since[i];  // its snapshot's ask said it took no answer
  }
  size_t short_of = 0;
  while (!waits.empty() && !StopAsked()) {
    int64_t next_ns = INT64_MAX;
    for (auto it = waits.begin(); it != waits.end() && !StopAsked();) {
      PeerWait& p = **it;
      std::optional<Waited> w;
      if (MonoNs() >= p.next_ns) w = AskOnce(c, p);
      if (!w) {
        next_ns = std::min(next_ns, p.next_ns);
        ++it;
        continue;
      }
      if (*w == Waited::kShort || missed[p.i]) ++short_of;
      it = waits.erase(it);
    }
    const int64_t now = MonoNs();
    if (!waits.empty() && next_ns > now) SleepMs(static_cast<int>(std::min<int64_t>((next_ns - now) / kMsNs + 1, 200)));
  }
  return short_of;
}

}  // namespace

// A <cluster> change made by a restart instead of SIGHUP: the store says
// which list its nodes were last handed off for (cluster.digest). Another
// list keeps the handoff pending, as the SIGHUP would have, so that this
// shard answers no snapshot until frsctl handoff reports done; a shard that
// forgot it answered a new shard's snapshot with counts the handoff then
// sent again (a count of 3 read 9). That list itself (cluster.list, when its
// digest is the one noted) is the list before the change, *previous: a
// SIGHUP's master keeps it, and without it this shard's links, sent without
// previous=, were refused by every shard still on it, and its own routes
// answered 503 until each of them had the new list too.
void CarryRingChange(const SrvConfig& cfg, bool fresh_store, ReplicaShared* shared, std::vector<RingShard>* previous) {
  auto ring = Ring::Make(cfg.cluster_shards);
  if (!ring.ok()) return;
  const std::string now = ring->DigestText();
  const std::string path = store_dir::In(cfg.store_dir, store_dir::kRingDigest);
  const std::string list_path = store_dir::In(cfg.store_dir, store_dir::kRingList);
  Result<std::string> was = os::ReadTextFile(path);
  std::string text = was.ok() ? was.value() : std::string();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  Result<std::string> list_text = os::ReadTextFile(list_path);
  Result<Ring> listed = list_text.ok() ? Ring::ParseList(list_text.value()) : Result<Ring>(list_text.status());
  const std::string listed_digest = listed.ok() ? listed->DigestText() : std::string();
  // The list first, then its digest: a stop between the two leaves a list
  // whose digest is not the noted one, which is ignored.
  auto note_list = [&] {
    if (listed.ok() && listed_digest == now) return true;
    if (auto w = WriteFileWhole(list_path, ring->ListText(), {}); !w.ok()) {
      FRS_LOG("replicas: %s", w.status().message().c_str());
      return false;
    }
    return true;
  };
  if (fresh_store || !was.ok() || text.size() != 8) {
    if (!note_list()) return;
    if (auto w = WriteFileWhole(path, now + "\n", {}); !w.ok()) FRS_LOG("replicas: %s", w.status().message().c_str());
    return;
  }
  if (text == now) {
    note_list();  // a store noted by an earlier build, which kept the digest only
    return;
  }
  CounterSet(shared->ring_changed_to, ring->Digest());
  FRS_LOG(
      "replicas: this store's nodes were last handed off under another <cluster> (digest %s; this one is %s): "
      "a ring change made by a restart; the handoff is pending here, and this shard answers no snapshot until "
      "`frsctl handoff --from OLD_SRV.xml` reports it done (docs/cluster.md, \"Ring changes with replicas\")",
      text.c_str(), now.c_str());
  if (listed.ok() && text == listed_digest) {
    *previous = listed->shards();
    return;
  }
  FRS_LOG(
      "replicas: the list before the change is not in %s (%s): until every shard runs this one, the shards still "
      "on it refuse this shard's changes, and this shard refuses theirs",
      list_path.c_str(), listed.ok() ? "it holds another list" : listed.status().message().c_str());
}

Status PrepareReplicaCatchUp(const SrvConfig& cfg, bool* fresh_store, Store* store, ReplicaShared* shared,
                             std::vector<RingShard>* previous) {
  const std::string pending = store_dir::In(cfg.store_dir, store_dir::kCatchUpPending);
  if (cfg.cluster_replicas == 0 && ::access(pending.c_str(), F_OK) == 0) {
    // Served without replicas from now on, the store is this shard's own:
    // a later start with replicas must not take it for a catch-up's.
    FRS_LOG("replicas: this store's first catch-up did not finish, and replicas are off now: it serves as it is");
    if (Status s = os::RemoveFileSynced(pending); !s.ok()) return s;
  }
  if (cfg.cluster_replicas == 0 || shared == nullptr) return Status::OK();
  CounterSet(shared->catching_up, 1);
  if (!*fresh_store && ::access(pending.c_str(), F_OK) == 0) {
    // Everything in it came from the other shards (its routes answered 503
    // meanwhile), which still hold it: taken again whole, nothing is lost,
    // provided each answers. One that does not would leave its part of
    // this shard's nodes empty where the store held them.
    for (const auto& shard : cfg.cluster_shards) {
      if (shard.name == cfg.cluster_self) continue;
      client::HttpClient http(shard.name, 2000);
      ReplicaSigner signer(cfg.admin_token, shard.name);
      signer.Attach(&http);
      if (auto r = http.Get("/replicate?state=1"); !r.ok())
        return Status::Unavailable("this store's first catch-up did not finish (" + pending + " is left), and " +
                                   shard.name + " cannot be reached to take its nodes back again (" +
                                   r.status().message() +
                                   "): start this shard once every shard answers; to serve what the store holds "
                                   "instead, some of its nodes missing, remove " +
                                   pending + " first");
    }
    auto erased = store != nullptr ? store->EraseIf(Store::Filter{}, [](const NodeInfo&) { return true; })
                                   : Result<uint64_t>(Status::Unavailable("no store"));
    if (!erased.ok())
      return Status::Unavailable(
          "this store's first catch-up did not finish (" + pending +
          " is left) and the store cannot be emptied to begin it again: " + erased.status().message());
    FRS_LOG(
        "replicas: this store's first catch-up did not finish (%s is left: the last start was stopped before the "
        "other shards' snapshots were all in); its %llu node(s) are dropped and it catches up as a new store",
        pending.c_str(), static_cast<unsigned long long>(erased.value()));
    // What it kept aside then (replica_park.h) the snapshots carry again.
    if (Status s = RemoveParked(store_dir::In(cfg.store_dir, store_dir::kReplicaParked)); !s.ok())
      return Status::Unavailable("the store's first catch-up begins again, and " + s.message());
    *fresh_store = true;
  }
  CarryRingChange(cfg, *fresh_store, shared, previous);
  if (!*fresh_store) return Status::OK();
  // Marked before the first node is merged, and synced: a kill at any
  // instant of the catch-up leaves the mark for the next start.
  if (auto w = WriteFileWhole(pending, "a new store's catch-up began; removed once its snapshots are in\n",
                              {.sync_file = true, .sync_dir = true});
      !w.ok())
    return Status::Unavailable("cannot mark the new store's catch-up: " + w.status().message());
  // A new store takes each shard's snapshot before that shard's changes.
  for (size_t i = 0; i < cfg.cluster_shards.size() && i < kMaxReplicaPeers; ++i)
    if (cfg.cluster_shards[i].name != cfg.cluster_self) CounterSet(shared->hold_off[i], 1);
  return Status::OK();
}

namespace {

// A new store's snapshots not taken, kept for every later start, the link
// that first reaches such a shard again, and /metrics (snapshot_missed.h).
// Written before the catch-up's mark goes: a kill in between begins the
// catch-up again, which writes it anew.
void NoteMissedSnapshots(const SrvConfig& cfg, const Ring& ring, const std::vector<bool>& missed,
                         const ReplicaShared* shared) {
  std::vector<MissedSnapshot> list;
  // A shard that asked this one for a snapshot meanwhile is on a new store:
  // nothing of it to miss (its worker's removal may have run before this).
  auto make = [&] {
    list.clear();
    for (size_t i = 0; i < missed.size() && i < ring.shards().size(); ++i)
      if (missed[i] && (shared == nullptr || i >= kMaxReplicaPeers || CounterGet(shared->snapshot_asked[i]) == 0))
        list.push_back({ring.shards()[i].name, static_cast<int64_t>(::time(nullptr))});
    return list;
  };
  make();  // said below even when the file cannot be written
  if (Status s = NoteMissedSnapshotsLocked(cfg.store_dir, make); !s.ok())
    FRS_LOG("replicas: cannot note the snapshots not taken: %s", s.message().c_str());
  for (const MissedSnapshot& m : list) FRS_LOG("replicas: %s", MissedSnapshotWords(cfg.store_dir, m, m.at_s).c_str());
}

// Said again at each later start on this store, until it is replaced: each
// shard of this ring once. Lines naming none, or not in form (the file
// edited), are said in one line: said each, a megabyte of them wrote 18 MB
// of log at every start, and one naming no shard read as a remedy due
// (found from outside).
void SayMissedSnapshots(const SrvConfig& cfg, const Ring& ring) {
  size_t unread = 0;
  auto missed = ReadMissedSnapshots(cfg.store_dir, &unread);
  if (!missed.ok()) {
    FRS_LOG("replicas: %s", missed.status().message().c_str());
    return;
  }
  std::vector<std::string> said;
  size_t foreign = 0;
  for (const MissedSnapshot& m : *missed) {
    if (ring.Find(m.shard) < 0) {
      ++foreign;
      continue;
    }
    if (std::find(said.begin(), said.end(), m.shard) != said.end()) continue;
    said.push_back(m.shard);
    FRS_LOG("replicas: %s", MissedSnapshotWords(cfg.store_dir, m, ::time(nullptr)).c_str());
  }
  if (unread + foreign > 0)
    FRS_LOG(
        "replicas: %s has %zu line(s) that are not \"SHARD UNIX_S\" and %zu naming no shard of this <cluster>: "
        "not said (frsd writes there the shards a new store took no snapshot from)",
        store_dir::In(cfg.store_dir, store_dir::kSnapshotMissed).c_str(), unread, foreign);
}

}  // namespace

bool RunReplicaCatchUp(const SrvConfig& cfg, bool fresh_store, AdminEngine* engine, ReplicaShared* shared) {
  if (cfg.cluster_replicas == 0 || shared == nullptr) return true;
  const std::string pending = store_dir::In(cfg.store_dir, store_dir::kCatchUpPending);
  // Served from here on: a later start must find its old store.
  auto serving = [&] {
    if (fresh_store)
      if (Status s = os::RemoveFileSynced(pending); !s.ok())
        FRS_LOG("replicas: %s (the next start would take the snapshots again into an emptied store)",
                s.message().c_str());
    CounterSet(shared->catching_up, 0);
  };
  auto ring = Ring::Make(cfg.cluster_shards);
  if (!ring.ok()) {
    serving();
    return true;
  }
  const std::string digest = ring->DigestText();
  // A snapshot and the question of what a peer holds for this shard are
  // asked with this shard's lease key check: a shard keyed otherwise
  // refuses them (409), as it refuses another's changes.
  std::string lease_key;
  if (const uint64_t check = engine->LeaseKeyCheck(); check != 0) {
    char hex[20];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(check));
    lease_key = std::string("&lease_key=") + hex;
  }
  CatchUp c{cfg,    engine,          shared,   PercentEncoded(cfg.cluster_self, kPercentQueryValue),
            digest, cfg.admin_token, MonoNs(), lease_key};
  std::vector<size_t> peers;
  for (size_t i = 0; i < ring->shards().size() && i < kMaxReplicaPeers; ++i)
    if (ring->shards()[i].name != cfg.cluster_self) peers.push_back(i);
  FRS_LOG("replicas: catching up (%s store) with %zu other shard(s) before serving this shard's routes",
          fresh_store ? "a new" : "its old", peers.size());
  if (!fresh_store) SayMissedSnapshots(cfg, *ring);
  std::vector<int64_t> stalled_since(ring->shards().size(), 0);  // took a question, answered none since
  const bool snapshots = fresh_store && SnapshotsWanted(c, *ring, peers, &stalled_since);
  if (!snapshots)
    for (size_t i : peers) CounterSet(shared->hold_off[i], 0);
  uint64_t nodes = 0;
  std::vector<bool> missed(ring->shards().size(), false);
  for (size_t i : peers) {
    bool m = false;
    if (snapshots && !StopAsked())
      nodes += TakeSnapshot(c, ring->shards()[i].name, i, lease_key, &m, &stalled_since[i]);
    missed[i] = m;
  }
  CounterSet(shared->catchup_nodes, nodes);
  if (fresh_store && !StopAsked()) NoteMissedSnapshots(cfg, *ring, missed, shared);
  // Peers whose holdings for this shard were not all taken or waited for.
  c.queue_start = MonoNs();
  const size_t short_of = StopAsked() ? 0 : WaitForQueued(c, *ring, peers, missed, stalled_since);
  // The mark goes only now: until every change a peer queued before the
  // snapshots is delivered, the numbers the snapshots carried (in memory)
  // are what skips those already in them. A start after a kill here on its
  // "old" store would count them again.
  if (StopAsked()) {
    FRS_LOG("replicas: a stop was asked during the catch-up, which ends here%s",
            fresh_store ? " (this new store's catch-up begins again at the next start)" : "");
    return false;
  }
  // Said before the routes are served: whoever waits for /health (an
  // operator, a test) then finds the line.
  FRS_LOG("replicas: caught up in %lld ms (%s store; %llu node(s) taken from snapshots%s); serving this shard's routes",
          static_cast<long long>((MonoNs() - c.start) / kMsNs), fresh_store ? "a new" : "its old",
          static_cast<unsigned long long>(nodes),
          short_of == 0 ? ""
                        : ("; without what " + std::to_string(short_of) + " shard(s) named above may hold").c_str());
  serving();
  return true;
}

}  // namespace frs::server
