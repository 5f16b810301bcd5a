#include "server/envoy_map.h"

#include "envoy/envoy_config.h"
#include "envoy/envoy_rules.h"

namespace frs::server {

Result<ComposedMap> ComposeEnvoyMap(const SrvConfig& cfg, std::string map_xml) {
  ComposedMap out;
  if (!cfg.grpc) {
    out.map_text = std::move(map_xml);
    return out;
  }
  Result<std::string> bundle = envoy::ReadEnvoyDir(cfg.grpc_config);
  if (!bundle.ok()) return bundle.status();
  Result<envoy::EnvoyConfig> parsed = envoy::ParseEnvoyBundle(bundle.value());
  if (!parsed.ok()) return parsed.status();
  auto rules = envoy::EnvoyRules::Compile(parsed.value());
  if (!rules.ok()) return rules.status();
  Result<std::string> composed = envoy::ComposeMap(map_xml, cfg.map_path, *rules.value());
  if (!composed.ok()) return composed.status();
  out.map_text = std::move(composed.value());
  out.envoy_bundle = std::move(bundle.value());
  out.envoy_limits = (*rules)->limits().size();
  out.envoy_domains = parsed->domains.size();
  return out;
}

}  // namespace frs::server
