// frs/envoy_map.h's EnvoyFilesAsMapXml: `frsctl envoy-config`'s text.
#include "envoy/envoy_config.h"
#include "envoy/envoy_rules.h"
#include "frs/envoy_map.h"

namespace frs {

Result<std::string> EnvoyFilesAsMapXml(const std::vector<std::string>& files, bool merge_domains) {
  // A bundle of the files named, as frsd builds one from its directory.
  Result<std::vector<std::string>> paths = envoy::ExpandEnvoyPaths(files);
  if (!paths.ok()) return paths.status();
  Result<std::string> bundle = envoy::BundleOfFiles(paths.value());
  if (!bundle.ok()) return bundle.status();
  auto rules = envoy::EnvoyRules::FromBundle(bundle.value(), merge_domains);
  if (!rules.ok()) return rules.status();
  std::string out =
      "<map>\n"
      "  <!-- from envoyproxy/ratelimit configuration: one biz per rate-limited descriptor path;\n"
      "       the counter key of a request descriptor is its entries as KEY_VALUE joined by '_'\n"
      "       (a '_' in a value that another entry follows written %5F: docs/integrations.md).\n"
      "       Biz ids here are derived from the names alone: a running frsd keeps the ids it\n"
      "       assigned in its store directory (envoy.ids), which can differ. -->\n";
  // Names come from the YAML: escaped, as a "--" in one would end the comment.
  for (const envoy::CompiledLimit& l : (*rules)->limits()) {
    if (l.name.empty() && l.replaces.empty()) continue;
    std::string what;
    if (!l.name.empty()) what = "name '" + envoy::XmlCommentText(l.name) + "'";
    for (const std::string& r : l.replaces) {
      if (!what.empty()) what += ", ";
      what += "replaces '" + envoy::XmlCommentText(r) + "'";
    }
    out += "  <!-- " + l.biz + ": " + what + " -->\n";
  }
  return out + (*rules)->MapXmlBizzes() + "</map>\n";
}

}  // namespace frs
