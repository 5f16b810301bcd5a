// frs/decision.h: the words a request and its answer are made of.
//
// A Request names a command, a biz and a key; the engine (frs/engine.h)
// answers it with a Decision, which carries one RuleResult per rule of the
// biz. The algorithms, the store's tools and the server's codecs all speak
// these types, so they live here, below everything that uses them: an
// algorithm needs RuleResult, not the Engine.
//
// The names of commands, algorithms and modes are in one table each, here;
// the wire protocol, map.xml, frsctl and the logs all print and parse them
// through CmdName/ParseCmd and their siblings.
//
// Thread safety: plain values and constant tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "frs/status.h"

namespace frs {

// kMerge: handoff between shards (admin; frs/admin_engine.h). kRelease and
// kRenew end and extend a lease that an acquire on a concurrency rule granted.
// kSettle charges the real amount of a reservation an acquire with
// `reserve` took (the sources' src/limit/reservation.h).
enum class Cmd : uint8_t {
  kQuery,
  kUpdate,
  kAcquire,
  kGet,
  kSet,
  kDelete,
  kReset,
  kStats,
  kMerge,
  kRelease,
  kRenew,
  kSettle
};
// kConcurrency: at most `max` leases held at once (the sources' src/limit/concurrency.h).
enum class Algo : uint8_t { kFixed, kCalendar, kSliding, kTokenBucket, kConcurrency };
enum class Mode : uint8_t { kEnforce, kShadow, kOff };

// Indexed by the enum's value.
inline constexpr std::string_view kCmdNames[] = {"query", "update", "acquire", "get",     "set",   "delete",
                                                 "reset", "stats",  "merge",   "release", "renew", "settle"};
inline constexpr std::string_view kAlgoNames[] = {"fixed", "calendar", "sliding", "token_bucket", "concurrency"};
inline constexpr std::string_view kModeNames[] = {"enforce", "shadow", "off"};

// NUL-terminated (the tables' literals are), for printf and C strings.
// A value past the table (a cast integer) is named "?", never read past it.
inline const char* CmdName(Cmd c) {
  return static_cast<size_t>(c) < std::size(kCmdNames) ? kCmdNames[static_cast<size_t>(c)].data() : "?";
}
inline const char* AlgoName(Algo a) {
  return static_cast<size_t>(a) < std::size(kAlgoNames) ? kAlgoNames[static_cast<size_t>(a)].data() : "?";
}
inline const char* ModeName(Mode m) {
  return static_cast<size_t>(m) < std::size(kModeNames) ? kModeNames[static_cast<size_t>(m)].data() : "?";
}

// The value whose name is `s` exactly; false leaves *out as it was. Inline:
// the server parses a command per request, and a compare of lengths first
// settles most names in one instruction.
template <class E, size_t N>
bool ParseName(const std::string_view (&names)[N], std::string_view s, E* out) {
  for (size_t i = 0; i < N; ++i) {
    if (s == names[i]) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}
inline bool ParseCmd(std::string_view s, Cmd* out) { return ParseName(kCmdNames, s, out); }
inline bool ParseAlgo(std::string_view s, Algo* out) { return ParseName(kAlgoNames, s, out); }
inline bool ParseMode(std::string_view s, Mode* out) { return ParseName(kModeNames, s, out); }

inline constexpr size_t kMaxRulesPerBiz = 4;
inline constexpr size_t kRuleNameBytes = 32;     // a rule's policy name, NUL included
inline constexpr int64_t kMaxUses = 2147483647;  // n and count: 1..2^31-1

// Which lease and reservation serials a grant draws (a key's ids carry
// them). A route's two holders (<cluster replicas>) may both grant on one
// key at once, each before the other's copy arrives: drawn from one
// sequence, the two grants took the same serial, two clients held one id,
// the copy took the other holder's grant for its own lease again, and the
// first release freed both (found from outside: 11 leases held at once on
// a max of 3). The owner of the route draws odd serials, its successor even
// ones; a lone holder every one.
enum class SerialHalf : uint8_t { kAll, kOdd, kEven };

struct Request {
  Cmd cmd = Cmd::kQuery;
  std::string_view biz;  // name or numeric id
  std::string_view key;
  int64_t n = 1;
  int64_t count = 0;  // for kSet
  // kRelease, kRenew: the lease's id as an acquire answered it (24 hex
  // digits; LeaseId() below makes it from an in-process acquire's Decision).
  std::string_view lease = {};
  // kRelease only: give back n uses instead of ending the lease `lease`
  // names (Envoy's negative hits, which carry no id). A concurrency rule
  // ends its n leases that expire first, whoever holds them; any other rule
  // takes n from its current count, never below 0. Answers the rules after.
  bool give_back = false;
  // kAcquire: hold n as an estimate for `reserve` seconds and answer a
  // reservation id (0: an ordinary acquire). kSettle: the id, and n the real
  // amount (0..2^31-1).
  int64_t reserve = 0;
  std::string_view reservation = {};
  // The ring position of the request's route (frs/ring.h), kept in the node
  // for handoff. Not known: the route its key implies (hash tag, else key).
  uint32_t route_pos = 0;
  bool route_known = false;
  // kQuery: a read the statistics do not count (daily counters, recent
  // denials, statistics by field): Envoy's look (hits_addend 0), which
  // envoyproxy/ratelimit counts as nothing and may answer OK at a limit
  // where the query's n=1 would be denied.
  bool uncounted = false;
  // kUpdate: the statistics take the use for a denial when the rule's count
  // after it is past this (negative: the rule's own verdict). Envoy's limit
  // override counts in a biz whose own limit never denies; the call's limit
  // decides, and its denials belong in the biz's statistics all the same.
  int64_t stats_limit = -1;
  // kAcquire (and kSet of a concurrency rule): the serials its grants draw;
  // a give-back (kRelease without an id) ends this half's leases first. A
  // batch's members all name the same half (else each is refused).
  SerialHalf serial_half = SerialHalf::kAll;
};

// retry_after of a denial that no wait can cure: n is above what the rule
// can ever grant (the XML says retry_after="-1"; no Retry-After header).
inline constexpr int64_t kNeverCurable = -1;

// One rule's verdict. Times are unix seconds.
struct RuleResult {
  Algo algo = Algo::kFixed;
  uint32_t interval = 0;
  int64_t count = 0;  // uses counted in the current window (tokens used, for token_bucket)
  int64_t limit = 0;  // allowance of the current window (max - debt; burst for token_bucket)
  int64_t remaining = 0;
  int64_t reset = 0;        // when the count next drops (window end / refill of one token)
  int64_t retry_after = 0;  // seconds until n more uses would be allowed (0 if allowed; kNeverCurable)
  int64_t debt = 0;         // borrow owed to the next window
  int64_t quota = 0;        // max: what the rule grants per interval (a token bucket's sustained rate), RateLimit's q
  int64_t before = 0;  // an update's or acquire's: `count` before its uses (count - n unless it stopped at 2^32 - 1)
  bool allowed = true;
  char name[kRuleNameBytes] = {};  // the policy name (RateLimit-Policy)
};

// The answer to one request. `status` is OK, or says in the engine's own
// terms why there is no answer (InvalidArgument: a bad key, n or count;
// NotFound: an unknown biz; Unavailable/Busy: the store could not do it),
// its message one readable sentence (Conflict and Gone: a lease or
// reservation id the key never gave, or no longer holds). Only the server
// maps it to HTTP. `allowed` is false whenever `status` is not OK: what
// failed was not done.
struct Decision {
  Status status;
  bool allowed = true;
  bool shadow = false;      // mode="shadow": counted, never denied
  bool found = false;       // for kGet: the node exists
  bool would_deny = false;  // shadow mode: what enforce would have answered
  int64_t count = 0, limit = 0, remaining = 0, reset = 0, retry_after = 0;  // most restrictive rule
  uint32_t nrules = 0;
  uint32_t top = 0;  // index of the most restrictive rule
  RuleResult rules[kMaxRulesPerBiz];
  uint64_t erased = 0;  // kReset: nodes erased
  uint16_t biz_id = 0;  // the biz the request resolved to (0: none)
  // With lease_serial below (here: it fits beside biz_id): the node's nonce
  // the lease's id was made with, which a replica adopts (the sources' src/limit/rule_event.h).
  uint32_t lease_nonce = 0;
  int64_t now_s = 0;  // the engine's clock when it decided (unix seconds; 0: no decision)
  // A lease of the biz's concurrency rule: granted by this acquire (or
  // update), or renewed (lease_serial 0: none). The id is the serial and
  // the keyed hash that proves it (the sources' src/limit/lease_id.h); expires is the unix
  // second from which the lease is no longer held.
  uint64_t lease_mac = 0;
  uint32_t lease_serial = 0;
  uint16_t leases_expired = 0;  // leases this call found past their expiry and freed (counted)
  bool released = false;        // kRelease: the lease was held and is now free
  int64_t lease_expires = 0;
  int64_t given_back = 0;  // kRelease with give_back: the uses (leases) it took back
  // kSet on a biz with a concurrency rule: the leases the set granted,
  // serials set_lease_first and the set_leases - 1 after it in the request's
  // half (Concurrency::NextInHalf), each held until
  // lease_expires under lease_nonce (the other holder is sent them).
  uint32_t set_lease_first = 0;
  uint16_t set_leases = 0;
  // kSet, and a release with give_back, on a biz with a concurrency rule:
  // the serials of the leases it ended (the first leases_ended_n of them,
  // under lease_nonce), which the other holder ends by serial.
  uint8_t leases_ended_n = 0;
  static constexpr uint32_t kMaxLeasesEnded = 16;
  uint32_t leases_ended[kMaxLeasesEnded] = {};
  // A reservation (the sources' src/limit/reservation.h): taken by this acquire (res_serial
  // 0: none), with its id's serial and hash and the unix second it expires
  // at; reservations this call found expired (charged their estimate); a
  // settle applied (kSettle), and how much it charged beyond the estimate
  // or gave back, summed over the rules whose window was still in force.
  uint64_t res_mac = 0;
  uint32_t res_serial = 0;
  uint32_t res_nonce = 0;  // the table's nonce (its replica needs it)
  uint16_t res_expired = 0;
  bool settled = false;
  bool reservations_full = false;  // an acquire denied: the key holds all the reservations its biz allows
  int64_t res_expires = 0;         // taken: its expiry; full: when the first held one expires
  int64_t res_returned = 0;
  int64_t res_overrun = 0;
  bool ok() const { return status.ok(); }
  // Back to Decision{}, writing only rules[0, nrules): the engine sets
  // nrules before it writes a rule and writes none past it, so the rest are
  // still as constructed. A batch resets each decision of the span it is
  // given; clearing all 664 bytes of each cost a batch of 64 a 32-KB sweep
  // through the cache (docs/performance.md, section 9).
  void Reset() {
    const uint32_t used = nrules < kMaxRulesPerBiz ? nrules : static_cast<uint32_t>(kMaxRulesPerBiz);
    status = Status();
    allowed = true;
    shadow = found = would_deny = false;
    count = limit = remaining = reset = retry_after = 0;
    nrules = top = 0;
    for (uint32_t i = 0; i < used; ++i) rules[i] = RuleResult{};
    erased = 0;
    biz_id = 0;
    now_s = 0;
    lease_mac = 0;
    lease_serial = 0;
    lease_nonce = 0;
    leases_expired = 0;
    released = false;
    lease_expires = 0;
    given_back = 0;
    set_lease_first = 0;
    set_leases = 0;
    leases_ended_n = 0;
    res_mac = 0;
    res_serial = 0;
    res_nonce = 0;
    res_expired = 0;
    settled = false;
    reservations_full = false;
    res_expires = 0;
    res_returned = 0;
    res_overrun = 0;
  }
};

// The ids a decision carries, as the protocol writes them: 24 lowercase hex
// digits, the same whether frsd or this process made them, so either may
// release, renew or settle what the other granted. Request::lease of a
// release or renew takes LeaseId, Request::reservation of a settle
// ReservationId. "" when the decision carries none.
std::string LeaseId(const Decision& d);
std::string ReservationId(const Decision& d);

// One rule of a node as a human or a script sees it (frsctl explain, get,
// dump, top): the rule's configuration beside its state now.
struct RuleView {
  Algo algo = Algo::kFixed;
  uint32_t interval = 0;
  std::string name;  // map.xml's name, else BIZ_N: what `frsctl top --rule` and the answers' name= say
  // A calendar rule's zone, the one its windows follow: an IANA name (the
  // rule's zone=, else the server's <timezone>), "UTC", or "epoch" (counted
  // from 1970-01-01T00:00Z); "" for the other algorithms.
  std::string zone;
  int64_t max = 0, burst = 0, borrow = 0;
  int64_t count = 0;
  int64_t limit = 0;
  int64_t remaining = 0;                           // as an answer's: what may still be taken now, borrow included
  int64_t window_start_ms = 0, window_end_ms = 0;  // 0 when no window is open
  int64_t debt = 0;
  double tokens = 0;            // token_bucket
  bool denies = false;          // a request of n=1 now would be denied by this rule
  int64_t next_allowed_ms = 0;  // when n=1 is next allowed (now when allowed)
};

}  // namespace frs
