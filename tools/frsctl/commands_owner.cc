// frsctl owner: which shard of srv.xml's <cluster> owns a route.
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
  if (s.json) {
    JsonOut j;
    j.BeginObject().Key("route").String(route).Key("hash").Uint(hash).Key("owner").String(owner);
    j.Key("self").Bool(owner == s.cfg.cluster_self).EndObject();
    std::printf("%s\n", j.str().c_str());
  } else {
    std::printf("%s\n", owner.c_str());
  }
  return kExitOk;
}

}  // namespace frs::ctl
