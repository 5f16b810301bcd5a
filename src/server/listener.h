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
// Port 0 lets the kernel choose: the first socket is bound to port 0 and the
// others of a reuseport group to the port it got, so every worker listens on
// the same one; `port` says which. No probe is needed then (nobody else can
// be on a port the kernel has just handed out).
//
// Thread safety: plain functions.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "frs/status.h"
#include "os/unique_fd.h"

namespace frs::server {

struct Listeners {
  std::vector<os::UniqueFd> fds;  // one per worker slot
  uint16_t port = 0;              // the bound port (the configured one, or the kernel's choice for 0)
};

Result<Listeners> OpenListeners(const std::string& host, uint16_t port, uint32_t count, bool reuseport,
                                int backlog = 4096);

// <grpc unix="PATH" mode="...">: one Unix stream socket at `path`, shared by
// `count` workers as the shared TCP socket is. A socket file left by a
// server that is gone (connect() refused) is removed first; a live one (a
// server answers there) or a file that is not a socket is an error, never
// removed. The socket gets `mode` before it listens, so no client connects
// through the umask's permissions. RemoveUnixListener unlinks it at stop.
Result<Listeners> OpenUnixListener(const std::string& path, uint32_t mode, uint32_t count, int backlog = 4096);
// A file's identity (device, inode): the socket file this process bound.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
};
// Removes the socket at `path` if it is still `bound` (nothing when that is
// unknown, all zeros).
void RemoveUnixListener(const std::string& path, FileIdentity bound);
// What OpenUnixListener would refuse at `path` before it binds (a file that
// is not a socket, a server answering there, a missing directory), changing
// nothing: frsd -t's check.
Status CheckUnixListenPath(const std::string& path);

// Publishes "name\n" at `path` for whoever started frsd on port 0: written
// to a temporary file and renamed, so a reader sees the whole line or none.
// `synced`: the file and its name are on disk before this returns, for a
// file whose presence at the next start says how this run ended.
Status PublishListenAddress(const std::string& path, const std::string& name, bool synced);

}  // namespace frs::server
