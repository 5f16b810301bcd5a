// os/whole_file.h: the one way to write a file whole (frs/whole_file.h),
// under the names the modules use. The temporary name is
// store_dir::TempPath's; one left by a killed process is told by
// store_dir::IsTempName.
//
// Thread safety: as frs/whole_file.h (plain functions), RemoveFileSynced too.
#pragma once

#include "frs/whole_file.h"

namespace frs::os {

using frs::Placed;
using frs::WholeFileOptions;
using frs::WriteFileWhole;

// unlink(2)s `path`, then fsync(2)s its directory, so that the removal
// outlives a power cut as a synced write's name does. A file already gone
// is success.
[[nodiscard]] Status RemoveFileSynced(const std::string& path);

}  // namespace frs::os
