#!/usr/bin/env python3
"""conf/frontdoor/haproxy.cfg and frs.lua, run by Debian's HAProxy 2.6
(`haproxy -f ... -db`) in front of a real frsd and a stand-in site
(tests/frontdoor/frontdoor.py).

    FRSD=build/src/server/frsd python3 tests/frontdoor/test_haproxy.py

Checked: allowed pages with RateLimit-Policy and RateLimit, each counted once;
the (max+1)th request a 429 with Retry-After and the fields, as text or, to
a client that asks for it, as the draft's quota-exceeded problem
(application/problem+json); a POST keeps its body; frsd stopped (by pid) or
silent: fail-open pages (200) and fail-closed
/login (503, Retry-After: 5), each within 1.5 s; an frsd answering 503 counts
as down; a biz frsd does not know (its 404) is a 500, not a page served.
"""

import os

import frontdoor as fd


class HaproxyLuaTest(fd.FrontDoorTest):
    door = "haproxy"
    shipped = "haproxy.cfg"
    unknown_biz = ("lua.frs_auth api   unless", "lua.frs_auth nosuchbiz unless", 1)
    unknown_login_biz = ("lua.frs_auth login if", "lua.frs_auth nosuchbiz if", 1)

    def start_door(self, frsd_port, extra=()):
        cfg = os.path.join(self.dir, "haproxy.cfg")

        def render():
            port = fd.candidate_port()
            self.render_shipped(
                cfg,
                list(extra)
                + [
                    ("setenv FRS_ADDR 127.0.0.1:8300", "setenv FRS_ADDR 127.0.0.1:%d" % frsd_port, 1),
                    ("lua-load /etc/haproxy/frs.lua", "lua-load " + os.path.join(fd.CONF, "frs.lua"), 1),
                    ("    bind :80\n", "    bind 127.0.0.1:%d\n" % port, 1),
                    ("server site1 127.0.0.1:8080", "server site1 127.0.0.1:%d" % self.site.port, 1),
                ],
            )
            return port

        self.spawn([self.program, "-f", cfg, "-db"], render)

    def door_log(self):
        return self.out()


if __name__ == "__main__":
    fd.main()
