#!/usr/bin/env python3
"""The most bizzes a map may hold (ids 1..65535, 4.3 MB) load and reload
between requests, on the build operators run: each worker's reload searched
the rule history and the running map once per rule (quadratic), held every
connection for over a minute, and the master's stall watch killed both
workers, then their restarts, in a loop (found by an outside run). A timed
property of the optimized build (under a sanitizer the start alone takes ten
times as long), so it runs in the outside stage, not the ASan one.

    FRSD=build/src/server/frsd python3 tests/e2e/test_largest_map.py
"""
import http.client
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from processes import read_text, reload_frsd, start_frsd, stop, wait_for  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FRSD = os.path.abspath(os.environ.get("FRSD") or os.path.join(ROOT, "build", "src", "server", "frsd"))
BIZZES = 65535


def the_map(last_max):
    rules = ['<biz id="%d" name="b%d"><rule interval="60" max="5"/></biz>\n' % (i, i) for i in range(1, BIZZES)]
    rules.append('<biz id="%d" name="b%d"><rule interval="60" max="%d"/></biz>\n' % (BIZZES, BIZZES, last_max))
    return "<map>\n" + "".join(rules) + "</map>\n"


class LargestMap(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="frs-largest-map-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        with open(os.path.join(self.dir, "map.xml"), "w") as f:
            f.write(the_map(5))
        self.config = os.path.join(self.dir, "srv.xml")
        with open(self.config, "w") as f:
            f.write(
                '<frs><listen host="127.0.0.1" port="0"/><workers>2</workers><map>map.xml</map>'
                '<store dir="data" files="1" keynodes="4096" chain="8"/><admin token=""/>'
                '<limits worker_stall_ms="10000"/></frs>\n'
            )
        self.err = os.path.join(self.dir, "frsd.stderr")

    def log(self):
        return read_text(self.err)

    def status(self, port, biz):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            c.request("GET", "/acquire?biz=%s&key=k" % biz)
            r = c.getresponse()
            r.read()
            return r.status
        finally:
            c.close()

    def test_it_loads_and_reloads_without_a_worker_killed(self):
        proc, port = start_frsd(FRSD, self.config, os.path.join(self.dir, "data"), self.err, self.log, timeout=30)
        self.addCleanup(stop, proc, with_workers=True)
        self.assertTrue(wait_for(lambda: self.log().count(": serving") >= 2, 30), self.log())
        self.assertEqual(self.status(port, "b%d" % BIZZES), 200)
        # One rule's limit changed: every rule is looked at again.
        with open(os.path.join(self.dir, "map.xml"), "w") as f:
            f.write(the_map(1))
        self.assertTrue(reload_frsd(proc, self.log, workers=2, timeout=30), self.log())
        self.assertNotIn("killing it", self.log())
        self.assertEqual(self.status(port, "b%d" % BIZZES), 429, "max 1, one use counted already")
        self.assertEqual(self.status(port, "b1"), 200)
        self.assertIsNone(proc.poll())


if __name__ == "__main__":
    unittest.main()
