// One batch at a time of a replica stream while one that resets a biz is
// applied (server/reset_claim.h): a live claimant keeps the stream's other
// batches off; its release, its death or the master's reaping lets them in.
#include "server/reset_claim.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/metrics.h"

namespace frs::server {
namespace {

// Another process, alive until the test lets it go: a claimant that is not
// this one.
class OtherProcess {
 public:
  OtherProcess() {
    if (::pipe(fds_) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      char b;
      ::close(fds_[1]);
      while (::read(fds_[0], &b, 1) < 0) {
      }
      _exit(0);
    }
    ::close(fds_[0]);
  }
  ~OtherProcess() { End(); }
  pid_t pid() const { return pid_; }
  void End() {
    if (pid_ <= 0) return;
    ::close(fds_[1]);
    ::waitpid(pid_, nullptr, 0);
    ended_ = pid_;
    pid_ = 0;
  }
  pid_t ended() const { return ended_; }

 private:
  int fds_[2] = {-1, -1};
  pid_t pid_ = -1;
  pid_t ended_ = 0;
};

// `stream` claimed in `shared` as the process `pid` would: its word.
uint64_t* ClaimAs(ReplicaShared& shared, const char* stream, pid_t pid) {
  uint64_t* word = nullptr;
  uint64_t value = 0;
  {
    ResetClaim c(shared, stream);
    EXPECT_TRUE(c.held());
    for (uint64_t& w : shared.reset_claims)
      if (w != 0) word = &w, value = w;
  }
  if (word != nullptr) *word = (value & ~((uint64_t{1} << 22) - 1)) | static_cast<uint64_t>(pid);
  return word;
}

TEST(ResetClaim, AClaimHoldsItsStreamsWordUntilItIsReleased) {
  ReplicaShared shared{};
  {
    ResetClaim first(shared, "s/1");
    ASSERT_TRUE(first.held());
    size_t set = 0;
    for (uint64_t w : shared.reset_claims) set += w != 0;
    EXPECT_EQ(set, 1u);
    // This process's own claim does not keep its next batch off.
    EXPECT_FALSE(ResetClaim::HeldByOther(shared, "s/1"));
  }
  for (uint64_t w : shared.reset_claims) EXPECT_EQ(w, 0u);
}

// Stream "s/1" claimed by another live process.
class OthersClaim : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(other.pid(), 0);
    word = ClaimAs(shared, "s/1", other.pid());
    ASSERT_NE(word, nullptr);
  }
  ReplicaShared shared{};
  OtherProcess other;
  uint64_t* word = nullptr;
};

TEST_F(OthersClaim, ALiveOnesKeepsEveryBatchOfItsStreamOff) {
  EXPECT_TRUE(ResetClaim::HeldByOther(shared, "s/1"));   // a batch without a reset waits too
  EXPECT_FALSE(ResetClaim(shared, "s/1").held());        // and one with
  EXPECT_FALSE(ResetClaim::HeldByOther(shared, "s/2"));  // another stream does not
  // Dead (reaped): taken over.
  other.End();
  EXPECT_FALSE(ResetClaim::HeldByOther(shared, "s/1"));
  EXPECT_TRUE(ResetClaim(shared, "s/1").held());
}

TEST_F(OthersClaim, TheMasterClearsADeadWorkersClaims) {
  // Its pid still alive (given to another process, say): only the reaping
  // clears it.
  ResetClaim::ReleaseDead(shared, other.pid());
  EXPECT_EQ(*word, 0u);
  EXPECT_FALSE(ResetClaim::HeldByOther(shared, "s/1"));
}

}  // namespace
}  // namespace frs::server
