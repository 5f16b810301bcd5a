// frsctl envoy-config: the map.xml that envoyproxy/ratelimit's YAML files
// mean, printed as <grpc config> compiles them (envoy/envoy_rules.h).
#include <cstdio>

#include "commands.h"
#include "envoy/envoy_config.h"
#include "envoy/envoy_rules.h"

namespace frs::ctl {

Result<int> RunEnvoyConfig(Session&, const EnvoyConfigArgs& a) {
  // A bundle of the files named, as frsd builds one from its directory.
  Result<std::string> bundle = envoy::BundleOfFiles(a.files);
  if (!bundle.ok()) return bundle.status();
  auto rules = envoy::EnvoyRules::FromBundle(bundle.value());
  if (!rules.ok()) return rules.status();
  std::printf("<map>\n");
  std::printf(
      "  <!-- from envoyproxy/ratelimit configuration: one biz per rate-limited descriptor path;\n"
      "       the counter key of a request descriptor is its entries as KEY_VALUE joined by '_'.\n"
      "       Biz ids here are derived from the names alone: a running frsd keeps the ids it\n"
      "       assigned in its store directory (envoy.ids), which can differ. -->\n");
  // Names come from the YAML: escaped, as a "--" in one would end the comment.
  for (const envoy::CompiledLimit& l : (*rules)->limits())
    if (!l.name.empty() || !l.replaces.empty()) {
      std::printf("  <!-- %s:", l.biz.c_str());
      if (!l.name.empty()) std::printf(" name '%s'", envoy::XmlCommentText(l.name).c_str());
      for (const std::string& r : l.replaces) std::printf(", replaces '%s'", envoy::XmlCommentText(r).c_str());
      std::printf(" -->\n");
    }
  std::printf("%s</map>\n", (*rules)->MapXmlBizzes().c_str());
  return kExitOk;
}

}  // namespace frs::ctl
