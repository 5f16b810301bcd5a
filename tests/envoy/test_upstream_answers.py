"""tests/envoy/test_upstream_answers.py: envoyproxy/ratelimit's answers,
reproduced against a live frsd over gRPC (python3-grpcio): its
configuration keys (share_threshold, quota_mode, value_to_metric, metadata,
week/month/year, requests_per_unit up to 2^32-1), a descriptor's own
limit, and its settings as <grpc> attributes (LIMIT_*_HEADER,
RESPONSE_DYNAMIC_METADATA, NEAR_LIMIT_RATIO, SHADOW_MODE, QUOTA_MODE,
STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT). The configurations and expected
answers are written for FRS from upstream's documented behaviour. One frsd
for the module; settings change by srv.xml and SIGHUP. Skipped (77)
without grpcio or protoc."""
import re
import time
import unittest

import envoy_frsd

grpc, rls_pb2, ratelimit_pb2, health_pb2 = envoy_frsd.load_grpc()
from google.protobuf import json_format  # noqa: E402  (python3-protobuf, beside grpcio)

Resp = rls_pb2.RateLimitResponse
OK, OVER = Resp.OK, Resp.OVER_LIMIT
Unit = Resp.RateLimit

YAML = """domain: shop
descriptors:
  - key: look
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: bucket
    value: "img-*"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: bucket
    value: "doc-*"
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: team
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: seat
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: strict
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: weekly
    rate_limit: {unit: week, requests_per_unit: 10}
  - key: monthly
    rate_limit: {unit: month, requests_per_unit: 10}
  - key: yearly
    rate_limit: {unit: year, requests_per_unit: 10}
  - key: vip
    metadata: {tier: gold, limits: {burst: 5}}
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: app
    metadata: {limits: {owner: web}, tier: silver}
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: api
    value_to_metric: true
    descriptors:
      - key: verb
        rate_limit: {unit: minute, requests_per_unit: 100}
  - key: huge
    rate_limit: {unit: second, requests_per_unit: 4294967295}
  - key: ten
    rate_limit: {unit: minute, requests_per_unit: 10}
"""

SETTINGS = (
    ' headers="1" limit_header="X-RL-Limit" remaining_header="X-RL-Remaining" reset_header="X-RL-Reset"'
    ' metadata="1" near_limit_ratio="0.5"'
)


def desc(entries, hits=None, limit=None):
    d = ratelimit_pb2.RateLimitDescriptor()
    for k, v in entries:
        d.entries.add(key=k.encode(), value=v.encode())
    if hits is not None:
        d.hits_addend.value = hits
    if limit is not None:
        d.limit.requests_per_unit, d.limit.unit = limit
    return d


def fresh_minute(margin=6):
    """Minute windows are aligned to the epoch: wait out one that ends soon."""
    left = 60 - time.time() % 60
    if left < margin:
        time.sleep(left + 0.2)


