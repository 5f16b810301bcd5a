#!/usr/bin/env python3
"""The decision log read by a real rsyslogd, as docs/integrations.md ships it
(imfile, here into omfile instead of omkafka): every line frsd writes arrives
exactly once in rsyslog's output, across a rotation done as logrotate does it
(rename, then SIGUSR1 to frsd's master) while requests keep coming.

rsyslogd runs as the current user with a configuration, a work directory and
a pid file of its own (-n: in the foreground), so nothing of the machine's
syslog is touched.

    FRSD=build/src/server/frsd python3 tests/shipping/test_rsyslog.py
"""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
from processes import read_text as text, require, stop, wait_for  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Not a skip: CI installs rsyslog (tools/setup.sh --test).
RSYSLOGD = require("rsyslogd", "/usr/sbin/rsyslogd", "/sbin/rsyslogd")


def frsd_path():
    return os.path.abspath(os.environ.get("FRSD") or os.path.join(ROOT, "build", "src", "server", "frsd"))


def lines(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return []
    return data.split(b"\n")[:-1]


RSYSLOG_CONF = """
global(workDirectory="{work}" maxMessageSize="64k")
# Polling, as docs/integrations.md says: in inotify mode imfile finishes the
# renamed file the moment it sees the rename, while frsd's workers write to it
# until SIGUSR1 has reached each of them (milliseconds later), and those lines
# were lost. Polled, the rename is seen up to a second later, by when frsd
# has written its last line there; imfile reads the old file to its end,
# then the new one from its start.
module(load="imfile" mode="polling" PollingInterval="1")
template(name="asis" type="string" string="%msg%\\n")
ruleset(name="decisions") {{
  action(type="omfile" file="{out}" template="asis")
}}
input(type="imfile" File="{log}" Tag="frs-decisions" ruleset="decisions" freshStartTail="off" reopenOnTruncate="on")
"""


class RsyslogShipsTheDecisionLog(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="frs-rsyslog-")
        self.frsd = self.rsyslogd = None

    def tearDown(self):
        stop(self.rsyslogd)
        stop(self.frsd)
        if not os.environ.get("FRS_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def start_frsd(self):
        with open(self.path("map.xml"), "w") as f:
            f.write('<map><biz id="1" name="login"><rule interval="60" max="2"/></biz></map>\n')
        with open(self.path("srv.xml"), "w") as f:
            f.write(
                '<frs>\n  <listen host="127.0.0.1" port="0"/>\n  <workers>2</workers>\n  <map>map.xml</map>\n'
                '  <store dir="data" files="1" keynodes="4096" chain="8"/>\n'
                '  <decisions file="decisions.log" record="all"/>\n</frs>\n'
            )
        err = open(self.path("frsd.stderr"), "ab")
        self.frsd = subprocess.Popen(
            [frsd_path(), "-c", self.path("srv.xml"), "--foreground"], stdin=subprocess.DEVNULL, stdout=err, stderr=err
        )
        err.close()
        listen = self.path("data/frsd.listen")
        ok = wait_for(lambda: self.frsd.poll() is not None or text(listen).endswith("\n"), 10)
        self.assertTrue(ok and self.frsd.poll() is None, "frsd did not start: " + text(self.path("frsd.stderr")))
        self.port = int(text(listen).strip().rsplit(":", 1)[1])

    def start_rsyslogd(self):
        os.makedirs(self.path("rsyslog-work"))
        with open(self.path("rsyslog.conf"), "w") as f:
            f.write(
                RSYSLOG_CONF.format(
                    work=self.path("rsyslog-work"), out=self.path("shipped.log"), log=self.path("decisions.log")
                )
            )
        err = open(self.path("rsyslogd.out"), "ab")
        self.rsyslogd = subprocess.Popen(
            [RSYSLOGD, "-n", "-f", self.path("rsyslog.conf"), "-i", self.path("rsyslogd.pid")],
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
        )
        err.close()
        self.assertTrue(
            wait_for(lambda: os.path.exists(self.path("rsyslogd.pid")) or self.rsyslogd.poll() is not None, 10)
        )
        self.assertIsNone(self.rsyslogd.poll(), "rsyslogd stopped: " + text(self.path("rsyslogd.out")))

    def acquire(self, keys):
        """GET /acquire of each key, from four connections at once."""
        failures = []

        def run(part):
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            for k in part:
                c.request("GET", "/acquire?biz=login&key=" + k)
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    failures.append((k, r.status))
            c.close()

        threads = [threading.Thread(target=run, args=(keys[i::4],)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(failures, [])

    def test_every_line_arrives_exactly_once_across_a_rotation(self):
        self.start_frsd()
        self.start_rsyslogd()
        before = ["before-%d" % i for i in range(600)]
        after = ["after-%d" % i for i in range(600)]
        self.acquire(before[:300])
        # rsyslog follows the file (its first lines are out), then the
        # rotation comes while lines are still arriving.
        self.assertTrue(
            wait_for(lambda: len(lines(self.path("shipped.log"))) > 0, 15),
            "rsyslog shipped nothing: " + text(self.path("rsyslogd.out")),
        )
        writer = threading.Thread(target=self.acquire, args=(before[300:],))
        writer.start()
        writer.join()
        os.rename(self.path("decisions.log"), self.path("decisions.log.1"))
        os.kill(self.frsd.pid, signal.SIGUSR1)
        self.acquire(after)
        self.assertTrue(wait_for(lambda: os.path.exists(self.path("decisions.log")), 5), "frsd did not reopen the log")
        want = len(before) + len(after)
        wait_for(lambda: len(lines(self.path("shipped.log"))) >= want, 30)
        stop(self.frsd)
        self.frsd = None

        written = lines(self.path("decisions.log.1")) + lines(self.path("decisions.log"))
        shipped = lines(self.path("shipped.log"))
        self.assertEqual(len(written), want, "frsd wrote %d lines for %d decisions" % (len(written), want))
        self.assertTrue(lines(self.path("decisions.log")), "no line went to the new file")
        keys = [json.loads(line)["key"] for line in shipped]
        self.assertEqual(len(keys), len(set(keys)), "a line arrived twice")
        self.assertEqual(
            sorted(shipped),
            sorted(written),
            "rsyslog's output differs from what frsd wrote: %d shipped, %d written; missing %s"
            % (len(shipped), len(written), sorted(set(before + after) - set(keys))[:10]),
        )


if __name__ == "__main__":
    if not os.access(frsd_path(), os.X_OK):
        sys.exit("no frsd at %s (set FRSD)" % frsd_path())
    unittest.main(verbosity=2)
