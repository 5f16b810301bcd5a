// server/map_channel.h: how the master hands every worker the same map.
//
// On SIGHUP each worker used to re-read map.xml itself, so a file being
// rewritten could leave workers on different maps (limits 101 and 5 at
// once). Now only the master reads the file, once, validates the bytes, and
// publishes exactly those bytes here; workers (and a respawned worker, at
// start) take the map from here, never from the disk.
//
// The channel is a memfd the master creates before forking: a 64-byte
// header (magic, generation, length, XXH3-64 of the bytes) followed by the
// bytes. Publish writes the bytes first and the header last; a reader that
// meets a half-written publication sees a checksum that does not match and
// reads again.
//
// Thread safety: Publish from the master only; Read from any process.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "frs/status.h"
#include "os/unique_fd.h"

namespace frs::server {

class MapChannel {
 public:
  static Result<MapChannel> Create();

  // Master: makes `map_xml`, with the srv.xml it was read under, current
  // (generation + 1). Workers apply srv.xml's live settings from these bytes.
  // `envoy` is the bundle of <grpc config>'s YAML files (envoy/envoy_config.h),
  // "" without one; map_xml then already holds their bizzes. `previous` is
  // the master's record of the shard list before its last <cluster> change
  // (Ring::ListText, "" for none): a worker that applies two changes at once
  // (a second SIGHUP before its turn) would otherwise take its own list,
  // two changes back, for it.
  Status Publish(std::string_view srv_xml, std::string_view map_xml, std::string_view envoy = {},
                 std::string_view previous = {});

  struct Map {
    uint64_t generation = 0;    // 0: nothing published yet
    std::string text;           // map.xml
    std::string srv_text;       // srv.xml ("" when published without it)
    std::string envoy_text;     // the <grpc config> bundle ("" without one)
    std::string previous_list;  // the shard list before the last change ("" for none)
  };
  // The current map; retries a publication caught half-written.
  Result<Map> Read() const;

 private:
  MapChannel() = default;
  os::UniqueFd fd_;
  uint64_t generation_ = 0;
};

}  // namespace frs::server
