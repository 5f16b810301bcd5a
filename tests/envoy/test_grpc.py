"""tests/envoy/test_grpc.py: a real gRPC client (python3-grpcio: gRPC's C
core) against a live frsd's <grpc> listener: Envoy's ShouldRateLimit and
gRPC health, as a platform team moving from envoyproxy/ratelimit would
check them. Skipped (77) without grpcio or protoc."""
import json
import os
import re
import threading
import time
import unittest

import envoy_frsd

grpc, rls_pb2, ratelimit_pb2, health_pb2 = envoy_frsd.load_grpc()
Resp = rls_pb2.RateLimitResponse

YAML = """domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 50}
  - key: route
    value: checkout
    rate_limit: {unit: minute, requests_per_unit: %d}
  - key: client
    value: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: client
    value: internal
    rate_limit: {unlimited: true}
"""


def b(s):
    """domain, key and value are `bytes` in FRS's .proto (identical on the
    wire to Envoy's `string`): str is sent as UTF-8, bytes as they are."""
    return s if isinstance(s, bytes) else s.encode()


def request(domain, descriptors, hits_addend=0, look=False):
    r = rls_pb2.RateLimitRequest(domain=b(domain), hits_addend=hits_addend)
    for entries in descriptors:
        d = r.descriptors.add()
        for k, v in entries:
            d.entries.add(key=b(k), value=b(v))
        if look:
            d.hits_addend.value = 0
    return r


def wait_for_a_fresh_minute(margin=8):
    """Per-minute windows are aligned to the epoch: a test that needs one
    window whole waits when the current one ends within `margin` s."""
    left = 60 - time.time() % 60
    if left < margin:
        time.sleep(left + 0.2)


