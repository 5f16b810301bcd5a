// config/service_options.h: the store and engine options a srv.xml implies.
//
// frsd's master and workers and frsctl all open "the store and the map of
// this srv.xml"; they differ only in whether a missing store may be created
// and in how they report, so the mapping from SrvConfig lives here once.
#pragma once

#include "config/srv_config.h"
#include "frs/engine.h"
#include "frs/store.h"

namespace frs {

inline StoreOptions StoreOptionsFor(const SrvConfig& cfg, bool create_if_missing) {
  StoreOptions so;
  so.dir = cfg.store_dir;
  so.geometry = cfg.geometry;
  so.create_if_missing = create_if_missing;
  return so;
}

// The daily statistics file lives beside the store files.
inline EngineOptions EngineOptionsFor(const SrvConfig& cfg, Store* store) {
  EngineOptions eo;
  eo.map_path = cfg.map_path;
  eo.timezone = cfg.timezone;
  eo.store = store;
  eo.stats_dir = cfg.store_dir;
  eo.lease_key_file = cfg.cluster_lease_key;
  return eo;
}

}  // namespace frs
