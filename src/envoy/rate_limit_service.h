// envoy/rate_limit_service.h: ShouldRateLimit's decisions, free of any wire
// format: the gRPC method (server/grpc_methods.cc) and the /json endpoint
// (server/handler.cc) both decode into RlsRequest and encode RlsAnswer.
//
// Answers as envoyproxy/ratelimit gives them: one status per descriptor in
// request order; a descriptor that matches no limit is OK without
// current_limit (limit_remaining 0), an `unlimited` one is OK with
// limit_remaining 4294967295; a limit another matched limit `replaces` is
// dropped (OK, no current_limit); shadow_mode limits count and answer OK;
// OVER_LIMIT answers limit_remaining 0; overall OVER_LIMIT when any status
// is. An empty descriptor list, or more than kMaxDescriptorsPerCall, is
// INVALID_ARGUMENT. Each counted descriptor is one engine acquire of n =
// hits, at most 2^31-1 (check and count in one step, so a limit is exact
// under concurrency: a denied hit is not counted, where
// envoyproxy/ratelimit's counter keeps growing past the limit); hits 0 is a
// query: the count as it is, nothing counted, OVER_LIMIT when the count has
// reached the limit. Every counter key is made before anything is counted;
// a store error part way leaves the earlier descriptors counted.
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
  // For metrics: what this descriptor did.
  uint64_t hits = 0;
  bool over = false, near = false, shadow_over = false;
};

struct RlsAnswer {
  Status status;  // not OK: no answer (store unavailable, bad key)
  Code overall = Code::kOk;
  std::vector<RlsStatus> statuses;
  // The descriptor of the RateLimit-* headers (fewest remaining, an
  // OVER_LIMIT one first), -1: none.
  int32_t tightest = -1;
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
};

class RateLimitService {
 public:
  explicit RateLimitService(Engine* engine) : engine_(engine) {}
  void SetRules(std::shared_ptr<const EnvoyRules> rules) { rules_ = std::move(rules); }
  const EnvoyRules* rules() const { return rules_.get(); }
  void SetOwnership(Ownership o) { own_ = std::move(o); }
  void set_max_descriptors(size_t n) { max_descriptors_ = n; }
  // Fills `out` (cleared first).
  void Decide(const RlsRequest& req, RlsAnswer* out);

 private:
  Engine* engine_;
  // False (out->status and out->owner set) when a descriptor belongs to
  // another shard and the cluster enforces ownership.
  bool CheckOwnership(const RlsRequest& req, RlsAnswer* out);

  std::shared_ptr<const EnvoyRules> rules_;
  Ownership own_;
  std::string scratch_;
  std::vector<std::string> keys_;  // per descriptor, reused between calls
  std::vector<int32_t> found_;
  std::unordered_set<std::string_view> replaced_;
  size_t max_descriptors_ = kMaxDescriptorsPerCall;
};

// envoyproxy/ratelimit's near_limit_ratio default: a hit that leaves the
// count above 80 % of the limit is near it.
inline constexpr double kNearLimitRatio = 0.8;

}  // namespace frs::envoy
