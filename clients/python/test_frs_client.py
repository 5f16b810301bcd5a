#!/usr/bin/env python3
"""Tests of frs_client against real frsd processes.

    FRSD=build/src/server/frsd FRSCTL=build/tools/frsctl/frsctl python3 clients/python/test_frs_client.py
    python3 clients/python/test_frs_client.py build/src/server/frsd build/tools/frsctl/frsctl [unittest args]

Each frsd runs --foreground in its own temp dir on <listen port="0">: it binds
a loopback port the kernel chooses and names it in data/frsd.listen, so no
port is picked here and handed on (tests running side by side cannot take
each other's). It is stopped by its pid, never by name. The
cluster tests compare the client's ring with `frsctl owner` (skipped without
FRSCTL). The Frsd class here is reused by tests/clients/test_cgi.py.
"""

import concurrent.futures
import contextlib
import http.client
import http.server
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# What every test that starts frsd shares (tests/common; copied beside this
# file where it runs alone, as tests/clients/test_pip_install.py runs it).
sys.path.append(os.path.join(HERE, "..", "..", "tests", "common"))

import frs_client  # noqa: E402
import processes  # noqa: E402
import stand_ins  # noqa: E402
from frs_client import Client  # noqa: E402


def _tool(env, index):
    path = os.environ.get(env, "")
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    if not path and len(args) > index and os.path.isfile(args[index]):
        path = args[index]
    return os.path.abspath(path) if path else ""


FRSD = _tool("FRSD", 0)
FRSCTL = _tool("FRSCTL", 1)

MAP = """<map>
  <biz id="1" name="login"><rule interval="60" max="5"/></biz>
  <biz id="2" name="ad_user">
    <rule algo="calendar" interval="86400" max="3"/>
    <rule algo="sliding" interval="3600" max="1"/>
  </biz>
  <biz id="5" name="shadowed" mode="shadow"><rule interval="60" max="1"/></biz>
  <biz id="6" name="big"><rule interval="3600" max="1000000"/></biz>
  <biz id="7" name="inflight"><rule algo="concurrency" max="2" lease="60"/></biz>
  <biz id="8" name="twice" reservations="2"><rule interval="3600" max="1000"/></biz>
</map>
"""


class RefusingPort(object):
    """A loopback port bound and never listening: connections to it are
    refused for as long as this object lives, and nobody else can take it."""

    def __init__(self, port=0):
        """port: 0 for one the kernel chooses, or the port of a server just
        stopped, so that it keeps refusing (nobody else can take it)."""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.port = self.sock.getsockname()[1]
        self.name = "127.0.0.1:%d" % self.port

    def close(self):
        self.sock.close()


