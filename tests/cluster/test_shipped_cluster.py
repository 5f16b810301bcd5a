#!/usr/bin/env python3
"""The shipped example cluster (conf/cluster/, docs/cluster.md "The example
cluster") as an operator starts it: with the lease key made as the docs say,
`frsd -t` passes on each shard's srv.xml; without it, it names the file.

    FRSD=... python3 tests/cluster/test_shipped_cluster.py

A copy of the folder in a temp dir: nothing is written into conf/.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SHIPPED = os.path.normpath(os.path.join(HERE, "..", "..", "conf", "cluster"))
FRSD = os.environ.get("FRSD")


class ShippedCluster(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="frs-shipped-cluster-")
        self.dir = os.path.join(self.tmp, "cluster")
        shutil.copytree(SHIPPED, self.dir, ignore=shutil.ignore_patterns("lease.key", "*-data", "*.pid", "*.log"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def check(self, shard):
        return subprocess.run(
            [FRSD, "-t", "-c", os.path.join(self.dir, "shard%d.xml" % shard)],
            capture_output=True,
            text=True,
            timeout=30,
        )

    def test_each_shard_passes_with_the_key_made_as_the_docs_say(self):
        # docs/cluster.md: (umask 077; head -c 16 /dev/urandom > conf/cluster/lease.key)
        key = os.path.join(self.dir, "lease.key")
        with open(key, "wb") as f:
            f.write(os.urandom(16))
        os.chmod(key, 0o600)
        for shard in (1, 2, 3):
            r = self.check(shard)
            self.assertEqual(r.returncode, 0, "shard%d.xml: %s%s" % (shard, r.stdout, r.stderr))

    def test_without_the_key_the_check_names_it(self):
        r = self.check(1)
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("lease.key", r.stdout + r.stderr)
        # The last line is frsd's own, naming the file checked.
        self.assertEqual(
            r.stderr.splitlines()[-1], "frsd: %s: test failed" % os.path.join(self.dir, "shard1.xml"), r.stderr
        )


if __name__ == "__main__":
    if not FRSD:
        sys.exit("FAIL: set FRSD")
    unittest.main(verbosity=2)
