// os/whole_file.h: the one way to write a file whole (frs/whole_file.h),
// under the names the modules use. The temporary name is
// store_dir::TempPath's; one left by a killed process is told by
// store_dir::IsTempName.
#pragma once

#include "frs/whole_file.h"

namespace frs::os {

using frs::Placed;
using frs::WholeFileOptions;
using frs::WriteFileWhole;

}  // namespace frs::os
