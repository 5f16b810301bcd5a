"""tests/envoy/test_upstream_reload.py: envoyproxy/ratelimit's runtime
directory as frsd reads and watches it (live frsd, python3-grpcio): files
of any name and in subdirectories, a change applied without a signal
(inotify), a Kubernetes ConfigMap's "..data" swap and a swapped directory
link each one reload, a broken file keeping the old configuration (logged,
counted), SIGHUP as before; gRPC health for "ratelimit", "" and the full
service name, HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED. One frsd for the
module. Skipped (77) without grpcio or protoc."""
import os
import re
import shutil
import subprocess
import time
import unittest

import envoy_frsd

grpc, rls_pb2, ratelimit_pb2, health_pb2 = envoy_frsd.load_grpc()
Resp = rls_pb2.RateLimitResponse
Health = health_pb2.HealthCheckResponse
HEALTH_WATCH = "/grpc.health.v1.Health/Watch"


def domain(name, limit):
    return "domain: %s\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: %d}\n" % (name, limit)


class UpstreamReload(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.frsd = f = envoy_frsd.Frsd({"a.yaml": domain("a", 5), "team/b.conf": domain("b", 5)}, workers=2)
        # The configuration directory is a link to a version of it, as
        # upstream's RUNTIME_ROOT "current" is, and holds a ConfigMap's layout.
        os.rename(f.path("envoy"), f.path("envoy-v1"))
        os.symlink("envoy-v1", f.path("envoy"))
        os.mkdir(f.path("envoy", "..2024_v1"))
        with open(f.path("envoy", "..2024_v1", "cm.yaml"), "w") as out:
            out.write(domain("cm", 1))
        os.symlink("..2024_v1", f.path("envoy", "..data"))
        os.symlink("..data/cm.yaml", f.path("envoy", "cm.yaml"))
        f.start()

    @classmethod
    def tearDownClass(cls):
        cls.frsd.remove()

    def limit(self, dom, value="x"):
        """requests_per_unit for (k, value) in `dom`, or None: no limit."""
        req = rls_pb2.RateLimitRequest(domain=dom.encode(), hits_addend=0)
        req.descriptors.add().entries.add(key=b"k", value=value.encode())
        st = envoy_frsd.should_rate_limit(self.frsd.grpc_port, req).statuses[0]
        return st.current_limit.requests_per_unit if st.HasField("current_limit") else None

    def limit_becomes(self, dom, want, timeout=10.0):
        """Waits until `dom`'s limit reads `want` (or the time is up); the last
        read. A swap made of several steps may be seen in two reloads when the
        machine is busy: the first (a new sibling directory, the quiet period
        over before the link moved) reads the old version."""
        end = time.monotonic() + timeout
        got = self.limit(dom)
        while got != want and time.monotonic() < end:
            time.sleep(0.02)
            got = self.limit(dom)
        return got

    def metric(self, name):
        _, text = self.frsd.get("/metrics")
        m = re.search(r"^%s (\d+)$" % name, text, re.M)
        return int(m.group(1)) if m else None

    def test_files_of_any_name_in_subdirectories_and_links_are_read_once(self):
        # b from team/b.conf; cm through its links (read twice, domain cm
        # would be configured twice and frsd would not have started).
        self.assertEqual(self.limit("b"), 5)
        self.assertIsNotNone(self.limit("a"))
        self.assertIsNotNone(self.limit("cm"))
        # The start says what the directory gave: a file skipped would show.
        self.assertIn(": 3 rate limit(s) of 3 domain(s)", self.frsd.log())

    def test_a_new_or_changed_file_applies_without_a_signal(self):
        f = self.frsd
        self.assertTrue(f.reloaded(lambda: f.write_yaml("deep/er/c.yml", domain("c", 7))), f.log())
        self.assertEqual(self.limit_becomes("c", 7), 7, self.frsd.log())
        self.assertRegex(f.log(), r"are valid, with \d+ Envoy rate limit\(s\) of \d+ domain\(s\) from ")
        # Each worker's line names the Envoy files too (it named map.xml alone,
        # for a reload of the YAML alone).
        self.assertIn(" and the <grpc config> files in ", f.log())
        self.assertTrue(f.reloaded(lambda: f.write_yaml("deep/er/c.yml", domain("c", 8))), f.log())
        self.assertEqual(self.limit_becomes("c", 8), 8, self.frsd.log())
        self.assertTrue(f.reloaded(lambda: os.unlink(f.path("envoy", "deep", "er", "c.yml"))), f.log())
        self.assertIsNone(self.limit_becomes("c", None), self.frsd.log())

    def test_a_broken_file_keeps_the_old_configuration_logged_and_counted(self):
        f = self.frsd
        before = self.metric("frs_reload_failures_total")
        self.assertFalse(f.reloaded(lambda: f.write_yaml("a.yaml", domain("a", 6).replace("hour", "fortnight"))))
        self.assertIn("a.yaml:4: unknown unit 'fortnight'", f.log())
        self.assertEqual(self.metric("frs_reload_failures_total"), before + 1)
        self.assertEqual(self.limit("a"), 5)  # the old configuration answers
        # frsctl shows what frsd runs (Envoy's bizzes included) and says the
        # files on disk do not load (it said nothing).
        r = subprocess.run(
            [os.environ["FRSCTL"], "-c", f.path("srv.xml"), "explain", "envoy.a.k", "x"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        self.assertNotIn("unknown biz", r.stderr)
        self.assertIn("<grpc config> does not load (", r.stderr)
        self.assertIn("keeps serving the configuration it loaded before", r.stderr)
        self.assertTrue(f.reloaded(lambda: f.write_yaml("a.yaml", domain("a", 6))), f.log())
        self.assertEqual(self.limit_becomes("a", 6), 6, self.frsd.log())

    def test_frsctl_blames_map_xml_alone_for_a_change_of_map_xml(self):
        # map.xml edited on disk (a reload would apply it; frsd runs the one
        # it loaded) with <grpc config> unchanged: frsctl said that <grpc
        # config> differed from what frsd runs too, even for a change of
        # layout alone.
        f = self.frsd
        with open(f.path("map.xml")) as src:
            loaded = src.read()

        def frsctl_with_map(text):
            with open(f.path("map.xml"), "w") as out:
                out.write(text)
            return subprocess.run(
                [os.environ["FRSCTL"], "-c", f.path("srv.xml"), "explain", "envoy.a.k", "x"],
                capture_output=True,
                text=True,
                timeout=30,
            )

        try:
            laid_out = frsctl_with_map(loaded.replace("<map>", "<map >", 1).replace("</map>", "</map >") + "\n")
            broken = frsctl_with_map(loaded.replace("</map>", "</mapx>"))
        finally:
            with open(f.path("map.xml"), "w") as out:
                out.write(loaded)
        self.assertIn("map.xml is not the map frsd (pid", laid_out.stderr)
        self.assertNotIn("<grpc config>", laid_out.stderr)
        self.assertNotIn("does not load", laid_out.stderr)
        self.assertNotIn("unknown biz", laid_out.stderr)
        # Broken, it is said as map.xml's, without a reload frsd never tried.
        self.assertIn("map.xml does not load (", broken.stderr)
        self.assertIn("a reload of frsd (pid", broken.stderr)
        self.assertNotIn("frsd's log says which", broken.stderr)  # no reload was tried
        self.assertNotIn("keeps serving", broken.stderr)
        self.assertNotIn("<grpc config>", broken.stderr)

    def test_a_configmap_data_swap_is_one_reload(self):
        f = self.frsd

        def swap():
            os.mkdir(f.path("envoy", "..2024_v2"))
            with open(f.path("envoy", "..2024_v2", "cm.yaml"), "w") as out:
                out.write(domain("cm", 2))
            os.symlink("..2024_v2", f.path("envoy", "..data_tmp"))
            os.rename(f.path("envoy", "..data_tmp"), f.path("envoy", "..data"))
            shutil.rmtree(f.path("envoy", "..2024_v1"))

        self.assertTrue(f.reloaded(swap), f.log())
        self.assertEqual(self.limit_becomes("cm", 2), 2, self.frsd.log())

    def test_the_directory_link_swapped_to_another_version(self):
        f = self.frsd

        def swap():
            shutil.copytree(f.path("envoy-v1"), f.path("envoy-v2"), symlinks=True)
            with open(f.path("envoy-v2", "a.yaml"), "w") as out:
                out.write(domain("a", 9))
            os.symlink("envoy-v2", f.path("envoy.tmp"))
            os.rename(f.path("envoy.tmp"), f.path("envoy"))

        try:
            self.assertTrue(f.reloaded(swap), f.log())
            self.assertEqual(self.limit_becomes("a", 9), 9, f.log())
            # The new version is watched: a change in it applies too.
            # (The swap's second reload may still be on its way to a worker:
            # the wait below, not the count of reloads, says 10 applies.)
            self.assertTrue(f.reloaded(lambda: f.write_yaml("a.yaml", domain("a", 10))), f.log())
            self.assertEqual(self.limit_becomes("a", 10), 10, f.log())
        finally:
            f.reloaded(lambda: (os.unlink(f.path("envoy")), os.symlink("envoy-v1", f.path("envoy"))))

    def test_a_link_to_a_version_not_made_yet_is_followed_once_it_is(self):
        # The link first, its target after (a deploy script's order): the
        # refused reload keeps the old configuration, and the target made
        # later beside the link is noticed without a signal.
        f = self.frsd
        try:
            self.assertFalse(f.reloaded(lambda: (os.unlink(f.path("envoy")), os.symlink("envoy-v3", f.path("envoy")))))
            self.assertEqual(self.limit("b"), 5)

            def make():
                shutil.copytree(f.path("envoy-v1"), f.path("envoy-v3.tmp"), symlinks=True)
                with open(f.path("envoy-v3.tmp", "a.yaml"), "w") as out:
                    out.write(domain("a", 11))
                os.rename(f.path("envoy-v3.tmp"), f.path("envoy-v3"))

            self.assertTrue(f.reloaded(make), f.log())
            self.assertEqual(self.limit_becomes("a", 11), 11, self.frsd.log())
        finally:
            f.reloaded(lambda: (os.unlink(f.path("envoy")), os.symlink("envoy-v1", f.path("envoy"))))

    def test_sighup_still_reloads(self):
        self.frsd.write_yaml("a.yaml", domain("a", 5))
        self.assertTrue(self.frsd.reload(), self.frsd.log())

    def test_sighup_onto_another_directory_names_it_everywhere(self):
        # <grpc config> named anew by srv.xml and SIGHUP: the files of the
        # new directory apply, and each worker's line names them (it named
        # the start's directory); the master reads the new one again once
        # watched, and says that is what it does (it said "changed").
        f = self.frsd
        conf = f.path("srv.xml")
        with open(conf) as fh:
            text = fh.read()
        os.mkdir(f.path("envoy-other"))
        with open(f.path("envoy-other", "o.yaml"), "w") as out:
            out.write(domain("other", 3))
        try:
            with open(conf, "w") as fh:
                fh.write(text.replace('config="envoy"', 'config="envoy-other"'))
            since = len(f.log())
            self.assertTrue(f.reload(), f.log())
            self.assertEqual(self.limit("other"), 3)
            self.assertIsNone(self.limit("a"))
            self.assertTrue(
                envoy_frsd.processes.wait_for(lambda: "read again once watched" in f.log()[since:], 5), f.log()[since:]
            )
            lines = [ln for ln in f.log()[since:].splitlines() if " and the <grpc config> files in " in ln]
            self.assertTrue(lines, f.log()[since:])
            for ln in lines:
                self.assertTrue(ln.split(" files in ", 1)[1].split(" (map generation")[0].endswith("envoy-other"), ln)
            self.assertNotIn("envoy-other changed: reloading", f.log()[since:])
        finally:
            with open(conf, "w") as fh:
                fh.write(text)
            f.reload()
            shutil.rmtree(f.path("envoy-other"), ignore_errors=True)
        # Back on the first directory: waited for, since the reload above
        # counts workers' lines, and a late one of the watch's reload before
        # it passed for its own (the workers still on envoy-other: None).
        self.assertTrue(envoy_frsd.processes.wait_for(lambda: self.limit("a") is not None, 10), f.log())

    def check(self, service):
        with grpc.insecure_channel("127.0.0.1:%d" % self.frsd.grpc_port) as ch:
            f = ch.unary_unary(
                envoy_frsd.HEALTH_CHECK,
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )
            try:
                return f(health_pb2.HealthCheckRequest(service=service), timeout=5).status
            except grpc.RpcError as e:
                return e.code()

    def test_health_watch_streams_the_status_and_its_changes(self):
        f = self.frsd
        ch = grpc.insecure_channel("127.0.0.1:%d" % f.grpc_port)
        watch = ch.unary_stream(
            HEALTH_WATCH,
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        saved = f.path("saved-w")
        try:
            stream = watch(health_pb2.HealthCheckRequest(service="ratelimit"), timeout=30)
            self.assertEqual(next(stream).status, Health.SERVING)
            # The status changes (no domain under healthy_with_config): the
            # open stream gets NOT_SERVING as the reload lands, with nothing
            # else on the connection (the channel sends no keepalive).
            f.write_srv(' healthy_with_config="1"')
            os.mkdir(saved)
            self.assertTrue(
                f.reloaded(
                    lambda: [os.rename(f.path("envoy", n), os.path.join(saved, n)) for n in os.listdir(f.path("envoy"))]
                ),
                f.log(),
            )
            self.assertEqual(next(stream).status, Health.NOT_SERVING)
            check = ch.unary_unary(
                envoy_frsd.HEALTH_CHECK,
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )
            # The server as a whole ("") serves on, as upstream's does.
            self.assertEqual(check(health_pb2.HealthCheckRequest(service=""), timeout=5).status, Health.SERVING)
            # An unknown service is SERVICE_UNKNOWN, the stream kept.
            other = watch(health_pb2.HealthCheckRequest(service="other"), timeout=30)
            self.assertEqual(next(other).status, Health.SERVICE_UNKNOWN)
            other.cancel()
            stream.cancel()
        finally:
            ch.close()
            f.write_srv()
            for n in os.listdir(saved) if os.path.isdir(saved) else []:
                os.rename(os.path.join(saved, n), f.path("envoy", n))
            self.assertTrue(f.reload(), f.log())

    def test_health_check_names_and_healthy_with_config(self):
        for name in ("", "ratelimit", "envoy.service.ratelimit.v3.RateLimitService"):
            self.assertEqual(self.check(name), Health.SERVING, name)
        self.assertEqual(self.check("other"), grpc.StatusCode.NOT_FOUND)
        f = self.frsd
        saved = f.path("saved")
        try:
            # No domain loaded: SERVING, unless healthy_with_config="1".
            f.write_srv(' healthy_with_config="1"')
            os.mkdir(saved)
            self.assertTrue(
                f.reloaded(
                    lambda: [os.rename(f.path("envoy", n), os.path.join(saved, n)) for n in os.listdir(f.path("envoy"))]
                ),
                f.log(),
            )
            self.assertEqual(self.check("ratelimit"), Health.NOT_SERVING)
            self.assertEqual(self.check("envoy.service.ratelimit.v3.RateLimitService"), Health.NOT_SERVING)
            self.assertEqual(self.check(""), Health.SERVING)  # upstream's "" is the server's, not the config's
            # Upstream's HTTP health check follows the same setting, with its 500.
            st, body = f.get("/healthcheck")
            self.assertEqual(st, 500, body)
            self.assertIn("no rate limit configuration is loaded", body)
            self.assertTrue(f.reloaded(lambda: os.rename(os.path.join(saved, "a.yaml"), f.path("envoy", "a.yaml"))))
            self.assertEqual(self.check("ratelimit"), Health.SERVING)
            st, body = f.get("/healthcheck")
            self.assertEqual((st, body), (200, "OK\n"))
        finally:
            f.write_srv()
            for n in os.listdir(saved) if os.path.isdir(saved) else []:
                os.rename(os.path.join(saved, n), f.path("envoy", n))
            self.assertTrue(f.reload(), f.log())

    def test_health_is_not_serving_while_a_store_file_is_lost(self):
        # A frsd of its own: its store file is deleted. /health says 503 and
        # /healthcheck 500; gRPC health says NOT_SERVING for every name, and
        # an open watch hears it (it answered SERVING while every call failed).
        f = envoy_frsd.Frsd({"a.yaml": domain("a", 5)}, workers=1)
        ch = None
        try:
            f.start()
            ch = grpc.insecure_channel("127.0.0.1:%d" % f.grpc_port)
            watch = ch.unary_stream(
                HEALTH_WATCH,
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )
            check = ch.unary_unary(
                envoy_frsd.HEALTH_CHECK,
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )
            stream = watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
            self.assertEqual(next(stream).status, Health.SERVING)
            os.unlink(f.path("data", "frs.0.store"))
            self.assertEqual(next(stream).status, Health.NOT_SERVING, f.log())
            for name in ("", "ratelimit", "envoy.service.ratelimit.v3.RateLimitService"):
                got = check(health_pb2.HealthCheckRequest(service=name), timeout=5).status
                self.assertEqual(got, Health.NOT_SERVING, name)
            st, body = f.get("/healthcheck")
            self.assertEqual(st, 500, body)
            self.assertIn("frs.0.store was deleted while in use", body)
            stream.cancel()
        finally:
            if ch is not None:
                ch.close()
            f.remove()


if __name__ == "__main__":
    envoy_frsd.main()
