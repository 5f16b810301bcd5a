// server/listener.h: the listening sockets, one per worker slot.
//
// Each worker owns its own SO_REUSEPORT socket, so the kernel spreads new
// connections over the workers without a shared accept queue, an accept lock
// or thundering-herd wake-ups. The master creates the sockets before forking
// and keeps them open for the life of the server: a respawned worker gets the
// same socket back, so connections the kernel queued on it while its worker
// was dead are served by the replacement instead of being reset, and the
// port stays ours between respawns. Before binding the group the master
// probes the address without SO_REUSEPORT, so a second server on the same
// port fails with "address in use" instead of silently joining the group.
//
// Thread safety: plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frs/status.h"
#include "os/unique_fd.h"

namespace frs::server {

Result<std::vector<os::UniqueFd>> OpenListeners(const std::string& host, uint16_t port, uint32_t count,
                                                int backlog = 4096);

}  // namespace frs::server
