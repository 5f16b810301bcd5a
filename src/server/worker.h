// server/worker.h: one pre-forked worker process: its own store mapping and
// engine, its own epoll loop over its own listening socket.
//
// The worker opens the store and the engine itself after fork (no mapping,
// lock or thread id state is inherited from the master). Signals only set
// flags; the loop acts on them between waits: SIGTERM/SIGINT stop accepting
// and finish the requests in flight (at most kDrainMs), SIGHUP reloads
// map.xml into the engine (connections and counts stay), SIGUSR1 reopens the
// log file.
//
// Exit codes: 0 after a graceful stop, kExitFatalConfig when the store or
// map cannot be opened (the master does not respawn it), kExitStoreLost when
// a store file went while frsd ran, 1 otherwise.
//
// Thread safety: single-threaded by design.
#pragma once

#include "server/worker_context.h"

namespace frs::server {

// Runs the worker until it stops; returns the process exit code.
int RunWorker(WorkerContext ctx);

}  // namespace frs::server
