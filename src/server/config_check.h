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
#include <string_view>
#include <vector>

#include "config/srv_config.h"

namespace frs::server {

// One "map.xml:LINE: ..." line per biz whose node cannot fit srv.xml's
// <store chain> (such a biz would answer 503 on every request): frsd -t,
// frsd's start and every reload refuse such a map.
std::vector<std::string> NodeFitProblems(const SrvConfig& cfg, std::string_view map_xml);

// One "srv.xml: the decision log PATH is a FIFO, not a regular file" line
// per file srv.xml names for frsd to write (<decisions file>, <log file>,
// <pidfile>) that exists and is neither a regular file nor a character
// device: opening a FIFO for writing waits for a reader. Looks only
// (stat(2)); frsd -t and every reload refuse such a file.
std::vector<std::string> OutputPathProblems(const SrvConfig& cfg);
// A warning when the pid file's directory alone does not exist (yet), in a
// directory that does: systemd's RuntimeDirectory= makes it at each start.
// "" otherwise: the directory is there, or a deeper path is missing, which
// OutputPathProblems reports as a problem.
std::string PidDirMissing(const SrvConfig& cfg);
// "" unless this process runs as root and the store directory is another
// user's (the service user's): then what a start would do wrong, with the
// command to run instead. frsd's start refuses on it; frsd -t warns (it
// makes no file, and an operator checks as root).
std::string RootOnAnotherUsersStore(const SrvConfig& cfg);

// Prints one line ending in "ok" to `out` and returns 0, or one
// "file:line: what is wrong" line per problem to `err` and returns 1.
int CheckConfiguration(const std::string& srv_xml, std::FILE* out, std::FILE* err);

}  // namespace frs::server
