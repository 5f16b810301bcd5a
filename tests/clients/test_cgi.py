#!/usr/bin/env python3
"""examples/cgi/limit.py and limit.sh under a real CGI server: nginx + fcgiwrap.

nginx (Debian's, in the foreground without a master, every path in a temp
dir, as tests/common/nginx_runner.h runs it) passes each location to
fcgiwrap over a unix socket with SCRIPT_FILENAME and the FRS_* settings as
fastcgi_params; fcgiwrap runs the scripts, copied into a cgi dir next to a
copy of frs_client.py (as a user installs them), against real frsd
processes. Checked: allowed (200), denied (429 with Retry-After), user names
that need escaping counted on the right key, frsd stopped and frsd not
answering in time (FRS_FAIL open: 200, closed: 503 with Retry-After).

    FRSD=build/src/server/frsd python3 tests/clients/test_cgi.py

Exits 77 (ctest: skipped) when nginx, fcgiwrap or curl is missing
(tools/setup.sh --test installs them). Every process it starts is stopped
by its pid.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))

import test_frs_client as support  # noqa: E402  (Frsd, RefusingPort, http_get, SilentServer)
from frs_client import Client  # noqa: E402
import nginx_conf  # noqa: E402
from processes import candidate_port, listening, require, stop, wait_for  # noqa: E402

# Not skips: tools/setup.sh --test installs them.
NGINX = require("nginx", "/usr/sbin/nginx", "/usr/bin/nginx")
FCGIWRAP = require("fcgiwrap", "/usr/sbin/fcgiwrap", "/usr/bin/fcgiwrap")
CURL = require("curl")

MAP = """<map>
  <biz id="1" name="login"><rule interval="60" max="5"/></biz>
  <biz id="2" name="page_py"><rule interval="60" max="3"/></biz>
  <biz id="3" name="page_sh"><rule interval="60" max="3"/></biz>
  <biz id="4" name="free"><rule interval="60" max="1000"/></biz>
