#include "config/xml_location.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace frs {

XmlLines::XmlLines(std::string file, const std::string& text) : file_(std::move(file)) {
  starts_.push_back(0);
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') starts_.push_back(i + 1);
}

size_t XmlLines::LineOf(ptrdiff_t offset) const {
  if (offset < 0) return 1;
  auto it = std::upper_bound(starts_.begin(), starts_.end(), static_cast<size_t>(offset));
  return static_cast<size_t>(it - starts_.begin());
}

std::string XmlLines::At(ptrdiff_t offset, const std::string& msg) const {
  return file_ + ":" + std::to_string(LineOf(offset)) + ": " + msg;
}

bool ReadWholeFile(const std::string& path, std::string* out, std::string* err) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *err = path + ": " + std::strerror(errno);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

}  // namespace frs
