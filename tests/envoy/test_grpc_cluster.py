"""tests/envoy/test_grpc_cluster.py: ShouldRateLimit from a real gRPC client
(python3-grpcio) against two frsd shards of one <cluster>, as Envoy's
round-robin over its rate limit cluster would send it: a shard answers the
descriptors whose counter key it owns; with enforce="1" a call with a
descriptor the other shard owns fails UNAVAILABLE (14) naming that shard
(Envoy then applies failure_mode_deny), nothing of it counted; with
enforce="0" the shard counts it itself. Skipped (77) without grpcio or
protoc."""
import re
import unittest

import envoy_frsd

grpc, rls_pb2 = envoy_frsd.load_grpc()[:2]
Resp = rls_pb2.RateLimitResponse

# Day windows: a test cannot straddle a window's end but at midnight UTC.
YAML = """domain: rl
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 2}
"""
USERS = ["u%d" % i for i in range(40)]


def request(*users):
    # domain, key and value are `bytes` in FRS's .proto (identical on the wire)
    r = rls_pb2.RateLimitRequest(domain=b"rl")
    for u in users:
        r.descriptors.add().entries.add(key=b"user", value=u.encode())
    return r


class Pair:
    """Two shards started on ports of their own binding, then told the
    cluster (the ports they got) by a live reload of srv.xml."""

    def __init__(self, enforce, replicas=False):
        extra = '  <admin token="pair"/>\n' if replicas else ""
        self.shards = [envoy_frsd.Frsd({"rl.yaml": YAML}, workers=1, extra=extra) for _ in range(2)]
        for s in self.shards:
            s.start()
        names = ["127.0.0.1:%d" % s.port for s in self.shards]
        for s, name in zip(self.shards, names):
            with open(s.path("srv.xml")) as f:
                text = f.read()
            text = text.replace('port="0"', 'port="%d"' % s.port, 1)
            cluster = '  <cluster self="%s" enforce="%d"%s>\n%s  </cluster>\n' % (
                name,
                1 if enforce else 0,
                ' replicas="1"' if replicas else "",
                "".join("    <shard>%s</shard>\n" % n for n in names),
            )
            with open(s.path("srv.xml"), "w") as f:
                f.write(text.replace("</frs>", cluster + "</frs>"))
            if not s.reload():
                raise RuntimeError("the cluster was refused: " + s.log())
        self.names = names

    def call(self, i, req):
        return envoy_frsd.should_rate_limit(self.shards[i].grpc_port, req)

    def metric(self, i, name):
        m = re.search(r"^%s (\d+)$" % re.escape(name), self.shards[i].get("/metrics")[1], re.M)
        return int(m.group(1)) if m else None

    def remove(self):
        for s in self.shards:
            s.remove()


class GrpcCluster(unittest.TestCase):
    def test_enforce_refuses_what_the_other_shard_owns_naming_it(self):
        pair = Pair(enforce=True)
        try:
            owned = [set(), set()]
            for i in range(2):
                for u in USERS:
                    try:
                        r = pair.call(i, request(u))
                        self.assertEqual(r.overall_code, Resp.OK)
                        self.assertEqual(r.statuses[0].limit_remaining, 1)
                        owned[i].add(u)
                    except grpc.RpcError as e:
                        self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE)
                        self.assertIn("belongs to shard " + pair.names[1 - i], e.details())
            # Every user is answered by exactly one shard: the one the ring names.
            self.assertEqual(owned[0] | owned[1], set(USERS))
            self.assertEqual(owned[0] & owned[1], set())
            self.assertTrue(owned[0] and owned[1])
            # A refused call counts none of its descriptors, its own included.
            mine, theirs = sorted(owned[0])[0], sorted(owned[1])[0]
            with self.assertRaises(grpc.RpcError) as e:
                pair.call(0, request(mine, theirs))
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
            self.assertEqual(pair.call(0, request(mine)).statuses[0].limit_remaining, 0)
            self.assertEqual(pair.metric(0, "frs_misrouted_total"), len(owned[1]) + 1)
            self.assertEqual(pair.metric(1, "frs_misrouted_total"), len(owned[0]))
        finally:
            pair.remove()

    def test_without_enforce_each_shard_counts_what_it_is_sent(self):
        pair = Pair(enforce=False)
        try:
            codes = [pair.call(0, request(u)).overall_code for u in USERS for _ in range(3)]
            # Every user, owned or not, reaches its limit of 2 at shard 0.
            self.assertEqual(codes, [Resp.OK, Resp.OK, Resp.OVER_LIMIT] * len(USERS))
            misrouted = pair.metric(0, "frs_misrouted_total")
            self.assertTrue(0 < misrouted < 3 * len(USERS), misrouted)
            # Shard 1's counts are its own: fail-open splits a limit between shards.
            for u in USERS:
                self.assertEqual(pair.call(1, request(u)).statuses[0].limit_remaining, 1)
        finally:
            pair.remove()

    def test_a_replicated_pair_counts_every_descriptor_once_whichever_shard_a_call_reaches(self):
        # envoyproxy/ratelimit's deployment: N replicas over one Redis, Envoy
        # spreading calls round robin. Here: two frsd, each the other's
        # successor (<cluster replicas="1">), so both hold every counter.
        pair = Pair(enforce=True, replicas=True)
        try:
            # Round robin: each user's calls alternate between the shards.
            for u in USERS[:20]:
                codes = [pair.call(i % 2, request(u)).overall_code for i in range(3)]
                self.assertEqual(codes, [Resp.OK, Resp.OK, Resp.OVER_LIMIT], u)
            # Both hold each count: a look at either says 0 left.
            for u in USERS[:20]:
                for i in range(2):
                    r = pair.call(i, request(u))
                    self.assertEqual(r.overall_code, Resp.OVER_LIMIT, (u, i))
            # One of them killed mid-run: the other goes on from the same counts.
            for u in USERS[20:]:
                self.assertEqual(pair.call(0, request(u)).overall_code, Resp.OK, u)
            pair.shards[1].kill9_all()
            for u in USERS[20:]:
                codes = [pair.call(0, request(u)).overall_code for _ in range(2)]
                self.assertEqual(codes, [Resp.OK, Resp.OVER_LIMIT], u)
            for u in USERS[:20]:
                self.assertEqual(pair.call(0, request(u)).overall_code, Resp.OVER_LIMIT, u)
        finally:
            pair.remove()


if __name__ == "__main__":
    envoy_frsd.main()
