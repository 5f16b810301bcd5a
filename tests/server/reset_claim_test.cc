// One delivery at a time of a replica batch that resets a biz
// (server/reset_claim.h): a live claimant keeps others off that batch, its
// release or its death lets the next one in.
#include "server/reset_claim.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/metrics.h"

namespace frs::server {
namespace {

TEST(ResetClaim, AClaimHoldsAWordUntilItIsReleased) {
  ReplicaShared shared{};
  {
    ResetClaim first(shared, "s/1", 5);
    ASSERT_TRUE(first.held());
    size_t set = 0;
    for (uint64_t w : shared.reset_claims) set += w != 0;
    EXPECT_EQ(set, 1u);
  }
  for (uint64_t w : shared.reset_claims) EXPECT_EQ(w, 0u);
}

TEST(ResetClaim, AClaimOfALiveOtherProcessRefusesADeadOnesIsTakenOver) {
  ReplicaShared shared{};
  uint64_t* word = nullptr;
  {
    ResetClaim c(shared, "s/1", 5);
    ASSERT_TRUE(c.held());
    for (uint64_t& w : shared.reset_claims)
      if (w != 0) word = &w;
    ASSERT_NE(word, nullptr);
    const uint64_t held = *word;
    // The same word as the parent process holds it (alive, not this one):
    // another delivery is refused.
    const uint64_t pid_mask = (uint64_t{1} << 22) - 1;
    *word = (held & ~pid_mask) | static_cast<uint64_t>(::getppid());
    ResetClaim second(shared, "s/1", 5);
    EXPECT_FALSE(second.held());
    // As a process that died (a reaped child's pid): taken over.
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) _exit(0);
    ASSERT_EQ(::waitpid(child, nullptr, 0), child);
    *word = (held & ~pid_mask) | static_cast<uint64_t>(child);
    ResetClaim third(shared, "s/1", 5);
    EXPECT_TRUE(third.held());
    *word = held;  // c's own, for its release below
  }
}

}  // namespace
}  // namespace frs::server
