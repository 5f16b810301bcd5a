// os/stop_request.h: a process-wide request to stop between steps.
//
// frsctl's SIGINT/SIGTERM handlers call RequestStop() instead of letting the
// signal kill the process in the middle of a chain it holds; long walks over
// the store (dump, export, reset, verify) look at StopRequested() between
// chains and end there, with nothing half done. A single operation always
// finishes. frsd does not use it: its workers stop through their own loop.
//
// Thread safety: RequestStop is async-signal-safe; both are lock-free.
#pragma once

namespace frs::os {

void RequestStop();
bool StopRequested();

}  // namespace frs::os
