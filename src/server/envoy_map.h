// server/envoy_map.h: the engine's map with <grpc config>'s Envoy
// descriptors in it. frsd's start, every reload and frsd -t call this one
// function, so all three refuse and accept the same files.
//
// Thread safety: a plain function.
#pragma once

#include <string>

#include "config/srv_config.h"
#include "frs/status.h"

namespace frs::server {

struct ComposedMap {
  std::string map_text;      // map.xml's bytes, with the Envoy bizzes before </map>
  std::string envoy_bundle;  // <grpc config>'s files (envoy/envoy_config.h); "" without <grpc>
  size_t envoy_limits = 0;   // rate-limited descriptor paths
  size_t envoy_domains = 0;
};

// Without <grpc>, map_xml as it is. Errors are "file:line: message" (a
// YAML file's, or map.xml's for a biz in the range reserved for Envoy).
Result<ComposedMap> ComposeEnvoyMap(const SrvConfig& cfg, std::string map_xml);

}  // namespace frs::server
