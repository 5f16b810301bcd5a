// frs/envoy_map.h: the maps that envoyproxy/ratelimit's YAML files make, as
// an admin tool asks for them.
//
// frsd serves <grpc config>'s descriptors as bizzes of its map
// (docs/integrations.md): every command of frsctl on such a server needs the
// map frsd runs, and `frsctl envoy-config` prints what a set of YAML files
// means.
//
// Not installed with libfrs-dev: this header's functions live in the Envoy
// and server modules (frs_envoy, frs_server_core), which need yaml-cpp and
// protobuf and so are not part of libfrs.a. A program of this tree links
// them for it (tools/frsctl/CMakeLists.txt).
//
// Thread safety: safe from any thread; no shared state, each call reads its
// files.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "frs/status.h"

namespace frs {

// The map.xml that the YAML `files` mean, as <grpc config> compiles them
// (a directory among them: its files, as <grpc config> reads a directory):
// one biz per rate-limited descriptor path, each commented with the names
// it has and replaces, under ids derived from the names alone (a running
// frsd keeps the ids it assigned in envoy.ids, which may differ: the text
// says so). Errors name the file and line. `merge_domains`: files of one
// domain merged, as <grpc merge_domains="1"> merges them.
Result<std::string> EnvoyFilesAsMapXml(const std::vector<std::string>& files, bool merge_domains = false);

// The map the frsd of `srv_xml` serves: its map.xml, and with <grpc config>
// the descriptors of its YAML files under the ids that frsd gave them
// (envoy.ids in its store directory, read, never written). The same
// function frsd's start and `frsd -t` compose it with, so a tool names a
// descriptor's biz as frsd counts it.
Result<std::string> ServedMapText(const std::string& srv_xml);

// What <grpc config> added to a map ServedMapText (or frsd) composed: the
// bizzes of Envoy's descriptors, from the line that precedes them to the
// </map> after them; empty when it added none. Two maps whose map.xml
// differs, in layout or in bizzes, have the same part when their Envoy
// configurations (and the ids given to them) are the same.
std::string_view EnvoyPartOf(std::string_view served_map_text);

}  // namespace frs
