// os/unique_fd.h: the modules' name for the owned descriptor (frs/unique_fd.h).
//
// Thread safety: as frs/unique_fd.h.
#pragma once

#include "frs/unique_fd.h"

namespace frs::os {

using ::frs::UniqueFd;

}  // namespace frs::os
