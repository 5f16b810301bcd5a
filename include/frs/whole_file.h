// frs/whole_file.h: the one way to write a file whole (a backup, an
// export, every file of a store directory the modules make).
//
// The bytes are made under a temporary name beside the file
// (PATH.tmp.<pid>.<n>), then take the file's name in one step: rename(2),
// which replaces what is there, or, `exclusive`, link(2), which keeps what
// is there. So a reader (another process, frsd after a kill -9) sees the old
// file or the new one, never a part, and of two processes making the same
// file at once exactly one wins. Whether the bytes and the name are on the
// disk before it returns (fsync of the file, of the directory) costs a disk
// flush each, so each caller asks for what a power cut would otherwise cost
// it (docs/store.md, "What survives what"). The temporary file is removed on
// every error.
//
//   auto placed = frs::WriteFileWhole("/backup/frs.export", text, {.sync_file = true, .sync_dir = true});
//
// Thread safety: plain functions; temporary names are unique per call.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>

#include "frs/status.h"

namespace frs {

struct WholeFileOptions {
  // fsync(2) the new file before it takes the name: after a power cut the
  // name holds the whole new bytes or the old file, never a short one.
  bool sync_file = false;
  // fsync(2) the directory after: the new name itself survives a power cut.
  bool sync_dir = false;
  // Keep a file already at the name (link(2)); ours is dropped and the
  // result says kExisting. Else replace it (rename(2)).
  bool exclusive = false;
  // For the bytes form: the new file's mode (before the umask).
  mode_t mode = 0644;
};

enum class Placed { kOurs, kExisting };

// Makes `path` whole: `make` writes the file named `tmp` (not there yet; it
// creates it, with the mode it wants), then it takes `path` as `o` says.
// Errors name the file and the step ("cannot write PATH.tmp.1.0: ...").
[[nodiscard]] Result<Placed> WriteFileWhole(const std::string& path, const WholeFileOptions& o,
                                            const std::function<Status(const std::string& tmp)>& make);

// The same with the bytes given.
[[nodiscard]] Result<Placed> WriteFileWhole(const std::string& path, std::string_view bytes, const WholeFileOptions& o);

}  // namespace frs
