// The receiving side of <cluster replicas="1"> (docs/protocol.md,
// "Replicas"):
//   POST /replicate?from=SHARD&stream=S&seq=N&first=K&digest=D[&previous=P]
//                                                               a batch of changes (replica_wire.h)
//   GET  /replicate?for=SHARD&digest=D[&previous=P]             what this shard still queues for SHARD
//   GET  /replicate?for=SHARD&digest=D&snapshot=1[&file=F]      every node (of store file F) SHARD holds
//        [&parked=1]                                           and the changes kept aside for its routes
//   GET  /replicate?state=1                                     this shard's list, what it still delivers
//                                                               from an earlier list, and whether a
//                                                               ring change's handoff is pending here
//   POST /replicate?handed_off=D                                frsctl handoff finished under list D
// A batch stamped with the digest of the list this shard ran before its
// last <cluster> change is taken too: its sender queued it before the
// change and delivers it after (Replicator::Retire). So is one from a shard
// a change ahead, whose previous list is this shard's (previous=): during a
// ring change's SIGHUPs, one shard after another, the two would otherwise
// refuse each other's changes, answer alone, and then refuse those routes
// (503) until the queues drained, which a proxy takes for a dead shard.
// Every form needs the admin token: the shards of a cluster sign their
// requests under it (Authorization: FRS-HMAC-SHA256, replica_auth.h), so
// the token never crosses the network; frsctl and curl send it as
// Authorization: Bearer T (or token= in the query). A change of counts is
// an admin's act.
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>

#include "frs/ring.h"
#include "frs/store.h"
#include "server/admin_auth.h"
#include "server/clock_util.h"
#include "server/handler.h"
#include "server/logger.h"
#include "server/replica_auth.h"
#include "server/replica_park.h"
#include "server/replica_wire.h"
#include "server/replicator.h"
#include "server/request_decoder.h"
#include "server/reset_claim.h"
#include "server/snapshot_missed.h"

namespace frs::server {

// What a /replicate request names (the header comment's forms).
struct ReplicateQuery {
  std::string from, stream, forname, digest, previous, token, lease_key, handed_off;
  uint64_t seq = 0, file = 0, first = 0;
  bool snapshot = false, have_file = false, state = false;
  bool parked = false;  // a snapshot with the changes kept aside for the asker's routes (replica_park.h)
};

void Handler::LogKeyRefusal(std::string_view peer, const char* what, bool peer_keyless, bool self_keyless) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const int64_t now_s = ts.tv_sec;
  // Named as sent (admin-authenticated, but still bytes from the network):
  // cut short and made printable before it reaches the log.
  std::string name(peer.substr(0, 64));
  for (char& c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  if (name.empty()) name = "(unnamed)";
  // A batch, a snapshot ask and a question are logged apart: each says
  // what stopped.
  const std::string slot = std::string(what) + " " + name;
  auto seen = std::find_if(key_refusals_logged_.begin(), key_refusals_logged_.end(),
                           [&](const auto& e) { return e.first == slot; });
  if (seen != key_refusals_logged_.end() && now_s - seen->second < 60) return;
  if (seen != key_refusals_logged_.end()) seen->second = now_s;
  else if (key_refusals_logged_.size() < 3 * kMaxReplicaPeers) key_refusals_logged_.emplace_back(slot, now_s);
  // Which side has a key is said; the keys themselves (and their checks)
  // never are.
  const char* why = peer_keyless   ? "it names no <cluster lease_key> and this shard does"
                    : self_keyless ? "it names a <cluster lease_key> and this shard names none"
                                   : "its <cluster lease_key> differs from this shard's";
  FRS_LOG(
      "replicas: refused %s from %s (409): %s; every shard must name the same key file, or none "
      "(frs_replica_key_refused_total; logged once a minute per shard and kind)",
      what, name.c_str(), why);
}

void Handler::NoteSenderAhead(std::string_view peer, std::string_view theirs) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  // Per sender: each shard's SIGHUP is its own line, so that the log says
  // whose changes were taken. A shard of this list: at most one entry each.
  auto seen = std::find_if(ahead_logged_.begin(), ahead_logged_.end(), [&](const auto& e) { return e.first == peer; });
  if (seen != ahead_logged_.end() && ts.tv_sec - seen->second < 60) return;
  if (seen != ahead_logged_.end()) seen->second = ts.tv_sec;
  else if (ahead_logged_.size() < kMaxReplicaPeers) ahead_logged_.emplace_back(std::string(peer), ts.tv_sec);
  // `peer` is a shard of this list (found in it); `theirs` is the sender's
  // own text, cut and made printable for the log.
  std::string digest(theirs.substr(0, 16));
  for (char& ch : digest)
    if (ch < 0x21 || ch > 0x7e) ch = '?';
  FRS_LOG(
      "replicas: %.*s runs the <cluster> that follows this shard's (digest %s after %s): its changes are taken "
      "meanwhile, so neither answers alone; give this shard the same srv.xml and SIGHUP it (logged once a minute per "
      "sending shard)",
      static_cast<int>(std::min<size_t>(peer.size(), 100)), peer.data(), digest.c_str(),
      opts_.cluster.ring->DigestText().c_str());
}

namespace {

// The query string's parameters into *q; "" or the 400's text.
std::string ParseReplicateQuery(std::string_view query, ReplicateQuery* q) {
  std::string buf;
  std::string_view name, raw;
  std::string_view seen[16];
  size_t nseen = 0;
  while (NextQueryParam(&query, &name, &raw)) {
    std::string_view value;
    if (!PercentDecode(raw, &buf, &value))
      return "/replicate: parameter '" + std::string(name.substr(0, 32)) + "' has a bad %-escape";
    // Twice is ambiguous (the last one won: seq=1&seq=2 applied seq 2,
    // token=&token=T was T), as the GET forms refuse it.
    if (std::find(seen, seen + nseen, name) != seen + nseen)
      return "/replicate: parameter '" + std::string(name.substr(0, 32)) + "' is given twice";
    if (nseen < std::size(seen)) seen[nseen++] = name;
    auto number = [&](uint64_t* out) {
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), *out);
      return !value.empty() && ec == std::errc() && p == value.data() + value.size();
    };
    if (name == "from") q->from = std::string(value);
    else if (name == "stream") q->stream = std::string(value);
    else if (name == "for") q->forname = std::string(value);
    else if (name == "digest") q->digest = std::string(value);
    else if (name == "previous") q->previous = std::string(value);
    else if (name == "lease_key") q->lease_key = std::string(value);
    // A flag is 0 or 1, as the GET forms' are: parked=abc was taken for 0,
    // and snapshot=2 turned a snapshot ask into a question (found from
    // outside).
    else if ((name == "snapshot" || name == "parked" || name == "state") && value != "0" && value != "1")
      return "/replicate: parameter '" + std::string(name) + "' is 0 or 1";
    else if (name == "snapshot") q->snapshot = value == "1";
    else if (name == "parked") q->parked = value == "1";
    else if (name == "state") q->state = value == "1";
    else if (name == "handed_off") q->handed_off = std::string(value);
    else if (name == "token") q->token = std::string(value);
    else if (name == "seq" && number(&q->seq)) continue;
    else if (name == "first" && number(&q->first)) continue;
    else if (name == "file" && number(&q->file)) q->have_file = true;
    else
      return "/replicate: unknown or bad parameter '" + std::string(name.substr(0, 32)) +
             "' (from, stream, seq, first, digest, previous, lease_key; for, snapshot, parked, file; state; "
             "handed_off)";
  }
  // A stream's name becomes the receipts' (repl/STREAM) and the log's:
  // a sender's is "SELF/PID.NS", printable, its SELF at most a 253-byte
  // host and a port (Ring::CheckAddress): under 300 bytes.
  if (q->stream.size() > 512 ||
      std::any_of(q->stream.begin(), q->stream.end(), [](char c) { return c < 0x21 || c == 0x7f; }))
    return "/replicate: stream must be at most 512 printable bytes without spaces";
  return "";
}