def http_get(port, target, timeout=2.0):
    """(status, headers dict lower-case, body bytes) of one GET."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", target)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


class Frsd(object):
    """One frsd: its temp dir, srv.xml, map.xml, port and process."""

    def __init__(self, map_xml=MAP, workers=1, extra="", token="s3cret"):
        self.dir = tempfile.mkdtemp(prefix="frs-py-")
        self.workers = workers
        self.extra = extra
        self.token = token
        self.port = 0
        self._config_port = 0
        self.proc = None
        self._err = None
        with open(os.path.join(self.dir, "map.xml"), "w") as f:
            f.write(map_xml)

    @property
    def config(self):
        return os.path.join(self.dir, "srv.xml")

    @property
    def name(self):
        return "127.0.0.1:%d" % self.port

    @property
    def listen_file(self):
        return os.path.join(self.dir, "data", "frsd.listen")

    def write_config(self, port=0, cluster=""):
        """srv.xml on `port`: 0 (frsd binds one of its own), or the port it
        already holds (a shard told its own address with its cluster)."""
        self.port = port
        self._config_port = port
        with open(self.config, "w") as f:
            f.write(
                '<frs>\n  <listen host="127.0.0.1" port="%d"/>\n  <workers>%d</workers>\n'
                '  <map>map.xml</map>\n  <store dir="data" files="1" keynodes="1024" chain="8"/>\n'
                '  <pidfile>frsd.pid</pidfile>\n  <admin token="%s"/>\n%s%s</frs>\n'
                % (port, self.workers, self.token, self.extra, cluster)
            )

    def spawn(self):
        if self._config_port == 0:
            try:
                os.unlink(self.listen_file)  # the last run's address is not this one's
            except OSError:
                pass
            self.port = 0
        self._err = open(os.path.join(self.dir, "frsd.stderr"), "ab")
        self.proc = subprocess.Popen(
            [FRSD, "-c", self.config, "--foreground"],
            stdout=self._err,
            stderr=self._err,
            stdin=subprocess.DEVNULL,
            close_fds=True,
        )

    def wait_healthy(self, timeout=5.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            if self.port == 0:
                self.port = processes.listen_port(self.listen_file)
            try:
                if self.port and http_get(self.port, "/health", timeout=0.5)[0] == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def start(self):
        """Starts on a port of frsd's own binding (writes srv.xml)."""
        self.write_config(0)
        self.spawn()
        if not self.wait_healthy():
            self.stop()
            raise RuntimeError("frsd did not start: " + self.log())

    def reload(self, timeout=10.0):
        """SIGHUP, and wait until every worker logged the reload."""
        if not processes.reload_frsd(self.proc, self.log, self.workers, timeout):
            raise RuntimeError("frsd refused the reload: " + self.log())

    def log(self):
        return processes.read_text(os.path.join(self.dir, "frsd.stderr"))

    def stop(self):
        """SIGTERM and wait; SIGKILL (master, then its workers) when that is not enough."""
        if self.proc is None:
            return
        processes.stop(self.proc, timeout=6, with_workers=True)
        self.proc = None
        if self._err:
            self._err.close()
            self._err = None

    def remove(self):
        self.stop()
        if not os.environ.get("FRS_E2E_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)


def start_cluster(n, weights=None, attrs=""):
    """n frsd shards, each with <cluster self=... enforce="1" ATTRS> naming
    all of them: each starts alone on a port of its own binding, then all are
    told the cluster those ports make, and reload it."""
    weights = weights or [1] * n
    shards = []
    try:
        for _ in range(n):
            shards.append(Frsd())
            shards[-1].start()
        lines = "".join(
            "    <shard%s>127.0.0.1:%d</shard>\n" % ("" if w == 1 else ' weight="%d"' % w, s.port)
            for s, w in zip(shards, weights)
        )
        for s in shards:
            s.write_config(
                s.port,
                '  <cluster self="127.0.0.1:%d" enforce="1"%s>\n%s  </cluster>\n'
                % (s.port, " " + attrs if attrs else "", lines),
            )
            s.reload()
        return shards
    except BaseException:
        for s in shards:
            s.remove()
        raise


class SilentServer(object):
    """A listening socket that accepts (in the kernel's backlog) and never answers."""

    def __init__(self):
        self.sock = stand_ins.listener()
        self.port = self.sock.getsockname()[1]
        self.name = "127.0.0.1:%d" % self.port

    def close(self):
        self.sock.close()


def _read_request(conn):
    """One HTTP request (head and Content-Length body) as bytes, or None at EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            return None
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        piece = conn.recv(65536)
        if not piece:
            return None
        body += piece
    return head + b"\r\n\r\n" + body


def http_answer(body, status="200 OK", close=False):
    """The bytes of one HTTP/1.1 answer holding `body`."""
    return (
        "HTTP/1.1 %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n%s\r\n"
        % (status, len(body), "Connection: close\r\n" if close else "")
    ).encode("ascii") + body


class StubServer(object):
    """A hostile (or merely fake) frsd of this test's own: a loopback socket
    on a port the kernel chooses, one thread per connection. Each request
    read is recorded in .requests, then answer(stub, conn, request) writes the
    answer (stub.send counts the bytes) and returns True to keep the
    connection for another request. Every loop here ends on close() (its
    waits are on .stop), and the sockets have time-outs: nothing outlives
    the test."""

    def __init__(self, answer):
        self.answer = answer
        self.requests = []
        self.sent = 0
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.name = "127.0.0.1:%d" % self.port
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn):
        conn.settimeout(2.0)
        try:
            with conn:
                while not self.stop.is_set():
                    req = _read_request(conn)
                    if req is None:
                        return
                    with self._lock:
                        self.requests.append(req)
                    if not self.answer(self, conn, req):
                        return
        except OSError:
            pass  # the client went away: what several of these tests want

    def send(self, conn, data):
        conn.sendall(data)
        with self._lock:
            self.sent += len(data)

    def close(self):
        self.stop.set()
        for t in list(self._threads):
            t.join(5)
        self.sock.close()


def answer_200(body, status="200 OK"):
    """An answer function: `body` as a 200 (or `status`), keeping the connection."""

    def answer(stub, conn, req):
        stub.send(conn, http_answer(body, status))
        return True

    return answer


def stub_answers(body, **client_args):
    """[(fail, Decision of an acquire, BatchResult of a two-member batch)] for
    both policies, from a stub answering every request with `body` as a 200."""
    stub = StubServer(answer_200(body))
    out = []
    try:
        for fail in ("open", "closed"):
            c = Client(stub.name, timeout=2.0, fail=fail, **client_args)
            try:
                out.append(
                    (fail, c.acquire("login", "k"), c.batch([("acquire", "login", "a"), ("acquire", "login", "b")]))
                )
            finally:
                c.close()
    finally:
        stub.close()
    return out


_Answer503 = stand_ins.fixed_answer(503, b'<response code="503" msg="overloaded"/>\n')


@contextlib.contextmanager
def serving(handler):
    """An HTTP server of `handler` on a port of its own, its "host:port" given."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield "127.0.0.1:%d" % srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()


# What a proxy or another server in frsd's place answers: no FRS XML.
_AnswerBare404 = stand_ins.fixed_answer(404, b"")
_AnswerHtml429 = stand_ins.fixed_answer(429, b"<html><body>Too Many Requests</body></html>")


def each_policy(name, **kw):
    """A Client of `name` with fail="open", then one with fail="closed", each
    closed after its turn, with whether that policy allows when frsd fails."""
    for fail, allowed in (("open", True), ("closed", False)):
        c = Client(name, fail=fail, **kw)
        try:
            yield c, allowed
        finally:
            c.close()


def need_frsd(cls):
    return unittest.skipUnless(FRSD and os.access(FRSD, os.X_OK), "set FRSD to the frsd binary")(cls)


# ------------------------------------------------------------------ ring


class RingTest(unittest.TestCase):
    def test_split_host_port_as_nginx(self):
        split = frs_client._split_host_port
        self.assertEqual(split("127.0.0.1:8300"), ("127.0.0.1", "8300"))
        self.assertEqual(split("[::1]:8300"), ("[::1]", "8300"))
        self.assertEqual(split("backend"), ("backend", ""))
        self.assertEqual(split("host:"), ("host", ""))
        self.assertEqual(split("a:b:x1"), ("a:b:x1", ""))
        self.assertEqual(split("unix:/run/frs.sock"), ("/run/frs.sock", ""))

    def test_points_weights_and_wrap(self):
        ring = frs_client.Ring([("a:1", 1), ("b:2", 3)])
        self.assertLessEqual(len(ring), 4 * 160)
        self.assertGreater(len(ring), 4 * 160 - 5)
        # Above the last point wraps to the first.
        top = max(ring._hashes)
        first_owner = ring.shards[ring._owners[0]][0]
        for r in range(2000):
            route = "w%d" % r
            if frs_client.Ring.hash(route) > top:
                self.assertEqual(ring.owner(route), first_owner)
                break
        # A weight-3 shard owns about three quarters of the routes.
        share = sum(ring.owner("k%d" % i) == "b:2" for i in range(4000)) / 4000.0
        self.assertTrue(0.6 < share < 0.9, share)

    def test_route_of(self):
        self.assertEqual(frs_client.route_of("user:42"), b"user:42")
        self.assertEqual(frs_client.route_of("x{tag}y{z}"), b"tag")
        self.assertEqual(frs_client.route_of("x{}y{z}"), b"x{}y{z}")
        self.assertEqual(frs_client.route_of("x{open"), b"x{open")
        self.assertEqual(frs_client.route_of("é"), "é".encode("utf-8"))
        self.assertEqual(frs_client.route_of("k", route="a b+c&d"), b"a%20b%2Bc%26d")
        self.assertEqual(frs_client.route_of("k", route="abc-._~"), b"abc-._~")

    def test_parse_shards(self):
        self.assertEqual(frs_client.parse_shards("h:1"), [("h:1", 1)])
        self.assertEqual(frs_client.parse_shards("h:1, h:2 weight=3"), [("h:1", 1), ("h:2", 3)])
        self.assertEqual(frs_client.parse_shards(["h:1", ("h:2", 2)]), [("h:1", 1), ("h:2", 2)])
        for bad in ([], ["h:1", "h:1"], [("h:1", 0)], ["h:1 weight=x"], ["h:1 w=2"], [("h:1", 1001)]):
            with self.assertRaises(ValueError):
                frs_client.parse_shards(bad)
        # What is not host:port would fail every call it owns, which
        # fail="open" answers allowed: refused at once, as the C++ client does.
        self.assertEqual(frs_client.parse_shards("[::1]:8300"), [("[::1]:8300", 1)])
        for bad, why in (
            ("127.0.0.1", "it has no :port"),
            ("[::1]", "it has no :port"),
            ("127.0.0.1:notaport", 'its port "notaport" is not a number 1..65535'),
            ("127.0.0.1:99999", "its port 99999 is outside 1..65535"),
            ("host:0", "its port 0 is outside 1..65535"),
            (":8300", "its host is empty"),
            ("[1.2.3.4]:8300", 'its host "[1.2.3.4]" is not an IPv6 address in brackets'),
            ("a/b:8300", 'its host "a/b" is not a DNS name or IP address'),
            ("unix:/run/frs.sock", "a unix: socket, which this client (TCP only) cannot reach"),
        ):
            with self.assertRaises(ValueError) as e:
                Client(bad)
            self.assertIn('shard "%s" is not host:port: %s' % (bad, why), str(e.exception))
        with self.assertRaises(ValueError):
            Client("h:1", fail="maybe")
        for bad in (0, -1, 0.0, float("nan"), float("inf"), "0.5", True):
            with self.assertRaises(ValueError):
                Client("h:1", timeout=bad)
        self.assertIsNone(Client("h:1", timeout=None).timeout)


# ----------------------------------------------------------- one server


@need_frsd
class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # A short idle time-out: the client must notice closed keep-alive connections.
        cls.frsd = Frsd(extra='  <limits idle_timeout_ms="400"/>\n')
        cls.frsd.start()
        cls.client = Client(cls.frsd.name, timeout=2.0, fail="closed", token="s3cret")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.frsd.remove()

    def count_by_get(self, biz, key):
        """The key's count through GET /query (percent-decoded by frsd): a second, independent path."""
        status, _, body = http_get(self.frsd.port, "/query?biz=%s&key=%s" % (biz, urllib.parse.quote(key, safe="")))
        self.assertIn(status, (200, 429), body)
        return int(body.split(b' count="', 1)[1].split(b'"', 1)[0])

    def test_one_client_shared_by_threads_gives_each_its_own_answers(self):
        # Each thread counts a key of its own with update: its answers must
        # read 1, 2, 3, ... A socket shared between threads handed one
        # thread another's answer (or mixed two requests on the wire).
        c = Client(self.frsd.name, timeout=5.0, fail="closed")
        wrong = []

        def count(t):
            for i in range(60):
                d = c.update("big", "threads-%d" % t)
                if d.error is not None or d.count != i + 1:
                    wrong.append((t, i + 1, d.count, d.error))
                    return

        threads = [threading.Thread(target=count, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        c.close()
        self.assertEqual(wrong, [])
        for t in range(8):
            self.assertEqual(self.count_by_get("big", "threads-%d" % t), 60)

    def test_close_from_another_thread_never_makes_a_call_raise(self):
        # close() while other threads call: a call may fail (by the policy,
        # with an error), never raise; it raised AttributeError on a
        # connection dropped under it.
        c = Client(self.frsd.name, timeout=5.0, fail="closed")
        raised, stop = [], threading.Event()

        def call(t):
            while not stop.is_set():
                try:
                    d = c.query("big", "close-%d" % t)
                    if d.error is None and d.status != 200:
                        raised.append("no error and status %d" % d.status)
                except Exception as e:  # what the client must never let out
                    raised.append(repr(e))
                    return

        threads = [threading.Thread(target=call, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            c.close()
            time.sleep(0.002)
        stop.set()
        for t in threads:
            t.join()
        self.assertEqual(raised, [])
        self.assertIsNone(c.query("big", "close-after").error)  # a new connection
        c.close()

    def test_a_client_used_before_a_fork_serves_parent_and_child_apart(self):
        # A pre-forking server makes its client, uses it, then forks: the
        # child must not read the parent's answers off the parent's socket.
        c = Client(self.frsd.name, timeout=5.0, fail="closed")
        self.assertEqual(c.update("big", "fork-parent").count, 1)
        children = []
        for child in range(3):
            pid = os.fork()
            if pid == 0:  # the child: its own key, its own answers
                ok = True
                try:
                    for i in range(50):
                        d = c.update("big", "fork-child-%d" % child)
                        ok = ok and d.error is None and d.count == i + 1
                finally:
                    os._exit(0 if ok else 1)
            children.append(pid)
        for i in range(50):
            d = c.update("big", "fork-parent")
            self.assertIsNone(d.error)
            self.assertEqual(d.count, i + 2)
        for pid in children:
            self.assertEqual(os.waitpid(pid, 0)[1], 0)
        c.close()
        for child in range(3):
            self.assertEqual(self.count_by_get("big", "fork-child-%d" % child), 50)

    def test_acquire_exact_limit(self):
        c = self.client
        for i in range(5):
            d = c.acquire("login", "exact")
            self.assertTrue(d.allowed, d)
            self.assertTrue(d)
            self.assertIsNone(d.error)
            self.assertEqual((d.count, d.limit, d.remaining, d.retry_after), (i + 1, 5, 4 - i, 0))
            self.assertEqual(d.status, 200)
            self.assertEqual(d.server, self.frsd.name)
        d = c.acquire("login", "exact")
        self.assertFalse(d.allowed)
        self.assertFalse(d)
        self.assertIsNone(d.error)
        self.assertEqual((d.count, d.limit, d.remaining), (5, 5, 0))
        self.assertTrue(1 <= d.retry_after <= 60, d)
        self.assertGreater(d.reset, time.time())
        self.assertEqual(len(d.rules), 1)
        r = d.rules[0]
        self.assertEqual((r.algo, r.interval, r.count, r.limit, r.remaining, r.allowed), ("fixed", 60, 5, 5, 0, False))

    def test_leases_acquire_release_renew(self):
        c = self.client
        a, b = c.acquire("inflight", "py"), c.acquire("inflight", "py")
        self.assertTrue(a and b, (a, b))
        self.assertEqual(len(a.lease), 24)
        self.assertNotEqual(a.lease, b.lease)
        self.assertGreater(a.lease_expires, time.time())
        denied = c.acquire("inflight", "py")
        self.assertFalse(denied)
        self.assertIsNone(denied.lease)
        r = c.renew("inflight", "py", a.lease)
        self.assertIsNone(r.error, r)
        self.assertEqual(r.lease, a.lease)
        self.assertTrue(r, r)  # renewed, though both places are held
        r = c.release("inflight", "py", a.lease)
        self.assertTrue(r.released, r)
        self.assertEqual(r.count, 1)
        again = c.release("inflight", "py", a.lease)
        self.assertEqual(again.status, 410, again)
        self.assertFalse(again.released)
        other = c.release("inflight", "py-other", b.lease)
        self.assertEqual(other.status, 409, other)
        self.assertEqual(self.count_by_get("inflight", "py"), 1)
        self.assertTrue(c.release("inflight", "py", b.lease).released)

    def test_reservations_reserve_and_settle(self):
        c = self.client
        d = c.acquire("big", "py-res", n=4000, reserve=600)
        self.assertTrue(d, d)
        self.assertEqual(len(d.reservation), 24)
        self.assertGreater(d.reservation_expires, time.time())
        self.assertEqual(d.lease_expires, 0)
        self.assertEqual(d.count, 4000)
        s = c.settle("big", "py-res", d.reservation, 1730)
        self.assertIsNone(s.error, s)
        self.assertTrue(s.settled)
        self.assertEqual((s.returned, s.overrun, s.count), (2270, 0, 1730))
        again = c.settle("big", "py-res", d.reservation, 1730)
        self.assertEqual(again.status, 410, again)
        self.assertFalse(again.settled)
        other = c.settle("big", "py-res-other", d.reservation, 1)
        self.assertEqual(other.status, 409, other)
        zero = c.acquire("big", "py-res", n=10, reserve=60)
        self.assertTrue(c.settle("big", "py-res", zero.reservation, 0).settled)
        self.assertEqual(self.count_by_get("big", "py-res"), 1730)
        plain = c.acquire("big", "py-res")
        self.assertIsNone(plain.reservation)
        self.assertFalse(plain.reservations_full)
        # Its None id (as a fail="open" answer's): said here, nothing sent.
        none = c.settle("big", "py-res", plain.reservation, 5)
        self.assertFalse(none.allowed or none.settled)
        self.assertEqual(none.status, 0)
        self.assertIn("settle needs the reservation id an acquire answered, not None", none.error)
        self.assertIn("release needs the lease id", c.release("big", "py-res", None).error)
        self.assertEqual(self.count_by_get("big", "py-res"), 1731)

    def test_leases_and_reservations_as_batch_members(self):
        c = self.client
        # Tuples as the methods take their arguments, or dicts.
        res = c.batch([("acquire", "inflight", "py-b"), ("acquire", "big", "py-b", 100, 600)])
        self.assertTrue(res.allowed, res)
        lease, reservation = res[0].lease, res[1].reservation
        self.assertEqual((len(lease), len(reservation)), (24, 24), res)
        res = c.batch(
            [
                ("renew", "inflight", "py-b", lease),
                {"cmd": "settle", "biz": "big", "key": "py-b", "reservation": reservation, "n": 40},
            ]
        )
        self.assertEqual((res[0].lease, res[1].settled, res[1].returned), (lease, True, 60), res)
        res = c.batch([("release", "inflight", "py-b", lease), ("settle", "big", "py-b", reservation, 40)])
        self.assertTrue(res[0].released, res)
        self.assertEqual(res[1].status, 410, res)  # settled once
        for bad in (("release", "inflight", "k", lease, 1), {"cmd": "settle", "biz": "big", "key": "k", "id": "x"}):
            with self.assertRaises(ValueError):
                c.batch([bad])
        # Not a list of members: a string, a lone member (before, the string's
        # characters were taken for members, with a message about one of them).
        for bad in ("inflight", ("acquire", "inflight", "k"), {"cmd": "acquire", "biz": "inflight", "key": "k"}):
            with self.assertRaises(ValueError) as e:
                c.batch(bad)
            self.assertIn("batch takes a list of members", str(e.exception))
        empty = c.batch([])
        self.assertEqual((empty.allowed, empty.error, len(empty)), (False, "the batch is empty", 0))

    def test_reservations_full_says_why_an_acquire_is_denied(self):
        c = self.client
        held = [c.acquire("twice", "py-full", n=5, reserve=600) for _ in range(2)]
        self.assertTrue(all(held), held)
        self.assertFalse(any(d.reservations_full for d in held))
        full = c.acquire("twice", "py-full", n=5, reserve=600)
        self.assertFalse(full, full)
        self.assertTrue(full.reservations_full, full)
        self.assertIsNone(full.reservation)
        self.assertGreater(full.retry_after, 0)
        # The rate rule itself has room: only the table is full.
        self.assertEqual(full.remaining, 990)
        self.assertTrue(c.settle("twice", "py-full", held[0].reservation, 5).settled)
        again = c.acquire("twice", "py-full", n=5, reserve=600)
        self.assertTrue(again, again)
        self.assertFalse(again.reservations_full)

    def test_acquire_n_is_atomic(self):
        c = self.client
        self.assertTrue(c.acquire("login", "n-key", n=3))
        d = c.acquire("login", "n-key", n=3)
        self.assertFalse(d)
        self.assertEqual(d.count, 3)  # nothing recorded
        self.assertTrue(c.acquire("login", "n-key", n=2))
        self.assertFalse(c.acquire("login", "n-key"))

    def test_two_rules_most_restrictive(self):
        d = self.client.acquire("ad_user", "viewer")
        self.assertTrue(d)
        self.assertEqual([r.algo for r in d.rules], ["calendar", "sliding"])
        d = self.client.acquire("ad_user", "viewer")
        self.assertFalse(d)
        self.assertEqual(d.limit, 1)  # the sliding rule denies
        self.assertEqual([r.allowed for r in d.rules], [True, False])
        # Which one, by name (map.xml names neither: BIZ_N).
        self.assertEqual([r.name for r in d.rules if not r.allowed], ["ad_user_2"])

    def test_keys_that_need_escaping(self):
        keys = [
            "a+b",
            "a b",
            "a&b",
            "a&amp;b",
            "a=b?c#d",
            "100%",
            "ünïcødé",
            "emoji 😀",
            'say "hi"',
            "it's",
            "both \"'",
            "<tag/>",
            "x/y\\z",
            "{tag}rest",
            "%41",
        ]
        for i, key in enumerate(keys):
            for _ in range(i + 1):
                d = self.client.acquire("big", key)
                self.assertTrue(d, (key, d))
            self.assertEqual(d.count, i + 1, key)
            self.assertEqual(self.count_by_get("big", key), i + 1, key)
            g = self.client.get("big", key)
            self.assertEqual((g.found, g.count), (True, i + 1), key)
        # Every key was its own node.
        self.assertFalse(self.client.get("big", "ab").found)

    def test_bad_keys_are_denied_whatever_the_policy(self):
        open_client = Client(self.frsd.name, timeout=2.0, fail="open")
        try:
            for key in ("", "tab\there", "x" * 256, "nul\x00"):
                d = open_client.acquire("login", key)
                self.assertFalse(d.allowed, (key, d))
                self.assertEqual(d.status, 400, (key, d))
                self.assertIn("400", d.error)
            d = open_client.acquire("no_such_biz", "k")
            self.assertEqual((d.allowed, d.status), (False, 404))
            self.assertIn("no_such_biz", d.error)
            d = open_client.acquire("login", "lone\udc80surrogate")
            self.assertFalse(d.allowed)
            self.assertIn("bad request", d.error)
            d = open_client.acquire("login", b"\xff")
            self.assertEqual((d.allowed, d.status), (False, 0))
            self.assertIn("the key is bytes that are not UTF-8", d.error)
            # n=True went as n="True", n="2" as 2: an int, or refused unsent.
            for n in (True, "2", 2.0):
                d = open_client.acquire("login", "typed-n", n=n)
                self.assertEqual((d.allowed, d.status), (False, 0), n)
                self.assertIn("n must be an int, not " + type(n).__name__, d.error)
            self.assertEqual(open_client.query("login", "typed-n").count, 0)
        finally:
            open_client.close()
        # A key that is no string is refused alike with one shard or two (it
        # was counted as the key "None" with one, and raised with two).
        for servers in (self.frsd.name, [self.frsd.name, "127.0.0.1:9"]):
            c = Client(servers, timeout=2.0, fail="open")
            try:
                for key in (None, 42):
                    d = c.acquire("login", key)
                    self.assertFalse(d.allowed, (servers, key, d))
                    self.assertIn("the key must be str or bytes", d.error)
                    res = c.batch([("acquire", "login", "ok-key"), ("acquire", "login", key)])
                    self.assertFalse(res.allowed, (servers, key, res))
            finally:
                c.close()

    def test_query_and_update(self):
        c = self.client
        d = c.query("login", "qu", n=5)
        self.assertTrue(d)
        self.assertEqual(d.count, 0)  # read-only
        self.assertFalse(c.query("login", "qu", n=6))
        d = c.update("login", "qu", n=4)
        self.assertTrue(d)
        self.assertEqual(d.count, 4)
        d = c.update("login", "qu", n=3)  # recorded anyway, beyond the limit
        self.assertFalse(d)
        self.assertEqual(d.count, 7)
        d = c.query("login", "qu")
        self.assertFalse(d)
        self.assertEqual((d.count, d.remaining), (7, 0))

    def test_shadow(self):
        self.assertTrue(self.client.acquire("shadowed", "s"))
        d = self.client.acquire("shadowed", "s")
        self.assertTrue(d.allowed)
        self.assertTrue(d.shadow)
        self.assertTrue(d.would_deny)

    def test_admin_set_get_delete(self):
        c = self.client
        self.assertFalse(c.get("login", "adm").found)
        d = c.set("login", "adm", 5)
        self.assertIsNone(d.error, d)
        self.assertEqual(d.count, 5)
        self.assertFalse(c.acquire("login", "adm"))
        d = c.delete("login", "adm")
        self.assertTrue(d.found, d)
        self.assertTrue(c.acquire("login", "adm"))
        anon = Client(self.frsd.name, timeout=2.0)
        try:
            d = anon.set("login", "adm", 0)
            self.assertEqual((d.allowed, d.status), (False, 403))
        finally:
            anon.close()

    def test_batch_all_or_nothing(self):
        c = self.client
        self.assertTrue(c.acquire("login", "b2", n=4))
        res = c.batch([("acquire", "login", "b1"), ("acquire", "login", "b2", 2)])
        self.assertFalse(res.allowed)
        self.assertFalse(res)
        self.assertEqual(len(res), 2)
        self.assertEqual(c.query("login", "b1").count, 0)  # nothing recorded
        self.assertEqual(c.query("login", "b2").count, 4)
        res = c.batch([("acquire", "login", "b1", 2), ("acquire", "login", "b2"), ("query", "login", "b3")])
        self.assertTrue(res.allowed, res)
        self.assertEqual([d.count for d in res], [2, 5, 0])
        self.assertTrue(all(d.allowed for d in res))
        self.assertIsNone(res.error)
        # A bad member fails the whole batch, and nothing is counted.
        res = c.batch([("acquire", "login", "b4"), ("acquire", "nope", "b4")])
        self.assertFalse(res.allowed)
        self.assertEqual([d.status for d in res], [404, 404])
        self.assertEqual(c.query("login", "b4").count, 0)
        self.assertFalse(c.batch([]).allowed)
        with self.assertRaises(ValueError):
            c.batch([("acquire", "login")])
        # A string is no member (it read as cmd "a", biz "c", key "q", ...).
        for bad in ("acquire", b"acquire", 42, None):
            with self.assertRaisesRegex(ValueError, "a batch member is a tuple"):
                c.batch([bad])

    def test_get_in_batch(self):
        self.client.acquire("login", "bg")
        res = self.client.batch([("get", "login", "bg"), ("get", "login", "bg-absent")])
        self.assertEqual([(d.found, d.count) for d in res], [(True, 1), (False, 0)])

    def test_set_and_delete_in_batch_carry_the_token(self):
        # They went without it (403), and a tuple's count was dropped.
        res = self.client.batch([("set", "login", "bs", 3), {"cmd": "set", "biz": "login", "key": "bs2", "count": 2}])
        self.assertIsNone(res.error, res)
        self.assertEqual([d.count for d in res], [3, 2])
        self.assertEqual(self.client.get("login", "bs").count, 3)
        res = self.client.batch([("delete", "login", "bs"), ("delete", "login", "bs-absent")])
        self.assertIsNone(res.error, res)
        self.assertEqual([d.found for d in res], [True, False])
        self.assertFalse(self.client.get("login", "bs").found)

    def test_keepalive_reopened_after_idle_close(self):
        c = Client(self.frsd.name, timeout=2.0, fail="closed")
        try:
            self.assertTrue(c.acquire("big", "idle"))
            first = c._server(self.frsd.name).conn.sock
            time.sleep(0.8)  # frsd closes the idle connection after 400 ms
            d = c.acquire("big", "idle")
            self.assertIsNone(d.error, d)
            self.assertEqual(d.count, 2)  # sent once again, counted once
            self.assertIsNot(c._server(self.frsd.name).conn.sock, first)
            # Back to back, the connection is kept.
            sock = c._server(self.frsd.name).conn.sock
            for _ in range(20):
                c.acquire("big", "idle")
            self.assertIs(c._server(self.frsd.name).conn.sock, sock)
        finally:
            c.close()


# -------------------------------------------------------------- failures


class FailureTest(unittest.TestCase):
    def test_timeout_fail_open_and_closed(self):
        silent = SilentServer()
        try:
            for c, allowed in each_policy(silent.name, timeout=0.2):
                t = time.monotonic()
                d = c.acquire("login", "k")
                took = time.monotonic() - t
                self.assertEqual(d.allowed, allowed, d)
                self.assertIn("timed out", d.error)
                self.assertEqual(d.status, 0)
                self.assertLess(took, 1.5)
                res = c.batch([("acquire", "login", "a"), ("acquire", "login", "b")])
                self.assertEqual(res.allowed, allowed)
                self.assertTrue(all(d.error for d in res))
        finally:
            silent.close()

    def test_a_batch_split_over_a_silent_shard_waits_one_time_out(self):
        # Ten keys, each its own route, over two shards that never answer:
        # one deadline per shard (0.2 s each), not one per part (2 s).
        silent = [SilentServer(), SilentServer()]
        try:
            c = Client([s.name for s in silent], timeout=0.2, fail="open")
            try:
                t = time.monotonic()
                res = c.batch([("get", "login", "u%d" % i) for i in range(10)])
                took = time.monotonic() - t
                self.assertTrue(all("timed out" in d.error for d in res), res)
                self.assertLess(took, 1.2)
            finally:
                c.close()
        finally:
            for s in silent:
                s.close()

    def test_connection_refused(self):
        refusing = RefusingPort()
        try:
            for c, allowed in each_policy(refusing.name, timeout=0.5):
                d = c.query("login", "k")
                self.assertEqual(d.allowed, allowed)
                self.assertIn("ConnectionRefused", d.error)
                # Nothing to admit: a release, renew or settle that failed
                # reads as not done, whatever the policy.
                for done in (
                    c.release("login", "k", "0" * 24),
                    c.renew("login", "k", "0" * 24),
                    c.settle("login", "k", "0" * 24, 5),
                ):
                    self.assertFalse(done, done)
                    self.assertIn("ConnectionRefused", done.error)
                    self.assertFalse(done.released or done.settled)
                # In a batch too, beside an acquire that follows the policy.
                res = c.batch([("acquire", "login", "k"), ("settle", "login", "k", "0" * 24, 5)])
                self.assertEqual([d.allowed for d in res], [allowed, False])
                self.assertFalse(res.allowed)
        finally:
            refusing.close()

    def test_5xx_follows_the_policy(self):
        with serving(_Answer503) as name:
            for c, allowed in each_policy(name, timeout=1.0):
                d = c.acquire("login", "k")
                self.assertEqual((d.allowed, d.status), (allowed, 503), d)
                self.assertIn("overloaded", d.error)

    def test_a_5xx_from_both_holders_names_both(self):
        with serving(_Answer503) as one, serving(_Answer503) as two:
            c = Client([one, two], timeout=1.0, fail="closed")
            try:
                d = c.acquire("login", "k")
                self.assertFalse(d.allowed)
                self.assertEqual(d.status, 503)
                self.assertIn("the route's other holder", d.error)
                for name in (one, two):
                    self.assertIn("HTTP 503 from %s: overloaded" % name, d.error)
                self.assertEqual(c.failovers, 0)
            finally:
                c.close()

    def test_a_4xx_that_is_no_frs_answer_follows_the_policy(self):
        # frsd refuses with a <response>; a bare 404 or an HTML 429 is
        # something else answering (a wrong port, a proxy's own limit).
        for handler, status in ((_AnswerBare404, 404), (_AnswerHtml429, 429)):
            with serving(handler) as name:
                for c, allowed in each_policy(name, timeout=1.0):
                    d = c.acquire("login", "k")
                    self.assertEqual((d.allowed, d.status), (allowed, status), d)
                    res = c.batch([("acquire", "login", "a"), ("acquire", "login", "b")])
                    self.assertEqual([d.allowed for d in res], [allowed, allowed], res)


class HostileServerTest(unittest.TestCase):
    """Servers that answer slowly, hugely, elsewhere or wrongly: the client
    stays bounded in time and memory and decides by its fail policy."""

    def test_deadline_bounds_a_trickled_answer(self):
        # A valid 200 answer, one byte every 0.2 s: about 15 s in all. The
        # time-out is the whole call's, not each read's.
        answer = http_answer(b'<response code="0" allowed="0"/>\n')
        self.assertGreater(len(answer) * 0.2, 10)

        def trickle(stub, conn, req):
            for i in range(len(answer)):
                stub.send(conn, answer[i : i + 1])
                if stub.stop.wait(0.2):
                    return False
            return False

        stub = StubServer(trickle)
        try:
            for c, allowed in each_policy(stub.name, timeout=0.5):
                t = time.monotonic()
                d = c.acquire("login", "k")
                took = time.monotonic() - t
                self.assertLess(took, 1.2, d)
                self.assertEqual(d.allowed, allowed, d)
                self.assertIn("timed out", d.error or "", d)
                self.assertEqual(d.status, 0)
                t = time.monotonic()
                res = c.batch([("acquire", "login", "a"), ("acquire", "login", "b")])
                self.assertLess(time.monotonic() - t, 1.2, res)
                self.assertEqual(res.allowed, allowed, res)
                self.assertIn("timed out", res.error or "", res)
        finally:
            stub.close()

    def test_421_to_a_shard_outside_the_ring_is_not_followed(self):
        elsewhere = StubServer(answer_200(b'<response code="0" allowed="1" count="1"/>\n'))
        misroute = b'<response code="421" msg="route belongs to shard %s" owner="%s"/>\n' % (
            elsewhere.name.encode(),
            elsewhere.name.encode(),
        )
        stub = StubServer(answer_200(misroute, "421 Misdirected Request"))
        try:
            for c, allowed in each_policy(stub.name, timeout=2.0, token="s3cret"):
                for d in (
                    c.set("login", "k", 0),
                    c.acquire("login", "k"),
                    c.delete("login", "k"),
                    c.batch([("acquire", "login", "a")]),
                ):
                    self.assertEqual(d.allowed, allowed, d)
                    self.assertIn("not in this client's shard list", d.error or "", d)
                self.assertEqual(c.redirects, 0)
            self.assertIn(b"s3cret", stub.requests[0])  # the token was there to leak
            self.assertEqual(elsewhere.requests, [])  # nothing went outside the ring, no token
            # An owner in the client's own ring is followed, once.
            c = Client([stub.name, elsewhere.name], timeout=2.0, fail="closed", token="s3cret")
            try:
                key = next(k for k in ("r-%d" % i for i in range(1000)) if c.owner(k) == stub.name)
                d = c.acquire("login", key)
                self.assertTrue(d.allowed, d)
                self.assertIsNone(d.error, d)
                self.assertEqual((d.server, c.redirects, len(elsewhere.requests)), (elsewhere.name, 1, 1))
            finally:
                c.close()
        finally:
            stub.close()
            elsewhere.close()

    def test_answer_over_64_mib_is_not_read(self):
        import tracemalloc

        def huge(stub, conn, req):
            # Announces 100 MB and streams zeros until the client goes away.
            stub.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: 100000000\r\n\r\n")
            zeros = b"\0" * 65536
            left = 100000000
            while left > 0 and not stub.stop.is_set():
                stub.send(conn, zeros[:left])
                left -= len(zeros)
            return False

        def endless_chunks(stub, conn, req):
            # No length announced: a chunked body that grows past the cap.
            stub.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b"10000\r\n" + b"\0" * 65536 + b"\r\n"
            for _ in range(100000000 // 65536):
                if stub.stop.is_set():
                    return False
                stub.send(conn, chunk)
            stub.send(conn, b"0\r\n\r\n")
            return False

        stub = StubServer(huge)
        try:
            for c, allowed in each_policy(stub.name, timeout=10.0):
                tracemalloc.start()
                try:
                    t = time.monotonic()
                    d = c.acquire("login", "k")
                    took = time.monotonic() - t
                    peak = tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()
                self.assertIn("100000000", d.error or "", d)
                self.assertEqual(d.allowed, allowed, d)
                self.assertLess(took, 1.0, d)
                self.assertLess(peak, 8 << 20)  # the body was not read
            time.sleep(0.2)  # the stub notices the closed connection
            self.assertLess(stub.sent, 16 << 20)  # of the 100 MB announced
        finally:
            stub.close()
        stub = StubServer(endless_chunks)
        try:
            c = Client(stub.name, timeout=10.0, fail="closed")
            try:
                d = c.acquire("login", "k")
                self.assertFalse(d.allowed, d)
                self.assertIn("64 MiB", d.error or "", d)
            finally:
                c.close()
            time.sleep(0.2)
            self.assertLess(stub.sent, 90000000)  # it stopped reading at the cap
        finally:
            stub.close()

    def test_200_without_frs_xml_follows_the_policy(self):
        for body in (b"hello, not XML\n", b"<html><body>a proxy's page</body></html>\n", b""):
            for fail, d, res in stub_answers(body):
                allowed = fail == "open"
                self.assertEqual(d.allowed, allowed, (body, fail, d))
                self.assertIn("not FRS XML", d.error or "", (body, fail, d))
                self.assertEqual(res.allowed, allowed, (body, fail, res))
                self.assertEqual([m.allowed for m in res], [allowed, allowed], (body, fail, res))
                self.assertIn("not FRS XML", res.error or "", (body, fail, res))

    def test_a_refusal_sent_with_200_follows_the_policy(self):
        # frsd sends a refusal with its own status (400, 404, 503): one in a
        # 200 is not frsd answering (it was denied whatever fail said).
        for body in (b'<response code="503" msg="overloaded"/>\n', b'<response code="404" msg="unknown biz"/>\n'):
            for fail, d, res in stub_answers(body):
                allowed = fail == "open"
                self.assertEqual(d.allowed, allowed, (body, fail, d))
                self.assertIn("answered HTTP 200 with a refusal", d.error or "", (body, fail, d))
                self.assertEqual(res.allowed, allowed, (body, fail, res))

    def test_frs_answer_without_allowed_follows_the_policy(self):
        for body in (
            b'<response code="0"/>\n',
            b'<response code="0" allowed="maybe"/>\n',
            b"<response/>\n",
            b'<batch allowed="1"><response code="0"/><response code="0"/></batch>\n',
            b'<batch allowed="1"><response code="0" allowed="1"/></batch>\n',
        ):
            for fail, d, res in stub_answers(body):
                allowed = fail == "open"
                self.assertEqual(d.allowed, allowed, (body, fail, d))
                self.assertTrue(d.error, (body, fail, d))
                self.assertEqual(res.allowed, allowed, (body, fail, res))
                self.assertEqual([m.allowed for m in res], [allowed, allowed], (body, fail, res))
                self.assertTrue(res.error, (body, fail, res))


# --------------------------------------------------------------- cluster


@need_frsd
class ClusterTest(unittest.TestCase):
    WEIGHTS = [1, 1, 2]

    @classmethod
    def setUpClass(cls):
        cls.shards = start_cluster(3, cls.WEIGHTS)
        cls.names = [s.name for s in cls.shards]
        spec = [n if w == 1 else "%s weight=%d" % (n, w) for n, w in zip(cls.names, cls.WEIGHTS)]
        cls.client = Client(spec, timeout=2.0, fail="closed")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        for s in cls.shards:
            s.remove()

    def shard_client(self, i):
        return Client(self.names[i], timeout=2.0, fail="closed")

    @unittest.skipUnless(FRSCTL and os.access(FRSCTL, os.X_OK), "set FRSCTL to the frsctl binary")
    def test_owner_matches_frsctl(self):
        routes = ["route-%d" % i for i in range(170)] + ["user:%d" % i for i in range(10)]
        routes += [
            "a b",
            "a+b",
            "a&b",
            "ünï",
            "😀",
            "x%20y",
            "{t}",
            "127.0.0.1",
            "-",
            "~",
            "A" * 200,
            "q'\"",
            "tab",
            "z:1",
            "k" * 7,
            "0",
            "00",
            "1",
            "route",
            "frs",
        ]
        self.assertEqual(len(routes), 200)
        # A few frsctl at a time: under AddressSanitizer each takes ~150 ms to start.
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")

        def frsctl_owner(route):
            out = subprocess.run(
                [FRSCTL, "-c", self.shards[0].config, "owner", route], capture_output=True, check=True, env=env
            )
            return out.stdout.decode().strip()

        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            wants = list(pool.map(frsctl_owner, routes))
        seen = set()
        for r, want in zip(routes, wants):
            self.assertEqual(self.client.owner(r), want, r)
            seen.add(want)
        self.assertEqual(seen, set(self.names))

    @unittest.skipUnless(FRSCTL and os.access(FRSCTL, os.X_OK), "set FRSCTL to the frsctl binary")
    def test_successor_matches_frsctl(self):
        # The same <cluster> with replicas: frsctl owner names the successor too.
        with open(self.shards[0].config) as f:
            text = f.read()
        conf = os.path.join(self.shards[0].dir, "replicas.xml")
        with open(conf, "w") as f:
            f.write(text.replace('enforce="1">', 'enforce="1" replicas="1">', 1))
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
        ring = self.client.ring

        def frsctl_holders(route):
            out = subprocess.run([FRSCTL, "-c", conf, "owner", route], capture_output=True, check=True, env=env)
            owner, succ = out.stdout.decode().splitlines()
            return owner, succ.split()[-1]

        routes = ["route-%d" % i for i in range(40)] + ["a b", "ünï", "{t}"]
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            wants = list(pool.map(frsctl_holders, routes))
        for r, (owner, succ) in zip(routes, wants):
            self.assertEqual(ring.owner(r), owner, r)
            self.assertEqual(ring.shards[ring.successor_index(r)][0], succ, r)
        self.assertIsNone(frs_client.Ring([(self.names[0], 1)]).successor_index("x"))

    def test_requests_reach_their_owner(self):
        c = self.client
        before = c.redirects
        keys = ["ck-%d" % i for i in range(30)] + ["a b", "a+b", "a&b", "ünï", 'q"', "{grp}x", "{grp}y"]
        owners = set()
        for k in keys:
            d = c.acquire("login", k)
            self.assertTrue(d, (k, d))
            self.assertEqual(d.server, c.owner(frs_client.route_of(k)), k)
            owners.add(d.server)
        self.assertEqual(c.redirects, before)  # never misrouted
        self.assertEqual(owners, set(self.names))
        # {grp}x and {grp}y live together.
        self.assertEqual(c.get("login", "{grp}x").server, c.get("login", "{grp}y").server)
        # Keys travel in the XML body: frsd hashes the decoded key, not a
        # percent-encoded form. Keys whose two forms have different owners:
        q = lambda s: urllib.parse.quote(s, safe="")  # noqa: E731
        apart = [k for k in ("sp ace+&é-%d" % i for i in range(60)) if c.owner(q(k)) != c.owner(k)][:5]
        self.assertTrue(apart)
        for k in apart:
            d = c.acquire("login", k)
            self.assertTrue(d, (k, d))
            self.assertEqual(d.server, c.owner(k), k)
        # The route argument travels percent-encoded in the query string and
        # frsd hashes it as sent: the encoded form decides.
        routes = [r for r in ("r b+c&ü-%d" % i for i in range(60)) if c.owner(q(r)) != c.owner(r)][:5]
        self.assertTrue(routes)
        # A key of its own per route: six acquires of one key (a limit of 5)
        # were denied whenever the ring, which the shards' ports change at
        # each run, put all six routes on one shard.
        for i, route in enumerate(routes + ["plain"]):
            d = c.acquire("login", "rk-%d" % i, route=route)
            self.assertTrue(d, (route, d))
            self.assertEqual(d.server, c.owner(q(route)), route)
        self.assertEqual(c.redirects, before)

    def test_421_is_followed_once(self):
        # Every shard, with weights other than the cluster's (as during a
        # re-sharding): frsd names the owner, one of this client's shards.
        other = Client(self.names, timeout=2.0, fail="closed")
        one = self.shard_client(0)  # knows one shard: the owner frsd names is not among its own
        try:
            moved = [k for k in ("m-%d" % i for i in range(200)) if other.owner(k) != self.client.owner(k)][:5]
            self.assertEqual(len(moved), 5)
            for k in moved:
                d = other.acquire("login", k)
                self.assertTrue(d, d)
                self.assertEqual(d.server, self.client.owner(k))
                self.assertEqual(self.client.query("login", k).count, 1)
            self.assertEqual(other.redirects, len(moved))
            # A 421 naming a server outside the client's list is not followed:
            # it fails (closed here), and nothing is counted anywhere.
            k = next(k for k in ("n-%d" % i for i in range(200)) if self.client.owner(k) != self.names[0])
            d = one.acquire("login", k)
            self.assertEqual((d.allowed, d.status), (False, 421), d)
            self.assertIn("not in this client's shard list", d.error)
            self.assertEqual(self.client.query("login", k).count, 0)
            self.assertEqual(one.redirects, 0)
        finally:
            other.close()
            one.close()

    def test_batch_split_by_owner(self):
        c = self.client
        by_owner = {}
        for i in range(60):
            by_owner.setdefault(c.owner("bs-%d" % i), []).append("bs-%d" % i)
        keys = [ks[j] for j in range(2) for ks in by_owner.values()]
        self.assertEqual(len(keys), 6)
        res = c.batch([("acquire", "login", k, 2) for k in keys])
        self.assertTrue(res.allowed, res)
        for k, d in zip(keys, res):
            self.assertEqual((d.count, d.server), (2, c.owner(k)), k)
            # Counted at its owner: a client of that shard alone sees it.
            s = self.shard_client(self.names.index(c.owner(k)))
            self.assertEqual(s.get("login", k).count, 2)
            s.close()
        self.assertEqual(c.redirects, 0)
        # Members sharing a {tag} go together, all-or-nothing.
        res = c.batch([("acquire", "login", "{bt}a", 5), ("acquire", "login", "{bt}b", 6)])
        self.assertFalse(res.allowed)
        self.assertEqual(c.query("login", "{bt}a").count, 0)
        # A denied group stops the groups after it; the groups before it counted.
        first, second, third = keys[0], keys[1], keys[2]
        self.assertNotEqual(c.owner(first), c.owner(second))
        res = c.batch([("acquire", "login", first), ("acquire", "login", second, 4), ("acquire", "login", third)])
        self.assertFalse(res.allowed)
        self.assertTrue(res[0].allowed)
        self.assertFalse(res[1].allowed)
        self.assertIsNone(res[1].error)
        self.assertIn("not sent", res[2].error)
        self.assertEqual([c.query("login", k).count for k in (first, second, third)], [3, 2, 2])

    def test_batch_with_route_is_sent_whole(self):
        c = self.client
        res = c.batch([("acquire", "login", "rw-1"), ("acquire", "login", "rw-2")], route="tenant7")
        self.assertTrue(res.allowed, res)
        owner = c.owner("tenant7")
        self.assertEqual({d.server for d in res}, {owner})
        self.assertEqual(c.query("login", "rw-1", route="tenant7").count, 1)
        # Members that route apart, sent whole to one shard without a route, are refused.
        s = self.shard_client(0)
        try:
            apart = [k for k in ("ra-%d" % i for i in range(50)) if c.owner(k) == self.names[0]][:2]
            res = s.batch([("acquire", "login", apart[0]), ("acquire", "login", apart[1])])
            self.assertEqual(res[0].status, 400)
            self.assertIn("route differently", res.error)
        finally:
            s.close()


class FailoverTest(unittest.TestCase):
    """With <cluster replicas="1"> a route's successor holds the owner's
    counts: the client asks it when the owner cannot answer."""

    @classmethod
    def setUpClass(cls):
        cls.shards = start_cluster(3, attrs='replicas="1" replica_mode="sync" replica_timeout_ms="200"')
        cls.names = [s.name for s in cls.shards]

    @classmethod
    def tearDownClass(cls):
        for s in cls.shards:
            s.remove()

    def test_a_hung_then_dead_owners_routes_are_answered_by_its_successor(self):
        c = Client(self.names, timeout=2.0, fail="open", skip_failed=0.5)
        owner_only = Client(self.names, timeout=0.3, fail="open", failover=False)
        self.addCleanup(c.close)
        self.addCleanup(owner_only.close)
        victim = self.shards[0]
        keys = [k for k in ("fo-%d" % i for i in range(400)) if c.owner(k) == victim.name][:6]
        successor = {c.ring.shards[c.ring.successor_index(frs_client.route_of(k))][0] for k in keys}
        for k in keys[:3]:
            for _ in range(5):
                self.assertTrue(c.acquire("login", k).allowed)
        for k in keys[3:]:
            self.assertTrue(c.acquire("login", k).allowed)
        pids = [victim.proc.pid] + processes.children(victim.proc.pid)
        for p in pids:
            os.kill(p, signal.SIGSTOP)
        try:
            # Hung: the owner has half the call's time, its successor the rest.
            t = time.monotonic()
            d = c.acquire("login", keys[0])
            took = time.monotonic() - t
            self.assertIsNone(d.error, d)
            self.assertIn(d.server, successor)
            self.assertEqual((d.allowed, d.count), (False, 5), d)
            self.assertGreaterEqual(took, 0.9)
            self.assertLess(took, 2.0)
            # Then skipped: the successor first, at once.
            t = time.monotonic()
            d = c.acquire("login", keys[3])
            self.assertLess(time.monotonic() - t, 0.9)
            self.assertEqual((d.allowed, d.count, d.error), (True, 2, None), d)
            d = owner_only.acquire("login", keys[0])
            self.assertTrue(d.unanswered and d.allowed and "timed out" in d.error, d)
        finally:
            processes.kill9(victim.proc)
        # Dead: refused at once, asked of the successor; no key gets past 5.
        for k in keys:
            granted = sum(bool(c.acquire("login", k)) for _ in range(6))
            self.assertEqual(granted, 0 if k in keys[:3] else 3 if k == keys[3] else 4, k)
        res = c.batch([("query", "login", keys[0]), ("query", "login", keys[3])])
        self.assertEqual([(d.error, d.count) for d in res], [(None, 5), (None, 5)], res)
        self.assertGreaterEqual(c.failovers, 2 + 6 * 6 + 2)
        # Back, after its catch-up: asked first again once skip_failed passed,
        # and it holds what its successor granted meanwhile.
        victim.spawn()
        self.assertTrue(victim.wait_healthy(20.0), victim.log())
        time.sleep(0.5)
        before = c.failovers
        for k in keys:
            d = c.query("login", k)
            self.assertEqual((d.server, d.count, d.error), (victim.name, 5, None), d)
        self.assertEqual(c.failovers, before)


def main():
    argv = [sys.argv[0]] + [a for a in sys.argv[1:] if a.startswith("-") or not os.path.isfile(a)]
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
