#include "server/wire.h"

namespace frs::server {

namespace {}  // namespace

int HttpStatusFor(const Status& s) {
  switch (s.code()) {
    case Status::Code::kOk: return 200;
    case Status::Code::kInvalidArgument: return 400;
    case Status::Code::kNotFound: return 404;
    case Status::Code::kConflict: return 409;
    case Status::Code::kGone: return 410;
    case Status::Code::kBusy:
    case Status::Code::kUnavailable:
    case Status::Code::kIOError:
    case Status::Code::kCorruption: return 503;
    default: return 500;
  }
}

}  // namespace frs::server
