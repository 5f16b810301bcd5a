// A worker's claim on a replica stream while it applies a batch that resets
// a biz.
//
// A batch's changes and its stream's watermark are one store transaction,
// so the same batch delivered twice at once (the sender timed out on the
// first and sent it again) counts once. A reset is not in it: it walks the
// whole store, and is applied only to a batch the watermark says is new. Two
// deliveries of one such batch on two workers would both find it new, and
// the second's walk would erase what the first committed meanwhile; so
// would a resend that no longer carries the reset (a full backlog drops a
// batch's oldest changes), committed while the first walk runs. So the
// worker that applies a reset claims its stream in a word of the master's
// region first, and while the claimant lives every other POST of that
// stream is told to send again later (503). A claimant that dies holds
// nothing: the master clears its words when it reaps it (ReleaseDead), and
// a claim whose pid is dead is taken over.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string_view>

namespace frs::server {

struct ReplicaShared;

class ResetClaim {
 public:
  // Claims `stream` in `shared` (ReplicaShared::reset_claims, every
  // process of the shard's). held() is false when a live process holds it,
  // or a claim of another stream that shares its word (sent again alike).
  ResetClaim(ReplicaShared& shared, std::string_view stream);
  ~ResetClaim();
  ResetClaim(const ResetClaim&) = delete;
  ResetClaim& operator=(const ResetClaim&) = delete;

  bool held() const { return word_ != nullptr; }

  // Whether another live process holds a claim on `stream`: a batch of it
  // must wait, reset or not.
  static bool HeldByOther(const ReplicaShared& shared, std::string_view stream);
  // Clears every claim of the process `pid`, which has died (Master::Reap).
  static void ReleaseDead(ReplicaShared& shared, pid_t pid);

 private:
  uint64_t* word_ = nullptr;
  uint64_t value_ = 0;
};

}  // namespace frs::server
