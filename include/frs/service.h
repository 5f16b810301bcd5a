// frs/service.h: open, in this process, exactly what an frsd of a srv.xml
// serves: its store (directory, geometry), its map, its time zone and its
// daily statistics. A program linking libfrs decides requests on the same
// files a running frsd uses, with the same locks, and sees its counts.
//
//   auto svc = frs::OpenFromConfig("/etc/frs/srv.xml");
//   if (!svc.ok()) { fprintf(stderr, "%s\n", svc.status().ToString().c_str()); return 1; }
//   frs::Request req;
//   req.cmd = frs::Cmd::kAcquire; req.biz = "login"; req.key = "user:42";
//   frs::Decision d = svc->engine->Execute(req);
//
// Thread safety: as Store and Engine (both safe from many threads). A
// Service is moved, not copied; the engine is destroyed before the store.
// A thread holds a writer entry of the shared files only while it writes
// (frs/engine.h): an idle thread locks no one out.
#pragma once

#include <memory>
#include <string>

#include "frs/admin_engine.h"
#include "frs/status.h"
#include "frs/store.h"

namespace frs {

struct ServiceOpenOptions {
  // frsd creates the store on its first start; other programs normally open
  // an existing one (a missing store is NotFound, naming the directory).
  bool create_if_missing = false;
  const Clock* clock = nullptr;  // default: the system clock
};

struct Service {
  std::unique_ptr<Store> store;         // declared first: destroyed last
  std::unique_ptr<AdminEngine> engine;  // a caller that decides uses its Engine verbs
  std::string config_path;              // the srv.xml, absolute
};

// Reads srv.xml (errors are "file:line: what is wrong"), opens its store and
// its map.xml.
Result<Service> OpenFromConfig(const std::string& srv_xml, const ServiceOpenOptions& opts = {});

}  // namespace frs
