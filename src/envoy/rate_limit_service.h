// envoy/rate_limit_service.h: ShouldRateLimit's decisions, free of any wire
// format: the gRPC method (server/grpc_methods.cc) and the /json endpoint
// (server/handler.cc) both decode into RlsRequest and encode RlsAnswer.
//
// Answers as envoyproxy/ratelimit gives them: one status per descriptor in
// request order; a descriptor that matches no limit is OK without
// current_limit (limit_remaining 0), an `unlimited` one is OK with
// limit_remaining 4294967295; a limit another matched limit `replaces` is
// dropped (OK, no current_limit). Each counted descriptor is one engine
// update of n = hits (every hit counted, as upstream's counter counts it,
// at most 2^31-1 a call): OVER_LIMIT when the count after it is past
// requests_per_unit, limit_remaining 0 then, else the limit less the count;
// hits 0 is a look (a query): OK at the limit, OVER_LIMIT past it. With
// stop_increment (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT) every counter is
// read first and, when any descriptor would go past its limit, only those
// that would are counted. shadow_mode limits answer OK where they would
// not; quota_mode ones (or every one, global quota) answer OVER_LIMIT in
// their status but make the overall code OVER_LIMIT only when every quota
// descriptor is over (and no other); global shadow turns an overall
// OVER_LIMIT into OK. An empty descriptor list, or more than
// kMaxDescriptorsPerCall, is INVALID_ARGUMENT, as is an own limit of an
// unknown unit. Every counter key is made before anything is counted; a
// store error part way leaves the earlier descriptors counted.
//
// A descriptor with is_negative_hits gives its hits back (Request::
// give_back): a rate limit's count lowered, never below 0, answered OK. A
// limit of FRS's `unit: concurrent` takes one lease per positive call (OVER_
// LIMIT when none is free) and a give-back ends the key's leases that expire
// first; an acquire it refused is noted (EnvoyRules::PendingLimit) and the
// key's give-backs take such notes first, since Envoy sends the stream-done
// give-back of a refused request too (docs/integrations.md).
//
// In a cluster (SetOwnership) each descriptor's counter key is a route on
// the ring, as a key of the HTTP side is: a descriptor another shard owns
// fails the whole call, before anything is counted, when the cluster
// enforces ownership (Status Unavailable naming the owner: Envoy then
// applies its failure_mode_deny), and is counted here otherwise (fail-open,
// as HTTP's enforce="0"); either way it is counted in `misrouted`.
//
// Thread safety: one per worker (it owns scratch buffers).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "envoy/envoy_rules.h"
#include "frs/engine.h"
#include "frs/ring.h"

