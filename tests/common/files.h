// tests/common/files.h: a whole file read or written at once.
#pragma once

#include <fstream>
#include <iterator>
#include <string>

namespace frs::testing {

// Its bytes; "" when it cannot be read.
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Replaces its contents with `text`.
inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace frs::testing
