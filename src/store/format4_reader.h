// store/format4_reader.h: a store of the format before this one (4), read.
//
// Format 5 changed the layout around the nodes (key-node groups, their
// heads with continuation tags and check bytes, the journals' sizes) but not
// the nodes: a format-4 node's bytes decode as a format-5 node's
// (node_codec.h). So a format-4 store is read here, file by file, chain by
// chain, with format 4's own rules for what a whole node is, and `frsctl
// upgrade` copies every node into a new store of format 5 through the
// store's API, as `grow` copies one store into another.
//
// Read-only and lock-free: the store must be stopped (frsctl upgrade makes
// sure of it). A writer that died in the middle of a write left its journal
// open; its saved images are laid over the chains it touched as they are
// read (as its next locker would have restored them), and a batch across
// files that had reached its commit point is read as written.
//
// Only ForEach, Verify (without repair), Stats and geometry() answer; every
// other operation is refused (Unavailable).
//
// Thread safety: the Store OpenFormat4 returns changes nothing after it opens
// (a walk copies each chain into buffers of its own): any thread may read it
// while nothing writes the files (stopped, above).
#pragma once

#include <memory>
#include <string>

#include "frs/status.h"
#include "frs/store.h"
#include "frs/store_admin.h"

namespace frs::store {

inline constexpr uint32_t kPreviousFormatVersion = kPreviousStoreFormatVersion;  // frs/store_admin.h

// The format version the store file `path` says it has in its header (its
// magic checked; the rest is for the opener of that version to check).
Result<uint32_t> FormatVersionOf(const std::string& path);

// Opens the format-4 store in `dir` (every file, checked as format 4 checked
// them: magic, version, header checksum, geometry, one store id).
Result<std::unique_ptr<Store>> OpenFormat4(const std::string& dir);

}  // namespace frs::store
