#include "frs/stop_request.h"

#include <atomic>

namespace frs {
namespace {
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");
}  // namespace

void RequestStop() { g_stop.store(true, std::memory_order_relaxed); }
bool StopRequested() { return g_stop.load(std::memory_order_relaxed); }

}  // namespace frs
