// server/listener.h: the listening sockets, one per worker slot.
//
// Default (shared): one socket, one accept queue, each worker holding its own
// descriptor of it and waiting with EPOLLEXCLUSIVE, so the kernel wakes one
// idle worker per new connection. With keep-alive clients that open a few
// long connections, this is what balances the load: an idle worker is the
// one waiting, while SO_REUSEPORT hashes connections to workers blindly (with
// 16 connections one worker often got 10 and its core saturated while the
// other idled: 0.87x of nginx unpinned). <listen reuseport="1"> gives each
// worker its own SO_REUSEPORT socket instead (no shared queue at all, better
// for many short connections). The master creates the sockets before forking
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
                                                bool reuseport, int backlog = 4096);

}  // namespace frs::server
