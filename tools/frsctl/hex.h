// frsctl/hex.h: bytes as lower-case hex and back, for the spool and export
// lines that carry node states and key bytes.
//
// Thread safety: plain functions.
#pragma once

#include <string>
#include <string_view>

namespace frs::ctl {

std::string Hex(std::string_view bytes);
// False (and `out` unspecified) unless `hex` is an even run of 0-9a-f.
bool Unhex(std::string_view hex, std::string* out);

}  // namespace frs::ctl
