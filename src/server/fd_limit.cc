#include "server/fd_limit.h"

#include <sys/resource.h>

#include <cstdint>

namespace frs::server {

namespace {

// Beside its clients a worker holds the listening socket, epoll, the store
// files and their lock, the statistics file, the log, the map channel and
// the metrics: 64 is comfortably above their count with the largest store.
constexpr uint64_t kOwnDescriptors = 64;

// The largest <limits connections> whose worker fits in `limit` descriptors.
uint64_t MostConnections(uint64_t limit, uint32_t files) {
  if (limit <= kOwnDescriptors + files) return 0;
  const uint64_t avail = limit - kOwnDescriptors - files;  // for C + OverflowBudget(C)
  const uint64_t c = avail * 8 / 9;
  if (c >= 128) return c;  // C/8 >= 16
  return avail > 16 ? avail - 16 : 0;
}

uint64_t Of(rlim_t v) { return v == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(v); }

}  // namespace

uint64_t DescriptorsNeeded(const SrvConfig& cfg) {
  return uint64_t{cfg.max_connections} + OverflowBudget(cfg.max_connections) + kOwnDescriptors + cfg.geometry.files;
}

FdLimit CurrentFdLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return {};
  return FdLimit{Of(rl.rlim_cur), Of(rl.rlim_max)};
}

FdLimit RaiseFdLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != rl.rlim_max) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &raised);  // refused (a container's policy): the old one stays
  }
  return CurrentFdLimit();
}

std::string FdLimitProblem(const SrvConfig& cfg, const FdLimit& limit, bool raised) {
  const uint64_t need = DescriptorsNeeded(cfg);
  // A refused raise (hard above fs.nr_open, a container's policy) leaves the
  // soft limit where it was: that is what the workers get.
  const uint64_t can = raised ? limit.soft : limit.hard;
  if (can >= need) return "";
  return "the open file limit (ulimit -n: soft " + std::to_string(limit.soft) + ", hard " + std::to_string(limit.hard) +
         ") cannot hold <limits connections=\"" + std::to_string(cfg.max_connections) + "\">: each worker may need " +
         std::to_string(need) +
         " descriptors; raise the hard limit (LimitNOFILE= in the systemd unit, or ulimit -Hn) or lower "
         "<limits connections> to at most " +
         std::to_string(MostConnections(can, cfg.geometry.files));
}

}  // namespace frs::server
