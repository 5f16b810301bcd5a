// A worker's claim on a replica batch that resets a biz, while it applies it.
//
// A batch's changes and its stream's watermark are one store transaction,
// so the same batch delivered twice at once (the sender timed out on the
// first and sent it again) counts once. A reset is not in it: it walks the
// whole store, and is applied only to a batch the watermark says is new. Two
// deliveries of one such batch on two workers would both find it new, and
// the second's walk would erase what the first committed meanwhile. So the
// worker that applies one claims (stream, seq) in a word of the master's
// region first; another delivery of it, while the claimant lives, is told to
// send again later (503). A claimant killed mid-walk holds nothing: its pid
// is dead, and the next delivery takes the claim over.
#pragma once

#include <cstdint>
#include <string_view>

namespace frs::server {

struct ReplicaShared;

class ResetClaim {
 public:
  // Claims (stream, seq) in `shared` (ReplicaShared::reset_claims, every
  // process of the shard's). held() is false when a live process holds it,
  // or another batch whose claim shares its word (sent again alike).
  ResetClaim(ReplicaShared& shared, std::string_view stream, uint64_t seq);
  ~ResetClaim();
  ResetClaim(const ResetClaim&) = delete;
  ResetClaim& operator=(const ResetClaim&) = delete;

  bool held() const { return word_ != nullptr; }

 private:
  uint64_t* word_ = nullptr;
  uint64_t value_ = 0;
};

}  // namespace frs::server
