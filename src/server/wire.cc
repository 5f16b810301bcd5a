#include "server/wire.h"

namespace frs::server {

namespace {

constexpr const char* kCmdNames[] = {"query", "update", "acquire", "get", "set", "delete", "reset", "stats", "merge"};

}  // namespace

int HttpStatusFor(const Status& s) {
  switch (s.code()) {
    case Status::Code::kOk: return 200;
    case Status::Code::kInvalidArgument: return 400;
    case Status::Code::kNotFound: return 404;
    case Status::Code::kBusy:
    case Status::Code::kUnavailable:
    case Status::Code::kIOError:
    case Status::Code::kCorruption: return 503;
    default: return 500;
  }
}

const char* WireCmdName(Cmd cmd) { return kCmdNames[static_cast<size_t>(cmd)]; }

}  // namespace frs::server
