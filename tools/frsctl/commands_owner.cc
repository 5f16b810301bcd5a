// frsctl owner: which shard of srv.xml's <cluster> owns a route (and, with
// replicas, which holds its copy: the successor).
#include <cstdio>

#include "commands.h"
#include "frs/ring.h"
#include "json_out.h"

namespace frs::ctl {

Result<int> RunOwner(Session& s, const OwnerArgs& a) {
  if (s.cfg.cluster_shards.empty())
    return Status::InvalidArgument(s.cfg.path + " has no <cluster>: a lone server owns every route");
  if (a.route.empty()) return Status::InvalidArgument("the route is empty");
  Result<Ring> ring = Ring::Make(s.cfg.cluster_shards);
  if (!ring.ok()) return Status::InvalidArgument(s.cfg.path + ": " + ring.status().message());
  const std::string_view route = a.is_key ? Ring::RouteOf(a.route, "") : std::string_view(a.route);
  const uint32_t hash = Ring::HashRoute(route);
  const std::string& owner = ring->shards()[ring->OwnerOfHash(hash)].name;
  // With replicas the successor holds every count too: an operator who
  // checks or repairs a route needs both holders.
  const long succ = s.cfg.cluster_replicas != 0 ? ring->SuccessorOfHash(hash) : -1;
  const std::string successor = succ >= 0 ? ring->shards()[static_cast<size_t>(succ)].name : std::string();
  if (s.json) {
    JsonOut j;
    j.BeginObject().Key("route").String(route).Key("hash").Uint(hash).Key("owner").String(owner);
    if (succ >= 0) j.Key("successor").String(successor);
    j.Key("self").Bool(owner == s.cfg.cluster_self).EndObject();
    std::printf("%s\n", j.str().c_str());
  } else {
    std::printf("%s\n", owner.c_str());
    if (succ >= 0) std::printf("successor %s\n", successor.c_str());
  }
  return kExitOk;
}

}  // namespace frs::ctl
