// frsd.running: what the frsd of a store directory runs, for the tools that
// must show what it enforces (frs/service.h). A short header of "name value"
// lines, an empty line, then the map's bytes:
//
//   frsd.running 1
//   pid 4711
//   timezone America/New_York
//   map /etc/frs/map.xml
//   map_xxh3 9f86d081884c7d65
//   bytes 1234
//
//   <map>...</map>
//
// Written whole (renamed into place), so a reader sees one version or the
// previous; not synced: it is rewritten at every start and reload, and a
// reader trusts it only while its pid holds the store lock.
#include <xxhash.h>

#include <cinttypes>
#include <cstdio>
#include <string>
#include <string_view>

#include "frs/service.h"
#include "frs/store_dir.h"
#include "os/text_file.h"
#include "os/whole_file.h"

namespace frs {
namespace {

constexpr std::string_view kMagic = "frsd.running 1";

// The next line of `text` from `*at` (without its newline); false at the end.
bool NextLine(std::string_view text, size_t* at, std::string_view* line) {
  if (*at >= text.size()) return false;
  const size_t nl = text.find('\n', *at);
  if (nl == std::string_view::npos) return false;  // the header ends with an empty line
  *line = text.substr(*at, nl - *at);
  *at = nl + 1;
  return true;
}

}  // namespace

std::string MapDigest(std::string_view map_xml) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, static_cast<uint64_t>(XXH3_64bits(map_xml.data(), map_xml.size())));
  return hex;
}

Status WriteRunningConfig(const std::string& store_dir, const RunningConfig& rc) {
  std::string text(kMagic);
  text += "\npid " + std::to_string(rc.pid) + "\ntimezone " + rc.timezone + "\nmap " + rc.map_path + "\nmap_xxh3 " +
          rc.map_digest + "\nbytes " + std::to_string(rc.map_text.size()) + "\n\n" + rc.map_text;
  return os::WriteFileWhole(store_dir::In(store_dir, store_dir::kRunningConfig), text, {}).status();
}

namespace {
Result<RunningConfig> ReadRunningConfigAt(const std::string& path);
}  // namespace

Result<RunningConfig> ReadRunningConfig(const std::string& store_dir) {
  return ReadRunningConfigAt(store_dir::In(store_dir, store_dir::kRunningConfig));
}

Result<RunningConfig> ReadLastRunConfig(const std::string& store_dir) {
  return ReadRunningConfigAt(store_dir::In(store_dir, store_dir::kLastRunConfig));
}

namespace {
Result<RunningConfig> ReadRunningConfigAt(const std::string& path) {
  // The map read whole (map.xml may hold 16 MiB, and the Envoy bizzes
  // composed into it more) with the header lines before it: a map of
  // 16 MiB made a file frsctl refused as too large.
  Result<std::string> read = os::ReadTextFile(path, 2 * os::kMaxTextFileBytes);
  if (!read.ok()) return read.status();
  const std::string_view text = read.value();
  const Status damaged = Status::Corruption(path + ": not a file frsd wrote (frsd rewrites it at its next start)");
  size_t at = 0;
  std::string_view line;
  if (!NextLine(text, &at, &line) || line != kMagic) return damaged;
  RunningConfig rc;
  int64_t bytes = -1;
  while (NextLine(text, &at, &line) && !line.empty()) {
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos) return damaged;
    const std::string_view name = line.substr(0, sp);
    const std::string value(line.substr(sp + 1));
    if (name == "pid") rc.pid = std::atoll(value.c_str());
    else if (name == "timezone") rc.timezone = value;
    else if (name == "map") rc.map_path = value;
    else if (name == "map_xxh3") rc.map_digest = value;
    else if (name == "bytes") bytes = std::atoll(value.c_str());
  }
  if (!line.empty() || rc.pid <= 0 || bytes < 0 || static_cast<size_t>(bytes) != text.size() - at) return damaged;
  rc.map_text = std::string(text.substr(at));
  return rc;
}
}  // namespace

}  // namespace frs
