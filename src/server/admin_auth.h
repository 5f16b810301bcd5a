// server/admin_auth.h: the admin token check for set/delete/reset.
//
// The comparison takes time independent of where the strings differ (and of
// the given token's length beyond the configured one), so a client cannot
// learn the token byte by byte from response times.
//
// Thread safety: pure functions.
#pragma once

#include <string_view>

namespace frs::server {

enum class AdminAuth { kOk, kDisabled, kRefused };

// kDisabled when no token is configured (admin over HTTP is off).
AdminAuth CheckAdminToken(std::string_view configured, std::string_view given);

}  // namespace frs::server