// What a question past the state and the handoff note lacks ("": none).
std::string MissingFrom(const HttpHead& head, const ReplicateQuery& q) {
  if (head.method == HttpMethod::kGet && q.forname.empty())
    return "/replicate: a GET asks state=1 (this shard's state), or for=SHARD&digest=D (what this shard holds for "
           "that shard; with snapshot=1, its nodes)";
  if (q.digest.empty()) return "/replicate: digest= is missing (the sender's <cluster> digest, 8 hex digits)";
  return "";
}

// How many of a batch's changes (numbers first, first + 1, ... of
// `stream`) a snapshot of the sender carried already: those up to the
// last it named are in this store.
size_t CarriedAlready(const ReplicaShared& shared, size_t pi, const std::string& stream, uint64_t first,
                      size_t changes) {
  const uint64_t h = StreamHash(stream);
  for (size_t k = 0; k < kMaxSnapshotStreams; ++k) {
    const uint64_t kh = CounterGet(shared.carried[pi][k][0]);
    if (kh == 0) break;
    if (kh != h) continue;
    const uint64_t through = CounterGet(shared.carried[pi][k][1]);
    if (through >= first) return static_cast<size_t>(std::min<uint64_t>(through - first + 1, changes));
    break;
  }
  return 0;
}

// While it lives, every worker's engine waits before its next request
// (Replicator::Enter), until `deadline` at most (a reader that died stops
// nobody longer).
class SnapshotHold {
 public:
  SnapshotHold(ReplicaShared& shared, int64_t deadline) : n_(shared.snapshots) {
    std::atomic_ref<uint64_t> until(shared.snapshot_until_ns);
    uint64_t cur = until.load();
    while (cur < static_cast<uint64_t>(deadline) &&
           !until.compare_exchange_weak(cur, static_cast<uint64_t>(deadline))) {
    }
    std::atomic_ref<uint64_t>(n_).fetch_add(1);
  }
  ~SnapshotHold() { std::atomic_ref<uint64_t>(n_).fetch_sub(1); }
  SnapshotHold(const SnapshotHold&) = delete;
  SnapshotHold& operator=(const SnapshotHold&) = delete;

 private:
  uint64_t& n_;
};

// Waits until no worker's engine is inside a request; false at `deadline`.
bool WaitForWorkersOutside(Metrics& metrics, int64_t deadline) {
  for (uint32_t w = 0; w < metrics.workers(); ++w) {
    std::atomic_ref<uint64_t> inside(metrics.worker(w).replica.inside);
    while (inside.load() != 0) {
      if (MonoNs() >= deadline) return false;
      timespec ts{0, 50 * 1000};
      nanosleep(&ts, nullptr);
    }
  }
  return true;
}

// The answer's bytes, guessed before the reading so that the body is made
// once: grown by doubling, a 300,000-node answer (80 MB) was copied and its
// pages first touched twice over, a third of the reading's time, while every
// request of the shard waited. A node's line is about 270 bytes (one rule,
// no key kept) and the asker's share of the nodes is the routes it owns or
// follows, two shards' worth of the ring. A guess short of it costs one
// more doubling; past 1 GiB, the body grows as it goes.
size_t SnapshotBytesGuess(const StoreStats& st, int64_t file, size_t shards) {
  constexpr uint64_t kLineBytes = 288, kMost = uint64_t{1} << 30;
  const uint64_t nodes = file >= 0 && static_cast<size_t>(file) < st.per_file.size()
                             ? st.per_file[static_cast<size_t>(file)].nodes_used
                             : st.total.nodes_used;
  const uint64_t share = shards > 2 ? nodes * 2 / shards + 1 : nodes;
  return static_cast<size_t>(std::min(kMost, share * kLineBytes + 4096));
}

}  // namespace

// Lease ids verify on both holders only under one key: a sender keyed
// otherwise (or keyed by its own store) is refused as another <cluster> is,
// so that the operator hears of it before a failover answers 409; a
// snapshot likewise, or the asker would hold leases it cannot verify.
// During a rotation (<cluster lease_key_also>) a sender keyed by the other
// key is this shard's too: each verifies the other's ids. The question of
// what this shard holds for another (GET ?for=) is refused only when it
// names a key (a start's and a link's probe do; an earlier frsd's names
// none): so a shard started with another key hears of it at its start.
bool Handler::RefusedForLeaseKey(const HttpHead& head, const ReplicateQuery& q, int* status) {
  char mine_key[20] = "", also_key[20] = "";
  auto hex = [](uint64_t check, char(&out)[20]) {  // a check as a sender writes it; none: ""
    if (check != 0) std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(check));
  };
  hex(engine_->LeaseKeyCheck(), mine_key);
  hex(engine_->LeaseKeyAlsoCheck(), also_key);
  const bool checked = head.method == HttpMethod::kPost || q.snapshot || !q.lease_key.empty();
  if (!checked || q.lease_key == mine_key || (also_key[0] != '\0' && q.lease_key == also_key)) return false;
  auto said = [](const std::string& k) { return k.empty() ? std::string("none") : "check " + k.substr(0, 16); };
  if (counters_) CounterAdd(counters_->replica.key_refused);
  const char* what = head.method == HttpMethod::kPost ? "a batch of changes"
                     : q.snapshot                     ? "a snapshot"
                                                      : "a question of what it holds for that shard";
  LogKeyRefusal(head.method == HttpMethod::kPost ? q.from : q.forname, what, q.lease_key.empty(), mine_key[0] == '\0');
  TextBody(409,
           "/replicate: the sender's <cluster lease_key> (" + said(q.lease_key) + ") is not this shard's (" +
               said(mine_key) + "): every shard must name the same key file, or none (during a rotation, " +
               "the other's as lease_key_also)",
           status);
  return true;
}

void Handler::HandleReplicate(const HttpHead& head, const char* base, std::string_view query, Extra* extra,
                              int* status) {
  if (head.method != HttpMethod::kGet && head.method != HttpMethod::kPost) {
    TextBody(405, "/replicate takes POST (changes) or GET (state, snapshot)", status);
    extra->allow = "GET, POST";
    return;
  }
  ReplicateQuery q;
  if (std::string bad = ParseReplicateQuery(query, &q); !bad.empty()) {
    TextBody(400, bad, status);
    return;
  }
  std::string nonce;
  if (!ReplicateAuthorized(head, base, q, &nonce, status)) return;
  ReplicateAuthorizedRequest(head, base, q, nonce, status);
  // The answer proves this shard holds the token (replica_auth.h): a
  // sender takes no acknowledgement, state or snapshot without it.
  if (!nonce.empty()) {
    replica_proof_ = ReplicaAnswerProof(opts_.admin_token, nonce, *status, Body());
    extra->replica_proof = replica_proof_;
  }
}

