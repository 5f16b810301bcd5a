// frs/client.h: ask frsd (one server or a cluster of shards) from C++.
//
// A blocking client for services that decide before they serve: one
// keep-alive connection per shard, a time-out on every call, and a policy
// for when no answer comes (fail open: allow; fail closed: deny), so a
// caller's request path never hangs on FRS and never throws. With several
// shards it routes each request to its route's owner exactly as nginx's
// `hash $route consistent;` does (frs/ring.h), follows a 421 once to the
// owner it names, and splits a batch by route (acquires stay
// all-or-nothing within each part; see docs/integrations.md), and asks a
// route's other holder when its owner cannot answer (replicas). An explicit
// route is sent %-encoded and hashed as sent, as frsd and a proxy hash it.
//
//   frs::ClientOptions o;
//   o.shards = {{"127.0.0.1:8301", 1}, {"127.0.0.1:8302", 1}};
//   auto c = frs::Client::Make(o);
//   frs::ClientDecision d = c.value()->Acquire("login", "user:42");
//   if (!d.allowed) return TooManyRequests(d.retry_after);
//
// Thread safety: one Client per thread (it owns its connections).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frs/engine.h"
#include "frs/ring.h"
#include "frs/status.h"

namespace frs {

enum class FailPolicy : uint8_t { kOpen, kClosed };

struct ClientOptions {
  std::vector<RingShard> shards;  // "host:port" of each frsd, as in <cluster>; one for a lone server
  int timeout_ms = 500;           // per call: connect, send and answer (a 421 followed, every part of a batch)
  FailPolicy fail = FailPolicy::kOpen;
  // With several shards, a call its route's owner cannot answer (refused,
  // reset, no whole answer within half the time left, a 5xx) is asked of
  // the route's other holder with the rest: its successor on the ring, the
  // shard nginx falls over to, which with <cluster replicas="1"> holds the
  // owner's counts and serves them (docs/cluster.md, "Replicas"). A shard
  // that failed so is asked second for `skip_failed_ms` (nginx's
  // max_fails=1 fail_timeout), so a dead machine costs one call half its
  // time-out, not every call. With replica_mode="sync" a holder whose other
  // holder hangs holds its answer up to replica_timeout_ms (200 ms) before
  // it serves alone: give timeout_ms at least twice that plus the answer
  // time, or the first calls of such a hang fail by `fail`. Without
  // replicas a successor answers 421 (enforce="1": `fail` decides, as
  // without failover) or, with enforce="0", counts the route from zero as
  // nginx's fail-over does, for a dead owner and for one that only stalled
  // past half the time-out alike (failover=false keeps a fail-closed
  // client strict there). Each acquire the owner took but did not answer counts on
  // both holders (a hung owner applies what it queued when it resumes): the
  // key is denied sooner, never granted more. An owner that is slow but
  // alive goes on serving other clients meanwhile: both holders then serve
  // the key, bounded by its limit plus the other holder's uses of that
  // instant (docs/cluster.md, "Both holders serving one key"). false: the
  // owner only.
  bool failover = true;
  int skip_failed_ms = 10000;
};

struct ClientDecision {
  bool allowed = false;
  int64_t count = 0, limit = 0, remaining = 0, reset = 0;
  int64_t retry_after = 0;  // seconds; kNeverCurable (-1): no wait cures it
  bool shadow = false;
  // A shadow-mode biz allowed it, and enforced it would have denied.
  bool would_deny = false;
  // A concurrency rule's lease: granted by an acquire (or renewed), its id
  // for Release/Renew and the unix second it ends ("" and 0: none).
  std::string lease = {};
  int64_t lease_expires = 0;
  bool released = false;  // Release: the lease was held and is now free
  // A reservation (acquire with reserve): its id for Settle and the unix
  // second it expires at ("" and 0: none; `lease_expires` is a lease's).
  std::string reservation = {};
  int64_t reservation_expires = 0;
  bool settled = false;  // Settle: it was held and is now charged its real amount
  int64_t returned = 0;  // Settle: given back (real below the estimate)
  int64_t overrun = 0;   // Settle: charged beyond the estimate
  // An acquire with reserve denied because the key holds all the
  // reservations its biz allows (retry_after: until the first expires).
  bool reservations_full = false;
  // Not OK: there was no usable answer (unreachable, time-out, a 5xx or a
  // 408, for a whole call or one batch member, or a body that is not
  // frsd's decision: a proxy's 404 or 429 page, a decision without
  // `allowed`, a batch answered with fewer decisions than it has members:
  // Unavailable, naming the shard and what came); `allowed` then follows
  // the fail policy. It is false for a request the server refused
  // (InvalidArgument for a 400, 413 or 431; NotFound, Conflict, Gone), and
  // for Release, Renew and Settle, which admit nothing: failed, they were
  // not done.
  // A time-out says nothing of whether the server applied the request: one
  // that came late may have been counted, and a lease or reservation it
  // granted holds its place until it expires (the id never reached you).
  Status error;
  // The shard ("host:port") that answered: the route's owner, or its other
  // holder after a failover; when none answered, the last one asked. Empty
  // for a request refused before it was sent.
  std::string server = {};
};

struct ClientRequest {
  Cmd cmd = Cmd::kAcquire;  // query, update, acquire, release, renew or settle
  std::string biz, key;
  int64_t n = 1;
  std::string lease = {};        // release, renew: the id an acquire answered
  int64_t reserve = 0;           // acquire: hold n as an estimate for this many seconds (0: no reservation)
  std::string reservation = {};  // settle: the id an acquire answered (n: the real amount)
};

class Client {
 public:
  // Refuses an empty or malformed shard list.
  static Result<std::unique_ptr<Client>> Make(ClientOptions opts);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  ClientDecision Acquire(std::string_view biz, std::string_view key, int64_t n = 1, std::string_view route = {});
  ClientDecision Query(std::string_view biz, std::string_view key, int64_t n = 1, std::string_view route = {});
  ClientDecision Update(std::string_view biz, std::string_view key, int64_t n = 1, std::string_view route = {});
  // Ends or extends a lease (docs/protocol.md, "Leases"). An id the key
  // never granted answers error Conflict (409), a lease that ended Gone (410).
  ClientDecision Release(std::string_view biz, std::string_view key, std::string_view lease,
                         std::string_view route = {});
  ClientDecision Renew(std::string_view biz, std::string_view key, std::string_view lease, std::string_view route = {});
  // Reservations (docs/protocol.md, "Reservations"): Reserve holds n for
  // `seconds`; Settle charges `real` in the reservation's window and gives
  // back the rest. An id the key never issued answers Conflict (409), one
  // settled or expired Gone (410).
  ClientDecision Reserve(std::string_view biz, std::string_view key, int64_t n, int64_t seconds,
                         std::string_view route = {});
  ClientDecision Settle(std::string_view biz, std::string_view key, std::string_view reservation, int64_t real,
                        std::string_view route = {});
  ClientDecision Execute(const ClientRequest& r, std::string_view route = {});

  // One decision per request, in order; returns whether every one was
  // allowed. Members are grouped by their key's route (or all go together
  // under `route` when given) and each group is one POST to its owner: frsd
  // keeps each node under its own route, which a later ring change moves by
  // (a group per owner, sent under its first member's route, had every node
  // of it kept under that one). Acquires are all-or-nothing within a group
  // only: give members one {hash tag}, or `route`, to make them one. With
  // one shard the batch goes whole (a lone server takes any routes), and
  // again split by route if that server, a <cluster>'s, refuses members
  // that route apart. A group holds at most frsd's <limits batch> members
  // (64 by default; more: refused whole). `out` null: false, nothing sent.
  bool Batch(std::span<const ClientRequest> reqs, std::vector<ClientDecision>* out, std::string_view route = {});

  const Ring& ring() const;
  // Calls (and batch parts) answered by a route's other holder because its
  // first one could not answer (ClientOptions::failover).
  uint64_t failovers() const;
  // The shard that answers `route` ("" = the key's own route). A route is
  // hashed %-encoded as it is sent (frsctl owner takes it so encoded).
  const std::string& OwnerOf(std::string_view key, std::string_view route = {}) const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace frs
