// config/service_options.h: the store and engine options a srv.xml implies.
//
// frsd's master and workers and frsctl all open "the store and the map of
// this srv.xml"; they differ only in whether a missing store may be created
// and in how they report, so the mapping from SrvConfig lives in one place:
// frs/service.h's, for a ServiceConfig, which is SrvConfig's public part.
//
// Thread safety: pure functions.
#pragma once

#include "config/srv_config.h"
#include "frs/engine.h"
#include "frs/service.h"
#include "frs/store.h"

namespace frs {

// What a program beside frsd is told of `cfg` (frs/service.h).
ServiceConfig ServiceConfigOf(const SrvConfig& cfg);

inline StoreOptions StoreOptionsFor(const SrvConfig& cfg, bool create_if_missing) {
  return StoreOptionsFor(ServiceConfigOf(cfg), create_if_missing);
}

inline EngineOptions EngineOptionsFor(const SrvConfig& cfg, Store* store) {
  return EngineOptionsFor(ServiceConfigOf(cfg), store);
}

}  // namespace frs
