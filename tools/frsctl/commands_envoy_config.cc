// frsctl envoy-config: the map.xml that envoyproxy/ratelimit's YAML files
// mean, printed as <grpc config> compiles them (frs/envoy_map.h).
#include <cstdio>

#include "commands.h"
#include "frs/envoy_map.h"

namespace frs::ctl {

Result<int> RunEnvoyConfig(Session&, const EnvoyConfigArgs& a) {
  Result<std::string> map = EnvoyFilesAsMapXml(a.files);
  if (!map.ok()) return map.status();
  std::fputs(map->c_str(), stdout);
  return kExitOk;
}

}  // namespace frs::ctl
