// tests/common/example_conf.h: the example configuration the tests load, as
// shipped in conf/ and as the docs show it: map.xml ("the example map",
// docs/rules.md) and srv.xml. FRS_SOURCE_DIR: tests/CMakeLists.txt.
#pragma once

#include <string>

#include "common/files.h"

namespace frs::testing {

// conf/`name`.
inline std::string ConfPath(const std::string& name) { return FRS_SOURCE_DIR "/conf/" + name; }

// The text of conf/map.xml ("" when it cannot be read: every parse of it
// then fails loudly).
inline std::string ExampleMap() { return ReadFile(ConfPath("map.xml")); }

// The example map with more <biz> elements (`bizzes`) before its </map>.
inline std::string ExampleMapWith(const std::string& bizzes) {
  std::string map = ExampleMap();
  const size_t end = map.rfind("</map>");
  if (end != std::string::npos) map.insert(end, bizzes);
  return map;
}

}  // namespace frs::testing