class Grpc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.frsd = envoy_frsd.Frsd({"edge.yaml": YAML % 3}, extra='  <decisions file="decisions.log" record="all"/>\n')
        cls.frsd.start()

    @classmethod
    def tearDownClass(cls):
        cls.frsd.remove()

    def channel(self):
        return grpc.insecure_channel("127.0.0.1:%d" % self.frsd.grpc_port)

    def call(self, req, channel=None):
        ch = channel or self.channel()
        f = ch.unary_unary(
            envoy_frsd.SHOULD_RATE_LIMIT,
            request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
            response_deserializer=Resp.FromString,
        )
        try:
            return f(req, timeout=5)
        finally:
            if channel is None:
                ch.close()

    def test_per_minute_limit_is_exact_under_8_concurrent_clients(self):
        wait_for_a_fresh_minute()
        ok, over, errors = [], [], []

        def client(i):
            with self.channel() as ch:
                for _ in range(20):
                    try:
                        r = self.call(request("edge", [[("remote_address", "198.51.100.7")]]), ch)
                        (ok if r.overall_code == Resp.OK else over).append(r.statuses[0].limit_remaining)
                    except grpc.RpcError as e:
                        errors.append(e)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(ok), 50)
        self.assertEqual(len(over), 110)
        self.assertEqual(sorted(ok), list(range(50)))  # each remaining given once
        r = self.call(request("edge", [[("remote_address", "198.51.100.7")]]))
        s = r.statuses[0]
        self.assertEqual(s.code, Resp.OVER_LIMIT)
        self.assertEqual(s.current_limit.requests_per_unit, 50)
        self.assertEqual(s.current_limit.unit, Resp.RateLimit.MINUTE)
        self.assertTrue(0 < s.duration_until_reset.seconds <= 60)
        self.assertAlmostEqual(s.duration_until_reset.seconds, 60 - time.time() % 60, delta=2)

    def test_hits_addend_and_a_look_that_counts_nothing(self):
        wait_for_a_fresh_minute()
        key = [("remote_address", "hits-%f" % time.time())]
        r = self.call(request("edge", [key], hits_addend=10))
        self.assertEqual(r.statuses[0].limit_remaining, 40)
        for _ in range(5):
            r = self.call(request("edge", [key], look=True))
            self.assertEqual(r.overall_code, Resp.OK)
            self.assertEqual(r.statuses[0].limit_remaining, 40)
        r = self.call(request("edge", [key], hits_addend=41))
        self.assertEqual(r.overall_code, Resp.OVER_LIMIT)  # 10 + 41 > 50: nothing counted
        self.assertEqual(self.call(request("edge", [key], hits_addend=40)).statuses[0].limit_remaining, 0)

    def test_negative_hits_give_back_never_below_zero_and_answer_ok(self):
        # is_negative_hits (RateLimitDescriptor field 4), as envoyproxy/
        # ratelimit takes it: the count lowered, floored at 0, OK even past
        # the limit.
        wait_for_a_fresh_minute()
        key = [("remote_address", "neg-%f" % time.time())]
        self.assertEqual(self.call(request("edge", [key], hits_addend=51)).overall_code, Resp.OVER_LIMIT)

        def give_back(n):
            r = request("edge", [key])
            r.descriptors[0].hits_addend.value = n
            r.descriptors[0].is_negative_hits = True
            return self.call(r)

        r = give_back(31)
        self.assertEqual((r.overall_code, r.statuses[0].code), (Resp.OK, Resp.OK))
        self.assertEqual(r.statuses[0].limit_remaining, 30)
        self.assertEqual(give_back(100).statuses[0].limit_remaining, 50)
        self.assertEqual(self.call(request("edge", [key])).statuses[0].limit_remaining, 49)

    def biz_totals(self):
        """frs_biz_{allowed,denied,shadow_denied}_total summed over this
        domain's descriptors (bizzes envoy.edge.*)."""
        body = self.frsd.get("/metrics")[1]
        totals = {"allowed": 0, "denied": 0, "shadow_denied": 0}
        for name in totals:
            for m in re.finditer(r'^frs_biz_%s_total\{biz="envoy\.edge\.[^"]*",[^}]*\} (\d+)$' % name, body, re.M):
                totals[name] += int(m.group(1))
        return totals

    def test_shadow_unknown_unlimited_in_request_order(self):
        wait_for_a_fresh_minute()
        before = self.biz_totals()
        for i in range(4):
            r = self.call(request("edge", [[("nothing", "x")], [("client", "internal")], [("client", "trial")]]))
            self.assertEqual(r.overall_code, Resp.OK)
            unknown, unlimited, shadow = r.statuses
            self.assertEqual(unknown.code, Resp.OK)
            self.assertFalse(unknown.HasField("current_limit"))
            self.assertEqual(unlimited.code, Resp.OK)
            self.assertFalse(unlimited.HasField("current_limit"))
            self.assertEqual(unlimited.limit_remaining, 4294967295)
            self.assertEqual(shadow.code, Resp.OK)  # over its limit of 2 from the third on
            self.assertEqual(shadow.current_limit.requests_per_unit, 2)
        # Each limited descriptor is a decision of its biz: the shadow one's
        # four allowed, the two past its limit counted as shadow denials
        # (the unknown and the unlimited ones decide nothing).
        after = self.biz_totals()
        self.assertEqual(after["allowed"] - before["allowed"], 4, (before, after))
        self.assertEqual(after["denied"], before["denied"])
        self.assertGreaterEqual(after["shadow_denied"] - before["shadow_denied"], 2, (before, after))
        # An unknown domain: every descriptor OK, unlimited.
        r = self.call(request("no_such_domain", [[("remote_address", "1")]]))
        self.assertEqual(r.overall_code, Resp.OK)
        self.assertFalse(r.statuses[0].HasField("current_limit"))

    def test_over_limit_of_one_descriptor_is_the_overall_code(self):
        wait_for_a_fresh_minute()
        key = "multi-%f" % time.time()
        r = self.call(request("edge", [[("remote_address", key)]], hits_addend=50))
        self.assertEqual(r.overall_code, Resp.OK)
        before = self.biz_totals()
        r = self.call(request("edge", [[("client", "internal")], [("remote_address", key)]]))
        self.assertEqual(r.overall_code, Resp.OVER_LIMIT)
        self.assertEqual([s.code for s in r.statuses], [Resp.OK, Resp.OVER_LIMIT])
        after = self.biz_totals()
        self.assertEqual((after["allowed"] - before["allowed"], after["denied"] - before["denied"]), (0, 1))

    def test_any_descriptor_bytes_are_limited_normally(self):
        # Header values Envoy forwards: a tab, bytes that are not UTF-8, 1,000
        # bytes. Each is limited as any value is; none fails the call (which
        # with failure_mode_deny false would let the request through).
        wait_for_a_fresh_minute()
        tag = ("%f" % time.time()).encode()
        long_prefix = b"w" * 1000 + tag
        for v in [b"a\tb" + tag, b"x\xff\xc3(y" + tag, b"v" * 1000 + tag, long_prefix + b"A"]:
            r = self.call(request("edge", [[("remote_address", v)]], hits_addend=50))
            self.assertEqual((r.overall_code, r.statuses[0].limit_remaining), (Resp.OK, 0), v[:20])
            r = self.call(request("edge", [[("remote_address", v)]]))
            self.assertEqual((r.overall_code, r.statuses[0].limit_remaining), (Resp.OVER_LIMIT, 0), v[:20])
        # Two long values that differ only at the end: two counters.
        r = self.call(request("edge", [[("remote_address", long_prefix + b"B")]]))
        self.assertEqual((r.overall_code, r.statuses[0].limit_remaining), (Resp.OK, 49))
        self.assertNotIn("String field", self.frsd.log())

    def test_empty_and_too_many_descriptors_are_invalid_argument(self):
        for descriptors, message in (
            ([], "rate limit descriptor list must not be empty"),
            ([[("remote_address", "many")]] * 65, "at most 64"),
        ):
            with self.assertRaises(grpc.RpcError) as e:
                self.call(request("edge", descriptors))
            self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn(message, e.exception.details())
        r = self.call(request("edge", [[("remote_address", "many")]], look=True))
        self.assertEqual(r.statuses[0].limit_remaining, 50)  # the refused call counted nothing

    def test_decisions_are_in_the_decision_log_with_domain_and_descriptor(self):
        self.assertEqual(self.call(request("edge", [[("remote_address", "198.51.100.77")]])).overall_code, Resp.OK)
        log = self.frsd.path("decisions.log")

        def line():
            for ln in envoy_frsd.processes.read_text(log).splitlines():
                o = json.loads(ln)
                if o.get("domain") == "edge" and "198.51.100.77" in o.get("key", ""):
                    return o
            return None

        self.assertTrue(
            envoy_frsd.processes.wait_for(lambda: line() is not None, 5), envoy_frsd.processes.read_text(log)
        )
        o = line()
        self.assertEqual(
            (o["biz"], o["domain"], o["descriptor"], o["allowed"], o["n"], o["limit"], o["client"]),
            ("envoy.edge.remote_address", "edge", "remote_address", True, 1, 50, "127.0.0.1"),
        )

    def test_health_check(self):
        with self.channel() as ch:
            check = ch.unary_unary(
                envoy_frsd.HEALTH_CHECK,
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )
            self.assertEqual(
                check(health_pb2.HealthCheckRequest(), timeout=5).status, health_pb2.HealthCheckResponse.SERVING
            )
            self.assertEqual(
                check(
                    health_pb2.HealthCheckRequest(service="envoy.service.ratelimit.v3.RateLimitService"), timeout=5
                ).status,
                health_pb2.HealthCheckResponse.SERVING,
            )
            with self.assertRaises(grpc.RpcError) as e:
                check(health_pb2.HealthCheckRequest(service="other"), timeout=5)
            self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_unknown_method_and_bad_protobuf(self):
        with self.channel() as ch:
            raw = ch.unary_unary("/envoy.service.ratelimit.v3.RateLimitService/Nope")
            with self.assertRaises(grpc.RpcError) as e:
                raw(b"", timeout=5)
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
            raw = ch.unary_unary(envoy_frsd.SHOULD_RATE_LIMIT)
            with self.assertRaises(grpc.RpcError) as e:
                raw(b"\x0a\xff\xff\xff\xff\x0f", timeout=5)  # a length past the end
            self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            with self.assertRaises(grpc.RpcError) as e:
                raw(request("", [[("a", "b")]]).SerializeToString(), timeout=5)
            self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        # The server is still there.
        self.assertEqual(self.call(request("edge", [[("nothing", "x")]])).overall_code, Resp.OK)

    def test_z_reload_changes_a_limit_and_a_broken_file_is_refused(self):
        wait_for_a_fresh_minute()
        key = [("route", "checkout")]
        self.assertEqual(self.call(request("edge", [key], look=True)).statuses[0].current_limit.requests_per_unit, 3)
        self.frsd.write_yaml("edge.yaml", YAML % 7)
        self.assertTrue(self.frsd.reload())
        self.assertEqual(self.call(request("edge", [key], look=True)).statuses[0].current_limit.requests_per_unit, 7)
        for i in range(7):
            self.assertEqual(self.call(request("edge", [key])).overall_code, Resp.OK, i)
        self.assertEqual(self.call(request("edge", [key])).overall_code, Resp.OVER_LIMIT)
        # A broken file: refused with file:line, the old limit and count stay.
        self.frsd.write_yaml(
            "edge.yaml", (YAML % 9).replace("unit: minute, requests_per_unit: 9", "unit: minit, requests_per_unit: 9")
        )
        self.assertFalse(self.frsd.reload())
        self.assertIn("edge.yaml:7: unknown unit 'minit'", self.frsd.log())
        r = self.call(request("edge", [key], look=True))
        self.assertEqual(r.statuses[0].current_limit.requests_per_unit, 7)
        self.assertEqual(r.statuses[0].limit_remaining, 0)
        self.frsd.write_yaml("edge.yaml", YAML % 7)
        # Nested aliases meaning 9^7 descriptor paths: the master refuses the
        # file while parsing it, before building anything, and serves on.
        self.frsd.write_yaml("bomb.yaml", envoy_frsd.alias_bomb("bomb"))
        self.assertFalse(self.frsd.reload())
        self.assertIn("bomb.yaml:2: the file expands to more than 1000000 YAML nodes", self.frsd.log())
        os.remove(self.frsd.path("envoy", "bomb.yaml"))
        self.assertEqual(self.call(request("edge", [key], look=True)).statuses[0].current_limit.requests_per_unit, 7)


