#include "server/fd_limit.h"

#include <sys/resource.h>

#include <cstdint>

namespace frs::server {

namespace {

// Beside its clients, the store's files and the statistics day files, a
// worker holds the listening sockets, epoll, the store's lock, stats.frs,
// denials.frs, the log, the decision log, the map channel, the metrics, and
// for a moment the files a /stats read or a handoff opens one at a time: 64
// is comfortably above their count.
constexpr uint64_t kOwnDescriptors = 64;

// The descriptors a worker needs whatever its connections.
uint64_t FixedNeed(const SrvConfig& cfg, const limit::MapConfig& map) {
  return kOwnDescriptors + cfg.geometry.files + limit::StatsDescriptors(map);
}

// The largest <limits connections> whose worker fits in `limit` descriptors.
uint64_t MostConnections(uint64_t limit, uint64_t fixed) {
  if (limit <= fixed) return 0;
  const uint64_t avail = limit - fixed;  // for C + OverflowBudget(C)
  const uint64_t c = avail * 8 / 9;
  if (c >= 128) return c;  // C/8 >= 16
  return avail > 16 ? avail - 16 : 0;
}

uint64_t Of(rlim_t v) { return v == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(v); }

}  // namespace

uint64_t DescriptorsNeeded(const SrvConfig& cfg, const limit::MapConfig& map) {
  return uint64_t{cfg.max_connections} + OverflowBudget(cfg.max_connections) + FixedNeed(cfg, map);
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

std::string FdLimitProblem(const SrvConfig& cfg, const limit::MapConfig& map, const FdLimit& limit, bool raised) {
  const uint64_t need = DescriptorsNeeded(cfg, map);
  // A refused raise (hard above fs.nr_open, a container's policy) leaves the
  // soft limit where it was: that is what the workers get.
  const uint64_t can = raised ? limit.soft : limit.hard;
  if (can >= need) return "";
  const uint64_t stats = limit::StatsDescriptors(map);
  const uint64_t most = MostConnections(can, FixedNeed(cfg, map));
  return "the open file limit (ulimit -n: soft " + std::to_string(limit.soft) + ", hard " + std::to_string(limit.hard) +
         ") cannot hold <limits connections=\"" + std::to_string(cfg.max_connections) + "\">" +
         (stats != 0 ? " and the statistics day files of map.xml's <stats> (" + std::to_string(stats) + ")" : "") +
         ": each worker may need " + std::to_string(need) +
         " descriptors; raise the hard limit (LimitNOFILE= in the systemd unit, or ulimit -Hn)" +
         (most != 0 ? " or lower <limits connections> to at most " + std::to_string(most)
                    : " or keep fewer <stats> tables");
}

}  // namespace frs::server