namespace frs::envoy {

struct RlsDescriptor {
  std::vector<Entry> entries;
  bool has_hits = false;  // a per-descriptor hits_addend (overrides the request's)
  uint64_t hits = 0;
  // RateLimitDescriptor.is_negative_hits: the hits are given back, not
  // counted (Envoy's refund, typically sent when a stream is done).
  bool negative = false;
  // Envoy's RateLimitDescriptor.limit: the descriptor's own limit (unit as
  // rls.proto numbers it; anything but 1..7 is refused).
  bool has_limit = false;
  uint32_t limit_rpu = 0;
  int64_t limit_unit = 0;
};

struct RlsRequest {
  std::string_view domain;
  std::vector<RlsDescriptor> descriptors;
  uint64_t hits = 1;  // the request's hits_addend (0 here: look only)
  void Clear() {
    domain = {};
    descriptors.clear();
    hits = 1;
  }
};

enum class Code : uint8_t { kUnknown = 0, kOk = 1, kOverLimit = 2 };

struct RlsStatus {
  Code code = Code::kOk;
  bool has_limit = false;  // current_limit present
  const CompiledLimit* limit = nullptr;
  uint32_t remaining = 0;
  int64_t until_reset_s = 0;
  // The descriptor's own limit (has_limit and limit->is_override): what
  // current_limit says.
  Limit own;
  bool quota = false;  // quota_mode (its own or the global one)
  // For metrics: what this descriptor did, its count before and after.
  uint64_t hits = 0;
  int64_t before = 0, after = 0;
  uint64_t near_threshold = 0;  // floor(limit x near_limit_ratio)
  bool negative = false;        // given back (is_negative_hits): `hits` not counted
  // unit: concurrent: a lease taken, leases given back, leases found expired.
  bool lease_granted = false;
  uint32_t leases_given_back = 0;
  uint16_t leases_expired = 0;
  bool over = false, near = false, shadow_over = false;
  // The per-key metric label: the counter key (detailed_metric) or the
  // value_to_metric path; "": none.
  std::string metric_key;
  const Limit& limit_value() const { return limit->is_override ? own : limit->limit; }
};

// envoyproxy/ratelimit's settings that shape answers (<grpc> attributes).
struct RlsSettings {
  bool global_shadow = false;     // SHADOW_MODE
  bool global_quota = false;      // QUOTA_MODE
  double near_limit_ratio = 0.8;  // NEAR_LIMIT_RATIO
  bool stop_increment = false;    // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT
};

struct RlsAnswer {
  Status status;  // not OK: no answer (store unavailable, bad key)
  Code overall = Code::kOk;
  std::vector<RlsStatus> statuses;
  // The descriptor of the RateLimit-* headers, as upstream picks it: the
  // first with the fewest remaining, but the last OVER_LIMIT one that is not
  // in quota mode; -1: none.
  int32_t tightest = -1;
  // The descriptors answered OK (not unlimited), for the dynamic metadata.
  std::vector<uint32_t> passed;
  bool global_shadowed = false;  // SHADOW_MODE turned OVER_LIMIT into OK
  // The call named a domain no configuration has: answered OK with no limit,
  // as upstream answers it (counted and logged: a typo in Envoy's domain
  // turns every limit off).
  bool unknown_domain = false;
  // Descriptors whose counter key another shard of the cluster owns.
  uint32_t misrouted = 0;
  // Set with a not-OK status when the call was refused for a descriptor
  // another shard owns: that shard's name (/json answers 421 for it).
  std::string owner;
};

// Which counter keys this server owns (<cluster> in srv.xml).
struct Ownership {
  std::shared_ptr<const Ring> ring;  // null: a lone server owns every key
  long self_index = -1;              // in ring->shards(); -1: owns nothing
  bool enforce = true;
  bool replicas = false;  // <cluster replicas="1">: a route's successor serves it too
  // Non-zero while the shard takes back its nodes after a start (a word of
  // the server's shared region; null: never): every counted call is refused.
  const uint64_t* catching_up = nullptr;
  // With replicas: whether a route this shard shares with the shard of
  // that ring index answers 503 now (its link down under
  // on_replica_down="refuse", or this shard behind it on that side's routes;
  // `as_successor`: the route is that shard's; the server's
  // Replicator::Refusing). Empty: never.
  std::function<bool(long peer, bool as_successor)> refusing;
};

class RateLimitService {
 public:
  explicit RateLimitService(Engine* engine) : engine_(engine) {}
  void SetRules(std::shared_ptr<const EnvoyRules> rules) { rules_ = std::move(rules); }
  const EnvoyRules* rules() const { return rules_.get(); }
  void SetOwnership(Ownership o) { own_ = std::move(o); }
  void set_max_descriptors(size_t n) { max_descriptors_ = n; }
  void SetSettings(const RlsSettings& s) { settings_ = s; }
  const RlsSettings& settings() const { return settings_; }
  // Fills `out` (cleared first).
  void Decide(const RlsRequest& req, RlsAnswer* out);

 private:
  Engine* engine_;
  // False (out->status and out->owner set) when a descriptor belongs to
  // another shard and the cluster enforces ownership.
  bool CheckOwnership(const RlsRequest& req, RlsAnswer* out);
  SerialHalf HalfOf(const std::string& key) const;
  // Decide's steps, in order; each false once `out` holds the call's error.
  // FindLimits: the matched limit of each descriptor, or its own.
  bool FindLimits(const RlsRequest& req, RlsAnswer* out);
  // The limits whose names a matched limit `replaces`, dropped.
  void DropReplaced(size_t n);
  // The counter key of each descriptor that counts.
  bool MakeKeys(const RlsRequest& req, RlsAnswer* out);
  // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: the hits that are not counted.
  bool StopIncrement(const RlsRequest& req, RlsAnswer* out);
  // Descriptor i counted (or looked at, or given back) and its status filled.
  bool Count(const RlsRequest& req, size_t i, RlsAnswer* out);

  std::shared_ptr<const EnvoyRules> rules_;
  Ownership own_;
  std::string scratch_;
  std::vector<std::string> keys_;  // per descriptor, reused between calls
  std::vector<int32_t> found_;
  std::vector<MatchInfo> match_;
  std::vector<Entry> shared_entries_;
  std::vector<uint64_t> hits_;
  std::string pending_key_;
  // One descriptor of unit: concurrent, counted (acquire, give back or look).
  Decision DecideConcurrent(const CompiledLimit& l, const std::string& key, uint64_t applied, bool negative,
                            RlsStatus* st);
  Decision Give(std::string_view biz, std::string_view key, uint64_t n);
  RlsSettings settings_;
  std::unordered_set<std::string_view> replaced_;
  size_t max_descriptors_ = kMaxDescriptorsPerCall;
};

// envoyproxy/ratelimit's near_limit_ratio default: a hit that leaves the
// count above 80 % of the limit is near it (RlsSettings).
inline constexpr double kNearLimitRatio = 0.8;

}  // namespace frs::envoy