class Headers(unittest.TestCase):
    def test_ratelimit_headers_as_envoyproxy_ratelimit_names_them(self):
        wait_for_a_fresh_minute()
        frsd = envoy_frsd.Frsd({"edge.yaml": YAML % 3}, grpc_extra=' headers="1"')
        try:
            frsd.start()
            with grpc.insecure_channel("127.0.0.1:%d" % frsd.grpc_port) as ch:
                f = ch.unary_unary(
                    envoy_frsd.SHOULD_RATE_LIMIT,
                    request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
                    response_deserializer=Resp.FromString,
                )
                f(request("edge", [[("route", "checkout")]], hits_addend=3), timeout=5)
                # route is exhausted (0 left, OVER_LIMIT); remote_address has 49
                # left: the OVER_LIMIT descriptor's values are sent.
                r = f(request("edge", [[("remote_address", "h")], [("route", "checkout")]]), timeout=5)
                h = {x.key: x.value for x in r.response_headers_to_add}
                self.assertEqual(set(h), {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"})
                self.assertEqual(h["RateLimit-Limit"], "3")
                self.assertEqual(h["RateLimit-Remaining"], "0")
                self.assertTrue(0 < int(h["RateLimit-Reset"]) <= 60)
        finally:
            frsd.remove()


class Durability(unittest.TestCase):
    def start(self, limit):
        """At the start of a minute, a started frsd (2 workers) whose route
        and remote_address limits are `limit` and 50, removed after the test;
        returns it and its ShouldRateLimit call."""
        wait_for_a_fresh_minute(margin=20)
        frsd = envoy_frsd.Frsd({"edge.yaml": YAML % limit}, workers=2)
        self.addCleanup(frsd.remove)
        frsd.start()
        return frsd, lambda req: envoy_frsd.should_rate_limit(frsd.grpc_port, req)

    def test_a_reload_adding_a_colliding_descriptor_keeps_every_count(self):
        # envoy.edge.path_13022 hashes to envoy.edge.route_checkout's slot
        # (1380 of 16384) and sorts before it: ids probed over all names in
        # name order gave it route_checkout's id on the reload, so
        # route_checkout's count moved to another id. Ids are kept in
        # data/envoy.ids and never move.
        frsd, call = self.start(5)
        key = [("route", "checkout")]
        self.assertEqual(call(request("edge", [key], hits_addend=3)).statuses[0].limit_remaining, 2)
        frsd.write_yaml(
            "edge.yaml",
            YAML % 5 + "  - key: path\n    value: '13022'\n" "    rate_limit: {unit: minute, requests_per_unit: 9}\n",
        )
        self.assertTrue(frsd.reload())
        r = call(request("edge", [key, [("path", "13022")]], look=True))
        self.assertEqual(r.statuses[0].limit_remaining, 2)
        self.assertEqual(r.statuses[1].limit_remaining, 9)
        with open(frsd.path("data", "envoy.ids")) as f:
            ids = f.read()
        self.assertIn("envoy.edge.path_13022 ", ids)
        # Every process, respawned or restarted after kill -9, keeps them.
        frsd.kill9_all()
        frsd.start()
        r = call(request("edge", [key], look=True))
        self.assertEqual(r.statuses[0].limit_remaining, 2)
        # Removed again: the id stays reserved in the file.
        frsd.write_yaml("edge.yaml", YAML % 5)
        self.assertTrue(frsd.reload())
        with open(frsd.path("data", "envoy.ids")) as f:
            self.assertEqual(f.read(), ids)

    def test_counts_survive_a_restart_and_kill_9_of_every_process(self):
        frsd, call = self.start(3)
        key = [("remote_address", "durable")]
        self.assertEqual(call(request("edge", [key], hits_addend=20)).statuses[0].limit_remaining, 30)
        frsd.stop()
        frsd.start()
        self.assertEqual(call(request("edge", [key], hits_addend=5)).statuses[0].limit_remaining, 25)
        frsd.kill9_all()
        frsd.start()
        r = call(request("edge", [key], look=True))
        self.assertEqual(r.statuses[0].limit_remaining, 25)


INFLIGHT_YAML = """domain: llm
descriptors:
  - key: user
    rate_limit: {unit: concurrent, requests_per_unit: 3, lease: 60}
  - key: crashy
    rate_limit: {unit: concurrent, requests_per_unit: 2, lease: 1}
"""


class InFlight(unittest.TestCase):
    """unit: concurrent driven as Envoy drives it: a ShouldRateLimit with
    the descriptor when a request starts, the same descriptor with
    is_negative_hits when its stream is done (apply_on_stream_done), for a
    refused request too (Envoy's filter sends it from onDestroy)."""

    @classmethod
    def setUpClass(cls):
        cls.frsd = envoy_frsd.Frsd({"llm.yaml": INFLIGHT_YAML})
        cls.frsd.start()
        cls.ch = grpc.insecure_channel("127.0.0.1:%d" % cls.frsd.grpc_port)
        cls.f = cls.ch.unary_unary(
            envoy_frsd.SHOULD_RATE_LIMIT,
            request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
            response_deserializer=Resp.FromString,
        )

    @classmethod
    def tearDownClass(cls):
        cls.ch.close()
        cls.frsd.remove()

    def start(self, key, value):
        return self.f(request("llm", [[(key, value)]]), timeout=5)

    def done(self, key, value):
        r = request("llm", [[(key, value)]])
        r.descriptors[0].hits_addend.value = 1
        r.descriptors[0].is_negative_hits = True
        return self.f(r, timeout=5)

    def metric(self, name, biz):
        body = self.frsd.get("/metrics")[1]
        for line in body.splitlines():
            if line.startswith(name + '{biz="%s",' % biz):
                return int(line.rsplit(" ", 1)[1])
        return None

    def held(self, biz, since=None):
        """frs_leases_held of `biz` as the store was at `since` or later."""
        body = self.frsd.get("/metrics")[1]
        series = [ln.rpartition(" ")[0] for ln in body.splitlines() if ln.startswith('frs_leases_held{biz="%s",' % biz)]
        if not series:
            return None
        v = envoy_frsd.processes.held_metric(lambda: self.frsd.get("/metrics")[1], series[0], since)
        return None if v is None else int(v)

    def test_never_more_than_max_in_flight_under_8_concurrent_envoys(self):
        in_flight, peak, refused, lock = [0], [0], [0], threading.Lock()
        errors = []

        def envoy():
            try:
                for _ in range(40):
                    r = self.start("user", "u1")
                    if r.overall_code == Resp.OK:
                        with lock:
                            in_flight[0] += 1
                            peak[0] = max(peak[0], in_flight[0])
                        with lock:  # the stream is done
                            in_flight[0] -= 1
                    else:
                        with lock:
                            refused[0] += 1
                    self.assertEqual(self.done("user", "u1").overall_code, Resp.OK)
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)

        threads = [threading.Thread(target=envoy) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        self.assertLessEqual(peak[0], 3)
        # Every stream done: nothing held, every grant given back.
        biz = "envoy.llm.user"
        self.assertEqual(self.held(biz), 0)
        granted = self.metric("frs_leases_granted_total", biz)
        self.assertEqual(granted + refused[0], 8 * 40)
        self.assertEqual(self.metric("frs_leases_released_total", biz), granted)
        self.assertEqual(self.start("user", "u1").statuses[0].limit_remaining, 2)
        self.done("user", "u1")

    def test_an_envoy_that_dies_leaves_places_that_expire_within_lease_plus_one_second(self):
        biz = "envoy.llm.crashy"
        for _ in range(2):
            r = self.start("crashy", "c1")
            self.assertEqual(r.overall_code, Resp.OK)
            self.assertEqual(r.statuses[0].current_limit.requests_per_unit, 2)
            self.assertEqual(r.statuses[0].current_limit.unit, Resp.RateLimit.UNKNOWN)
        started = time.monotonic()
        self.assertEqual(self.start("crashy", "c1").overall_code, Resp.OVER_LIMIT)
        self.done("crashy", "c1")  # the refused one's stream: it ends no lease
        self.assertEqual(self.start("crashy", "c1").overall_code, Resp.OVER_LIMIT)
        self.done("crashy", "c1")
        # The Envoy dies: no -1 for the two it let through. Granted at second
        # t, each is held until t + lease + 1 = t + 2: the store holds neither
        # from then on, before any write sweeps them. (Held until then is
        # the test above: the master's walk that would show these two may
        # come after their expiry.)
        self.assertEqual(self.held(biz, since=started + 2.2), 0)
        r = self.start("crashy", "c1")
        self.assertEqual(r.overall_code, Resp.OK)
        self.assertEqual(self.metric("frs_leases_expired_total", biz), 2)
        self.done("crashy", "c1")
        self.assertEqual(self.held(biz), 0)

    def test_a_give_back_for_a_key_never_counted_changes_nothing(self):
        r = self.done("user", "never")
        self.assertEqual(r.overall_code, Resp.OK)
        self.assertEqual(r.statuses[0].limit_remaining, 3)


if __name__ == "__main__":
    envoy_frsd.main()
