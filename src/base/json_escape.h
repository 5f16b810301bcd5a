// base/json_escape.h: text put into a JSON string, written for the request
// path (the decision log's lines): through a plain pointer, no allocation
// per string. What the escaping gives a JSON reader back, and the
// allocating forms every other writer uses (AppendJsonString), are
// frs/json_writer.h's; one escaper serves both.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "frs/json_writer.h"

namespace frs {

// The most bytes one byte of input becomes (\u00XX).
inline constexpr size_t kJsonEscapedBytesPerByte = 6;

// Writes `s` escaped, without quotes, at `p`, which must have room for
// kJsonEscapedBytesPerByte * s.size() bytes; returns the new end.
char* JsonEscapeInto(std::string_view s, char* p);

}  // namespace frs
