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

// A batch without a reset marks its stream before it looks at the claim; a
// reset batch claims before it looks at the marks: whichever comes second
// sees the first (the race a late reset batch of a resent stream had).
TEST(ApplyingMark, AResetBatchSeesAnotherWorkersBatchOfItsStream) {
  auto metrics = Metrics::Create(2);
  ASSERT_TRUE(metrics.ok());
  Metrics& m = *metrics.value();
  OtherProcess other;
  ASSERT_GT(other.pid(), 0);
  {
    ApplyingMark mark(m.worker(1).replica.applying, "s/1");
    EXPECT_NE(m.worker(1).replica.applying, 0u);
    // This process's own mark is not another's.
    EXPECT_FALSE(ResetClaim::AppliedByOther(m, "s/1"));
    // The same word under the other (live) process's pid, as its worker's.
    uint64_t& w = m.worker(1).replica.applying;
    w = (w & ~((uint64_t{1} << 22) - 1)) | static_cast<uint64_t>(other.pid());
    EXPECT_TRUE(ResetClaim::AppliedByOther(m, "s/1"));
    EXPECT_FALSE(ResetClaim::AppliedByOther(m, "s/2"));  // another stream's reset goes on
    other.End();                                         // dead: holds nothing
    EXPECT_FALSE(ResetClaim::AppliedByOther(m, "s/1"));
  }
  EXPECT_EQ(m.worker(1).replica.applying, 0u);  // cleared when the batch is done
}

// A batch without a reset marks its stream in its worker's word for as long
// as it applies, and its look at the claim comes after: a claim made before
// is seen (the handler answers 503); one made after sees the mark
// (ApplyingMark.AResetBatchSeesAnotherWorkersBatchOfItsStream).
TEST_F(OthersClaim, ABatchWithoutAResetIsMarkedWhileItLooksAndApplies) {
  auto metrics = Metrics::Create(1);
  ASSERT_TRUE(metrics.ok());
  uint64_t& word = metrics.value()->worker(0).replica.applying;
  {
    ApplyingMark mark(word, "s/1");
    EXPECT_NE(word, 0u);
    EXPECT_TRUE(ResetClaim::HeldByOther(shared, "s/1"));
    ApplyingMark other_stream(metrics.value()->worker(0).replica.applying, "s/2");
    EXPECT_FALSE(ResetClaim::HeldByOther(shared, "s/2"));
  }
  EXPECT_EQ(word, 0u);
}

}  // namespace
}  // namespace frs::server