bool Handler::ReplicateAuthorized(const HttpHead& head, const char* base, const ReplicateQuery& q, std::string* nonce,
                                  int* status) {
  if (opts_.admin_token.empty()) {
    TextBody(403, "/replicate: replicas authenticate with the admin token, and srv.xml sets none", status);
    return false;
  }
  const std::string_view auth(base + head.auth_off, head.auth_len);
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const auto check = [&](std::string_view self) {
    return CheckReplicaRequest(auth, opts_.admin_token, self, head.method == HttpMethod::kPost ? "POST" : "GET",
                               std::string_view(base + head.target_off, head.target_len),
                               std::string_view(base + head.body_off, head.body_len), now.tv_sec);
  };
  const ReplicaAuthCheck signed_by = check(opts_.cluster.self);
  int code = 403;
  std::string why;    // the refusal's answer
  size_t reason = 0;  // its throttle (token_refusals_)
  // What the log line adds: whose setting to mend.
  const char* mend = "every shard must run the same <admin token> (SIGHUP applies a new one)";
  switch (signed_by.kind) {
    case ReplicaAuthCheck::Kind::kOk: *nonce = signed_by.nonce; return true;
    case ReplicaAuthCheck::Kind::kNotSigned:
      // The token itself (frsctl, curl): Bearer, or token= in the query.
      if (CheckAdminToken(opts_.admin_token, q.token.empty() ? BearerToken(auth) : std::string_view(q.token)) ==
          AdminAuth::kOk)
        return true;
      why =
          "/replicate needs the admin token (Authorization: Bearer T) or a request signed under it, and it is "
          "missing or wrong";
      break;
    case ReplicaAuthCheck::Kind::kMalformed:
      why = "/replicate: an " + std::string(kReplicaAuthScheme) +
            " Authorization needs t= (decimal digits), n= (1 to 64 lower-case hex digits) and mac= (64)";
      mend = "no frsd of this version signs so";
      reason = 1;
      break;
    case ReplicaAuthCheck::Kind::kSkewed:
      why = "/replicate: signed at a time " + std::to_string(signed_by.skew_s) +
            " s from this shard's clock (at most " + std::to_string(kReplicaAuthSkewS) +
            " s apart): set both shards' clocks (NTP)";
      mend = "every shard's clock must be right (NTP)";
      reason = 2;
      break;
    case ReplicaAuthCheck::Kind::kWrong:
      // Signed with this token for the shard its Host names, which is not
      // this shard's self: the two lists name this shard otherwise (a self
      // misspelled), not another token. Said as such, not as a 403 that a
      // starting sender waits on for a token to change.
      if (const std::string_view host(base + head.host_off, head.host_len);
          !host.empty() && host != opts_.cluster.self && check(host).kind == ReplicaAuthCheck::Kind::kOk) {
        code = 400;
        why = "/replicate: the request was signed for shard " + std::string(host.substr(0, 64)) +
              ", and this shard's <cluster self> is " + opts_.cluster.self +
              ": the sender's <cluster> list names this shard otherwise (set self to its name exactly as the list "
              "spells it)";
        mend = "set <cluster self> as every shard's list spells it";
        reason = 3;
        break;
      }
      why =
          "/replicate: the request's signature does not verify under this shard's admin token and <cluster self>"
          " (another token, a request meant for another shard, or one changed on the way)";
      reason = 4;
      break;
  }
  // Said here too (the sender's log reads "answered 403"): a shard that
  // refuses every change of another keeps nothing of its routes' copies.
  if (uint64_t n = 0; token_refusals_[reason].Note(MonoNs(), &n)) {
    // The name the sender gave itself, unverified (it did not prove it
    // holds the token): printable bytes only.
    std::string peer = (q.from.empty() ? q.forname : q.from).substr(0, 80);
    for (char& ch : peer)
      if (ch < 0x20 || ch > 0x7e) ch = '?';
    peer = peer.empty() ? "a sender that gave no name" : "a sender calling itself " + peer + " (unverified)";
    FRS_LOG(
        "replicas: refused %llu /replicate request(s) (%d) for this reason since it was last logged, the last from "
        "%s: %s; a shard refused so keeps none of these copies: %s (each reason logged at most once a minute)",
        static_cast<unsigned long long>(n), code, peer.c_str(),
        why.c_str() + (why.starts_with("/replicate: ") ? 12 : 0), mend);
  }
  TextBody(code, why, status);
  return false;
}

void Handler::ReplicateAuthorizedRequest(const HttpHead& head, const char* base, const ReplicateQuery& q,
                                         std::string_view nonce, int* status) {
  const ClusterView& c = opts_.cluster;
  if (!c.ring || !c.replicas) {
    TextBody(404, "/replicate: this shard keeps no replicas (<cluster replicas=\"1\">)", status);
    return;
  }
  // This shard's own changes, come back: queued while it ran another
  // shard's self (a copied srv.xml) for the name it has again now, sent by
  // the links that reload retired, or by a worker the reload has not reached
  // yet. They are in this store already; applied, each use would count
  // twice (found by an outside run). The answer is proven like every one
  // here: the sender drops them on it (Replicator::DropOwn), and on nothing
  // less (a name alone cannot tell this shard from the one it was taken for).
  // Before the list checks: whatever lists the two ran, they are its own.
  if (head.method == HttpMethod::kPost && OwnStream(q.stream)) {
    TextBody(409,
             "/replicate: " + std::string(kOwnBatchWords) + " (its stream " + q.stream.substr(0, 80) +
                 "), sent to it as '" + opts_.cluster.self +
                 "' by a <cluster> that named it otherwise: its uses are here already",
             status);
    return;
  }
  const std::string mine = c.ring->DigestText();
  const std::string earlier = c.previous_ring ? c.previous_ring->DigestText() : std::string();
  ReplicaShared* shared = metrics_ != nullptr ? &metrics_->master().replica : nullptr;
  if (q.state && head.method == HttpMethod::kGet) {
    uint64_t draining = 0;
    if (metrics_ != nullptr)
      for (uint32_t w = 0; w < metrics_->workers(); ++w) draining += CounterGet(metrics_->worker(w).replica.draining);
    TextBody(200,
             std::string("digest ") + mine + "\ndraining " + std::to_string(draining) + "\nhandoff_pending " +
                 (shared != nullptr && HandoffPending(*shared) ? "1" : "0") + "\n",
             status);
    return;
  }
  if (!q.handed_off.empty() && head.method == HttpMethod::kPost) {
    if (q.handed_off != mine) {
      TextBody(409,
               "/replicate: handed off under <cluster> digest " + q.handed_off.substr(0, 16) + ", this shard runs " +
                   mine + ": nothing noted",
               status);
      return;
    }
    if (shared != nullptr) CounterSet(shared->handed_off, c.ring->Digest());
    TextBody(200, "noted", status);
    return;
  }
  if (std::string missing = MissingFrom(head, q); !missing.empty()) {
    TextBody(400, missing, status);
    return;
  }
  // A batch its sender queued under the list before the change (it is
  // delivered after it): its shards are named in that list. A question of
  // that list (a shard that has not had its SIGHUP yet asks what this one
  // holds for it) is answered as for the shard of this list by its name.
  const bool from_earlier = q.digest != mine && earlier[0] != '\0' && q.digest == earlier && !q.snapshot;
  const bool old_batch = from_earlier && head.method == HttpMethod::kPost;
  // A sender one change ahead of this shard: its batches and questions are
  // taken under this list, in which it is named (it ran it). A snapshot is
  // not: across two lists the nodes move by frsctl handoff.
  const bool ahead = q.digest != mine && !from_earlier && q.previous == mine && !q.snapshot;
  if ((q.digest != mine && !from_earlier && !ahead) || (from_earlier && !old_batch && c.ring->Find(q.forname) < 0)) {
    TextBody(409,
             "/replicate: the sender's <cluster> (digest " + q.digest.substr(0, 16) + ") is not this shard's (" + mine +
                 "): every shard must list the same shards",
             status);
    return;
  }
  if (RefusedForLeaseKey(head, q, status)) return;
  const std::string& peer_name = head.method == HttpMethod::kPost ? q.from : q.forname;
  const Ring& peer_ring = old_batch ? *c.previous_ring : *c.ring;
  const long peer = peer_ring.Find(peer_name);
  const long self_in_peer_ring = old_batch ? c.previous_ring->Find(c.self) : c.self_index;
  if (peer >= 0 && peer == self_in_peer_ring) {
    // A shard that sent this to itself (its <shard> list names it under
    // another name too), or another shard that took this one's <cluster self>
    // (a copied srv.xml): either way one name, two meanings.
    TextBody(400,
             "/replicate: the sender calls itself '" + peer_name.substr(0, 64) +
                 "', which is this shard's own <cluster self>: two shards have one self (a copied srv.xml?), or "
                 "a <shard> names this shard a second time under another name",
             status);
    return;
  }
  if (peer < 0) {
    TextBody(400, "/replicate: '" + peer_name.substr(0, 64) + "' is not another shard of this <cluster>", status);
    return;
  }
  // A question from that shard does not make this shard's link to it read
  // up (ReplicaShared::unreached): it says that shard reaches this one, not
  // that this one reaches it (a one-way partition, a proxy down on one
  // side); this shard's own probe, each second, says that.
  if (ahead) {
    if (shared != nullptr) CounterSet(shared->list_ahead_seen_ms, static_cast<uint64_t>(MonoNs() / 1000000));
    NoteSenderAhead(peer_name, q.digest);
  }
  if (head.method == HttpMethod::kPost) {
    ReplicateReceive(head, base, q,
                     old_batch ? ListOf::kEarlier
                     : ahead   ? ListOf::kLater
                               : ListOf::kSame,
                     static_cast<size_t>(peer), status);
    return;
  }
  if (q.snapshot) ReplicateSnapshot(q, peer, nonce, status);
  else ReplicatePending(static_cast<size_t>(peer), !ahead && !from_earlier, status);
}

