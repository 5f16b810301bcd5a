#include "frs/service.h"

#include <cstdio>

#include "config/service_options.h"
#include "config/srv_config.h"
#include "os/path_access.h"
#include "os/text_file.h"

namespace frs {

ServiceConfig ServiceConfigOf(const SrvConfig& cfg) {
  ServiceConfig sc;
  sc.path = cfg.path;
  sc.store_dir = cfg.store_dir;
  sc.geometry = cfg.geometry;
  sc.map_path = cfg.map_path;
  sc.timezone = cfg.timezone;
  sc.pidfile = cfg.pidfile;
  sc.admin_token = cfg.admin_token;
  sc.host = cfg.host;
  sc.port = cfg.port;
  sc.max_body_bytes = cfg.max_body_bytes;
  sc.grpc = cfg.grpc;
  sc.cluster_self = cfg.cluster_self;
  sc.cluster_shards = cfg.cluster_shards;
  sc.cluster_replicas = cfg.cluster_replicas;
  sc.cluster_lease_key = cfg.cluster_lease_key;
  sc.cluster_lease_key_also = cfg.cluster_lease_key_also;
  return sc;
}

StoreOptions StoreOptionsFor(const ServiceConfig& cfg, bool create_if_missing) {
  StoreOptions so;
  so.dir = cfg.store_dir;
  so.geometry = cfg.geometry;
  so.create_if_missing = create_if_missing;
  return so;
}

// The daily statistics file lives beside the store files.
EngineOptions EngineOptionsFor(const ServiceConfig& cfg, Store* store) {
  EngineOptions eo;
  eo.map_path = cfg.map_path;
  eo.timezone = cfg.timezone;
  eo.store = store;
  eo.stats_dir = cfg.store_dir;
  eo.lease_key_file = cfg.cluster_lease_key;
  eo.lease_key_also_file = cfg.cluster_lease_key_also;
  return eo;
}

Result<ServiceConfig> ReadServiceConfig(const std::string& srv_xml) {
  Result<SrvConfig> cfg = LoadSrvConfig(srv_xml);
  if (!cfg.ok()) return cfg.status();
  if (cfg->port == 0) {
    // <listen port="0">: the running frsd's address names this shard (its
    // own words in the store directory); with no frsd running, 0 it stays.
    if (Result<std::string> read = os::ReadTextFile(ListenAddressPath(*cfg)); read.ok()) {
      const std::string& line = read.value();
      const size_t colon = line.rfind(':');
      unsigned port = 0;
      if (colon != std::string::npos && std::sscanf(line.c_str() + colon + 1, "%u", &port) == 1 && port <= 65535)
        ApplyBoundPort(&cfg.value(), static_cast<uint16_t>(port));
    }
  }
  return ServiceConfigOf(*cfg);
}

std::string DefaultServiceConfigPath() { return DefaultSrvConfigPath(); }

Result<Service> OpenFromConfig(const std::string& srv_xml, const ServiceOpenOptions& opts) {
  Result<SrvConfig> cfg = LoadSrvConfig(srv_xml);
  if (!cfg.ok()) return cfg.status();
  if (cfg->cluster_replicas > 0 && !opts.unreplicated)
    return Status::InvalidArgument(
        cfg->path +
        ": this frsd is a cluster shard with replicas=\"1\": a change made in this process reaches no other holder "
        "of its route (frsd's workers send theirs), and a failover would grant it again; ask frsd over HTTP, or "
        "open it with ServiceOpenOptions::unreplicated to read only (docs/install.md, \"The library\")");
  // A store a replicated shard's frsd did not make itself takes no
  // snapshot at that frsd's first start (it is not new there): the counts
  // the other shards hold for its routes would be missing from it.
  if (cfg->cluster_replicas > 0 && opts.create_if_missing)
    return Status::InvalidArgument(cfg->path +
                                   ": a cluster shard with replicas=\"1\" makes its store at its first start, which "
                                   "then takes the other shards' snapshots: create_if_missing is refused here");
  Service svc;
  svc.config_path = cfg->path;
  // Before the store, which a create would make root's too.
  if (Status s = os::RootOnAnotherUsersStore(cfg->store_dir); !s.ok()) return s;
  Result<std::unique_ptr<Store>> store = Store::Open(StoreOptionsFor(*cfg, opts.create_if_missing));
  if (!store.ok()) return store.status();
  svc.store = std::move(store).value();
  EngineOptions eo = EngineOptionsFor(*cfg, svc.store.get());
  eo.clock = opts.clock;
  Result<std::unique_ptr<AdminEngine>> engine = AdminEngine::Open(eo);
  if (!engine.ok()) return engine.status();
  svc.engine = std::move(engine).value();
  return svc;
}

}  // namespace frs
