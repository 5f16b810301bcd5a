// server/admin_auth.h: the admin token check for set/delete/reset.
//
// The comparison takes time independent of where the strings differ (and of
// the given token's length beyond the configured one), so a client cannot
// learn the token byte by byte from response times.
//
// Thread safety: pure functions.
#pragma once

#include <string_view>

#include "frs/key.h"

namespace frs::server {

enum class AdminAuth { kOk, kDisabled, kRefused };

// kDisabled when no token is configured (admin over HTTP is off).
AdminAuth CheckAdminToken(std::string_view configured, std::string_view given);

// Who may read what only an operator should (GET /stats: key-field values
// such as user ids): with a token configured, whoever gives it, from
// anywhere; without one, loopback peers only (the operator's own host, as
// frsctl stat runs), never the network: kDisabled for any other peer, and
// for a peer not known (null).
AdminAuth CheckAdminRead(std::string_view configured, std::string_view given, const IpAddress* peer);

// The token of an Authorization header's value "Bearer TOKEN" (the scheme in
// any case, as RFC 9110 11.1 has it), or "" for any other value.
std::string_view BearerToken(std::string_view authorization);

// 127.0.0.0/8, ::1, or an IPv4 loopback address mapped into IPv6.
bool IsLoopback(const IpAddress& peer);

}  // namespace frs::server