bool Handler::OwnStream(std::string_view stream) const {
  if (metrics_ == nullptr || stream.empty()) return false;
  // Any stream of this run (current, or of a replicator a reload retired).
  if (stream.ends_with(StreamTokenSuffix(CounterGet(metrics_->master().stream_token)))) return true;
  // A spool of an earlier run this shard's workers deliver.
  const uint64_t h = StreamHash(stream);
  for (uint32_t w = 0; w < metrics_->workers(); ++w) {
    const ReplicaCounters& rc = metrics_->worker(w).replica;
    for (size_t i = 0; i < kMaxSpoolStreams; ++i)
      if (CounterGet(rc.spool_hash[i]) == h) return true;
  }
  return false;
}

// The bizzes among `changes` (from `skip` on) that this map has not, each
// with its number of changes: the engine skips them.
std::vector<std::pair<uint32_t, size_t>> Handler::BizzesNotInMap(std::span<const Change> changes, size_t skip) {
  // A batch's changes run by biz: each run's id looked up once, on the
  // receiving path of every replicated use.
  uint32_t run_id = UINT32_MAX;
  std::vector<std::pair<uint32_t, size_t>> unknown;
  bool run_known = true;
  for (size_t i = skip; i < changes.size(); ++i) {
    const Change& c = changes[i];
    if (c.biz_id != run_id) {
      run_id = c.biz_id;
      run_known = engine_->ResolveBiz(std::to_string(c.biz_id)).ok();
    }
    if (run_known) continue;
    auto it = std::find_if(unknown.begin(), unknown.end(), [&](const auto& u) { return u.first == c.biz_id; });
    if (it == unknown.end()) unknown.emplace_back(c.biz_id, 1);
    else ++it->second;
  }
  return unknown;
}

// Changes of a biz this map has not are skipped by the engine (a map edit
// that reached one shard first must not stop the link for every other
// biz). Dropped, they left this copy short of that biz's uses until their
// windows ended, and a failover after the rollout granted them again (10
// of 5 from outside): kept aside instead, one record per biz, for the
// reload that brings it (TakeParkedChanges). Written before the batch is
// applied, in the file locked since (LockParked says why), and taken out
// again when it is not applied (refused, or applied before: the first
// apply kept its own), so that they count once. A worker killed between
// the records and the apply leaves them for a batch not applied here,
// which its sender sends again: the take's receipt per biz and stream
// applies the two records of one seq once (counted twice only when a
// worker that already has the biz applies the batch sent again: more,
// never less). Written after the apply, as they were, a worker killed
// between the two lost them, the batch acknowledged by then.
Handler::KeptOfNoBiz Handler::KeepChangesOfNoBiz(std::span<const Change> changes, size_t skip, const ReplicateQuery& q,
                                                 std::span<const std::pair<uint32_t, size_t>> unknown,
                                                 const Result<os::UniqueFd>& park) {
  // Not kept: an admin's set, delete or reset (ParkChanges leaves them
  // out: the copy counts more, never less), or everything when the file
  // takes nothing (full, an I/O error: those uses are missing here).
  KeptOfNoBiz out;
  struct stat st;
  if (park.ok() && ::fstat(park.value().get(), &st) == 0) out.size_before = st.st_size;
  off_t before = static_cast<off_t>(out.size_before);  // the file's length before this biz's record
  for (const auto& [biz, n] : unknown) {
    size_t k = 0;
    const Status s = !park.ok()            ? park.status()
                     : out.size_before < 0 ? Status::IOError("cannot stat " + opts_.park_path)
                                           : ParkChanges(park.value(), opts_.park_path, biz, q.stream, q.seq,
                                                         changes.subspan(skip), ::time(nullptr), &k);
    out.kept += k;
    if (s.ok()) {
      out.unkept += n - k;
    } else {
      out.failed += n, out.failed_biz = biz;
      if (out.why.empty()) out.why = s.message();
      // What a short write left (the disk full) goes at once, not at the
      // next take as a record whose writer was killed.
      if (park.ok() && ::fstat(park.value().get(), &st) == 0 && st.st_size > before)
        (void)!::ftruncate(park.value().get(), before);
    }
    if (park.ok() && ::fstat(park.value().get(), &st) == 0) before = st.st_size;
  }
  return out;
}

void Handler::UnkeepChangesOfNoBiz(const KeptOfNoBiz& k, const Result<os::UniqueFd>& park) {
  if (k.size_before < 0 || !park.ok()) return;
  // Left, they are the records of a batch not applied (as a worker killed
  // before its apply leaves them): the sender's next try keeps its own.
  // With none kept, what a failed write left goes too.
  if (::ftruncate(park.value().get(), static_cast<off_t>(k.size_before)) != 0)
    FRS_LOG("replicas: the changes kept aside in %s for a batch not applied could not be taken out again: %s",
            opts_.park_path.c_str(), std::strerror(errno));
}

