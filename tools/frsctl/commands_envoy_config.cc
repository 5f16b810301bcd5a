// frsctl envoy-config: the map.xml that envoyproxy/ratelimit's YAML files
// mean, printed as <grpc config> compiles them (frs/envoy_map.h).
#include <cstdio>

#include "commands.h"
#include "frs/envoy_map.h"
#include "json_out.h"

namespace frs::ctl {

Result<int> RunEnvoyConfig(Session& s, const EnvoyConfigArgs& a) {
  Result<std::string> map = EnvoyFilesAsMapXml(a.files, a.merge_domains);
  if (!map.ok()) return map.status();
  if (s.json) {
    // The same text, as one JSON string: what --json promises of every
    // command (a program reads one object), not XML on standard output.
    JsonOut j;
    j.BeginObject();
    j.Key("files").BeginArray();
    for (const std::string& f : a.files) j.String(f);
    j.EndArray();
    j.Key("map_xml").String(*map);
    j.EndObject();
    std::printf("%s\n", j.str().c_str());
    return kExitOk;
  }
  std::fputs(map->c_str(), stdout);
  return kExitOk;
}

}  // namespace frs::ctl
