// os/stop_request.h: the process-wide stop request (frs/stop_request.h),
// under the names the store's walks use.
//
// Thread safety: as frs/stop_request.h.
#pragma once

#include "frs/stop_request.h"

namespace frs::os {

using frs::RequestStop;
using frs::StopRequested;

}  // namespace frs::os
