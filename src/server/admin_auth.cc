#include "server/admin_auth.h"

#include <cstddef>
#include <cstdint>

namespace frs::server {

AdminAuth CheckAdminToken(std::string_view configured, std::string_view given) {
  if (configured.empty()) return AdminAuth::kDisabled;
  // Walk the configured token's length whatever `given` is; fold the length
  // difference into the accumulator instead of returning early.
  uint32_t diff = static_cast<uint32_t>(configured.size() ^ given.size());
  volatile uint8_t acc = 0;
  for (size_t i = 0; i < configured.size(); ++i) {
    uint8_t g = i < given.size() ? static_cast<uint8_t>(given[i]) : 0;
    acc = static_cast<uint8_t>(acc | (static_cast<uint8_t>(configured[i]) ^ g));
  }
  return (diff | acc) == 0 ? AdminAuth::kOk : AdminAuth::kRefused;
}

}  // namespace frs::server