void Handler::NoteChangesOfNoBiz(const KeptOfNoBiz& k, const ReplicateQuery& q,
                                 std::span<const std::pair<uint32_t, size_t>> unknown) {
  const size_t kept = k.kept, unkept = k.unkept, failed = k.failed;
  const uint32_t failed_biz = k.failed_biz;
  const std::string& why = k.why;
  if (counters_) {
    CounterAdd(counters_->replica.parked, kept);
    CounterAdd(counters_->replica.skipped_no_biz, failed + unkept);
  }
  // Each outcome its own line: a minute of batches kept aside must not
  // hide the first that could not be (the file full).
  const int from_len = static_cast<int>(std::min<size_t>(q.from.size(), 100));
  uint64_t batches = 0;
  const char* unkept_words =
      "a set, delete or reset of such a biz is not kept (applied late it would undo the uses that followed it): "
      "this copy counts more than its sender until that window ends, never less";
  if ((kept > 0 || unkept > 0) && no_biz_changes_.Note(MonoNs(), &batches)) {
    if (kept > 0)
      FRS_LOG(
          "replica changes from %.*s of a biz this map has not are kept aside in %s until a reload brings it (%zu "
          "in this batch, biz %u; %llu batch(es) with such changes since the last such line); after a day without "
          "it they are dropped%s%s",
          from_len, q.from.data(), opts_.park_path.c_str(), kept, unknown.front().first,
          static_cast<unsigned long long>(batches), unkept > 0 ? "; " : "", unkept > 0 ? unkept_words : "");
    else
      FRS_LOG("replica changes from %.*s of a biz this map has not (%zu in this batch, biz %u): %s", from_len,
              q.from.data(), unkept, unknown.front().first, unkept_words);
  }
  if (failed > 0 && no_biz_skipped_.Note(MonoNs(), &batches))
    FRS_LOG(
        "replica changes from %.*s of a biz this map has not are skipped (%zu in this batch, biz %u; %llu batch(es) "
        "with such changes since the last such line): they could not be kept aside: %s; that biz's uses are missing "
        "from this copy until their windows end, and a failover grants them again",
        from_len, q.from.data(), failed, failed_biz, static_cast<unsigned long long>(batches), why.c_str());
}

namespace {

// How many refused nodes one kept record's take leaves out before it gives
// the record up: each is found by a merge attempt of its own.
constexpr size_t kMaxRefusedParkedNodes = 16;

// The line index of an engine merge's "node N: ..." refusal.
bool RefusedNodeIndex(std::string_view message, size_t* at) {
  constexpr std::string_view kNode = "node ";
  if (!message.starts_with(kNode)) return false;
  size_t n = 0;
  const auto [p, ec] = std::from_chars(message.data() + kNode.size(), message.data() + message.size(), n);
  if (ec != std::errc() || n == 0 || p == message.data() + message.size() || *p != ':') return false;
  *at = n - 1;
  return true;
}

}  // namespace

void Handler::TakeParkedChanges() {
  if (opts_.park_path.empty()) return;
  auto known = [&](uint32_t biz) { return engine_->ResolveBiz(std::to_string(biz)).ok(); };
  size_t left_out = 0;  // nodes of records applied, refused by the store
  auto apply = [&](const ParkedBatch& b) -> Result<bool> {
    // A receipt of its own per biz and sender's stream, at the batch's seq:
    // taken again (its taker killed before it rewrote the file), it is a
    // duplicate; the batch's own receipt is its stream's.
    // A record of a snapshot's nodes: merged under its own receipt.
    if (!b.nodes.empty()) {
      std::vector<std::string_view> lines(b.nodes.begin(), b.nodes.end());
      // By their biz id, which `known` found in the map; one the map has
      // no more by the merge (a reload between) refuses the record, kept.
      // A node the store refuses (its biz was lacked when it was kept, so
      // nothing checked it) is left out, said, and the others merged: the
      // record was dropped whole for it (found in review).
      for (size_t refused = 0;; ++refused) {
        Result<bool> r = engine_->MergeKnownNodes(lines, b.stream, nullptr);
        size_t at = 0;
        if (r.ok() || r.status().code() != Status::Code::kInvalidArgument || refused == kMaxRefusedParkedNodes ||
            !RefusedNodeIndex(r.status().message(), &at) || at >= lines.size() || lines.size() == 1) {
          if (r.ok() && *r) left_out += refused;
          return r;
        }
        FRS_LOG("replicas: a node of biz %u kept aside from another shard's snapshot is refused here and left out: %s",
                b.biz, r.status().message().c_str());
        lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(at));
      }
    }
    return engine_->ApplyChanges(b.changes, ParkReceiptStream(b.biz, b.stream), b.seq);
  };
  auto taken = TakeParked(opts_.park_path, known, apply, ::time(nullptr));
  if (!taken.ok()) {
    FRS_LOG("replicas: the changes kept aside in %s could not be taken: %s", opts_.park_path.c_str(),
            taken.status().message().c_str());
    return;
  }
  for (const std::string& p : taken->problems) FRS_LOG("replicas: %s", p.c_str());
  left_out = std::min(taken->applied, left_out);
  taken->applied -= left_out;
  taken->dropped += left_out;  // said below with the others, and counted
  if (taken->applied > 0) {
    std::string bizzes, still;
    for (uint32_t b : taken->bizzes) bizzes += (bizzes.empty() ? "" : ", ") + std::to_string(b);
    if (taken->kept > 0) still = std::to_string(taken->kept) + " still kept for bizzes this map has not";
    if (taken->held > 0)
      still += (still.empty() ? "" : ", ") + std::to_string(taken->held) + " held for the next take (said above)";
    FRS_LOG(
        "replicas: %zu change(s) or node(s) another shard sent of biz(es) %s while this map lacked them are applied "
        "now%s%s%s",
        taken->applied, bizzes.c_str(), still.empty() ? "" : " (", still.c_str(), still.empty() ? "" : ")");
  }
  if (taken->dropped > 0)
    FRS_LOG(
        "replicas: %zu change(s) kept aside are dropped: kept over a day for a biz no reload brought, or "
        "refused for good (said above)",
        taken->dropped);
  if (counters_) {
    CounterAdd(counters_->replica.parked_applied, taken->applied);
    CounterAdd(counters_->replica.skipped_no_biz, taken->dropped);
  }
}

// Which routes a batch of changes is on, as ReplicaShared::alone_applied
// counts them: bit 0 this shard's own (the sender served them for it), bit
// 1 the others; a reset of a biz is on both.
uint8_t Handler::AloneSides(std::span<const Change> changes) const {
  const ClusterView& c = opts_.cluster;
  uint8_t sides = 0;
  for (const Change& ch : changes) {
    if (ch.kind == Change::Kind::kResetBiz) return 3;
    const uint32_t pos = ch.route_known ? ch.route_pos : Ring::HashRoute(Ring::RouteOf(ch.key, {}));
    sides |= static_cast<long>(c.ring->OwnerOfHash(pos)) == c.self_index ? 1 : 2;
    if (sides == 3) break;
  }
  return sides;
}

