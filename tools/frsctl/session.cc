// frsctl/session.cc: opening srv.xml, the store and the engine for a command.
#include "session.h"

#include <unistd.h>

#include <cstdio>

#include "config/service_options.h"
#include "frs/clock.h"
#include "os/store_dir.h"
#include "os/text_file.h"
#include "server/envoy_map.h"

namespace frs::ctl {

int64_t Session::NowMs() const { return SystemClock::Default()->NowMs(); }

Status OpenStoreAndEngine(Session* s, bool create, bool engine) {
  StoreOptions so = StoreOptionsFor(s->cfg, create);
  // Reading commands work on a store that cannot be written here (a
  // read-only file system, a backup mounted read-only): without locks, see
  // StoreOptions::read_only.
  const std::string first = os::store_dir::In(s->cfg.store_dir, os::store_dir::StoreFileName(0));
  if (s->reads_only && ::access(first.c_str(), F_OK) == 0 &&
      (::access(first.c_str(), W_OK) != 0 || ::access(s->cfg.store_dir.c_str(), W_OK) != 0)) {
    so.read_only = true;
    so.create_if_missing = false;
    s->opened_read_only = true;
    std::fprintf(stderr, "frsctl: %s cannot be written here; reading it without locks\n", s->cfg.store_dir.c_str());
  }
  Result<std::unique_ptr<Store>> store = Store::Open(so);
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
  EngineOptions eo = EngineOptionsFor(s->cfg, s->store.get());
  eo.read_only = s->opened_read_only;
  if (s->cfg.grpc) {
    // The map frsd runs: map.xml with <grpc config>'s descriptors in it, under
    // the ids the running frsd gave them (envoy.ids, read, never written), so
    // every command names an Envoy descriptor's biz as frsd counts it.
    Result<std::string> text = os::ReadTextFile(s->cfg.map_path);
    if (!text.ok()) return text.status();
    Result<server::ComposedMap> composed =
        server::ComposeEnvoyMap(s->cfg, std::move(text).value(), /*persist_ids=*/false);
    if (!composed.ok()) return composed.status();
    eo.map_text = std::move(composed->map_text);
  }
  Result<std::unique_ptr<AdminEngine>> e = AdminEngine::Open(eo);
  if (!e.ok()) return e.status();
  s->engine = std::move(e).value();
  return Status::OK();
}

Status OpenSession(const std::string& config_path, Needs needs, Session* s) {
  if (needs == Needs::kNothing) return Status::OK();
  Result<SrvConfig> cfg = LoadSrvConfig(config_path);
  if (!cfg.ok()) return cfg.status();
  s->cfg = std::move(cfg).value();
  if (s->cfg.port == 0) {
    // <listen port="0">: the running frsd's address names this shard (its
    // own words in the store directory); with no frsd running, 0 it stays.
    if (Result<std::string> read = os::ReadTextFile(ListenAddressPath(s->cfg)); read.ok()) {
      const std::string& line = read.value();
      const size_t colon = line.rfind(':');
      unsigned port = 0;
      if (colon != std::string::npos && std::sscanf(line.c_str() + colon + 1, "%u", &port) == 1 && port <= 65535)
        ApplyBoundPort(&s->cfg, static_cast<uint16_t>(port));
    }
  }
  if (needs == Needs::kConfig) return Status::OK();
  return OpenStoreAndEngine(s, /*create=*/false, needs == Needs::kEngine);
}

Result<uint16_t> ResolveBizArg(const Session& s, const std::string& biz) {
  Result<uint16_t> id = s.engine->ResolveBiz(biz);
  if (id.ok()) return id;
  std::string known;
  for (const BizInfo& b : s.engine->Bizzes()) {
    if (!known.empty()) known += ", ";
    known += b.name + " (" + std::to_string(b.id) + ")";
  }
  return Status::InvalidArgument("unknown biz \"" + biz + "\": " + s.cfg.map_path + " has " +
                                 (known.empty() ? "none" : known));
}

int ExitCodeFor(const Status& s) { return s.code() == Status::Code::kInvalidArgument ? kExitUsage : kExitFail; }

}  // namespace frs::ctl
