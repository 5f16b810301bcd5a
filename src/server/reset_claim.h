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
//
// A batch without a reset takes no claim (two deliveries of one such batch
// are safe: the watermark is in their transaction), but a reset batch
// claiming after such a batch looked must still not start its walk while
// that batch applies: resent without the reset, it would be committed and
// then erased. So such a batch first marks its stream in its worker's word
// (ApplyingMark, ReplicaCounters::applying), then looks at the claim; a reset
// batch first claims, then looks at every worker's mark (AppliedByOther).
// Each writes before it reads, all sequentially consistent: of two that
// overlap, at least one sees the other and is sent again.
//
// Thread safety: the words are shared memory that every process of the shard
// writes at once, so each is read and changed atomically (a claim by
// compare-and-set) and any process may call anything here. A ResetClaim or
// ApplyingMark belongs to the one batch that made it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string_view>

namespace frs::server {

struct ReplicaShared;
class Metrics;

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
  // Whether another live process's worker marked `stream` (ApplyingMark):
  // a reset batch that claimed it must be sent again.
  static bool AppliedByOther(const Metrics& metrics, std::string_view stream);

 private:
  uint64_t* word_ = nullptr;
  uint64_t value_ = 0;
};

// This process applies a batch of `stream` that resets nothing: marked in
// `word` (its worker's ReplicaCounters::applying) for the object's life.
class ApplyingMark {
 public:
  ApplyingMark(uint64_t& word, std::string_view stream);
  ~ApplyingMark();
  ApplyingMark(const ApplyingMark&) = delete;
  ApplyingMark& operator=(const ApplyingMark&) = delete;

 private:
  uint64_t& word_;
};

}  // namespace frs::server