// POST: a batch of changes from the shard `pi`.
void Handler::ReplicateReceive(const HttpHead& head, const char* base, const ReplicateQuery& q, ListOf list, size_t pi,
                               int* status) {
  ReplicaShared* shared = metrics_ != nullptr ? &metrics_->master().replica : nullptr;
  // An earlier list's batch, or a later one's: not of a stream a snapshot
  // here named (a start's snapshots are of the current list), so none of it
  // is skipped.
  const bool current = list == ListOf::kSame && shared != nullptr && pi < kMaxReplicaPeers;
  // The sender as this list numbers it (`pi` is of the earlier list for an
  // earlier list's batch: a link a ring change retired); -1: not in it.
  const long now_pi = list == ListOf::kEarlier ? opts_.cluster.ring->Find(q.from) : static_cast<long>(pi);
  const bool now_known = shared != nullptr && now_pi >= 0 && static_cast<size_t>(now_pi) < kMaxReplicaPeers;
  // While this shard takes that shard's snapshot, none of its changes, of
  // whichever list: the snapshot's nodes go first.
  if (now_known && std::atomic_ref<uint64_t>(shared->hold_off[now_pi]).load(std::memory_order_acquire) != 0) {
    TextBody(503, "/replicate: this shard is taking back its nodes from " + q.from + "; send again later", status);
    return;
  }
  if (q.stream.empty() || q.seq == 0) {
    TextBody(400, "/replicate: POST needs stream and seq (>= 1)", status);
    return;
  }
  std::vector<Change> changes;
  std::vector<std::string> keys;
  if (Status s = DecodeChangeLines(std::string_view(base + head.body_off, head.body_len), &changes, &keys); !s.ok()) {
    TextBody(400, "/replicate: " + s.message(), status);
    return;
  }
  // A sender's batch is at most Replicator::kBatch changes; each reset is a
  // walk of the whole store, so a longer body could hold a worker for a
  // minute.
  if (changes.size() > Replicator::kBatch) {
    TextBody(400,
             "/replicate: a batch holds at most " + std::to_string(Replicator::kBatch) + " changes, not " +
                 std::to_string(changes.size()),
             status);
    return;
  }
  const size_t skip = current && q.first != 0 ? CarriedAlready(*shared, pi, q.stream, q.first, changes.size()) : 0;
  // Changes this map cannot apply are kept aside, in a file locked from
  // before the apply to after their records (LockParked).
  const std::vector<std::pair<uint32_t, size_t>> unknown = BizzesNotInMap(changes, skip);
  std::optional<Result<os::UniqueFd>> park;
  if (!unknown.empty())
    park.emplace(opts_.park_path.empty() ? Result<os::UniqueFd>(Status::Unavailable("no store directory"))
                                         : LockParked(opts_.park_path));
  // While a batch of this stream that resets a biz is applied, no other of
  // it is; nor does one start while another of it is applied (reset_claim.h).
  std::optional<ResetClaim> claim;
  std::optional<ApplyingMark> mark;
  if (shared != nullptr) {
    bool busy;
    if (std::any_of(changes.begin(), changes.end(),
                    [](const Change& c) { return c.kind == Change::Kind::kResetBiz; })) {
      claim.emplace(*shared, q.stream);
      busy = !claim->held() || ResetClaim::AppliedByOther(*metrics_, q.stream);
    } else {
      if (counters_ != nullptr) mark.emplace(counters_->replica.applying, q.stream);
      busy = ResetClaim::HeldByOther(*shared, q.stream);
    }
    if (busy) {
      TextBody(503,
               "/replicate: another batch of this stream is being applied, one of them resetting a biz; send it again",
               status);
      return;
    }
  }
  // Kept aside before the apply (KeepChangesOfNoBiz says why).
  KeptOfNoBiz kept;
  if (park) kept = KeepChangesOfNoBiz(changes, skip, q, unknown, *park);
  auto applied = engine_->ApplyChanges(changes, q.stream, q.seq, skip);
  claim.reset();
  mark.reset();
  if (park && !(applied.ok() && applied.value())) UnkeepChangesOfNoBiz(kept, *park);
  if (!applied.ok()) {
    const Status& s = applied.status();
    TextBody(s.code() == Status::Code::kInvalidArgument || s.IsNotFound() ? 400 : 503, "/replicate: " + s.message(),
             status);
    return;
  }
  if (counters_) {
    if (applied.value()) CounterAdd(counters_->replica.received, changes.size());
    else CounterAdd(counters_->replica.duplicates);
  }
  if (applied.value() && park) NoteChangesOfNoBiz(kept, q, unknown);
  // Uses the sender answered alone are here now: each worker refuses the
  // answers it holds on the side they change, judged without them
  // (Replicator::NoteAloneApplied). Released after the store took them,
  // before this answer goes out. Counted for the sender as this list names
  // it.
  if (applied.value() && head.replica_alone && now_known) {
    const uint8_t sides = list == ListOf::kSame ? AloneSides(changes) : 3;
    for (int side = 0; side < 2; ++side)
      if (sides >> side & 1)
        std::atomic_ref<uint64_t>(shared->alone_applied[now_pi][side]).fetch_add(1, std::memory_order_release);
  }
  // The seq it answers for: a sender takes no other answer for its batch
  // (one that came twice, late, from something between the two shards).
  std::string answer = (applied.value() ? "applied\nseq " : "duplicate\nseq ") + std::to_string(q.seq);
  // A sender one list ahead is told too, without the sides: this shard's
  // are of its own list, whose routes the sender's divides otherwise, so
  // it refuses every route it shares with this one until they arrive.
  const bool tell = current || (list == ListOf::kLater && shared != nullptr && pi < kMaxReplicaPeers);
  if (tell)
    if (const Ahead ahead = AheadOf(pi); ahead.n != 0) {
      answer += "\nbehind " + std::to_string(ahead.n);
      if (current) answer += "\nbehind_routes " + std::to_string(ahead.on_own) + " " + std::to_string(ahead.on_peers);
      std::atomic_ref<uint64_t>(shared->told_behind[pi]).fetch_add(1, std::memory_order_relaxed);
    }
  // As a probe's answer says it: a sender that waits for this shard's
  // catch-up to end (its advice on a snapshot it missed) hears of the end
  // from its batches too, which keep its probes from going while they flow.
  if (shared != nullptr && CounterGet(shared->catching_up) != 0) answer += "\ncatching_up 1\n";
  TextBody(200, answer, status);
}

// What this shard answered alone for routes it shares with the shard `pi`
// (its links to it down: on_replica_down="serve"), not yet acknowledged by
// it, over every worker; every change a spool of a stopped or killed worker
// still holds for it (which of those were answered alone is not kept: all
// are taken for it); and those a link retired by a <cluster> reload holds
// that were answered alone (a sync link's answers held at the reload wait
// for it: Worker::RetiredWaitTurn), by side as a live link's when the list
// is unchanged. Not 0: the
// sender judged the batch on a copy without those uses, so it refuses the
// batch's held answers and answers 503 on those routes until this says 0
// (Replicator::Behind). A use answered alone by another worker is counted
// here once its change is noted (after its store write): a batch read in
// between, microseconds, does not see it.
// Which side's routes they are on tells the sender which of its routes to
// refuse: a worker's own links say it, and a link retired by a reload that
// kept the list; a spool's changes, a retired link's of another list, and
// a worker's figures read mid-update (short of its total), count on both
// sides.
Handler::Ahead Handler::AheadOf(size_t pi) const {
  Ahead a;
  if (metrics_ == nullptr || pi >= kMaxReplicaPeers) return a;
  for (uint32_t w = 0; w < metrics_->workers(); ++w) {
    const ReplicaCounters& rc = metrics_->worker(w).replica;
    const uint64_t alone = std::atomic_ref<const uint64_t>(rc.alone[pi]).load(std::memory_order_acquire);
    uint64_t own = CounterGet(rc.alone_own[pi]), peers = CounterGet(rc.alone_peer[pi]);
    if (alone == 0) own = peers = 0;
    else if (own + peers < alone) own = peers = alone;
    // A retired link's, by side as a live link's (both: the list changed).
    const uint64_t retired = std::atomic_ref<const uint64_t>(rc.retired_alone[pi]).load(std::memory_order_acquire);
    uint64_t retired_own = CounterGet(rc.retired_alone_own[pi]), retired_peers = CounterGet(rc.retired_alone_peer[pi]);
    if (retired_own + retired_peers < retired) retired_own = retired_peers = retired;
    uint64_t whole = 0;
    for (size_t i = 0; i < kMaxSpoolStreams; ++i)
      if (CounterGet(rc.spool_hash[i]) != 0) whole += CounterGet(rc.spool_held[i][pi]);
    a.n += alone + retired + whole;
    a.on_own += own + retired_own + whole;
    a.on_peers += peers + retired_peers + whole;
  }
  return a;
}

