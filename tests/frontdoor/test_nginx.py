#!/usr/bin/env python3
"""conf/frontdoor/nginx-auth-request.conf, run by Debian's nginx in front of
a real frsd and a stand-in site (tests/frontdoor/frontdoor.py).

    FRSD=build/src/server/frsd python3 tests/frontdoor/test_nginx.py

Checked: allowed pages (proxied and static) with RateLimit-Policy and
RateLimit, each counted once; the (max+1)th request a 429 with Retry-After
and the fields, as text or, to a client that asks for it, as the draft's
quota-exceeded problem (application/problem+json); a POST keeps its body and is still a GET /auth for frsd; the
subrequest location is not reachable from outside; frsd stopped (by pid) or
silent, or answering 503: fail-open pages (200) and fail-closed /login (503,
Retry-After: 5); a biz frsd does not know (its 404) is a 500, not a page;
and the internal-redirect double count: `index`, or auth_request at server
level with try_files' fallback, counts one view twice; the shipped file's
try_files/`auth_request off` counts it once.
"""

import os
import signal

import frontdoor as fd


class NginxAuthRequestTest(fd.FrontDoorTest):
    door = "nginx"
    shipped = "nginx-auth-request.conf"
    unknown_biz = ("auth_request /_frs/open/api;", "auth_request /_frs/open/nosuchbiz;", 1)
    unknown_login_biz = ("auth_request /_frs/closed/login;", "auth_request /_frs/closed/nosuchbiz;", 1)
    unknown_login_status = 503  # fail-closed: auth_request reports a 404 and an outage alike (500)
    forwards_fields = True

    def start_door(self, frsd_port, extra=()):
        www = os.path.join(self.dir, "www")
        os.makedirs(os.path.join(www, "docs"), exist_ok=True)
        with open(os.path.join(www, "hello.txt"), "w") as f:
            f.write("static hello\n")
        with open(os.path.join(www, "docs", "index.html"), "w") as f:
            f.write("docs index\n")
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)

        def render():
            port = fd.candidate_port()
            self.render_shipped(
                os.path.join(self.dir, "site.conf"),
                list(extra)
                + [
                    ("server 127.0.0.1:8300;", "server 127.0.0.1:%d;" % frsd_port, 1),
                    ("server 127.0.0.1:8080;", "server 127.0.0.1:%d;" % self.site.port, 1),
                    ("listen 80;", "listen 127.0.0.1:%d;" % port, 1),
                    ("root /var/www/html;", "root %s;" % www, 1),
                ],
            )
            fd.nginx_conf.write(self.dir, "  include %s/site.conf;\n" % self.dir)
            return port

        self.spawn([self.program, "-p", self.dir, "-c", os.path.join(self.dir, "nginx.conf")], render)

    def stop_door(self):
        fd.stop(self.proc, signal.SIGQUIT)
        self.proc = None

    def door_log(self):
        return self.out() + fd.read_text(os.path.join(self.dir, "error.log"))

    def test_static_files_are_counted_once_and_the_subrequest_is_internal(self):
        self.start_door(self.frsd.port)
        status, h, body = self.get("/hello.txt")
        self.assertEqual((status, body), (200, b"static hello\n"))
        self.assertEqual((h.get("ratelimit-policy"), fd.remaining(h)), (self.policy("api"), fd.API_MAX - 1), h)
        # A folder's index.html through try_files: served in place, once.
        status, h, body = self.get("/docs/")
        self.assertEqual((status, body), (200, b"docs index\n"))
        self.assertEqual((fd.remaining(h), self.counted("api")), (fd.API_MAX - 2, fd.API_MAX - 2), h)
        # /_frs/... is `internal`: 404, and nothing counted.
        status, h, body = self.get("/_frs/open/api")
        self.assertEqual(status, 404)
        self.assert_page("/page", "api", fd.API_MAX - 3)

    def test_internal_redirect_double_count(self):
        # The trap, shown on the shipped file changed as an operator might:
        # `index` instead of try_files. GET /docs/ redirects internally to
        # /docs/index.html, which `location /` (with auth_request) handles
        # again: two subrequests, two counts for one view.
        self.start_door(
            self.frsd.port,
            extra=[
                (
                    "        try_files $uri $uri/index.html @site;",
                    "        index index.html;\n        try_files $uri $uri/ @site;",
                    1,
                )
            ],
        )
        status, h, body = self.get("/docs/")
        self.assertEqual((status, body), (200, b"docs index\n"))
        self.assertEqual(self.counted("api"), fd.API_MAX - 2, "one view, counted twice")
        self.stop_door()

        # auth_request at server level, and @site without `auth_request off`:
        # the try_files fallback to @site asks frsd a second time. (The
        # client's RateLimit still says r=4: @site has no auth_request_set,
        # so the first answer's fields stay. Only frsd's own count shows it.)
        fresh = fd.Frsd(os.path.join(self.dir, "frsd2"))
        fresh.start()
        try:
            self.start_door(
                fresh.port,
                extra=[
                    ("    root /var/www/html;", "    auth_request /_frs/open/api;\n    root /var/www/html;", 1),
                    (
                        "        auth_request off;\n        proxy_pass http://site;",
                        "        proxy_pass http://site;",
                        1,
                    ),
                ],
            )
            status, h, body = self.get("/page")
            self.assertEqual(status, 200, body)
            self.assertEqual(self.counted("api", fresh), fd.API_MAX - 2, "one view, counted twice")
            # A static file, served in place by try_files: once.
            status, h, body = self.get("/hello.txt")
            self.assertEqual(self.counted("api", fresh), fd.API_MAX - 3)
        finally:
            self.stop_door()
            fresh.close()
        # The shipped file itself counts each of these once: the other tests.


if __name__ == "__main__":
    fd.main()
