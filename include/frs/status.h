// frs/status.h: errors as values.
//
// Every fallible call at a module boundary returns a Status (or a Result<T>,
// which is a value or a Status). An OK Status is one null pointer and costs
// nothing; a failure carries a code and one readable sentence that names
// what was wrong (the file, the field, the value). Exceptions thrown by
// libraries (Boost, the standard library) are caught at the boundary that
// calls them and turned into a Status; none crosses a module boundary.
//
// Thread safety: Status and Result are values; distinct objects may be used
// from distinct threads freely.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace frs {

class [[nodiscard]] Status {
 public:
  enum class Code : unsigned char {
    kOk = 0,
    kNotFound,
    kInvalidArgument,
    kCorruption,  // a file's content is not what its format says
    kMismatch,    // a valid file of another geometry or version
    kIOError,
    kBusy,         // a resource is full or held (e.g. writer table)
    kUnavailable,  // shutting down, overloaded
    kConflict,     // names nothing this holds (a lease id of another key, forged, or of an erased node)
    kGone,         // named something that has ended (a lease released or expired)
  };

  Status() = default;
  static Status OK() { return Status(); }
  static Status NotFound(std::string_view msg) { return Status(Code::kNotFound, msg); }
  static Status InvalidArgument(std::string_view msg) { return Status(Code::kInvalidArgument, msg); }
  static Status Corruption(std::string_view msg) { return Status(Code::kCorruption, msg); }
  static Status Mismatch(std::string_view msg) { return Status(Code::kMismatch, msg); }
  static Status IOError(std::string_view msg) { return Status(Code::kIOError, msg); }
  // An IOError naming `context` (usually a path) and errno's text.
  static Status FromErrno(std::string_view context, int err);
  static Status Busy(std::string_view msg) { return Status(Code::kBusy, msg); }
  static Status Unavailable(std::string_view msg) { return Status(Code::kUnavailable, msg); }
  static Status Conflict(std::string_view msg) { return Status(Code::kConflict, msg); }
  static Status Gone(std::string_view msg) { return Status(Code::kGone, msg); }

  bool ok() const { return rep_ == nullptr; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  bool IsNotFound() const { return code() == Code::kNotFound; }
  // The sentence without a code prefix ("" when OK).
  const std::string& message() const;
  // "Corruption: data/frs.0: bad magic" style, for logs.
  std::string ToString() const;

 private:
  struct Rep {
    Code code;
    std::string msg;
  };
  Status(Code c, std::string_view msg) : rep_(std::make_shared<const Rep>(Rep{c, std::string(msg)})) {}
  std::shared_ptr<const Rep> rep_;
};

// A value or the Status that explains its absence. Never "OK without value".
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status s) : v_(std::move(s)) {      // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) v_ = Status::InvalidArgument("Result built from an OK status");
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace frs
