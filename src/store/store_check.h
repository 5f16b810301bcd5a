// store/store_check.h: whether the store a srv.xml names can be opened as
// it says, without mapping, locking or creating anything (frsd -t).
//
// Thread safety: a plain function over the files; safe anywhere.
#pragma once

#include <string>

#include "frs/status.h"
#include "frs/store.h"

namespace frs::store {

struct StoreCheck {
  bool exists = false;  // false: no file of the store yet (frsd creates it)
  uint32_t files_found = 0;
};

// Reads each file's header with pread and checks magic, version, layout,
// checksum and geometry as Open does. A store with some files missing is
// an error naming them; no file at all is `exists = false`.
Result<StoreCheck> CheckStoreFiles(const std::string& dir, const StoreGeometry& geometry);

// Whether a store file of `dir` (every frs.N.store there) holds a node by
// its header's counter, or may hold one: it does not open or read as a
// store file (a damaged header, its mode), or the directory does not list.
// Whether a store there was ever used, read without its geometry.
bool StoreMayHoldNodes(const std::string& dir);

// For a directory with no store file: an error when the engine's daily
// counters (stats.frs) show a store that served there, whose files were
// deleted or moved (a new empty store would reset every count unsaid);
// OK otherwise. Only frsctl init --recreate-missing makes such a store anew.
Status GoneStoreProblem(const std::string& dir, uint32_t files);

}  // namespace frs::store
