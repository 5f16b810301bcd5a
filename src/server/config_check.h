// server/config_check.h: `frsd -t`: is this configuration one frsd would
// start with? srv.xml, map.xml, the time zone, the allow list, whether every
// biz's node fits the store's chains, and, when the store exists, whether
// its files match the geometry and format. Nothing is created, mapped or
// locked, so it is safe beside a running frsd (before a reload or restart).
//
// Thread safety: a plain function.
#pragma once

#include <cstdio>
#include <string>

namespace frs::server {

// Prints one line ending in "ok" to `out` and returns 0, or one
// "file:line: what is wrong" line per problem to `err` and returns 1.
int CheckConfiguration(const std::string& srv_xml, std::FILE* out, std::FILE* err);

}  // namespace frs::server
