// store/test_hooks.h: hooks for the store's own tests. Not installed, not
// part of frs/store.h: nothing but a test may call them.
//
// Thread safety: set a hook before the store is used by other threads.
#pragma once

#include <functional>

#include "frs/store.h"

namespace frs::store {

// To test death inside a critical section: when set, `hook` is called with
// phase 0 while the chain lock(s) are held, after the mutator ran and before
// anything is written; in a batch across files with phase 2 once every file
// is written, 3 right after the commit point, 4 once the other files'
// journals are closed; and with phase 1 in the middle of writing a node (its
// first 16 bytes new, the rest old: a torn node). An empty hook removes it.
// REQUIRES: `store` came from Store::Open.
void SetTestHookInCriticalSection(Store* store, std::function<void(int phase)> hook);

}  // namespace frs::store
