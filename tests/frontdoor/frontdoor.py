"""What the front-door tests share: a real frsd, a stand-in site, the shipped
config rendered with test addresses, and a front door run and stopped by pid.

Each test gets a temp dir, a fresh frsd (fresh counts) on a loopback port it
binds itself (<listen port="0">, named in data/frsd.listen), and the front
door (nginx, haproxy or caddy, Debian's) started in the
foreground from the SHIPPED file in conf/frontdoor/, in which only the
addresses (and paths) are replaced; every replacement must match the shipped
text exactly as often as expected, so a change of the file that the test
would silently stop covering fails here instead. Everything listens on
127.0.0.1. Every process started is stopped by its pid, never by name.

A missing front door fails the test (tools/setup.sh --test installs nginx,
haproxy and caddy): processes.require().
"""

import http.client
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
import nginx_conf  # noqa: E402,F401  (the tests use them here)
from processes import candidate_port, held_metric, listening, read_text, require, stop, wait_for  # noqa: E402,F401
from stand_ins import fixed_answer, listener  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CONF = os.path.join(ROOT, "conf", "frontdoor")

# The bizes the shipped configs name, with small limits.
LOGIN_MAX = 3
API_MAX = 5
MAP = """<map>
  <biz id="1" name="login"><rule interval="60" max="%d"/></biz>
  <biz id="3" name="api"><rule interval="60" max="%d"/></biz>
</map>
""" % (
    LOGIN_MAX,
    API_MAX,
)


def frsd_path():
    p = os.environ.get("FRSD", "")
    if not p:
        p = os.path.join(ROOT, "build", "src", "server", "frsd")
    return os.path.abspath(p)


def main():
    """unittest.main(), or a failure when there is no frsd to test."""
    if not os.access(frsd_path(), os.X_OK):
        sys.exit("FAIL: no frsd at %s (set FRSD)" % frsd_path())
    unittest.main(verbosity=2)


def accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def request(port, path, method="GET", body=None, timeout=5.0, headers=None):
    """(status, {lower-case name: value}, body bytes) of one request."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = dict(headers or {})
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def remaining(headers):
    """r of `RateLimit: "name";r=R;t=T`, or None."""
    v = headers.get("ratelimit", "")
    for part in v.split(";"):
        if part.startswith("r="):
            return int(part[2:])
    return None


def render(src, dst, replacements):
    """Copies the shipped file `src` to `dst` with (old, new, times) replaced;
    each `old` must occur exactly `times` times in the shipped text."""
    with open(src) as f:
        text = f.read()
    for old, new, times in replacements:
        found = text.count(old)
        if found != times:
            raise AssertionError(
                "%s: expected %r %d time(s), found %d: the test's rendering needs updating"
                % (os.path.relpath(src, ROOT), old, times, found)
            )
        text = text.replace(old, new)
    with open(dst, "w") as f:
        f.write(text)
    return text


class Frsd(object):
    """One frsd --foreground in `dir`, on a port it binds itself."""

    def __init__(self, dir):
        self.dir = dir
        self.proc = None
        self.port = 0
        self.held = None
        os.makedirs(dir, exist_ok=True)
        with open(os.path.join(dir, "map.xml"), "w") as f:
            f.write(MAP)

    def start(self):
        with open(os.path.join(self.dir, "srv.xml"), "w") as f:
            f.write(
                '<frs>\n  <listen host="127.0.0.1" port="0"/>\n  <workers>1</workers>\n'
                '  <map>map.xml</map>\n  <store dir="data" files="2" keynodes="4096" chain="8"/>\n'
                '  <pidfile>frsd.pid</pidfile>\n  <admin token=""/>\n</frs>\n'
            )
        listen_file = os.path.join(self.dir, "data", "frsd.listen")
        if os.path.exists(listen_file):
            os.unlink(listen_file)
        err = open(os.path.join(self.dir, "frsd.stderr"), "ab")
        self.proc = subprocess.Popen(
            [frsd_path(), "-c", os.path.join(self.dir, "srv.xml"), "--foreground"],
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
        )
        err.close()

        def bound():
            try:
                with open(listen_file) as f:
                    line = f.read()
            except OSError:
                return False
            if not line.endswith("\n"):
                return False
            self.port = int(line.rsplit(":", 1)[1])
            return True

        if (
            wait_for(lambda: self.proc.poll() is not None or bound())
            and self.proc.poll() is None
            and wait_for(self.healthy)
        ):
            return
        stop(self.proc)
        raise RuntimeError("frsd did not start: " + self.log())

    def healthy(self):
        try:
            return request(self.port, "/health", timeout=1)[0] == 200
        except OSError:
            return False

    def stop(self):
        """SIGTERM to the master (its workers follow); its port then stays
        bound here without listening, so it refuses connections for the rest
        of the test and nobody else's server can answer on it."""
        stop(self.proc)
        self.held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.held.bind(("127.0.0.1", self.port))
        if accepts(self.port):
            raise RuntimeError("frsd's port still accepts after it stopped")

    def close(self):
        stop(self.proc)
        if self.held:
            self.held.close()
            self.held = None

    def log(self):
        try:
            with open(os.path.join(self.dir, "frsd.stderr"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""


class QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A peer that closed mid-answer (a front door stopped, or frs.lua
        # hanging up after the headers it needs) is no error here.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class Site(object):
    """The protected site, in this process: answers `page PATH body=BODY`,
    and tells what RateLimit request header it was given (X-Seen-RateLimit)."""

    def __init__(self):
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                out = b"page " + self.path.encode() + b" body=" + body + b"\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(out)))
                self.send_header("X-Seen-RateLimit", self.headers.get("RateLimit", "-"))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(out)

            do_POST = do_GET
            do_HEAD = do_GET

            def log_message(self, *args):
                pass

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Stub(object):
    """An "frsd" that answers every request with `status` (503: overloaded)."""

    def __init__(self, status):
        handler = fixed_answer(status, b'<response code="%d" msg="stub"/>\n' % status)
        self.server = QuietServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Silent(object):
    """A listener that accepts and never answers: an frsd that hangs."""

    def __init__(self):
        self.sock = listener()
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.done = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        self.sock.settimeout(0.1)
        while not self.done:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                pass

    def close(self):
        self.done = True
        self.thread.join(2)
        for c in self.conns:
            c.close()
        self.sock.close()


class FrontDoorTest(unittest.TestCase):
    """The checks every front door passes; subclasses start the front door
    (start_door(frsd_port, extra) sets self.port) and stop it (stop_door())."""

    door = "front door"  # the program, Debian's, in /usr/sbin or /usr/bin
    shipped = None  # its file in conf/frontdoor/
    # (old, new, times) replacements that make the shipped file ask frsd about
    # a biz its map.xml lacks (frsd: 404): for every path but /login, and for
    # /login; and what /login (fail-closed) then answers.
    unknown_biz = None
    unknown_login_biz = None
    unknown_login_status = 500
    forwards_fields = False  # the site gets frsd's RateLimit as a request header

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        # Not a skip: tools/setup.sh --test installs every front door.
        cls.program = require(cls.door, "/usr/sbin/" + cls.door, "/usr/bin/" + cls.door)

    @classmethod
    def setUpClass(cls):
        cls.site = Site()

    @classmethod
    def tearDownClass(cls):
        cls.site.close()

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="frs-frontdoor-")
        self.frsd = Frsd(os.path.join(self.dir, "frsd"))
        self.frsd.start()
        self.proc = None
        self.silent = None
        self.stub = None
        self.port = 0

    def tearDown(self):
        self.stop_door()
        self.frsd.close()
        if self.silent:
            self.silent.close()
        if self.stub:
            self.stub.close()
        if not os.environ.get("FRS_E2E_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)

    # --- to be provided by each front door -------------------------------
    def start_door(self, frsd_port, extra=()):
        """Renders the shipped file (plus `extra` replacements) for frsd at
        127.0.0.1:frsd_port and starts the front door on it."""
        raise NotImplementedError

    def door_log(self):
        return ""

    def stop_door(self):
        stop(self.proc)
        self.proc = None

    # --- helpers -----------------------------------------------------------
    def render_shipped(self, dst, replacements):
        """The shipped file, with `replacements` (see render()), written to `dst`."""
        render(os.path.join(CONF, self.shipped), dst, replacements)

    def spawn(self, argv, ready_port_fn, env=None, name="door"):
        """Starts argv, which must listen on the candidate port that
        ready_port_fn() picks and renders: none of the front doors can bind
        port 0 and say which it got, so a start whose port was taken first
        (the door exits, or never holds it) is tried again on another; sets
        self.port."""
        for _ in range(5):
            port = ready_port_fn()
            out = open(os.path.join(self.dir, name + ".out"), "ab")
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)
            out.close()
            if (
                wait_for(lambda: self.proc.poll() is not None or listening(self.proc.pid, port), 10)
                and self.proc.poll() is None
            ):
                self.port = port
                return
            stop(self.proc)
        raise RuntimeError("%s did not start:\n%s" % (self.door, self.door_log()))

    def out(self, name="door"):
        try:
            with open(os.path.join(self.dir, name + ".out"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def get(self, path, **kw):
        try:
            return request(self.port, path, **kw)
        except OSError as e:
            self.fail("%s %s: %s\n%s" % (self.door, path, e, self.door_log()))

    def policy(self, biz):
        return '"%s_1";q=%d;w=60' % (biz, {"api": API_MAX, "login": LOGIN_MAX}[biz])

    def counted(self, biz, frsd=None):
        """What frsd itself has left for this client in `biz` (GET /query
        counts nothing): the proof that a view was counted exactly once."""
        status, h, _ = request((frsd or self.frsd).port, "/query?biz=%s&key=127.0.0.1" % biz)
        return remaining(h)

    def assert_page(self, path, biz, r_expected, **kw):
        status, h, body = self.get(path, **kw)
        self.assertEqual(status, 200, "%s: %r\n%s" % (path, body, self.door_log()))
        if kw.get("method") != "HEAD":
            self.assertTrue(body.startswith(b"page " + path.encode()), body)
        self.assertEqual(h.get("ratelimit-policy"), self.policy(biz), h)
        self.assertEqual(remaining(h), r_expected, h)
        self.assertEqual(self.counted(biz), r_expected, "counted once per request")
        self.assertNotIn("retry-after", h)
        if self.forwards_fields:  # the app was given frsd's answer too
            self.assertEqual(h.get("x-seen-ratelimit"), h.get("ratelimit"), h)
        return h, body

    def assert_429(self, path, biz, **kw):
        status, h, body = self.get(path, **kw)
        self.assertEqual(status, 429, "%s: %r %s" % (path, body, h))
        self.assertNotIn(b"page", body)
        self.assertEqual(h.get("ratelimit-policy"), self.policy(biz), h)
        self.assertEqual(remaining(h), 0, h)
        retry = int(h.get("retry-after", "0"))
        self.assertGreaterEqual(retry, 1, h)
        self.assertLessEqual(retry, 60, h)
        return h

    # --- the checks ------------------------------------------------------------
    def test_allowed_then_429_with_retry_after(self):
        self.start_door(self.frsd.port)
        for i in range(API_MAX):
            self.assert_page("/page", "api", API_MAX - 1 - i)
        self.assert_429("/page", "api")
        # /login is its own biz, counted apart.
        for i in range(LOGIN_MAX):
            self.assert_page("/login", "login", LOGIN_MAX - 1 - i)
        self.assert_429("/login", "login")

    def test_a_429_is_the_quota_exceeded_problem_when_the_client_asks_for_it(self):
        # draft-ietf-httpapi-ratelimit-headers-11, 5.1: a client that names
        # application/problem+json gets its 429 as the quota-exceeded problem
        # naming the policies that denied (frsd's FRS-Violated-Policies);
        # the fields are the same, and any other client gets text as before.
        self.start_door(self.frsd.port)
        for i in range(LOGIN_MAX):
            self.assert_page("/login", "login", LOGIN_MAX - 1 - i)
        problem = {"Accept": "application/json, application/problem+json;q=0.9"}
        for path, biz in (("/login", "login"), ("/page", "api")):
            if biz == "api":
                for i in range(API_MAX):
                    self.assert_page("/page", "api", API_MAX - 1 - i, headers=problem)
            h = self.assert_429(path, biz, headers=problem)
            status, h, body = self.get(path, headers=problem)
            self.assertEqual(h.get("content-type"), "application/problem+json", "%s %r" % (h, body))
            self.assertEqual(
                json.loads(body),
                {
                    "type": "https://iana.org/assignments/http-problem-types#quota-exceeded",
                    "title": "Request cannot be satisfied as assigned quota has been exceeded",
                    "status": 429,
                    "violated-policies": ["%s_1" % biz],
                },
                body,
            )
            # q=0 after another parameter refuses it too (the doors read only
            # a q=0 right after the media type).
            for accept in (
                "text/html,*/*;q=0.8",
                "application/problem+json;q=0, text/plain",
                "application/problem+json;charset=utf-8;q=0",
            ):
                status, h, body = self.get(path, headers={"Accept": accept})
                self.assertEqual(status, 429)
                self.assertTrue(h.get("content-type", "").startswith("text/plain"), (accept, h))
                self.assertEqual(body.strip(), b"Too many requests", body)

    def test_the_login_path_spelled_otherwise_is_counted_as_login(self):
        # Sites route these to their login handler (a trailing slash, a path
        # parameter, a percent-encoded letter, doubled slashes, another case):
        # each must be counted in biz login, or spelling skips the limit.
        self.start_door(self.frsd.port)
        for i in range(LOGIN_MAX):
            self.assert_page("/login", "login", LOGIN_MAX - 1 - i)
        for path in ("/login/", "/login;jsessionid=1", "/%6Cogin", "//login", "/LOGIN"):
            self.assert_429(path, "login")
        # Dot segments: resolved by the door (nginx, Caddy) or refused (HAProxy).
        for path in ("/./login", "/x/../login"):
            status, h, body = self.get(path)
            self.assertIn(status, (400, 429), "%s: %s %r" % (path, status, body))
        # Not the login page: counted as a page view.
        self.assert_page("/login-help", "api", API_MAX - 1)

    def test_post_keeps_its_body_and_is_counted(self):
        self.start_door(self.frsd.port)
        h, body = self.assert_page("/login", "login", LOGIN_MAX - 1, method="POST", body=b"user=alice&pw=x")
        self.assertIn(b"body=user=alice&pw=x", body)
        self.assert_page("/page", "api", API_MAX - 1, method="HEAD")

    def test_frsd_down_fail_open_and_fail_closed(self):
        self.start_door(self.frsd.port)
        self.assert_page("/page", "api", API_MAX - 1)
        self.frsd.stop()
        # Fail-open: the page, without RateLimit fields (nobody counted it).
        for path in ("/page", "/other"):
            status, h, body = self.get(path)
            self.assertEqual(status, 200, "%s: %r\n%s" % (path, body, self.door_log()))
            self.assertTrue(body.startswith(b"page " + path.encode()), body)
            self.assertNotIn("ratelimit", h)
        # Fail-closed: 503 with Retry-After, for every spelling that is
        # counted as login (Caddy served /login/ and /login;... here).
        for path in ("/login", "/login/", "/login;jsessionid=1", "/%6Cogin", "//login", "/LOGIN", "/Login/"):
            status, h, body = self.get(path)
            self.assertEqual(status, 503, "%s: %r %s" % (path, body, h))
            self.assertEqual(h.get("retry-after"), "5", (path, h))
            self.assertNotIn(b"page", body)

    def test_a_clients_own_ratelimit_header_never_reaches_the_site(self):
        # The site may read RateLimit as frsd's word (the doors that forward
        # it say so): one a client wrote must not pass, with frsd up or down.
        forged = {"RateLimit": '"forged";r=999;t=1', "RateLimit-Policy": '"forged";q=999'}
        self.start_door(self.frsd.port)
        status, h, _ = self.get("/page", headers=forged)
        self.assertEqual(status, 200, self.door_log())
        self.assertNotIn("forged", h.get("x-seen-ratelimit", ""), h)
        self.frsd.stop()
        status, h, _ = self.get("/page", headers=forged)
        self.assertEqual(status, 200, self.door_log())
        self.assertEqual(h.get("x-seen-ratelimit"), "-", h)

    def test_silent_frsd_counts_as_down_within_a_second(self):
        self.silent = Silent()
        self.start_door(self.silent.port)
        for path, want in (("/page", 200), ("/login", 503)):
            t0 = time.monotonic()
            status, h, body = self.get(path)
            took = time.monotonic() - t0
            self.assertEqual(status, want, "%s: %r %s\n%s" % (path, body, h, self.door_log()))
            self.assertLess(took, 1.5, "%s took %.2f s" % (path, took))

    def test_frsd_answering_503_counts_as_down(self):
        self.stub = Stub(503)
        self.start_door(self.stub.port)
        status, h, body = self.get("/page")
        self.assertEqual(status, 200, "%r %s\n%s" % (body, h, self.door_log()))
        self.assertTrue(body.startswith(b"page /page"), body)
        status, h, body = self.get("/login")
        self.assertEqual((status, h.get("retry-after")), (503, "5"), "%r %s" % (body, h))

    def test_a_biz_frsd_does_not_know_is_an_error_not_a_page(self):
        self.start_door(self.frsd.port, extra=[self.unknown_biz, self.unknown_login_biz])
        for path, want in (("/page", 500), ("/login", self.unknown_login_status)):
            status, h, body = self.get(path)
            self.assertEqual(status, want, "%s: %r %s\n%s" % (path, body, h, self.door_log()))
            self.assertNotIn(b"page", body)
