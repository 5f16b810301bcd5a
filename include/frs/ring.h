// frs/ring.h: which shard of a cluster owns a route.
//
// FRS shards sit behind nginx's `upstream { hash $route consistent; }`, so
// the ring here is nginx's, point for point: every `server` line (a shard,
// spelled exactly as in the upstream block) contributes weight x 160 points,
// point j of server "HOST:PORT" at CRC-32(HOST, '\0', PORT, point j-1 as 4
// little-endian bytes) (point -1 reads as 0); a route goes to the first point
// at or after CRC-32(route), wrapping around. Equal strings, order and weights
// give the same owner nginx picks (tests/cluster check it against a real
// nginx). A route's CRC-32 is its position on the ring: it is all a node needs
// to find its owner again under another shard list.
//
// The route of a request: the `route` parameter when given, else the part of
// the key inside its first `{...}` (Redis Cluster's hash tags: the first `{`
// and the first `}` after it, used only when something lies between them),
// else the whole key. Routes are hashed byte for byte as sent.
//
// Thread safety: a Ring is immutable after Make(); share it freely.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frs/status.h"

namespace frs {

struct RingShard {
  std::string name;     // "host:port" exactly as in the proxy's `server` line
  uint32_t weight = 1;  // 1..kMaxRingWeight, nginx's `weight=`
  friend bool operator==(const RingShard&, const RingShard&) = default;
};

class Ring {
 public:
  static constexpr uint32_t kPointsPerWeight = 160;
  static constexpr uint32_t kMaxRingWeight = 1000;
  static constexpr size_t kMaxShards = 4096;

  // Refuses an empty list, an empty or duplicate name, a weight of 0 or
  // above kMaxRingWeight, naming the shard.
  static Result<Ring> Make(std::vector<RingShard> shards);

  // Whether `name` is host:port as frsd shards (and clients) reach each
  // other: a DNS name or IPv4 address, or an IPv6 address in brackets, then
  // ':' and a port 1..65535, in printable ASCII. Make() hashes any string as
  // nginx does; this is the stricter check for names that must be dialled.
  // The error says what is wrong, without the name (the caller adds it).
  static Status CheckAddress(std::string_view name);

  // CRC-32 (IEEE 802.3, as zlib and nginx) of the route: its ring position.
  static uint32_t HashRoute(std::string_view route);
  // The route a request carries (see the file comment).
  static std::string_view RouteOf(std::string_view key, std::string_view route_param);

  // Index into shards() of the owner of a ring position / of a route.
  size_t OwnerOfHash(uint32_t hash) const;
  size_t OwnerIndex(std::string_view route) const { return OwnerOfHash(HashRoute(route)); }
  const std::string& Owner(std::string_view route) const { return shards_[OwnerIndex(route)].name; }
  // Index of the route's successor: the shard nginx falls over to when the
  // owner fails, the server of the first point after the owner's that
  // belongs to another shard (nginx marks the failed peer tried and walks
  // on point by point). -1 with a single shard. The holder of a route's
  // replica (<cluster replicas="1">).
  long SuccessorOfHash(uint32_t hash) const;

  const std::vector<RingShard>& shards() const { return shards_; }
  // Index of the shard named `name`, or -1.
  long Find(std::string_view name) const;
  // A short fingerprint of the shard list (names, order, weights): two
  // shards agree on every owner when their digests are equal.
  uint32_t Digest() const;
  // Digest() as 8 lowercase hex digits: the one form every reader compares
  // (srv.xml's /stats <cluster digest>, the store's cluster.digest, the
  // replicas' questions and answers, frsctl handoff's notes).
  std::string DigestText() const;
  // The list as text, one "WEIGHT NAME" line per shard in order: what a
  // store directory keeps beside the digest (store_dir::kRingList), so that
  // a start under a changed list knows the one before it. ParseList reads it
  // back with Make()'s checks, naming a line it cannot read.
  std::string ListText() const;
  static Result<Ring> ParseList(std::string_view text);
  // Points on the ring (after nginx's removal of equal hashes).
  size_t points() const { return points_.size(); }

 private:
  struct Point {
    uint32_t hash;
    uint32_t shard;
  };
  Ring() = default;
  std::vector<RingShard> shards_;
  std::vector<Point> points_;  // sorted by hash, equal hashes kept once
};

}  // namespace frs
