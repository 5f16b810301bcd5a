// config/xml_location.h: "file:line" for pugixml nodes and parse errors.
//
// pugixml reports byte offsets; operators want line numbers. XmlLines indexes
// a file's line starts once so each lookup is a binary search.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace frs {

class XmlLines {
 public:
  XmlLines(std::string file, const std::string& text);
  // 1-based line of a byte offset.
  size_t LineOf(ptrdiff_t offset) const;
  // "file:line: msg"
  std::string At(ptrdiff_t offset, const std::string& msg) const;
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::vector<size_t> starts_;
};

// Reads a whole file; false (and *err set to "file: reason") when it can't.
bool ReadWholeFile(const std::string& path, std::string* out, std::string* err);

}  // namespace frs
