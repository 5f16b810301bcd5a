"""tests/envoy/test_envoy_config.py: `frsctl envoy-config` on the shape of
envoyproxy/ratelimit's README examples (fixtures/): the map.xml printed has
one biz per rate-limited descriptor path, calendar rules of the unit's
seconds aligned in UTC, shadow mode as mode="shadow", nothing for an
unlimited descriptor; `frsd -t` accepts it; a broken file is refused with
file:line. Needs FRSCTL and FRSD."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

import envoy_frsd

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures")
FRSCTL = os.environ["FRSCTL"]
FRSD = os.environ["FRSD"]


def envoy_config(*files):
    return subprocess.run(
        [FRSCTL, "envoy-config", *[os.path.join(FIX, f) for f in files]], capture_output=True, text=True, timeout=30
    )


class EnvoyConfig(unittest.TestCase):
    def test_json_carries_the_same_map(self):
        xml = envoy_config("rl.yaml")
        r = subprocess.run(
            [FRSCTL, "--json", "envoy-config", os.path.join(FIX, "rl.yaml")], capture_output=True, text=True, timeout=30
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["map_xml"], xml.stdout)
        self.assertEqual(doc["files"], [os.path.join(FIX, "rl.yaml")])

    def test_readme_example_becomes_one_biz_per_limited_path(self):
        r = envoy_config("mongo_cps.yaml", "rl.yaml")
        self.assertEqual(r.returncode, 0, r.stderr)
        root = ET.fromstring(r.stdout)
        bizzes = {b.get("name"): b for b in root.findall("biz")}
        want = {
            "envoy.mongo_cps.database_users": ("1", "500", None),
            "envoy.mongo_cps.database_default": ("1", "500", None),
            "envoy.rl.remote_address": ("1", "10", None),
            "envoy.rl.client_id_trial": ("3600", "100", "shadow"),
            "envoy.rl.user": ("86400", "50", None),
            "envoy.rl.plan_premium": ("86400", "5000", None),
        }
        for name, (interval, mx, mode) in want.items():
            self.assertIn(name, bizzes, r.stdout)
            rules = bizzes[name].findall("rule")
            self.assertEqual(len(rules), 1)
            self.assertEqual(rules[0].get("algo"), "calendar")
            self.assertEqual(rules[0].get("interval"), interval)
            self.assertEqual(rules[0].get("max"), mx)
            self.assertEqual(rules[0].get("zone"), "UTC")
            self.assertEqual(bizzes[name].get("mode"), mode)
        # The nested path, too long for a biz name: cut, ending in a hash.
        nested = [n for n in bizzes if n.startswith("envoy.rl.category_account.source_cluster_proxy.")]
        self.assertEqual(len(nested), 1, bizzes.keys())
        self.assertLessEqual(len(nested[0]), 64)
        self.assertEqual(nested[0] and bizzes[nested[0]].find("rule").get("interval"), "60")
        # unlimited: no biz, nothing counted
        self.assertFalse([n for n in bizzes if "internal" in n])
        # 7 limited paths, and one biz per unit (second..week) for the limits
        # Envoy sends with a descriptor (RateLimitDescriptor.limit).
        own = sorted(n for n in bizzes if n.startswith("envoy._override."))
        self.assertEqual(
            own, ["envoy._override." + u for u in ("day", "hour", "minute", "month", "second", "week", "year")]
        )
        self.assertEqual(len(bizzes), 7 + 7)
        ids = [int(b.get("id")) for b in bizzes.values()]
        self.assertEqual(len(set(ids)), len(ids))
        self.assertTrue(all(49152 <= i <= 65535 for i in ids), ids)
        self.assertIn("replaces 'per_user'", r.stdout)

    def test_comments_say_where_each_biz_comes_from(self):
        out = envoy_config("mongo_cps.yaml", "rl.yaml").stdout
        comments = [line.strip() for line in out.splitlines() if "<!--" in line and "-->" in line]
        self.assertTrue(comments, out)
        for c in comments:
            self.assertNotIn(":,", c)  # a biz with only `replaces` had "NAME:, replaces"
            self.assertNotIn(":0:", c)  # nor a file and line it does not have
            self.assertNotIn("domain ,", c)
        self.assertIn("<!-- envoy.rl.plan_premium: replaces 'per_user' -->", out)
        self.assertIn("a descriptor's own limit (Envoy's limit override)", out)

    def test_a_directory_is_read_as_frsd_reads_its_config_directory(self):
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "envoy", "sub"))
            os.makedirs(os.path.join(d, "envoy", ".hidden"))
            with open(os.path.join(FIX, "rl.yaml")) as f, open(os.path.join(d, "envoy", "sub", "rl.conf"), "w") as g:
                g.write(f.read())
            with open(os.path.join(FIX, "broken.yaml")) as f, open(os.path.join(d, "envoy", ".hidden", "x"), "w") as g:
                g.write(f.read())  # skipped, as frsd skips it
            os.symlink(os.path.join(FIX, "mongo_cps.yaml"), os.path.join(d, "envoy", "mongo.yaml"))
            r = subprocess.run([FRSCTL, "envoy-config", os.path.join(d, "envoy")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)

            # The same bizzes and rules as the two files named (the comments
            # name other paths).
            def bizzes(text):
                return [(b.get("id"), b.get("name"), b.find("rule").attrib) for b in ET.fromstring(text).findall("biz")]

            self.assertEqual(bizzes(r.stdout), bizzes(envoy_config("mongo_cps.yaml", "rl.yaml").stdout))
            # A link to nothing is refused by name (skipped, its domain would
            # answer OK with no limit), by frsctl and by frsd -t alike.
            os.symlink(os.path.join(d, "nowhere.yaml"), os.path.join(d, "envoy", "dangling.yaml"))
            r = subprocess.run([FRSCTL, "envoy-config", os.path.join(d, "envoy")], capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("dangling.yaml: a symbolic link whose target cannot be read", r.stderr)
            t = self.frsd_t(d)
            self.assertEqual(t.returncode, 1, t.stdout + t.stderr)
            self.assertIn("dangling.yaml: a symbolic link whose target cannot be read", t.stdout + t.stderr)

    def test_the_same_files_give_the_same_ids(self):
        a = envoy_config("mongo_cps.yaml", "rl.yaml").stdout
        b = envoy_config("rl.yaml", "mongo_cps.yaml").stdout
        self.assertEqual(a, b)

    def test_frsd_accepts_the_printed_map(self):
        r = envoy_config("mongo_cps.yaml", "rl.yaml")
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "map.xml"), "w") as f:
                f.write(r.stdout)
            with open(os.path.join(d, "srv.xml"), "w") as f:
                f.write(
                    '<frs><listen host="127.0.0.1" port="0"/><workers>1</workers><map>map.xml</map>'
                    '<store dir="data" files="1" keynodes="1024" chain="8"/></frs>\n'
                )
            t = subprocess.run(
                [FRSD, "-t", "-c", os.path.join(d, "srv.xml")], capture_output=True, text=True, timeout=30
            )
            self.assertEqual(t.returncode, 0, t.stderr)
            self.assertIn("14 biz(es)", t.stdout)

    def test_a_broken_file_names_file_and_line(self):
        r = envoy_config("broken.yaml")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("broken.yaml:6: unknown unit 'fortnight'", r.stderr)

    def frsd_check(self, d, yaml_text):
        os.makedirs(os.path.join(d, "envoy"), exist_ok=True)
        with open(os.path.join(d, "envoy", "rl.yaml"), "w") as f:
            f.write(yaml_text)
        return self.frsd_t(d)

    def frsd_t(self, d):
        """frsd -t of a server whose <grpc config> is d/envoy."""
        with open(os.path.join(d, "map.xml"), "w") as f:
            f.write("<map>\n</map>\n")
        with open(os.path.join(d, "srv.xml"), "w") as f:
            f.write(
                '<frs><listen host="127.0.0.1" port="0"/><workers>1</workers><map>map.xml</map>'
                '<store dir="data" files="1" keynodes="1024" chain="8"/>'
                '<grpc listen="127.0.0.1:0" config="envoy"/></frs>\n'
            )
        return subprocess.run(
            [FRSD, "-t", "-c", os.path.join(d, "srv.xml")], capture_output=True, text=True, timeout=30
        )

    def test_frsd_t_refuses_an_alias_bomb_without_expanding_it(self):
        # 9^7 descriptor paths in 2.6 kB: nested lists, each an alias of the one below.
        with tempfile.TemporaryDirectory() as d:
            t = self.frsd_check(d, envoy_frsd.alias_bomb("d"))
            self.assertEqual(t.returncode, 1, t.stdout + t.stderr)
            self.assertIn("envoy/rl.yaml:2: the file expands to more than 1000000 YAML nodes", t.stdout + t.stderr)

    def test_frsd_t_refuses_a_duplicate_key(self):
        with tempfile.TemporaryDirectory() as d:
            t = self.frsd_check(d, "domain: a\ndescriptors: []\ndomain: b\n")
            self.assertEqual(t.returncode, 1, t.stdout + t.stderr)
            self.assertIn("envoy/rl.yaml:3: duplicate key 'domain'", t.stdout + t.stderr)

    def test_frsctl_reads_map_xmls_counts_while_the_envoy_files_are_broken(self):
        # A ConfigMap pushed with an error: frsd keeps the configuration it
        # loaded, and frsctl, which refused every command then (exit 2 with
        # the YAML's error), reads map.xml's bizzes and says what it left out.
        with tempfile.TemporaryDirectory() as d:
            t = self.frsd_check(
                d,
                "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n"
                '  - key: path\n    value: "/files/*"\n    rate_limit: {unit: second, requests_per_unit: 5}\n',
            )
            self.assertEqual(t.returncode, 0, t.stdout + t.stderr)
            with open(os.path.join(d, "map.xml"), "w") as f:
                f.write('<map>\n  <biz id="1" name="login"><rule interval="60" max="5"/></biz>\n</map>\n')
            ctl = [FRSCTL, "-c", os.path.join(d, "srv.xml")]
            init = subprocess.run(ctl + ["init"], capture_output=True, text=True, timeout=30)
            self.assertEqual(init.returncode, 0, init.stderr)
            # A descriptor as its metrics label it: an unknown biz, whose
            # error names the biz that spelling is.
            r = subprocess.run(ctl + ["explain", "envoy.a.path_/files/*", "x"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn('unknown biz "envoy.a.path_/files/*" (an Envoy descriptor', r.stderr)
            self.assertIn(": envoy.a.path__files__?)", r.stderr)
            with open(os.path.join(d, "envoy", "rl.yaml"), "w") as f:
                f.write("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: minit, requests_per_unit: 5}\n")
            r = subprocess.run(ctl + ["explain", "login", "u1"], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("<grpc config> does not load", r.stderr)
            self.assertIn("rl.yaml:4: unknown unit 'minit'", r.stderr)
            self.assertIn("a running frsd keeps serving the configuration it loaded before", r.stderr)
            r = subprocess.run(ctl + ["get", "envoy.a.k", "x"], capture_output=True, text=True, timeout=30)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn('unknown biz "envoy.a.k"', r.stderr)
            # A command that writes would act on a map without the bizzes frsd
            # serves: refused, saying which commands still run.
            r = subprocess.run(ctl + ["set", "login", "u1", "3"], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("rl.yaml:4: unknown unit 'minit'", r.stderr)
            self.assertIn("the commands that only read, get, explain, dump, stat, top and export, still run", r.stderr)

    def test_the_shipped_example_loads(self):
        # conf/envoy: a srv.xml with <grpc> and an upstream-style YAML directory.
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(os.path.join(os.path.dirname(__file__), "..", "..", "conf", "envoy"), d, dirs_exist_ok=True)
            t = subprocess.run(
                [FRSD, "-t", "-c", os.path.join(d, "srv.xml")], capture_output=True, text=True, timeout=30
            )
            self.assertEqual(t.returncode, 0, t.stdout + t.stderr)
            self.assertIn("5 Envoy rate limit(s) of 1 domain(s)", t.stdout + t.stderr)

    def test_two_files_of_one_domain_are_refused(self):
        r = envoy_config("rl.yaml", "rl.yaml")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("domain 'rl' is configured in two files", r.stderr)
        self.assertIn("frsctl envoy-config --merge-domains", r.stderr)

    def test_merge_domains_prints_what_grpc_merge_domains_serves(self):
        # The map a <grpc merge_domains="1"> server runs: frsctl could not
        # print it (a domain in two files was refused, naming an attribute of
        # srv.xml it never reads).
        with tempfile.TemporaryDirectory() as d:
            for name, key in (("1.yaml", "k"), ("2.yaml", "j")):
                with open(os.path.join(d, name), "w") as f:
                    f.write(
                        "domain: a\ndescriptors:\n  - key: %s\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"
                        % key
                    )
            r = subprocess.run(
                [FRSCTL, "envoy-config", "--merge-domains", d], capture_output=True, text=True, timeout=30
            )
            self.assertEqual(r.returncode, 0, r.stderr)
            names = {b.get("name") for b in ET.fromstring(r.stdout).iter("biz")}
            self.assertEqual({n for n in names if not n.startswith("envoy._override.")}, {"envoy.a.k", "envoy.a.j"})

    def test_a_limit_a_rule_cannot_hold_is_said_beside_it(self):
        # requests_per_unit 0 denies every request in Envoy; as FRS's own rule
        # its max of 1 lets one through a window: the comment says so.
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "z.yaml"), "w") as f:
                f.write(
                    "domain: w\ndescriptors:\n  - key: zero\n    rate_limit: {unit: second, requests_per_unit: 0}\n"
                    "  - key: q\n    quota_mode: true\n    rate_limit: {unit: hour, requests_per_unit: 9}\n"
                )
            r = subprocess.run([FRSCTL, "envoy-config", d], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("0 per second; a rule's max is at least 1", r.stdout)
            self.assertIn("where Envoy's 0 denies every request", r.stdout)
            self.assertIn("9 per hour; quota_mode (the overall code only) has no rule of its own", r.stdout)


if __name__ == "__main__":
    sys.exit(unittest.main())
