#!/usr/bin/env python3
"""conf/frontdoor/Caddyfile, run by Debian's Caddy 2.6 (`caddy run --adapter
caddyfile`) in front of a real frsd and a stand-in site
(tests/frontdoor/frontdoor.py).

    FRSD=build/src/server/frsd python3 tests/frontdoor/test_caddy.py

Checked: allowed pages with RateLimit-Policy and RateLimit (and the site given
them by copy_headers), each counted once; the (max+1)th request a 429 (not
forward_auth's pass-through 403) with Retry-After and the fields, as text or,
to a client that asks for it, as the draft's quota-exceeded problem
(application/problem+json); a POST keeps its body; frsd stopped (by pid), silent, or answering 503: fail-open pages
(200) and fail-closed /login (503, Retry-After: 5); a biz frsd does not know
(its 404) is a 500, not a page; the site itself down stays the site's 502.

Caddy's own state (autosave.json, its data folder) goes to the test's temp
dir (HOME and XDG_* point there); its admin API is off.
"""

import os

import frontdoor as fd


class CaddyForwardAuthTest(fd.FrontDoorTest):
    door = "caddy"
    shipped = "Caddyfile"
    forwards_fields = True
    unknown_biz = ("import frs_auth api", "import frs_auth nosuchbiz", 1)
    unknown_login_biz = ("import frs_auth login", "import frs_auth nosuchbiz", 1)

    def start_door(self, frsd_port, extra=(), site_port=None):
        cfg = os.path.join(self.dir, "Caddyfile")
        home = os.path.join(self.dir, "home")
        env = dict(
            os.environ,
            HOME=home,
            XDG_DATA_HOME=os.path.join(home, "data"),
            XDG_CONFIG_HOME=os.path.join(home, "config"),
        )

        def render():
            port = fd.candidate_port()
            self.render_shipped(
                cfg,
                list(extra)
                + [
                    ("admin localhost:2019", "admin off", 1),
                    ("forward_auth 127.0.0.1:8300 {", "forward_auth 127.0.0.1:%d {" % frsd_port, 1),
                    ("reverse_proxy 127.0.0.1:8080", "reverse_proxy 127.0.0.1:%d" % (site_port or self.site.port), 3),
                    ("\n:80 {\n", "\n:%d {\n\tbind 127.0.0.1\n" % port, 1),
                ],
            )
            return port

        self.spawn([self.program, "run", "--config", cfg, "--adapter", "caddyfile"], render, env=env)

    def door_log(self):
        # Caddy logs JSON lines; the info ones are noise here.
        return "\n".join(line for line in self.out().splitlines() if '"level":"info"' not in line)

    def test_the_site_down_stays_the_sites_502(self):
        # An error after frsd allowed is the site's: not served "fail-open" again.
        site = fd.socket.socket(fd.socket.AF_INET, fd.socket.SOCK_STREAM)
        site.bind(("127.0.0.1", 0))  # bound and never listening: a site that refuses
        try:
            self.start_door(self.frsd.port, site_port=site.getsockname()[1])
            status, h, body = self.get("/page")
            self.assertEqual(status, 502, "%r %s" % (body, h))
            self.assertEqual(self.counted("api"), fd.API_MAX - 1)
        finally:
            site.close()


if __name__ == "__main__":
    fd.main()
