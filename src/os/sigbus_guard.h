// os/sigbus_guard.h: a truncated store file must not kill the process that
// touches it.
//
// A page of a shared file mapping past the file's end raises SIGBUS; when an
// operator (or a full disk, or a bug elsewhere) truncated a store file, every
// worker touching it died, then the master. With the guard installed, a
// SIGBUS inside a registered mapping replaces that whole mapping with zero
// pages (mmap MAP_FIXED of anonymous memory), marks it broken and returns, so
// the faulting instruction completes on the zero page; the store then sees
// the mark and answers the operation with an error instead of acknowledging
// it. A SIGBUS anywhere else keeps its default action (the process dies with
// a core, as it should).
//
// Thread safety: Register/Unregister from any thread; the handler is
// async-signal-safe (atomics and mmap only).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "frs/sigbus_guard.h"

namespace frs::os {

// Installs the SIGBUS handler: frs/sigbus_guard.h.
using frs::InstallSigbusGuard;

// Registers [base, base + len); a fault there sets *broken. Returns a handle
// for Unregister, or -1 when the table is full (the mapping is then not
// guarded).
int RegisterGuardedMapping(uint8_t* base, size_t len, std::atomic<bool>* broken);
void UnregisterGuardedMapping(int handle);

}  // namespace frs::os
