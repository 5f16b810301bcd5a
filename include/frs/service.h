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
//
// The map is the one map.xml held when the engine opened: frsd's reloads
// (SIGHUP) reach its own processes, not this one. A program that must follow
// them calls engine->Reload() itself (on its own SIGHUP, or when map.xml's
// mtime moves); until then the same key may be decided by two maps.
//
// A program that opens the store and the engine itself (read-only, or later
// than it reads the configuration) reads srv.xml with ReadServiceConfig and
// opens them with StoreOptionsFor and EngineOptionsFor: the options frsd's
// own processes take from the same file.
//
// The store files are shared mappings: a file truncated under the program
// (an operator, a restore) raises SIGBUS at the next touch, which kills it
// unless it called frs::InstallSigbusGuard() (frs/sigbus_guard.h) at its
// start, as frsd and frsctl do; then the operation fails with Unavailable,
// naming the file. A program that runs for long also calls
// svc->store->CheckFiles() now and then (frsd: once a second): a deleted
// file is seen there, not by a touch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frs/admin_engine.h"
#include "frs/engine.h"
#include "frs/ring.h"
#include "frs/status.h"
#include "frs/store.h"

namespace frs {

struct ServiceOpenOptions {
  // frsd creates the store on its first start; other programs normally open
  // an existing one (a missing store is NotFound, naming the directory).
  bool create_if_missing = false;
  const Clock* clock = nullptr;  // default: the system clock
  // A cluster shard's store with replicas (<cluster replicas="1">) is
  // refused unless this is set (InvalidArgument, saying why): frsd's
  // workers send each change to the route's other holder, and a change
  // made here reaches none, so a failover grants it again (found from
  // outside: 5 leases held of 3). Set it to read (query, get, inspect),
  // or for a shard stopped for good: it does not make the engine read-only,
  // and a program that decides should ask frsd. Such a store is never made
  // here (create_if_missing is refused): frsd makes it at its first start,
  // which takes the other shards' snapshots. ReadServiceConfig with
  // StoreOptionsFor and EngineOptionsFor opens a store without this check.
  bool unreplicated = false;
};

struct Service {
  std::unique_ptr<Store> store;         // declared first: destroyed last
  std::unique_ptr<AdminEngine> engine;  // a caller that decides uses its Engine verbs
  std::string config_path;              // the srv.xml, absolute
};

// Reads srv.xml (errors are "file:line: what is wrong"; a file that cannot
// be read says why: not there, or whose it is and as whom this runs), opens
// its store and its map.xml. A srv.xml that is not there is InvalidArgument
// (a wrong path, as frsctl's exit 2 says), a store not made yet NotFound. A
// process run as root on a store directory
// another user owns is refused (IOError naming that user): what its engine
// made there would be root's, and frsd, run as that user, could not open it.
Result<Service> OpenFromConfig(const std::string& srv_xml, const ServiceOpenOptions& opts = {});

// What srv.xml says about the files an frsd serves and its place in the
// cluster (docs/configuration.md): what a program beside it needs. Paths are
// absolute (srv.xml's own are relative to its folder).
struct ServiceConfig {
  std::string path;  // srv.xml
  std::string store_dir;
  StoreGeometry geometry;
  std::string map_path;
  std::string timezone;                   // of the calendar rules and the statistics' days
  std::string pidfile;                    // "" = none
  std::string admin_token;                // "" = admin requests over HTTP are refused
  std::string host;                       // <listen host>: with port, where frsd answers (an IPv6 one in [])
  uint16_t port = 0;                      // <listen port>; see ReadServiceConfig for port 0
  uint32_t max_body_bytes = 0;            // the largest request body frsd takes
  bool grpc = false;                      // <grpc>: the map frsd runs holds Envoy's descriptors too
  std::string cluster_self;               // "host:port": this shard as the ring names it
  std::vector<RingShard> cluster_shards;  // empty: a lone server owning every route
  uint32_t cluster_replicas = 0;
  std::string cluster_lease_key;       // "" = each store's own lease.key
  std::string cluster_lease_key_also;  // a rotation's second key ("" = none)
};

// Reads srv.xml. With <listen port="0"> the port (and a cluster self that
// follows <listen>) is the one the running frsd bound, from its store
// directory's frsd.listen; with no frsd running it stays 0.
Result<ServiceConfig> ReadServiceConfig(const std::string& srv_xml);

// What the frsd of a store directory runs, which may differ from the files
// on disk: a map.xml edited but not reloaded (or refused at reload), a
// <timezone> that needs a restart. frsd writes it (frsd.running) at start and
// at every reload it applies, and removes it at a clean stop; frsctl shows
// counts under it while that frsd runs. Trust it only while `pid` holds the
// store lock (frsd.lock): a killed frsd leaves it behind.
struct RunningConfig {
  int64_t pid = 0;         // frsd's master
  std::string timezone;    // the <timezone> it started with
  std::string map_path;    // the map.xml it read
  std::string map_digest;  // MapDigest of the map.xml bytes it read
  std::string map_text;    // the map it runs (with <grpc>, Envoy's bizzes added)
};
// Reads store_dir/frsd.running: NotFound when there is none, Corruption when
// it is not one frsd wrote.
Result<RunningConfig> ReadRunningConfig(const std::string& store_dir);
// The same of store_dir/frsd.last: what the last run ran, kept when it stopped.
Result<RunningConfig> ReadLastRunConfig(const std::string& store_dir);
// Writes it whole (frsd's).
Status WriteRunningConfig(const std::string& store_dir, const RunningConfig& rc);
// XXH3-64 of a map.xml's bytes, in 16 hex digits: whether two are the same.
std::string MapDigest(std::string_view map_xml);

// The srv.xml read without -c: $FRS_CONF when set, else the one installed
// beside the program that calls it (PREFIX/etc/frs/srv.xml, PREFIX the
// directory above the program's own; /etc/frs/srv.xml for the prefixes /usr
// and /). frsd and frsctl use it; a program of your own in /usr/local/bin
// gets /usr/local/etc/frs/srv.xml, not the .deb's /etc/frs/srv.xml: pass
// frsd's path to OpenFromConfig instead.
std::string DefaultServiceConfigPath();

// The options frsd opens the store and the engine with. EngineOptions's map
// is map.xml as it is: with <grpc>, frsd adds Envoy's descriptors to it.
StoreOptions StoreOptionsFor(const ServiceConfig& cfg, bool create_if_missing);
EngineOptions EngineOptionsFor(const ServiceConfig& cfg, Store* store);

}  // namespace frs