// GET without snapshot: per worker, the number of the last change it
// queued for shard `pi` and how many it still holds, and per spool of an
// earlier stop it delivers, how many of its changes it still holds. The asker waits until
// every change queued before its first question is delivered
// (replica_catchup.cc). The number is loaded first (Replicator::Publish
// releases it after the count).
void Handler::ReplicatePending(size_t pi, bool sides, int* status) {
  ReplicaShared* shared = metrics_ != nullptr ? &metrics_->master().replica : nullptr;
  uint64_t pending = 0;
  std::string lines;
  if (metrics_ != nullptr && pi < kMaxReplicaPeers)
    for (uint32_t w = 0; w < metrics_->workers(); ++w) {
      const ReplicaCounters& rc = metrics_->worker(w).replica;
      const uint64_t queued = std::atomic_ref<const uint64_t>(rc.queued_no[pi]).load(std::memory_order_acquire);
      const uint64_t held = CounterGet(rc.pending[pi]);
      pending += held;
      lines += "worker " + std::to_string(w) + " " + std::to_string(CounterGet(rc.stream_hash)) + " " +
               std::to_string(queued) + " " + std::to_string(held) + "\n";
      // The spools of earlier stops it delivers: all made before the
      // question, so the asker waits for every change they still hold.
      for (size_t i = 0; i < kMaxSpoolStreams; ++i) {
        // The hash first, with acquire: the worker stores it after the counts.
        const uint64_t h = std::atomic_ref<const uint64_t>(rc.spool_hash[i]).load(std::memory_order_acquire);
        const uint64_t spooled = CounterGet(rc.spool_held[i][pi]);
        if (h == 0 || spooled == 0) continue;
        pending += spooled;
        lines += "spool " + std::to_string(w) + " " + std::to_string(h) + " " + std::to_string(spooled) + "\n";
      }
      // Queued under an earlier <cluster> (a reload): made before the
      // question too, waited for whole.
      if (const uint64_t retired = CounterGet(rc.retired_held[pi]); retired != 0) {
        pending += retired;
        lines += "draining " + std::to_string(w) + " " + std::to_string(retired) + "\n";
      }
    }
  // What it answered alone for the asker and still holds: a shard that
  // learnt it is behind asks until this is 0 (Replicator::Behind).
  const Ahead alone = AheadOf(pi);
  if (alone.n != 0 && shared != nullptr && pi < kMaxReplicaPeers)
    std::atomic_ref<uint64_t>(shared->told_behind[pi]).fetch_add(1, std::memory_order_relaxed);
  TextBody(200,
           "pending " + std::to_string(pending) + "\nalone " + std::to_string(alone.n) +
               (sides ? "\nalone_routes " + std::to_string(alone.on_own) + " " + std::to_string(alone.on_peers)
                      : std::string()) +
               "\ncatching_up " + std::to_string(shared != nullptr ? CounterGet(shared->catching_up) : 0) +
               "\nhandoff_pending " + (shared != nullptr && HandoffPending(*shared) ? "1" : "0") + "\n" +
               (map_digest_.empty() ? std::string() : "map " + map_digest_ + "\n") + lines,
           status);
}

namespace {

// Notes a signed snapshot ask of shard `pi` by its nonce: false when one
// with that nonce was noted lately (ReplicaShared::snapshot_asks). Two
// workers noting at once may both miss the other's: a replay then gets one
// answer more, no worse.
bool FirstSnapshotAsk(ReplicaShared& shared, size_t pi, std::string_view nonce) {
  const uint64_t h = StreamHash(nonce);
  uint64_t(&asks)[kSnapshotAsksKept] = shared.snapshot_asks[pi];
  for (uint64_t& a : asks)
    if (std::atomic_ref<uint64_t>(a).load(std::memory_order_relaxed) == h) return false;
  // Its slot by the hash: the last few kept, a new one pushing out any.
  std::atomic_ref<uint64_t>(asks[h % kSnapshotAsksKept]).store(h, std::memory_order_relaxed);
  return true;
}

}  // namespace

// The records kept aside here (replica_park.h) with only their changes on
// the routes shard `peer` owns or follows. Those uses, of a biz this map
// lacks, are in none of its nodes: a snapshot carries them to a store that
// lost its own. Read before the snapshot's hold is taken (a reload's take holds the
// file while it waits for the engine): one taken into the store in between
// is in both, counted more, never less.
Result<std::string> Handler::ParkedFor(long peer) const {
  if (opts_.park_path.empty()) return std::string();
  const ClusterView& c = opts_.cluster;
  return ParkedRecordsFor(opts_.park_path, [&](const Change& ch) {
    const uint32_t pos = ch.route_known ? ch.route_pos : Ring::HashRoute(Ring::RouteOf(ch.key, {}));
    return static_cast<long>(c.ring->OwnerOfHash(pos)) == peer || c.ring->SuccessorOfHash(pos) == peer;
  });
}

// ParkedFor, as a snapshot carries it: what cannot be read is left out
// and said here. The nodes go all the same: a 503 failed every ask alike,
// and the asker missed every node over a file only it could not read
// (found in review).
std::string Handler::ParkedForSnapshot(long peer) const {
  Result<std::string> parked = ParkedFor(peer);
  if (parked.ok()) return std::move(parked.value());
  FRS_LOG(
      "replicas: the snapshot asked by %s goes without the changes kept aside here for its routes, which cannot be "
      "read: %s; their uses are missing from its copy until their windows end",
      opts_.cluster.ring->shards()[static_cast<size_t>(peer)].name.c_str(), parked.status().message().c_str());
  return std::string();
}

// A snapshot's `carried H K` lines for shard `pi`: each worker's stream and
// each spool of an earlier stop the workers deliver, with the number of the
// last change it queued for that shard (the nodes read hold them).
void Handler::AppendCarriedLines(size_t pi) {
  if (pi >= kMaxReplicaPeers) return;
  const auto carried = [&](uint64_t hash, uint64_t through) {
    char line[64];
    std::snprintf(line, sizeof line, "carried %016llx %llu\n", static_cast<unsigned long long>(hash),
                  static_cast<unsigned long long>(through));
    body_ += line;
  };
  for (uint32_t w = 0; w < metrics_->workers(); ++w) {
    const ReplicaCounters& rc = metrics_->worker(w).replica;
    const uint64_t h = std::atomic_ref<uint64_t>(const_cast<uint64_t&>(rc.stream_hash)).load();
    if (h != 0) carried(h, CounterGet(rc.queued_no[pi]));
  }
  // The spools of an earlier stop the workers deliver: their changes are in
  // the nodes read here, so the asker skips them as it skips a stream's.
  for (uint32_t w = 0; w < metrics_->workers(); ++w) {
    const ReplicaCounters& rc = metrics_->worker(w).replica;
    for (size_t i = 0; i < kMaxSpoolStreams; ++i) {
      const uint64_t h = std::atomic_ref<uint64_t>(const_cast<uint64_t&>(rc.spool_hash[i])).load();
      const uint64_t through = CounterGet(rc.spool_no[i][pi]);
      if (h != 0 && through != 0) carried(h, through);
    }
  }
}

