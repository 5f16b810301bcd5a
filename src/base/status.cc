#include "frs/status.h"

#include <cstring>

namespace frs {

Status Status::FromErrno(std::string_view context, int err) {
  std::string msg(context);
  msg += ": ";
  msg += std::strerror(err);
  return IOError(msg);
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->msg : kEmpty;
}

std::string Status::ToString() const {
  if (!rep_) return "OK";
  const char* name = "Unknown";
  switch (rep_->code) {
    case Code::kOk: name = "OK"; break;
    case Code::kNotFound: name = "NotFound"; break;
    case Code::kInvalidArgument: name = "InvalidArgument"; break;
    case Code::kCorruption: name = "Corruption"; break;
    case Code::kMismatch: name = "Mismatch"; break;
    case Code::kIOError: name = "IOError"; break;
    case Code::kBusy: name = "Busy"; break;
    case Code::kUnavailable: name = "Unavailable"; break;
    case Code::kConflict: name = "Conflict"; break;
    case Code::kGone: name = "Gone"; break;
  }
  return std::string(name) + ": " + rep_->msg;
}

}  // namespace frs
