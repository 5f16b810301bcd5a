// server/fd_limit.h: the descriptors a worker may hold, against the
// process's RLIMIT_NOFILE.
//
// Each worker is a process of its own, holding up to <limits connections>
// client sockets plus the lingering refusals above them (OverflowBudget), and
// a few dozen of its own (the listening socket, epoll, the store files, the
// log, the map channel). frsd started from a shell with `ulimit -n 1024` and
// the default 10,000 connections ran out at the 1,000th connection: accept
// failed with EMFILE on a socket still readable, and both workers spun
// writing 3.48 million log lines in 9 s. So at start frsd raises its soft
// limit to the hard one (what nginx's worker_rlimit_nofile asks for by hand)
// and says, at start and in `frsd -t`, when even that cannot hold the
// connections; a worker that still meets EMFILE stops accepting for a while
// (server/worker_accept.cc).
//
// Every descriptor a worker keeps is in the sum, and start, `frsd -t` and a
// reload all ask DescriptorsNeeded: the statistics day files above all (up
// to three per <stats> table: 140 bizzes of 8 tables hold 3,360), which
// under `ulimit -n 1100` once left every client timing out with no word.
//
// Thread safety: plain functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "config/srv_config.h"
#include "limit/map_config.h"

namespace frs::server {

// Connections a worker takes above <limits connections> only to answer
// them 503 and close (lingering refusals).
inline uint32_t OverflowBudget(uint32_t max_connections) { return std::max<uint32_t>(16, max_connections / 8); }

// The descriptors one worker may need with this configuration and map: its
// clients and lingering refusals, its own few, the store's files, and the
// statistics day files of every <stats> table (limit::StatsDescriptors).
uint64_t DescriptorsNeeded(const SrvConfig& cfg, const limit::MapConfig& map);

struct FdLimit {
  uint64_t soft = 0, hard = 0;  // RLIM_INFINITY is reported as UINT64_MAX
};

// The limit now in force, after raising the soft limit to the hard one
// where it was lower (a failure leaves it as it was).
FdLimit RaiseFdLimit();
// The limit in force, unchanged.
FdLimit CurrentFdLimit();

// "" when the limit holds what `cfg` and `map` may need; else one sentence
// naming both, and what to change. `raised`: the soft limit is the one in
// force (frsd's start, after RaiseFdLimit; a reload); otherwise the hard one,
// which frsd will raise its soft limit to (frsd -t).
std::string FdLimitProblem(const SrvConfig& cfg, const limit::MapConfig& map, const FdLimit& limit, bool raised);

}  // namespace frs::server
