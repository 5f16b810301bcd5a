// frs/sigbus_guard.h: a truncated store file must not kill the process that
// touches it.
//
// A page of a shared file mapping past the file's end raises SIGBUS; when an
// operator (or a full disk) truncated a store file, every process touching
// it would die. With the guard installed, a SIGBUS inside one of the store's
// mappings replaces that mapping with zero pages and marks it broken, so the
// store answers the operation with an error instead of acknowledging it. A
// SIGBUS anywhere else keeps its default action (the process dies with a
// core, as it should). A program that opens a store calls it once at its
// start (frsd and frsctl do); installing a signal handler is the program's
// decision, never the library's.
//
// Thread safety: async-signal-safe once installed; call it from any thread.
#pragma once

namespace frs {

// Installs the SIGBUS handler (once per process; later calls do nothing).
void InstallSigbusGuard();

}  // namespace frs
