// server/envoy_map.h: the engine's map with <grpc config>'s Envoy
// descriptors in it. frsd's start, every reload and frsd -t call this one
// function, so all three refuse and accept the same files.
//
// Biz ids: the master owns the assignment of Envoy descriptors' biz ids. It
// reads the store directory's envoy.ids ("NAME ID PATH" lines: a name is
// bound to one descriptor path for good), gives new names
// free ids (envoy/envoy_rules.h AssignEnvoyIds: an assigned id never moves,
// a removed name's id stays reserved), writes the file whole (temp file,
// fsync, rename) before the map is used, and appends the table to the
// bundle the workers receive, so every process compiles the same ids from
// the bytes it is handed. kill -9 at any point leaves either the old file
// (no process used the new ids) or the new one.
//
// Thread safety: a plain function (the master's thread only, for writes).
#pragma once

#include <string>
#include <string_view>

#include "config/srv_config.h"
#include "frs/status.h"

namespace frs::server {

struct ComposedMap {
  std::string map_text;      // map.xml's bytes, with the Envoy bizzes before </map>
  std::string envoy_bundle;  // <grpc config>'s files and the ids (envoy/envoy_config.h); "" without <grpc>
  size_t envoy_limits = 0;   // rate-limited descriptor paths
  size_t envoy_domains = 0;
  std::string map_digest;  // frs::MapDigest of map.xml's bytes as read (frsd.running)
};

// Without <grpc>, map_xml as it is. Errors are "file:line: message" (a
// YAML file's, or map.xml's for a biz in the range reserved for Envoy).
// `persist_ids` false (frsd -t): envoy.ids is read, never written.
Result<ComposedMap> ComposeEnvoyMap(const SrvConfig& cfg, std::string map_xml, bool persist_ids = true);

// What two shards compare to tell whether they count by the same rules
// (replicas: "runs another map"): frs::MapDigest of a composed map's text
// with its XML comments and layout left out (blanks between tags, and
// within a tag all but one space between its name and attributes; values
// in quotes count as they are). Neither is a rule, and the composed map's
// comments name each Envoy biz's YAML file by its absolute path, which
// differs between shards whose <grpc config> lies elsewhere. Attributes in
// another order still count as another map.
std::string RulesDigest(std::string_view map_text);

}  // namespace frs::server
