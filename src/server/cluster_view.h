// server/cluster_view.h: the cluster this server is a shard of, as the
// handler, the gRPC methods and the `stats` answer see it.
//
// Thread safety: a plain value; the ring it shares is immutable.
#pragma once

#include <memory>
#include <string>

#include "frs/ring.h"

namespace frs::server {

struct ClusterView {
  std::shared_ptr<const Ring> ring;
  std::string self;      // this shard's name on the ring
  long self_index = -1;  // in ring->shards(); -1: owns nothing (being removed)
  bool enforce = true;
  bool replicas = false;  // <cluster replicas="1">: a route's successor serves it too
  // The list this shard ran before its last <cluster> change (null: none):
  // changes its shards queued under it are still taken (handler_replica.cc).
  std::shared_ptr<const Ring> previous_ring;
  // The shared word that says the shard is still taking back its nodes
  // (ReplicaShared::catching_up; null: no shared region).
  const uint64_t* catching_up = nullptr;
};

}  // namespace frs::server
