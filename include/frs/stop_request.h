// frs/stop_request.h: a process-wide request that long walks end early.
//
// A program's SIGINT/SIGTERM handler calls RequestStop() instead of letting
// the signal kill the process in the middle of a chain it holds; the
// store's long walks (Store::ForEach, Verify, the reading of a previous
// format's store) look at StopRequested() between chains and end there with
// an error, nothing half done. A single operation always finishes. frsd
// does not use it: its workers stop through their own loop.
//
//   struct sigaction sa {};
//   sa.sa_handler = [](int) { frs::RequestStop(); };
//   sigaction(SIGINT, &sa, nullptr);
//
// Thread safety: RequestStop is async-signal-safe; both are lock-free. A
// request is never taken back.
#pragma once

namespace frs {

void RequestStop();
bool StopRequested();

}  // namespace frs