// GET with snapshot=1: every node (of store file `file`) the shard `peer`
// holds, owner or successor, read while the store holds still.
void Handler::ReplicateSnapshot(const ReplicateQuery& q, long peer, std::string_view nonce, int* status) {
  const ClusterView& c = opts_.cluster;
  const size_t pi = static_cast<size_t>(peer);
  ReplicaShared* shared = metrics_ != nullptr ? &metrics_->master().replica : nullptr;
  if (shared != nullptr && HandoffPending(*shared)) {
    // Its nodes of moved routes go to their new holders by the handoff:
    // a snapshot taken now would give them the same counts a second time.
    TextBody(409,
             "/replicate: a <cluster> change's handoff is pending on this shard (frsctl handoff --from OLD_SRV.xml "
             "has not finished here): its nodes reach their new holders by the handoff, not by a snapshot",
             status);
    return;
  }
  if (store_ == nullptr) {
    TextBody(503, "/replicate: this shard has no store open", status);
    return;
  }
  const StoreStats st = store_->Stats();
  if (q.have_file && q.file >= st.geometry.files) {
    TextBody(400,
             "/replicate: file " + std::to_string(q.file) + " is beyond this store's " +
                 std::to_string(st.geometry.files),
             status);
    return;
  }
  // The store must hold still while it is read: every worker's engine
  // waits before its next request (Replicator::Enter) and the ones inside
  // one finish it, change queued. Then each worker's stream to SHARD has
  // queued exactly the changes the nodes read here hold: the receiver
  // skips those (by number), and takes every later one.
  if (metrics_ == nullptr || shared == nullptr) {
    TextBody(503, "/replicate: a snapshot needs the shard's shared counters", status);
    return;
  }
  if (!nonce.empty() && pi < kMaxReplicaPeers && !FirstSnapshotAsk(*shared, pi, nonce)) {
    TextBody(409,
             "/replicate: this snapshot ask (its nonce) was answered here already: the same request sent again "
             "(a shard asks each snapshot anew), refused as its answer holds this shard's store still",
             status);
    return;
  }
  ForgetMissedSnapshotOf(peer);  // before the hold: it writes and syncs a file
  const std::string parked = q.parked ? ParkedForSnapshot(peer) : std::string();
  const int64_t deadline = MonoNs() + kSnapshotHoldNs;
  // Held for the reading only: what follows it (the log line, the kept-aside
  // changes appended) goes on with the workers serving again.
  std::optional<SnapshotHold> hold;
  hold.emplace(*shared, deadline);
  const std::string too_long = "/replicate: the store could not be read within the snapshot's hold (" +
                               std::to_string(kSnapshotHoldNs / 1000000000) + " s): every count would not be exact";
  if (!WaitForWorkersOutside(*metrics_, deadline)) {
    TextBody(503, too_long, status);
    return;
  }
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  body_.clear();
  body_.reserve(SnapshotBytesGuess(st, q.have_file ? static_cast<int64_t>(q.file) : -1, c.ring->shards().size()));
  body_ += "snapshot " + std::to_string(int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000) + " files " +
           std::to_string(st.geometry.files) + "\n";
  AppendCarriedLines(pi);
  Store::Filter filter;
  filter.file = q.have_file ? static_cast<int64_t>(q.file) : -1;
  // The walk is one long turn of this worker's loop (up to the hold): it
  // tells the master's watch over hung workers it is alive (stall_watch.h).
  uint32_t since_beat = 0;
  size_t sent = 0;
  Status walk = store_->ForEach(filter, [&](const NodeInfo& node) {
    if (counters_ != nullptr && ++since_beat == 4096) {
      since_beat = 0;
      CounterSet(counters_->beat_ms, static_cast<uint64_t>(MonoNs() / 1000000));
    }
    if (node.biz == kReceiptBiz) return;
    uint32_t pos = node.route_pos;
    if (!node.route_known) {
      if (node.key_len == 0 || node.key.size() != node.key_len) return;  // no route to place it by
      pos = Ring::HashRoute(Ring::RouteOf(node.key, {}));
    }
    if (static_cast<long>(c.ring->OwnerOfHash(pos)) != peer && c.ring->SuccessorOfHash(pos) != peer) return;
    auto line = engine_->ExportNode(node);
    if (line.ok()) {
      body_ += line.value();
      body_ += '\n';
      ++sent;
    }
  });
  if (!walk.ok()) {
    TextBody(503, "/replicate: " + walk.message(), status);
    return;
  }
  const int64_t read_ns = MonoNs();
  hold.reset();
  if (read_ns >= deadline) {  // the workers went on before the reading ended
    TextBody(503, too_long, status);
    return;
  }
  // Every request of this shard waited meanwhile: said, as a stall a large
  // store makes (300,000 nodes: 264 ms on the 2-core test VM,
  // tools/bench/snapshot_hold.py) must be seen.
  FRS_LOG("replicas: a snapshot for %s: %zu node(s), %zu bytes; this shard's requests waited %lld ms for the reading",
          c.ring->shards()[pi].name.c_str(), sent, body_.size(),
          static_cast<long long>((read_ns - deadline + kSnapshotHoldNs) / 1000000));
  if (!parked.empty()) {
    body_ += kParkedFirstLine;
    body_ += parked;
  }
  *status = 200;
}

// A shard asks for a snapshot only on a new store (replica_catchup.h): what
// this store's own first start could not take from it (snapshot.missed) is
// nowhere any more, and the remedy the mark asks for would take nothing. On
// a new cluster, the shard started first marked every other, and the alert
// on the mark fired on a healthy cluster (found from outside).
void Handler::ForgetMissedSnapshotOf(long peer) {
  if (opts_.store_dir.empty() || peer < 0) return;
  // First the mark a catch-up of this shard's reads (it writes under the
  // lock below): one that missed that shard then leaves it out.
  if (metrics_ != nullptr && static_cast<size_t>(peer) < kMaxReplicaPeers)
    std::atomic_ref<uint64_t>(metrics_->master().replica.snapshot_asked[peer]).store(1);
  const std::string& name = opts_.cluster.ring->shards()[static_cast<size_t>(peer)].name;
  auto forgot = ForgetMissedSnapshot(opts_.store_dir, name);
  if (!forgot.ok()) {
    FRS_LOG("replicas: %s asked for a snapshot (a new store): its line in snapshot.missed could not be removed: %s",
            name.c_str(), forgot.status().message().c_str());
    return;
  }
  if (forgot.value())
    FRS_LOG(
        "replicas: %s asked for a snapshot, so its store is new: what this store's first start could not take from "
        "it is nowhere any more, and snapshot.missed no longer names it",
        name.c_str());
}

}  // namespace frs::server
