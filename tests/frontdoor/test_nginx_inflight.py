#!/usr/bin/env python3
"""conf/frontdoor/nginx-inflight.conf, run by Debian's nginx in front of a
real frsd and a slow backend this test holds: an in-flight limit whose
places are given back when a response ends (post_action).

    FRSD=build/src/server/frsd python3 tests/frontdoor/test_nginx_inflight.py

Checked: MAX slow requests in flight, the next one a 429 that never reaches
the backend; one response finished, its place given back (frsd's count and
frs_leases_released_total), and a new request passes; a refused request and
a backend's error release nothing more than they took; a client that hangs
up mid-request gives its place back too. No sleeps: every wait is on the
backend having seen a request or on frsd's own count.
"""

import http.server
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import unittest

import frontdoor as fd

MAX = 2
MAP = (
    """<map>
  <biz id="20" name="llm_inflight"><rule algo="concurrency" max="%d" lease="120"/></biz>
</map>
"""
    % MAX
)


class SlowBackend(object):
    """The backend: each request for /v1/NAME waits until the test calls
    finish(NAME) (or fail(NAME): a 502-worthy hang-up), then answers."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen = []
        self.gates = {}
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                name = self.path.rsplit("/", 1)[-1]
                gate = backend.gate(name)
                with backend.lock:
                    backend.seen.append(name)
                gate["event"].wait(30)
                if gate["broken"]:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                out = b"answer " + name.encode() + b"\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = fd.QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def gate(self, name):
        with self.lock:
            return self.gates.setdefault(name, {"event": threading.Event(), "broken": False})

    def has_seen(self, name):
        with self.lock:
            return name in self.seen

    def finish(self, name):
        self.gate(name)["event"].set()

    def fail(self, name):
        g = self.gate(name)
        g["broken"] = True
        g["event"].set()

    def close(self):
        for g in list(self.gates.values()):
            g["event"].set()
        self.server.shutdown()
        self.server.server_close()


class NginxInflightTest(unittest.TestCase):
    program = fd.require("nginx", "/usr/sbin/nginx", "/usr/bin/nginx")

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="frs-inflight-")
        self.backend = SlowBackend()
        self.frsd = fd.Frsd(os.path.join(self.dir, "frsd"))
        with open(os.path.join(self.frsd.dir, "map.xml"), "w") as f:
            f.write(MAP)
        self.frsd.start()
        self.proc = None
        self.threads = []
        self.start_nginx()

    def tearDown(self):
        self.backend.close()
        for t in self.threads:
            t.join(10)
        fd.stop(self.proc, signal.SIGQUIT)
        self.frsd.close()
        if not os.environ.get("FRS_E2E_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def start_nginx(self):
        for _ in range(5):
            port = fd.candidate_port()
            fd.render(
                os.path.join(fd.CONF, "nginx-inflight.conf"),
                os.path.join(self.dir, "site.conf"),
                [
                    ("server 127.0.0.1:8300;", "server 127.0.0.1:%d;" % self.frsd.port, 1),
                    ("server 127.0.0.1:8080;", "server 127.0.0.1:%d;" % self.backend.port, 1),
                    ("listen 80;", "listen 127.0.0.1:%d;" % port, 1),
                ],
            )
            fd.nginx_conf.write(self.dir, "  include %s/site.conf;\n" % self.dir)
            out = open(os.path.join(self.dir, "nginx.out"), "ab")
            self.proc = fd.subprocess.Popen(
                [self.program, "-p", self.dir, "-c", os.path.join(self.dir, "nginx.conf")],
                stdin=fd.subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )
            out.close()
            if (
                fd.wait_for(lambda: self.proc.poll() is not None or fd.listening(self.proc.pid, port), 10)
                and self.proc.poll() is None
            ):
                self.port = port
                return
            fd.stop(self.proc)
        raise RuntimeError("nginx did not start:\n" + self.log())

    def log(self):
        return fd.read_text(os.path.join(self.dir, "nginx.out")) + fd.read_text(os.path.join(self.dir, "error.log"))

    # --- frsd's own view ------------------------------------------------------
    def held(self):
        """Leases frsd holds for this client now (GET /query counts nothing)."""
        status, _, body = fd.request(self.frsd.port, "/query?biz=llm_inflight&key=127.0.0.1")
        self.assertIn(status, (200, 429), body)  # 429: every place taken
        return MAX - int(re.search(rb' remaining="(\d+)"', body).group(1))

    def metric(self, name):
        _, _, body = fd.request(self.frsd.port, "/metrics")
        m = re.search(rb"^" + name.encode() + rb'\{biz="llm_inflight",id="20"\} (\d+)$', body, re.M)
        return int(m.group(1)) if m else 0

    def held_metric(self):
        """frs_leases_held as the store is now (the master walks for the scrapes)."""
        return fd.held_metric(
            lambda: fd.request(self.frsd.port, "/metrics")[2], 'frs_leases_held{biz="llm_inflight",id="20"}'
        )

    def wait_held(self, n):
        self.assertTrue(
            fd.wait_for(lambda: self.held() == n), "frsd holds %d, not %d\n%s" % (self.held(), n, self.log())
        )

    # --- requests ----------------------------------------------------------------
    def start_request(self, name):
        """GET /v1/NAME in a thread, once the backend has it in hand;
        returns the dict its answer will land in."""
        result = {}

        def run():
            try:
                result["answer"] = fd.request(self.port, "/v1/" + name, timeout=20)
            except OSError as e:
                result["error"] = e

        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.threads.append(t)
        self.assertTrue(
            fd.wait_for(lambda: self.backend.has_seen(name) or "answer" in result),
            "%s never reached the backend: %r\n%s" % (name, result, self.log()),
        )
        self.assertNotIn("answer", result, "answered before the backend did")
        result["thread"] = t
        return result

    def end_request(self, name, result):
        self.backend.finish(name)
        result["thread"].join(20)
        return result["answer"]

    def test_max_in_flight_then_429_and_a_finished_one_frees_its_place(self):
        a = self.start_request("a")
        b = self.start_request("b")
        self.assertEqual(self.held(), MAX)
        self.assertEqual(self.held_metric(), MAX)
        status, h, body = fd.request(self.port, "/v1/c")
        self.assertEqual(status, 429, body)
        self.assertGreaterEqual(int(h.get("retry-after", "0")), 1, h)
        self.assertFalse(self.backend.has_seen("c"), "a refused request reached the backend")
        # The refused request ran post_action too, with no lease: nothing
        # released, both places still taken.
        self.assertEqual(self.metric("frs_leases_released_total"), 0)
        self.assertEqual(self.held(), MAX)

        status, _, body = self.end_request("a", a)
        self.assertEqual((status, body), (200, b"answer a\n"))
        # Released after the response: wait for frsd to see it, then one more
        # request passes and the next is refused again.
        self.wait_held(MAX - 1)
        self.assertEqual(self.metric("frs_leases_released_total"), 1)
        d = self.start_request("d")
        self.assertEqual(fd.request(self.port, "/v1/e")[0], 429)
        self.assertEqual(self.end_request("b", b)[0], 200)
        self.assertEqual(self.end_request("d", d)[0], 200)
        self.wait_held(0)
        self.assertEqual(self.metric("frs_leases_released_total"), 3)
        self.assertEqual(self.metric("frs_leases_granted_total"), 3)
        self.assertEqual(self.held_metric(), 0)

    def test_a_backend_error_and_a_client_that_hangs_up_give_their_place_back(self):
        # The backend hangs up: nginx answers 502, and still releases.
        f = self.start_request("f")
        self.backend.fail("f")
        f["thread"].join(20)
        self.assertEqual(f["answer"][0], 502)
        self.wait_held(0)
        # The client hangs up while the backend still works on its request.
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        s.sendall(b"GET /v1/g HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(fd.wait_for(lambda: self.backend.has_seen("g")), self.log())
        self.assertEqual(self.held(), 1)
        s.close()
        self.wait_held(0)
        self.assertEqual(self.metric("frs_leases_released_total"), 2)
        self.assertEqual(self.metric("frs_leases_expired_total"), 0)


if __name__ == "__main__":
    fd.main()