</map>
"""
LIMIT = 3
LANGS = ("py", "sh")  # limit.py, limit.sh


class CgiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="frs-cgi-")
        cls.frsd = support.Frsd(MAP)
        cls.frsd.start()
        cls.down = support.Frsd(MAP)  # stopped by test_frsd_down
        cls.down.start()
        cls.silent = support.SilentServer()
        # Not frsd: a proxy or a web server at FRS_URL, answering its own
        # pages (a 200, a 429, a 404): frsd did not decide, the policy does.
        cls.proxies = {
            code: support.StubServer(support.answer_200(b"<html>not frsd</html>\n", status))
            for code, status in ((200, "200 OK"), (429, "429 Too Many Requests"), (404, "404 Not Found"))
        }
        cls.fcgi = cls.nginx = None
        try:
            cls._start_cgi()
        except BaseException:
            cls.tearDownClass()
            raise
        cls.client = Client(cls.frsd.name, timeout=2.0)

    @classmethod
    def _start_cgi(cls):
        cgi = os.path.join(cls.dir, "cgi")
        os.makedirs(cgi)
        for src in (
            os.path.join(ROOT, "examples", "cgi", "limit.py"),
            os.path.join(ROOT, "examples", "cgi", "limit.sh"),
            os.path.join(ROOT, "clients", "python", "frs_client.py"),
        ):
            dst = os.path.join(cgi, os.path.basename(src))
            shutil.copy(src, dst)
            os.chmod(dst, 0o755)
        sock = os.path.join(cls.dir, "fcgiwrap.sock")
        path = os.path.dirname(os.path.abspath(sys.executable)) + ":/usr/local/bin:/usr/bin:/bin"
        cls.fcgi_err = open(os.path.join(cls.dir, "fcgiwrap.stderr"), "ab")
        cls.fcgi = subprocess.Popen(
            [FCGIWRAP, "-s", "unix:" + sock],
            stdin=subprocess.DEVNULL,
            stdout=cls.fcgi_err,
            stderr=cls.fcgi_err,
            env={"PATH": path},
        )
        if not wait_for(lambda: os.path.exists(sock)):
            raise RuntimeError("fcgiwrap did not create its socket")

        def location(name, script, servers, biz, fail, timeout="0.5"):
            url = "http://" + servers
            return """
    location = /%s {
      fastcgi_pass unix:%s;
      fastcgi_param SCRIPT_FILENAME %s/%s;
      fastcgi_param QUERY_STRING $query_string;
      fastcgi_param REQUEST_METHOD $request_method;
      fastcgi_param CONTENT_TYPE $content_type;
      fastcgi_param CONTENT_LENGTH $content_length;
      fastcgi_param SCRIPT_NAME $fastcgi_script_name;
      fastcgi_param REQUEST_URI $request_uri;
      fastcgi_param SERVER_PROTOCOL $server_protocol;
      fastcgi_param GATEWAY_INTERFACE CGI/1.1;
      fastcgi_param REMOTE_ADDR $remote_addr;
      fastcgi_param SERVER_NAME $server_name;
      fastcgi_param SERVER_PORT $server_port;
      fastcgi_param PATH %s;
      fastcgi_param FRS_SERVERS %s;
      fastcgi_param FRS_URL %s;
      fastcgi_param FRS_BIZ %s;
      fastcgi_param FRS_FAIL %s;
      fastcgi_param FRS_TIMEOUT %s;
    }""" % (
                name,
                sock,
                cgi,
                script,
                path,
                servers,
                url,
                biz,
                fail,
                timeout,
            )

        locs = []
        for lang, script in (("py", "limit.py"), ("sh", "limit.sh")):
            locs.append(location(lang + "/page", script, cls.frsd.name, "page_" + lang, "closed"))
            locs.append(location(lang + "/login", script, cls.frsd.name, "login", "closed"))
            for fail in ("open", "closed"):
                locs.append(location("%s/down-%s" % (lang, fail), script, cls.down.name, "free", fail))
                locs.append(location("%s/slow-%s" % (lang, fail), script, cls.silent.name, "free", fail, "0.3"))
                for code, proxy in cls.proxies.items():
                    locs.append(location("%s/proxy%d-%s" % (lang, code, fail), script, proxy.name, "free", fail))
            # The page's own settings wrong: a 500, never the fail policy.
            locs.append(location(lang + "/bad-fail", script, cls.frsd.name, "free", "maybe"))
            locs.append(location(lang + "/bad-timeout", script, cls.frsd.name, "free", "closed", "0"))
        locs.append(location("py/bad-servers", "limit.py", cls.frsd.name.rsplit(":", 1)[0], "free", "open"))

        # nginx cannot bind port 0 and say which it got: a candidate port,
        # and another on "address in use" (nginx exits then).
        for _ in range(5):
            cls.port = candidate_port()
            conf = nginx_conf.write(
                cls.dir, "  server {\n    listen 127.0.0.1:%d;\n%s\n  }\n" % (cls.port, "".join(locs))
            )
            cls.nginx = subprocess.Popen(
                [NGINX, "-p", cls.dir, "-c", conf],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

            def up():
                try:
                    support.http_get(cls.port, "/none", timeout=0.5)
                    return True
                except OSError:
                    return False

            if (
                wait_for(lambda: cls.nginx.poll() is not None or listening(cls.nginx.pid, cls.port))
                and cls.nginx.poll() is None
                and wait_for(up)
            ):
                return
            stop(cls.nginx, signal.SIGQUIT)  # lost the port: try another
        raise RuntimeError("nginx did not start: " + cls.log("error.log"))

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "client", None):
            cls.client.close()
        stop(cls.nginx, signal.SIGQUIT)
        stop(cls.fcgi)
        if getattr(cls, "fcgi_err", None):
            cls.fcgi_err.close()
        cls.silent.close()
        for proxy in getattr(cls, "proxies", {}).values():
            proxy.close()
        if getattr(cls, "down_held", None):
            cls.down_held.close()
        cls.frsd.remove()
        cls.down.remove()
        if not os.environ.get("FRS_E2E_KEEP"):
            shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def log(cls, name):
        try:
            with open(os.path.join(cls.dir, name), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def get(self, target):
        status, headers, body = support.http_get(self.port, target, timeout=10)
        if status == 502 or status == 500:
            self.fail(
                "%s: %d\nnginx: %s\nfcgiwrap: %s" % (target, status, self.log("error.log"), self.log("fcgiwrap.stderr"))
            )
        return status, headers, body

    def test_allow_then_deny(self):
        for lang in LANGS:
            for i in range(LIMIT):
                status, headers, body = self.get("/%s/page" % lang)
                self.assertEqual(status, 200, body)
                self.assertEqual(body, b"Hello, visitor\n")
                self.assertNotIn("retry-after", headers)
            status, headers, body = self.get("/%s/page" % lang)
            self.assertEqual(status, 429, body)
            self.assertTrue(1 <= int(headers["retry-after"]) <= 60, headers)
            self.assertEqual(self.client.query("page_" + lang, "ip:127.0.0.1").count, LIMIT)

    def test_user_names_are_escaped(self):
        names = ["a+b c&d", 'é "quoted"', "it's <x>", "100%", "x=y?z#w", "😀"]
        for lang in LANGS:
            for name in names:
                user = lang + ":" + name
                status, _, body = self.get("/%s/login?user=%s" % (lang, urllib.parse.quote_plus(user)))
                self.assertEqual(status, 200, (user, body))
                self.assertEqual(body.decode("utf-8"), "Hello, %s\n" % user)
                # Counted on exactly that key.
                self.assertEqual(self.client.query("login", "user:" + user).count, 1, user)
            # Five per user name: the sixth is denied.
            for i in range(4):
                self.assertEqual(
                    self.get("/%s/login?user=%s" % (lang, urllib.parse.quote(lang + ":" + names[0])))[0], 200
                )
            status, headers, _ = self.get("/%s/login?user=%s" % (lang, urllib.parse.quote(lang + ":" + names[0])))
            self.assertEqual(status, 429)
            self.assertIn("retry-after", headers)

    def test_a_key_frsd_refuses_is_a_400_not_a_429(self):
        # A user name frsd cannot take as a key (longer than 255 bytes): a
        # 429 would tell the client to wait and try again, forever.
        for lang in LANGS:
            status, headers, body = self.get("/%s/login?user=%s" % (lang, "x" * 300))
            self.assertEqual(status, 400, body)
            self.assertNotIn("retry-after", headers)
            # The visitor's page names no internal address (frsd's error, in
            # the server's log, starts with the frsd that answered).
            self.assertNotIn(b"127.0.0.1", body)

    def test_a_user_name_that_is_no_utf8_or_badly_escaped_is_a_400(self):
        # limit.py decoded bad bytes to U+FFFD, so %FE, %FD, ... shared one
        # count; a lone % was counted as sent (limit.sh made it "\\x").
        for lang in LANGS:
            # a%00x: limit.sh's printf ended the name at the NUL and counted
            # it on user a's key; frsd refuses a control character: 400.
            for raw in ("%FE", "%FD", "a%", "a%4", "%zz1", "a%00x", "%00"):
                status, headers, body = self.get("/%s/login?user=%s" % (lang, raw))
                self.assertEqual(status, 400, (lang, raw, body))
                self.assertNotIn("retry-after", headers)

    def test_both_pages_count_the_first_user_and_leave_other_parameters_alone(self):
        # limit.py decoded the whole query strictly (another parameter's
        # %FF was "the user parameter is not UTF-8") and took the last
        # non-empty user=, limit.sh the first: two keys for one request.
        for lang in LANGS:
            status, _, body = self.get("/%s/login?x=%%ff&user=%s-bob" % (lang, lang))
            self.assertEqual((status, body.decode("utf-8")), (200, "Hello, %s-bob\n" % lang))
            status, _, body = self.get("/%s/login?user=&user=%s-zed" % (lang, lang))
            self.assertEqual((status, body), (200, b"Hello, visitor\n"), lang)
            self.assertEqual(self.client.query("login", "user:%s-zed" % lang).count, 0, lang)

    def test_frsd_down(self):
        for lang in LANGS:
            self.assertEqual(self.get("/%s/down-closed" % lang)[0], 200)  # while it serves
        port = self.down.port
        self.down.stop()
        # Its port keeps refusing for the rest of the test: nobody else's.
        self.__class__.down_held = support.RefusingPort(port)
        for lang in LANGS:
            status, headers, body = self.get("/%s/down-open" % lang)
            self.assertEqual(status, 200, body)
            status, headers, body = self.get("/%s/down-closed" % lang)
            self.assertEqual(status, 503, body)
            self.assertEqual(headers.get("retry-after"), "1")

    def test_a_page_that_is_not_frsd_answering_is_left_to_the_fail_policy(self):
        # limit.sh took a proxy's 200 page for "allowed" and its 429 for a
        # denial, limit.py its 404 for a misconfiguration (500), whatever
        # FRS_FAIL said.
        for lang in LANGS:
            for code in self.proxies:
                status, _, body = self.get("/%s/proxy%d-open" % (lang, code))
                self.assertEqual((status, body), (200, b"Hello, visitor\n"), (lang, code))
                status, headers, body = self.get("/%s/proxy%d-closed" % (lang, code))
                self.assertEqual(status, 503, (lang, code, body))
                self.assertEqual(headers.get("retry-after"), "1")

    def test_a_page_misconfigured_answers_500_whatever_fail_says(self):
        # limit.sh took FRS_TIMEOUT=0 for no limit (curl's --max-time 0) and
        # FRS_FAIL=maybe for open; limit.py a server without :port for a
        # shard that fails open on every call.
        for target in ("/py/bad-fail", "/sh/bad-fail", "/py/bad-timeout", "/sh/bad-timeout", "/py/bad-servers"):
            status, _, body = support.http_get(self.port, target, timeout=10)
            self.assertEqual((status, body), (500, b"The rate limiter is misconfigured.\n"), target)

    def test_frsd_too_slow(self):
        for lang in LANGS:
            t = time.monotonic()
            status, _, body = self.get("/%s/slow-open" % lang)
            self.assertEqual(status, 200, body)
            status, headers, body = self.get("/%s/slow-closed" % lang)
            self.assertEqual(status, 503, body)
            self.assertEqual(headers.get("retry-after"), "1")
            self.assertLess(time.monotonic() - t, 4.0)  # two 0.3 s time-outs, not a hang


def main():
    if not (support.FRSD and os.access(support.FRSD, os.X_OK)):
        sys.exit("FAIL: set FRSD to the frsd binary")
    argv = [sys.argv[0]] + [a for a in sys.argv[1:] if a.startswith("-") or not os.path.isfile(a)]
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
