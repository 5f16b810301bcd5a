// tests/common/envoy_yaml.h: Envoy rate limit configurations (YAML) for the
// tests, built from the descriptors they are made of.
#pragma once

#include <string>
#include <string_view>

namespace frs::testing {

// A domain's header: what its descriptors follow.
inline std::string EnvoyDomain(std::string_view domain) {
  return "domain: " + std::string(domain) + "\ndescriptors:\n";
}

// A top-level descriptor: `key`, its `value` (none when empty), a `flag`
// line such as "shadow_mode: true" (none when empty) and its rate_limit.
inline std::string EnvoyDescriptor(std::string_view key, std::string_view value, std::string_view flag,
                                   std::string_view rate_limit) {
  std::string out = "  - key: " + std::string(key) + "\n";
  if (!value.empty()) out += "    value: " + std::string(value) + "\n";
  if (!flag.empty()) out += "    " + std::string(flag) + "\n";
  return out + "    rate_limit: " + std::string(rate_limit) + "\n";
}

}  // namespace frs::testing
