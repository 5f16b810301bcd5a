// The process-wide stop request (os/stop_request.h): frsctl's signal
// handlers set it, long walks over the store read it between chains.
#include "os/stop_request.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace frs {
namespace {

void OnUsr1(int) { os::RequestStop(); }

TEST(StopRequest, ASignalHandlerRequestsAStopThatStays) {
  // Each test runs in a process of its own (gtest_discover_tests), so nothing
  // has asked yet.
  EXPECT_FALSE(os::StopRequested());
  struct sigaction sa {
  }, old{};
  sa.sa_handler = OnUsr1;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(::sigaction(SIGUSR1, &sa, &old), 0);
  ASSERT_EQ(::raise(SIGUSR1), 0);  // delivered before raise returns
  ::sigaction(SIGUSR1, &old, nullptr);
  EXPECT_TRUE(os::StopRequested());
  EXPECT_TRUE(os::StopRequested()) << "read, it is not consumed";
  os::RequestStop();
  EXPECT_TRUE(os::StopRequested());
}

}  // namespace
}  // namespace frs
