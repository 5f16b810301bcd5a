// os/text_file.h: a configuration file read whole, and "file:line" for a
// byte offset in it.
//
// srv.xml, map.xml and the listen file are read by one function, so that a
// missing file, an unreadable one and one too large are said alike: "path:
// no such file", the permission words of os/path_access.h for a file this
// user may not open, and "path:0: reason" (line 0 being the file as a
// whole) for one that opens but cannot be read whole. Parsers (pugixml)
// report byte offsets; operators want line numbers: a LineIndex indexes
// the line starts once, and each lookup is a binary search.
//
// Thread safety: plain values.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "frs/status.h"

namespace frs::os {

inline constexpr size_t kMaxTextFileBytes = 16u << 20;

// The file's bytes. NotFound when it does not exist; InvalidArgument when it
// holds more than max_bytes; IOError when it is not a regular file (a FIFO
// is refused, never waited on: its reader would wait for a writer) or for
// the system's reason.
Result<std::string> ReadTextFile(const std::string& path, size_t max_bytes = kMaxTextFileBytes);

class LineIndex {
 public:
  LineIndex(std::string path, std::string_view text);
  // 1-based line of a byte offset (0 for a negative one: no place).
  size_t LineOf(ptrdiff_t offset) const;
  // "path:line: msg"
  std::string At(ptrdiff_t offset, std::string_view msg) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<size_t> starts_;
};

}  // namespace frs::os
