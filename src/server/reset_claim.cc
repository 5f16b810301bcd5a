#include "server/reset_claim.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "server/metrics.h"

namespace frs::server {
namespace {

// A word: the stream's hash above, the claimant's pid in the low 22 bits
// (Linux's pid_max is at most 2^22).
constexpr unsigned kPidBits = 22;
constexpr uint64_t kPidMask = (uint64_t{1} << kPidBits) - 1;

bool Alive(uint64_t pid) { return pid != 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

uint64_t Hash(std::string_view stream) { return StreamHash(stream) * 1099511628211ull; }

size_t Index(uint64_t hash) { return (hash >> kPidBits) % kResetClaims; }

uint64_t MyPid() { return static_cast<uint64_t>(::getpid()) & kPidMask; }

}  // namespace

ResetClaim::ResetClaim(ReplicaShared& shared, std::string_view stream) {
  const uint64_t h = Hash(stream), pid = MyPid();
  const uint64_t mine = (h & ~kPidMask) | pid;
  uint64_t* word = &shared.reset_claims[Index(h)];
  std::atomic_ref<uint64_t> w(*word);
  uint64_t seen = w.load(std::memory_order_acquire);
  for (;;) {
    // Held by a live process. Not this one: a worker applies one batch at a
    // time, so a claim under its pid is a dead process's whose pid it got.
    if (seen != 0 && (seen & kPidMask) != pid && Alive(seen & kPidMask)) return;
    // seq_cst: the claim is written before AppliedByOther reads the marks.
    if (w.compare_exchange_weak(seen, mine, std::memory_order_seq_cst, std::memory_order_acquire)) break;
  }
  word_ = word;
  value_ = mine;
}

ResetClaim::~ResetClaim() {
  if (word_ == nullptr) return;
  uint64_t expected = value_;
  std::atomic_ref<uint64_t>(*word_).compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
}

bool ResetClaim::HeldByOther(const ReplicaShared& shared, std::string_view stream) {
  const uint64_t h = Hash(stream);
  // A load only: every batch of every worker passes here. seq_cst: after
  // the caller's ApplyingMark was written.
  const uint64_t seen = std::atomic_ref<const uint64_t>(shared.reset_claims[Index(h)]).load(std::memory_order_seq_cst);
  if (seen == 0 || (seen & ~kPidMask) != (h & ~kPidMask)) return false;
  const uint64_t pid = seen & kPidMask;
  return pid != MyPid() && Alive(pid);
}

void ResetClaim::ReleaseDead(ReplicaShared& shared, pid_t pid) {
  const uint64_t p = static_cast<uint64_t>(pid) & kPidMask;
  for (uint64_t& word : shared.reset_claims) {
    std::atomic_ref<uint64_t> w(word);
    uint64_t seen = w.load(std::memory_order_acquire);
    if (seen != 0 && (seen & kPidMask) == p) w.compare_exchange_strong(seen, 0, std::memory_order_acq_rel);
  }
}

bool ResetClaim::AppliedByOther(const Metrics& metrics, std::string_view stream) {
  const uint64_t tag = Hash(stream) & ~kPidMask, me = MyPid();
  for (uint32_t w = 0; w < metrics.workers(); ++w) {
    const uint64_t seen =
        std::atomic_ref<const uint64_t>(metrics.worker(w).replica.applying).load(std::memory_order_seq_cst);
    if (seen == 0 || (seen & ~kPidMask) != tag) continue;
    // A dead worker's mark (its slot not yet reaped) holds nothing.
    if ((seen & kPidMask) != me && Alive(seen & kPidMask)) return true;
  }
  return false;
}

ApplyingMark::ApplyingMark(uint64_t& word, std::string_view stream) : word_(word) {
  std::atomic_ref<uint64_t>(word_).store((Hash(stream) & ~kPidMask) | MyPid(), std::memory_order_seq_cst);
}

ApplyingMark::~ApplyingMark() { std::atomic_ref<uint64_t>(word_).store(0, std::memory_order_release); }

}  // namespace frs::server
