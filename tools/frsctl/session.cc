// frsctl/session.cc: opening srv.xml, the store and the engine for a command.
#include "session.h"

#include "config/service_options.h"
#include "frs/clock.h"

namespace frs::ctl {

int64_t Session::NowMs() const {
  return engine ? engine->clock()->NowMs() : SystemClock::Default()->NowMs();
}

Status OpenStoreAndEngine(Session* s, bool create, bool engine) {
  Result<std::unique_ptr<Store>> store = Store::Open(StoreOptionsFor(s->cfg, create));
  if (!store.ok()) {
    const Status& st = store.status();
    if (st.IsNotFound())
      return Status::NotFound(st.message() + (st.message().find("incomplete") != std::string::npos
                                                  ? std::string()
                                                  : ": start frsd, or create the store with `frsctl init`"));
    return st;
  }
  s->store = std::move(store).value();
  if (!engine) return Status::OK();
  Result<std::unique_ptr<Engine>> e = Engine::Open(EngineOptionsFor(s->cfg, s->store.get()));
  if (!e.ok()) return e.status();
  s->engine = std::move(e).value();
  return Status::OK();
}

Status OpenSession(const std::string& config_path, Needs needs, Session* s) {
  Result<SrvConfig> cfg = LoadSrvConfig(config_path);
  if (!cfg.ok()) return cfg.status();
  s->cfg = std::move(cfg).value();
  if (needs == Needs::kConfig) return Status::OK();
  return OpenStoreAndEngine(s, /*create=*/false, needs == Needs::kEngine);
}

Result<uint16_t> ResolveBizArg(const Session& s, const std::string& biz) {
  Result<uint16_t> id = s.engine->ResolveBiz(biz);
  if (id.ok()) return id;
  std::string known;
  for (const auto& [bid, name] : s.engine->Bizzes()) {
    if (!known.empty()) known += ", ";
    known += name + " (" + std::to_string(bid) + ")";
  }
  return Status::InvalidArgument("unknown biz \"" + biz + "\": " + s.cfg.map_path + " has " +
                                 (known.empty() ? "none" : known));
}

int ExitCodeFor(const Status& s) {
  return s.code() == Status::Code::kInvalidArgument ? kExitUsage : kExitFail;
}

}  // namespace frs::ctl