class UpstreamAnswers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.frsd = envoy_frsd.Frsd({"shop.yaml": YAML}, workers=1, grpc_extra=SETTINGS)
        cls.frsd.start()
        cls.n = 0

    @classmethod
    def tearDownClass(cls):
        cls.frsd.remove()

    def setUp(self):
        fresh_minute()

    def unique(self, prefix):
        UpstreamAnswers.n += 1
        return "%s%d-%d" % (prefix, UpstreamAnswers.n, int(time.time() * 1000) % 100000000)

    def ask(self, *descriptors, hits=0, domain="shop"):
        req = rls_pb2.RateLimitRequest(domain=domain.encode(), hits_addend=hits)
        req.descriptors.extend(descriptors)
        return envoy_frsd.should_rate_limit(self.frsd.grpc_port, req)

    def settings(self, extra):
        self.frsd.write_srv(extra)
        self.assertTrue(self.frsd.reload(), self.frsd.log())

    def test_a_look_at_a_key_exactly_at_its_limit_is_ok(self):
        v = self.unique("u")
        self.ask(desc([("look", v)]), desc([("look", v)]))
        r = self.ask(desc([("look", v)], hits=0))
        self.assertEqual((r.overall_code, r.statuses[0].limit_remaining), (OK, 0))
        r = self.ask(desc([("look", v)]))
        self.assertEqual(r.overall_code, OVER)
        # Past the limit now (every hit is counted): a look is over too.
        self.assertEqual(self.ask(desc([("look", v)], hits=0)).overall_code, OVER)

    def test_a_hit_past_the_limit_is_counted_as_upstream_counts_it(self):
        v = self.unique("c")
        self.assertEqual(self.ask(desc([("ten", v)]), hits=8).statuses[0].limit_remaining, 2)
        self.assertEqual(self.ask(desc([("ten", v)]), hits=3).overall_code, OVER)  # 11
        self.assertEqual(self.ask(desc([("ten", v)])).overall_code, OVER)  # 12, not 9

    def test_share_threshold_shares_one_counter_and_plain_wildcards_do_not(self):
        tag = self.unique("s")
        r = [self.ask(desc([("bucket", "img-%s-%d" % (tag, i))])) for i in range(3)]
        self.assertEqual([x.statuses[0].limit_remaining for x in r[:2]], [1, 0])
        self.assertEqual(r[2].overall_code, OVER)
        r = [self.ask(desc([("bucket", "doc-%s-%d" % (tag, i))])) for i in range(3)]
        self.assertEqual([x.statuses[0].limit_remaining for x in r], [1, 1, 1])

    def test_quota_mode_is_over_overall_only_when_every_quota_descriptor_is(self):
        t, s = self.unique("t"), self.unique("s")
        self.ask(desc([("team", t)]))
        r = self.ask(desc([("team", t)]), desc([("seat", s)]))
        self.assertEqual([x.code for x in r.statuses], [OVER, OK])
        self.assertEqual(r.overall_code, OK)
        self.ask(desc([("seat", s)]), hits=5)
        self.assertEqual(self.ask(desc([("team", t)]), desc([("seat", s)])).overall_code, OVER)
        # One non-quota descriptor over: OVER_LIMIT whatever the quota ones say.
        k = self.unique("k")
        self.ask(desc([("strict", k)]))
        self.assertEqual(self.ask(desc([("strict", k)]), desc([("seat", self.unique("f"))])).overall_code, OVER)

    def test_week_month_year_windows_count_from_the_epoch(self):
        for key, seconds, unit in (
            ("weekly", 604800, Unit.WEEK),
            ("monthly", 2592000, Unit.MONTH),
            ("yearly", 31536000, Unit.YEAR),
        ):
            now = int(time.time())
            st = self.ask(desc([(key, self.unique("w"))])).statuses[0]
            self.assertEqual(st.current_limit.unit, unit)
            self.assertIn(st.duration_until_reset.seconds, (seconds - now % seconds, seconds - (now + 1) % seconds))

    def test_requests_per_unit_up_to_uint32(self):
        st = self.ask(desc([("huge", self.unique("h"))]), hits=1000).statuses[0]
        self.assertEqual(
            (st.code, st.current_limit.requests_per_unit, st.limit_remaining), (OK, 4294967295, 4294967295 - 1000)
        )

    def test_a_descriptors_own_limit_wins_listed_or_not(self):
        v = self.unique("o")
        # look is 2 a minute in the YAML; the descriptor says 3 a minute (a
        # second's window could turn between the four calls on a loaded
        # machine; a minute's is waited out when it ends soon).
        fresh_minute()
        r = [self.ask(desc([("look", v)], limit=(3, Unit.MINUTE))) for _ in range(4)]
        self.assertEqual([x.statuses[0].limit_remaining for x in r], [2, 1, 0, 0])
        self.assertEqual(r[3].overall_code, OVER)
        self.assertEqual(
            (r[0].statuses[0].current_limit.requests_per_unit, r[0].statuses[0].current_limit.unit), (3, Unit.MINUTE)
        )
        # Not in the YAML, in a configured domain: limited all the same.
        n = self.unique("n")
        self.assertEqual(self.ask(desc([("nowhere", n)], limit=(1, 2))).statuses[0].limit_remaining, 0)
        self.assertEqual(self.ask(desc([("nowhere", n)], limit=(1, 2))).overall_code, OVER)
        # An unknown domain: no limit, as upstream.
        r = self.ask(desc([("nowhere", n)], limit=(1, 2)), domain="elsewhere")
        self.assertEqual(r.overall_code, OK)
        self.assertFalse(r.statuses[0].HasField("current_limit"))

    def test_header_names_and_the_descriptor_they_describe(self):
        a, b = self.unique("a"), self.unique("b")
        self.ask(desc([("ten", a)]), hits=4)
        r = self.ask(desc([("ten", a)]), desc([("ten", b)]))
        headers = {h.key: h.value for h in r.response_headers_to_add}
        self.assertEqual(set(headers), {"X-RL-Limit", "X-RL-Remaining", "X-RL-Reset"})
        self.assertEqual((headers["X-RL-Limit"], headers["X-RL-Remaining"]), ("10", "5"))

    def test_dynamic_metadata_of_the_descriptors_that_passed(self):
        v = self.unique("v")
        r = self.ask(desc([("vip", v)]), desc([("app", "x")], hits=2), hits=3)
        md = json_format.MessageToDict(r.dynamic_metadata)
        self.assertEqual(md["domain"], "shop")
        self.assertEqual(md["hitsAddend"], 3)
        self.assertEqual([d["entries"] for d in md["descriptors"]], [["vip=" + v], ["app=x"]])
        self.assertEqual(md["descriptors"][1]["hitsAddend"], 2)
        # Merged: maps merge, the first value of a key stays.
        self.assertEqual(md["metadata"], {"tier": "gold", "limits": {"burst": 5, "owner": "web"}})

    def test_dynamic_metadata_of_a_value_that_is_not_utf8_still_parses(self):
        # Envoy forwards header bytes as they came. Such a value in the
        # answer's metadata (a protobuf string) made Envoy's parser refuse
        # the whole answer: failing open, every descriptor of the call passed.
        grpc, rls_pb2 = envoy_frsd._LOADED[0], envoy_frsd._LOADED[1]
        v = self.unique("u8")
        req = rls_pb2.RateLimitRequest(domain=b"shop")
        req.descriptors.extend([desc([("vip", v + "-X")])])
        wire = req.SerializeToString().replace((v + "-X").encode(), (v + "-").encode() + b"\xff")
        with grpc.insecure_channel("127.0.0.1:%d" % self.frsd.grpc_port) as ch:
            call = ch.unary_unary(envoy_frsd.SHOULD_RATE_LIMIT)
            raw = call(wire, timeout=5)
        r = rls_pb2.RateLimitResponse.FromString(raw)  # raises on a string that is not UTF-8
        self.assertEqual(r.overall_code, OK)
        md = json_format.MessageToDict(r.dynamic_metadata)
        self.assertEqual(md["descriptors"][0]["entries"], ["vip=" + v + "-\ufffd"])

    def test_near_limit_ratio_and_value_to_metric_in_the_metrics(self):
        v = self.unique("p")
        self.ask(desc([("api", "/" + v), ("verb", "GET")]), hits=60)
        _, text = self.frsd.get("/metrics")
        near = re.search(
            r'frs_envoy_descriptor_hits_total\{domain="shop",descriptor="api.verb",' r'result="near_limit"\} (\d+)',
            text,
        )
        self.assertIsNotNone(near, text[-2000:])
        self.assertGreaterEqual(int(near.group(1)), 10)  # past floor(100 x 0.5)
        self.assertIn('key="api_/%s.verb",result="total"} 60' % v, text)

    def test_global_shadow_then_quota_then_stop_increment(self):
        try:
            self.settings(' shadow="1"')
            v = self.unique("g")
            self.ask(desc([("strict", v)]))
            r = self.ask(desc([("strict", v)]))
            self.assertEqual((r.statuses[0].code, r.overall_code), (OVER, OK))
            self.settings(' quota="1"')
            r = self.ask(desc([("strict", v)]), desc([("strict", self.unique("q"))]))
            self.assertEqual(([x.code for x in r.statuses], r.overall_code), ([OVER, OK], OK))
            self.settings(' stop_increment_when_over="1"')
            w, x = self.unique("w"), self.unique("x")
            self.ask(desc([("strict", w)]))
            # strict w would go over: only it is counted, ten x is not.
            self.assertEqual(self.ask(desc([("strict", w)]), desc([("ten", x)])).overall_code, OVER)
            self.assertEqual(self.ask(desc([("ten", x)], hits=0)).statuses[0].limit_remaining, 10)
        finally:
            self.settings(SETTINGS)


if __name__ == "__main__":
    envoy_frsd.main()
