#!/usr/bin/env python3
"""The Python client installs with pip, with no network, from a checkout and
from its source archive, and its one-server tests pass against a live frsd
with the installed module (not the checkout's copy).

    FRSD=... FRSCTL=... python3 tests/clients/test_pip_install.py

Each step runs in a temporary virtual environment with `pip install
--no-index`: pip may not reach any package index, and the client's build
backend (clients/python/build_backend) needs none.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLIENT = os.path.join(ROOT, "clients", "python")


def run(argv, **kw):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    return p.returncode, p.stdout


class PipInstallTest(unittest.TestCase):
    # One virtual environment for both installs (making one with pip in it
    # costs 5 CPU-s, a fifth of this test): each test leaves it as it found
    # it, without frs-client.
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="frs-pip-")
        rc, out = run([sys.executable, "-m", "venv", os.path.join(cls.dir, "venv")])
        # Not a skip: tools/setup.sh --test installs python3-venv.
        if rc != 0:
            shutil.rmtree(cls.dir, ignore_errors=True)
            raise AssertionError("no venv module here: " + out)
        cls.python = os.path.join(cls.dir, "venv", "bin", "python")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def tearDown(self):
        run([self.python, "-m", "pip", "uninstall", "-y", "frs-client"])
        shutil.rmtree(os.path.join(self.dir, "suite"), ignore_errors=True)
        shutil.rmtree(os.path.join(self.dir, "dist"), ignore_errors=True)

    def installed_file(self):
        rc, out = run([self.python, "-c", "import frs_client; print(frs_client.__file__)"], cwd=self.dir)
        self.assertEqual(rc, 0, out)
        return out.strip()

    def run_suite(self):
        # The suite alone in a directory of its own: `import frs_client` must
        # find the installed module. Its one-server class only: every public
        # call of the module, leases and batches included, against a live
        # frsd. The whole suite runs on the checkout's copy (Clients.Python),
        # the same file; its cluster, failure and hostile-server classes
        # again here cost 5 CPU-s and showed nothing about the install.
        suite_dir = os.path.join(self.dir, "suite")
        os.makedirs(suite_dir)
        shutil.copy(os.path.join(CLIENT, "test_frs_client.py"), suite_dir)
        for module in ("processes.py", "stand_ins.py"):
            shutil.copy(os.path.join(ROOT, "tests", "common", module), suite_dir)
        rc, out = run([self.python, os.path.join(suite_dir, "test_frs_client.py"), "ClientTest"], cwd=suite_dir)
        self.assertEqual(rc, 0, out)
        self.assertIn("OK", out.splitlines()[-1])

    def test_from_a_checkout(self):
        rc, out = run([self.python, "-m", "pip", "install", "--no-index", CLIENT])
        self.assertEqual(rc, 0, out)
        self.assertIn("Successfully installed frs-client-", out)
        self.assertTrue(self.installed_file().startswith(os.path.join(self.dir, "venv")), self.installed_file())
        rc, out = run([self.python, "-m", "pip", "show", "frs-client"])
        self.assertIn("License: MIT", out)
        # One version everywhere: the VERSION file, pip's, frsd's.
        with open(os.path.join(ROOT, "VERSION")) as f:
            version = f.read().strip()
        self.assertIn("Version: %s\n" % version, out)
        rc, out = run([os.environ["FRSD"], "--version"])
        self.assertIn(version, out)
        self.run_suite()

    def test_from_its_source_archive(self):
        dist = os.path.join(self.dir, "dist")
        os.makedirs(dist)
        rc, out = run(
            [sys.executable, "-c", "import sys, frs_build; print(frs_build.build_sdist(sys.argv[1]))", dist],
            cwd=os.path.join(CLIENT, "build_backend"),
        )
        self.assertEqual(rc, 0, out)
        sdist = os.path.join(dist, out.strip())
        rc, out = run([self.python, "-m", "pip", "install", "--no-index", sdist])
        self.assertEqual(rc, 0, out)
        with open(os.path.join(ROOT, "VERSION")) as f:
            self.assertIn("Successfully installed frs-client-%s" % f.read().strip(), out)
        self.assertTrue(self.installed_file().startswith(os.path.join(self.dir, "venv")))
        # Removed cleanly: pip knows every file it put there.
        rc, out = run([self.python, "-m", "pip", "uninstall", "-y", "frs-client"])
        self.assertEqual(rc, 0, out)
        rc, out = run([self.python, "-c", "import frs_client"], cwd=self.dir)
        self.assertNotEqual(rc, 0, out)


if __name__ == "__main__":
    for tool in ("FRSD", "FRSCTL"):
        if not os.environ.get(tool):
            sys.exit("FAIL: set %s" % tool)
    unittest.main(verbosity=2)
