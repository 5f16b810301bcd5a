#include "frs/service.h"

#include "config/service_options.h"
#include "config/srv_config.h"

namespace frs {

Result<Service> OpenFromConfig(const std::string& srv_xml, const ServiceOpenOptions& opts) {
  Result<SrvConfig> cfg = LoadSrvConfig(srv_xml);
  if (!cfg.ok()) return cfg.status();
  Service svc;
  svc.config_path = cfg->path;
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
