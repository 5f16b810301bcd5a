#include "server/admin_auth.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace frs::server {

std::string_view BearerToken(std::string_view authorization) {
  static constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return {};
  for (size_t i = 0; i < kScheme.size(); ++i)
    if ((authorization[i] | 0x20) != kScheme[i]) return {};  // ' ' | 0x20 is ' '
  // The scheme and the token are parted by one or more spaces (RFC 9110
  // 11.4's 1*SP): "Bearer  T" is T.
  authorization.remove_prefix(kScheme.size());
  while (!authorization.empty() && authorization.front() == ' ') authorization.remove_prefix(1);
  return authorization;
}

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

AdminAuth CheckAdminRead(std::string_view configured, std::string_view given, const IpAddress* peer) {
  if (!configured.empty()) return CheckAdminToken(configured, given);
  return peer != nullptr && IsLoopback(*peer) ? AdminAuth::kOk : AdminAuth::kDisabled;
}

bool IsLoopback(const IpAddress& peer) {
  static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static constexpr unsigned char kLoop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  if (!peer.v6) return peer.addr[0] == 127;
  if (std::memcmp(peer.addr, kMapped, sizeof kMapped) == 0) return peer.addr[12] == 127;
  return std::memcmp(peer.addr, kLoop6, sizeof kLoop6) == 0;
}

}  // namespace frs::server
