#!/usr/bin/env python3
"""Leases on replicas, end to end (docs/cluster.md, "Leases on replicas"):
two real frsd shards, each the other's successor, on loopback, both naming
one <cluster lease_key> file. The owner grants leases and dies (kill -9);
its successor releases them by the ids the owner issued, refuses a forged
one, and counts the owner's held leases before it grants more; the owner
comes back (on its store, then on an empty one) and holds what its
successor holds: the same ids, the same expiries, and a lease the successor
granted releases on the owner. Reservations the same way: taken on the
owner, settled by their ids on its successor after a kill -9 (the real
amount charged, the rest given back, once), one left to expire there at its
estimate (counted), and the owner back holds what its successor settled.

    python3 tests/cluster/test_lease_replicas.py FRSD FRSCTL

One cluster for the file; the tests run in order (unittest sorts them by
name), each on keys of its own. Every process is started here and stopped
by its pid; everything lives in one temp dir.
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import processes  # noqa: E402
import test_replicas  # noqa: E402

FRSCTL = None
MAX = 3
TOKENS = 200  # biz t's limit
test_replicas.MAP = (
    '<map>\n  <biz id="1" name="b"><rule algo="fixed" interval="3600" max="1000"/></biz>\n'
    '  <biz id="3" name="l"><rule algo="concurrency" lease="600" max="%d"/></biz>\n'
    '  <biz id="4" name="s"><rule algo="concurrency" lease="1" max="2"/></biz>\n'
    '  <biz id="5" name="t" reservations="8"><rule algo="fixed" interval="3600" max="%d"/></biz>\n</map>\n'
    % (MAX, TOKENS)
)


def expired_total(shard):
    """frs_leases_expired_total summed over its bizzes."""
    _, body = shard.get("/metrics")
    return sum(float(line.split()[-1]) for line in body.splitlines() if line.startswith("frs_leases_expired_total"))


def series(shard, prefix):
    """The value of the first /metrics line starting with `prefix` (0 if none)."""
    _, body = shard.get("/metrics")
    for line in body.splitlines():
        if line.startswith(prefix):
            return float(line.split()[-1])
    return 0.0


def attr(body, name):
    m = re.search(r' %s="([^"]*)"' % name, body)
    return m.group(1) if m else None


def lease_of(body):
    m = re.search(r' lease="([0-9a-f]{24})"', body)
    return m.group(1) if m else None


class Holder:
    """Lease calls on one shard (a test_replicas.Shard)."""

    def __init__(self, shard):
        self.s = shard

    def acquire(self, key):
        st, body = self.s.get("/acquire?biz=l&key=" + key)
        return st, lease_of(body)

    def release(self, key, lease):
        return self.s.get("/release?biz=l&key=%s&lease=%s" % (key, lease))[0]

    def renew(self, key, lease):
        st, body = self.s.get("/renew?biz=l&key=%s&lease=%s" % (key, lease))
        m = re.search(r' expires="(\d+)"', body)
        return st, int(m.group(1)) if m else None

    def held(self, key):
        """The leases this shard's store holds for `key`: {id: expires_s},
        read with frsctl from the store files (ids keyed as frsd keys them)."""
        r = subprocess.run(
            [FRSCTL, "-c", os.path.join(self.s.dir, "srv.xml"), "--json", "get", "l", key],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if r.returncode != 0:
            return {}
        return {x["id"]: x["expires_s"] for x in json.loads(r.stdout).get("leases", [])}


class LeaseReplicas(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="frs-lease-replicas-")
        cls.key_file = os.path.join(cls.tmp, "lease.key")
        with open(cls.key_file, "wb") as f:
            f.write(os.urandom(16))
        os.chmod(cls.key_file, 0o600)
        # Sync with a timeout no loaded run reaches (ASan servers beside
        # CI's build took over 300 ms): each test reads the other holder's
        # copy right after the answer; a kill closes the link at once.
        extra = 'replica_mode="sync" replica_timeout_ms="2000" lease_key="%s"' % cls.key_file
        cls.p = test_replicas.Pair(cls.tmp, extra_a=extra, extra_b=extra)
        cls.a, cls.b = Holder(cls.p.a), Holder(cls.p.b)

    @classmethod
    def tearDownClass(cls):
        cls.p.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def failover_and_back(self, key, lose_store):
        a, b, p = self.a, self.b, self.p
        # The owner grants two leases; its successor holds them under the
        # same ids and expiries (sync: before each answer went out).
        ids = []
        for _ in range(2):
            st, lease = a.acquire(key)
            self.assertEqual(st, 200)
            self.assertIsNotNone(lease)
            ids.append(lease)
        self.assertEqual(b.held(key), a.held(key))
        self.assertEqual(sorted(b.held(key)), sorted(ids))

        p.a.kill9()
        # The successor serves the owner's routes: it knows the owner's ids.
        self.assertEqual(b.release(key, ids[0]), 200)
        self.assertEqual(b.release(key, ids[0]), 410)  # released already
        forged = ids[1][:-1] + ("0" if ids[1][-1] != "0" else "1")
        self.assertEqual(b.release(key, forged), 409)
        st, expires = b.renew(key, ids[1])
        self.assertEqual(st, 200)
        # Up to max, counting the owner's lease still held: no extra grant.
        taken = []
        for _ in range(MAX - 1):
            st, lease = b.acquire(key)
            self.assertEqual(st, 200)
            taken.append(lease)
        self.assertEqual(b.acquire(key)[0], 429)
        self.assertEqual(sorted(b.held(key)), sorted([ids[1]] + taken))
        self.assertEqual(b.held(key)[ids[1]], expires)

        if lose_store:
            shutil.rmtree(os.path.join(p.a.dir, "data"))
        p.a.start()
        if lose_store:
            self.assertIn("node(s) taken from snapshots", p.a.log())
        # The owner holds what its successor holds: ids and expiries (the
        # successor's queue may still be on its way: a batch at most).
        self.assertTrue(
            processes.wait_for(lambda: a.held(key) == b.held(key), 10), "A %s, B %s" % (a.held(key), b.held(key))
        )
        self.assertEqual(len(a.held(key)), MAX)
        self.assertEqual(a.acquire(key)[0], 429)
        # A lease the successor granted releases on the owner, and the
        # successor hears of it.
        self.assertEqual(a.release(key, taken[0]), 200)
        self.assertEqual(b.release(key, taken[0]), 410)
        self.assertEqual(a.held(key), b.held(key))
        self.assertEqual(len(a.held(key)), MAX - 1)
        st, lease = a.acquire(key)
        self.assertEqual(st, 200)
        self.assertEqual(b.release(key, lease), 200)
        # B's link to A may still be down from A's absence (tried again once
        # a second): then its release reaches A with the next attempt.
        self.assertTrue(
            processes.wait_for(lambda: a.held(key) == b.held(key), 5), "A %s, B %s" % (a.held(key), b.held(key))
        )
        self.assertEqual(len(a.held(key)), MAX - 1)

    def test_1_a_failover_keeps_the_leases_and_the_owner_takes_them_back(self):
        self.failover_and_back(self.p.keys[0], lose_store=False)

    def test_2_an_owner_on_an_empty_store_takes_them_back_from_the_snapshot(self):
        self.failover_and_back(self.p.keys[1], lose_store=True)

    def test_3_an_expiry_is_counted_by_the_holder_that_found_it_only(self):
        a, b, k = self.p.a, self.p.b, self.p.keys[2]
        st, body = a.get("/acquire?biz=s&key=" + k)
        self.assertEqual(st, 200)
        lease = lease_of(body)
        # A 1 s lease is over within 2 s; a read sees it free at once.
        self.assertTrue(processes.wait_for(lambda: ' count="0"' in a.get("/query?biz=s&key=" + k)[1], 5))
        # Its renewal is a 410 that frees it and counts its expiry, here;
        # the successor frees it too (the sweep), uncounted.
        self.assertEqual(a.get("/renew?biz=s&key=%s&lease=%s" % (k, lease))[0], 410)
        self.assertEqual(expired_total(a), 1)
        # The successor's next write of the key finds nothing expired.
        self.assertEqual(b.get("/acquire?biz=s&key=" + k)[0], 200)
        self.assertEqual(expired_total(b), 0)

    def test_4_a_shard_keyed_otherwise_is_refused(self):
        # A batch carries the check of its sender's key: one keyed
        # otherwise, or by its own store, is answered 409 naming both.
        b = self.p.b

        def post(query, stream="t"):
            c = http.client.HTTPConnection("127.0.0.1", b.port, timeout=5)
            try:
                c.request(
                    "POST",
                    "/replicate?from=%s&stream=%s&seq=1&%s" % (self.p.a.name, stream, query),
                    body="A 1 - 1 1 k\n",
                    headers={"Authorization": "Bearer " + test_replicas.TOKEN},
                )
                r = c.getresponse()
                return r.status, r.read().decode()
            finally:
                c.close()

        # A stream name becomes a receipt's and the log's: printable only.
        st, body = post("digest=0", stream="a%0D%0AX-Evil:%201")
        self.assertEqual(st, 400, body)
        self.assertIn("stream must be at most 512 printable bytes", body)
        st, body = post("digest=0")
        self.assertEqual(st, 409)
        digest = re.search(r"is not this shard's \(([0-9a-f]{8})\)", body).group(1)
        for query, says in (("", "(none)"), ("&lease_key=0123456789abcdef", "(check 0123456789abcdef)")):
            st, body = post("digest=" + digest + query)
            self.assertEqual(st, 409, body)
            self.assertIn("the sender's <cluster lease_key> " + says, body)
        self.assertIn(' count="0"', b.get("/query?biz=b&key=k")[1])  # nothing applied

        def ask(query):  # GET /replicate?for=A, as a shard asks
            c = http.client.HTTPConnection("127.0.0.1", b.port, timeout=5)
            try:
                c.request(
                    "GET",
                    "/replicate?for=%s&digest=%s%s" % (self.p.a.name, digest, query),
                    headers={"Authorization": "Bearer " + test_replicas.TOKEN},
                )
                r = c.getresponse()
                return r.status, r.read().decode()
            finally:
                c.close()

        # A snapshot too: the asker would hold leases it cannot verify.
        for query, says in (("", "(none)"), ("&lease_key=0123456789abcdef", "(check 0123456789abcdef)")):
            st, body = ask("&snapshot=1" + query)
            self.assertEqual(st, 409, body)
            self.assertIn("the sender's <cluster lease_key> " + says, body)
        # The question of what B holds for A (a start's, a link's probe):
        # refused when it names another key, so a shard started with the
        # wrong one hears of it at once; answered when it names none (an
        # earlier frsd asks so).
        for query, want in (("&lease_key=0123456789abcdef", 409), ("", 200)):
            st, body = ask(query)
            self.assertEqual(st, want, body)
        # Each refusal is counted, and the first of each kind from the peer
        # logged, naming it and which side has a key, never a key or its check.
        self.assertEqual(b.metric("frs_replica_key_refused_total"), 5)
        self.assertIn(
            "replicas: refused a question of what it holds for that shard from %s (409): its <cluster lease_key> "
            "differs from this shard's" % self.p.a.name,
            b.log(),
        )
        log = b.log()
        self.assertIn(
            "replicas: refused a batch of changes from %s (409): it names no <cluster lease_key> and this shard does"
            % self.p.a.name,
            log,
        )
        self.assertIn(
            "replicas: refused a snapshot from %s (409): it names no <cluster lease_key> and this shard does"
            % self.p.a.name,
            log,
        )
        # Once a minute per peer and kind: the second of each is counted, not logged.
        self.assertEqual(log.count("refused a batch of changes from"), 1, log)
        self.assertEqual(log.count("refused a snapshot from"), 1, log)
        self.assertNotIn("0123456789abcdef", log)
        with open(self.key_file, "rb") as f:
            key = f.read()
        self.assertNotIn(key.hex(), log)

    def test_5_a_key_file_others_may_read_is_refused_at_reload_and_start(self):
        b = self.p.b
        os.chmod(self.key_file, 0o640)
        try:
            before = b.log().count("reload refused")
            b.proc.send_signal(signal.SIGHUP)
            self.assertTrue(processes.wait_for(lambda: b.log().count("reload refused") > before, 10), b.log())
            self.assertIn("<cluster lease_key>: %s has mode 0640" % self.key_file, b.log())
            self.assertEqual(b.status("/health"), 200)  # the old configuration stays
            # frsd -t and a start are refused likewise, naming the file and its mode.
            r = subprocess.run(
                [test_replicas.FRSD, "-c", os.path.join(b.dir, "srv.xml"), "-t"], capture_output=True, text=True
            )
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("%s has mode 0640" % self.key_file, r.stderr)
            self.assertIn("chmod 600 %s" % self.key_file, r.stderr)
            alone = os.path.join(self.tmp, "alone")
            os.makedirs(alone)
            shutil.copy(os.path.join(b.dir, "map.xml"), alone)
            with open(os.path.join(alone, "srv.xml"), "w") as f:
                f.write(
                    '<frs><listen host="127.0.0.1" port="0"/><map>map.xml</map>'
                    '<store dir="data" files="1" keynodes="1024" chain="8"/>'
                    '<cluster self="127.0.0.1:1" lease_key="%s"><shard>127.0.0.1:1</shard></cluster></frs>\n'
                    % self.key_file
                )
            r = subprocess.run(
                [test_replicas.FRSD, "-c", os.path.join(alone, "srv.xml"), "--foreground"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("%s has mode 0640" % self.key_file, r.stderr)
            # As lease_key_also, the same file is named as that, at its line;
            # and a second key with the first one's bytes is no second key.
            other = os.path.join(alone, "other.key")
            with open(os.open(other, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
                f.write(os.urandom(16))

            def check(main, also):
                with open(os.path.join(alone, "srv.xml"), "w") as f:
                    f.write(
                        '<frs><listen host="127.0.0.1" port="0"/><map>map.xml</map>\n'
                        '<store dir="data" files="1" keynodes="1024" chain="8"/>\n'
                        '<cluster self="127.0.0.1:1" lease_key="%s" lease_key_also="%s">'
                        "<shard>127.0.0.1:1</shard></cluster></frs>\n" % (main, also)
                    )
                r = subprocess.run(
                    [test_replicas.FRSD, "-c", os.path.join(alone, "srv.xml"), "-t"], capture_output=True, text=True
                )
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                return r.stderr

            err = check(other, self.key_file)
            self.assertIn("srv.xml:3: <cluster lease_key_also>: %s has mode 0640" % self.key_file, err)
            os.chmod(self.key_file, 0o600)
            same = os.path.join(alone, "same.key")
            shutil.copy(other, same)
            os.chmod(same, 0o600)
            err = check(other, same)
            self.assertIn("srv.xml:3: <cluster lease_key_also>: %s holds the key %s holds" % (same, other), err)
        finally:
            os.chmod(self.key_file, 0o600)

    def test_6_a_failover_settles_the_owners_reservations_once_and_the_owner_gets_them_back(self):
        a, b, k = self.p.a, self.p.b, self.p.keys[3]
        held_t = 'frs_reservations_held{biz="t",id="5"}'
        expired_t = 'frs_reservations_expired_total{biz="t"'
        # What the answers say the key holds: settled + held, never above the
        # limit (docs/rules.md, "Invariants"), and each answer's count is it.
        settled, held = 0, {}

        def check(body):
            self.assertEqual(int(attr(body, "count")), settled + sum(held.values()), body)
            self.assertLessEqual(settled + sum(held.values()), TOKENS)

        def reserve(shard, n, s):
            st, body = shard.get("/acquire?biz=t&key=%s&n=%d&reserve=%d" % (k, n, s))
            return st, body, attr(body, "reservation")

        def settle(shard, rid, n):
            return shard.get("/settle?biz=t&key=%s&reservation=%s&n=%d" % (k, rid, n))

        ids = {}
        for name, n, s in (("r1", 30, 600), ("r2", 30, 600), ("r3", 10, 1)):
            st, body, rid = reserve(a, n, s)
            self.assertEqual(st, 200, body)
            self.assertEqual(len(rid), 24, body)
            ids[name], held[rid] = rid, n
            check(body)
        # Sync: the successor held each before its answer went out.
        self.assertIn(' count="70"', b.get("/query?biz=t&key=" + k)[1])
        # Before any write on B: r3 (1 s) may end by the first of them on a
        # slow run, and its expiry is counted by the write that finds it.
        expired = series(b, expired_t)

        a.kill9()
        # The successor settles the owner's ids: the real amount charged in
        # the reservation's window, the rest given back; once.
        st, body = settle(b, ids["r1"], 12)
        self.assertEqual(st, 200, body)
        self.assertEqual((attr(body, "settled"), attr(body, "returned")), ("1", "18"), body)
        del held[ids["r1"]]
        settled += 12
        check(body)
        st, body = settle(b, ids["r1"], 12)
        self.assertEqual(st, 410, body)
        self.assertIn(' count="52"', b.get("/query?biz=t&key=" + k)[1])
        st, body = settle(b, ids["r2"], 45)  # above its estimate: the excess charged too
        self.assertEqual((st, attr(body, "overrun")), (200, "15"), body)
        del held[ids["r2"]]
        settled += 45
        check(body)
        # Up to the limit counting the owner's reservation still held: 67
        # counted, so 140 more is refused and 100 is not.
        st, body, _ = reserve(b, 140, 600)
        self.assertEqual((st, attr(body, "allowed")), (429, "0"), body)
        check(body)
        st, body, ids["r4"] = reserve(b, 100, 600)
        self.assertEqual(st, 200, body)
        held[ids["r4"]] = 100
        check(body)
        # The owner's 1 s reservation, left unsettled, ends by itself on the
        # successor (the gauge reads the store: r4 alone held), charged its
        # estimate; the next write of the key finds it and counts it there.
        # A figure of a walk after r4 was taken: an older one (the gauge is
        # the master's last walk) could count r3 held and r4 not.
        self.assertTrue(
            processes.wait_for(lambda: processes.held_metric(lambda: b.get("/metrics")[1], held_t) == 1, 5),
            b.get("/metrics")[1],
        )
        st, body = settle(b, ids["r3"], 1)
        self.assertEqual(st, 410, body)
        self.assertEqual(series(b, expired_t), expired + 1)
        settled += held.pop(ids["r3"])
        check(b.get("/query?biz=t&key=" + k)[1])
        self.assertEqual(settled + sum(held.values()), 167)

        # The owner back on its store holds what its successor settled: the
        # count (no charge twice, none lost), the settled ids gone, r4 held.
        a.start()
        self.assertTrue(
            processes.wait_for(lambda: ' count="167"' in a.get("/query?biz=t&key=" + k)[1], 10),
            a.get("/query?biz=t&key=" + k)[1],
        )
        held_now = processes.held_metric(lambda: a.get("/metrics")[1], 'frs_reservations_held{biz="t",id="5"}')
        self.assertEqual(held_now, 1)
        for name in ("r1", "r2", "r3"):
            self.assertEqual(settle(a, ids[name], 1)[0], 410, name)
        st, body = settle(a, ids["r4"], 60)
        self.assertEqual((st, attr(body, "returned")), (200, "40"), body)
        del held[ids["r4"]]
        settled += 60
        check(body)
        self.assertEqual(settle(b, ids["r4"], 60)[0], 410)
        self.assertIn(' count="127"', b.get("/query?biz=t&key=" + k)[1])

    def test_7_an_owner_on_an_empty_store_takes_its_reservations_back_from_the_snapshot(self):
        a, b, k = self.p.a, self.p.b, self.p.keys[4]
        st, body = a.get("/acquire?biz=t&key=%s&n=40&reserve=600" % k)
        self.assertEqual(st, 200, body)
        rid = attr(body, "reservation")
        self.assertIn(' count="40"', b.get("/query?biz=t&key=" + k)[1])
        a.kill9()
        shutil.rmtree(os.path.join(a.dir, "data"))
        a.start()
        self.assertIn("node(s) taken from snapshots", a.log())
        # The snapshot brought the table with the count: the owner settles
        # its own id (before, 409: an id the new store did not know, while
        # the successor still held the estimate).
        self.assertIn(' count="40"', a.get("/query?biz=t&key=" + k)[1], a.log())
        st, body = a.get("/settle?biz=t&key=%s&reservation=%s&n=25" % (k, rid))
        self.assertEqual((st, attr(body, "returned")), (200, "15"), body)
        self.assertEqual(a.get("/settle?biz=t&key=%s&reservation=%s&n=25" % (k, rid))[0], 410)
        self.assertTrue(
            processes.wait_for(lambda: ' count="25"' in b.get("/query?biz=t&key=" + k)[1], 5),
            b.get("/query?biz=t&key=" + k)[1],
        )

    def test_8_each_holder_grants_ids_of_its_own_half_of_the_serials(self):
        # Both holders may grant on one key at once (two proxies that
        # disagree): the owner's ids carry odd serials, its successor's even
        # ones (the id's first 8 hex digits), so two grants made at the same
        # instant are never one id, and each release frees its own lease on
        # both holders (docs/cluster.md, "Both holders serving one key").
        a, b, k = self.a, self.b, self.p.keys[15]
        got = []
        for holder in (a, a, b):  # max 3
            st, lease = holder.acquire(k)
            self.assertEqual(st, 200)
            got.append(lease)
        self.assertEqual([int(x[:8], 16) % 2 for x in got], [1, 1, 0])
        self.assertEqual(len(set(got)), 3)
        self.assertEqual(a.held(k), b.held(k))
        self.assertEqual(a.release(k, got[2]), 200)  # the successor's, on the owner
        self.assertEqual(sorted(b.held(k)), sorted(got[:2]))
        taken = [x.get("/acquire?biz=t&key=%s&n=5&reserve=60" % k) for x in (self.p.a, self.p.a, self.p.b)]
        self.assertEqual([st for st, _ in taken], [200, 200, 200])
        self.assertEqual([int(attr(body, "reservation")[:8], 16) % 2 for _, body in taken], [1, 1, 0])
        self.assertEqual(b.release(k, got[0]), 200)  # the owner's, on the successor
        self.assertEqual(a.release(k, got[1]), 200)
        self.assertEqual(a.held(k), {})


def worker_of(conn, shard):
    """The pid of `shard`'s worker that serves `conn` (a connected
    http.client.HTTPConnection): its socket's inode, found in /proc/net/tcp
    by the two ports, in the worker's descriptors."""
    mine = conn.sock.getsockname()[1]
    inode = None
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, remote = fields[1], fields[2]
            if int(local.split(":")[1], 16) == shard.port and int(remote.split(":")[1], 16) == mine:
                inode = fields[9]
    for pid in processes.children(shard.proc.pid):
        try:
            for fd in os.listdir("/proc/%d/fd" % pid):
                if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "socket:[%s]" % inode:
                    return pid
        except OSError:
            continue
    return None


class TwoWorkers(unittest.TestCase):
    """The successor serves with two workers while the owner is away: each
    keeps what it serves for the owner on a link of its own, and the two
    links deliver in any order when the owner is back. A release kept by one
    worker could reach the owner before the grant the other kept (the owner
    then held that lease until its expiry, a place nobody could free), and
    a settle before its take (dropped: the owner kept the estimate)."""

    def test_what_two_workers_kept_reaches_the_owner_whole_in_any_order(self):
        tmp = tempfile.mkdtemp(prefix="frs-lease-two-workers-")
        self.addCleanup(shutil.rmtree, tmp, True)
        key_file = os.path.join(tmp, "lease.key")
        with open(key_file, "wb") as f:
            f.write(os.urandom(16))
        os.chmod(key_file, 0o600)
        extra = 'replica_mode="sync" replica_timeout_ms="2000" lease_key="%s"' % key_file
        p = test_replicas.Pair(tmp, extra_a=extra, extra_b=extra, b_workers=2)
        self.addCleanup(p.close)
        p.a.kill9()
        # One keep-alive connection on each of the successor's workers. Which
        # worker accepts is the kernel's and the workers' pace: under a loaded
        # machine one may take dozens in a row, so the tries go on for 20 s,
        # pausing now and then for the other to wake.
        conns = {}
        deadline = time.monotonic() + 20
        tries = 0
        while len(conns) < 2 and time.monotonic() < deadline:
            c = http.client.HTTPConnection("127.0.0.1", p.b.port, timeout=5)
            c.connect()
            pid = worker_of(c, p.b)
            if pid is not None and pid not in conns:
                conns[pid] = c
            else:
                c.close()
            tries += 1
            if tries % 16 == 0:
                time.sleep(0.05)
        self.assertEqual(len(conns), 2, "no connection reached each worker")
        one, two = conns.values()

        def get(conn, path):
            conn.request("GET", path)
            r = conn.getresponse()
            return r.status, r.read().decode()

        keys = p.keys[:12]
        for i, k in enumerate(keys):
            took, gave = (one, two) if i % 2 == 0 else (two, one)
            st, body = get(took, "/acquire?biz=l&key=" + k)
            self.assertEqual(st, 200, body)
            self.assertEqual(get(gave, "/release?biz=l&key=%s&lease=%s" % (k, lease_of(body)))[0], 200)
            st, body = get(took, "/acquire?biz=t&key=%s&n=10&reserve=600" % k)
            self.assertEqual(st, 200, body)
            rid = attr(body, "reservation")
            self.assertEqual(get(gave, "/settle?biz=t&key=%s&reservation=%s&n=%d" % (k, rid, 20 + i))[0], 200)
        for c in conns.values():
            c.close()
        p.a.start()

        def owner_as_successor():
            for i, k in enumerate(keys):
                if p.a.count_of("l", k) != 0 or p.a.count_of("t", k) != 20 + i:
                    return False
            return True

        ok = processes.wait_for(owner_as_successor, 10)
        self.assertTrue(ok, ["%s: %s %s" % (k, p.a.count_of("l", k), p.a.count_of("t", k)) for k in keys] + [p.a.log()])
        for k in keys:
            self.assertEqual(p.b.count_of("l", k), 0)
            self.assertEqual(p.a.get("/acquire?biz=l&key=" + k)[0], 200)


class KeyRotation(unittest.TestCase):
    """<cluster lease_key> changed one shard at a time (docs/cluster.md, "The
    shared secret"): first every shard keyed by the old key with the new one
    beside it (lease_key_also), then by the new key with the old beside it.
    No batch is refused on the way (the shards of two keys refused each
    other's, each counted alone, and a key was granted up to twice its
    limit), and the successor of a dead owner releases the ids the owner
    made under either key."""

    def test_a_key_rotated_one_shard_at_a_time_keeps_every_link_and_id(self):
        tmp = tempfile.mkdtemp(prefix="frs-lease-rotation-")
        self.addCleanup(shutil.rmtree, tmp, True)
        old, new = os.path.join(tmp, "old.key"), os.path.join(tmp, "new.key")
        for path in (old, new):
            with open(path, "wb") as f:
                f.write(os.urandom(16))
            os.chmod(path, 0o600)

        def keyed(main, also=None):
            return ' lease_key="%s"' % main + (' lease_key_also="%s"' % also if also else "")

        extra = 'replica_mode="sync" replica_timeout_ms="2000"' + keyed(old)
        p = test_replicas.Pair(tmp, extra_a=extra, extra_b=extra)
        self.addCleanup(p.close)

        def rekey(shard, main, also=None):
            path = os.path.join(shard.dir, "srv.xml")
            with open(path) as f:
                text = re.sub(r' lease_key="[^"]*"( lease_key_also="[^"]*")?', keyed(main, also), f.read())
            shard.stop()
            with open(path, "w") as f:
                f.write(text)
            shard.start()

        k = p.keys[0]

        def acquire():
            st, body = p.a.get("/acquire?biz=l&key=" + k)
            self.assertEqual(st, 200, body)
            return lease_of(body)

        ids = [acquire()]  # under the old key
        rekey(p.b, old, new)
        rekey(p.a, old, new)
        rekey(p.b, new, old)
        ids.append(acquire())  # the owner still makes ids under the old key; its successor has the new
        rekey(p.a, new, old)
        ids.append(acquire())  # under the new key
        for s in (p.a, p.b):
            self.assertEqual(s.metric("frs_replica_key_refused_total") or 0, 0, s.log())
            self.assertEqual(s.metric("frs_replica_unprotected_total") or 0, 0, s.log())
        p.a.kill9()
        for lid in ids:
            st, body = p.b.get("/release?biz=l&key=%s&lease=%s" % (k, lid))
            self.assertEqual(st, 200, body)

    def test_a_successor_restarted_with_another_key_reads_down_while_idle(self):
        # B comes back under a key of its own while nothing goes to it: A's
        # idle link asks B whether it is there (at once, B's restart closed
        # the connection), B refuses the question for its key, and A's link
        # reads down without a change sent (before, up until the next one,
        # which B then refused). B keyed as A again: up, and the line says
        # how long it was down.
        tmp = tempfile.mkdtemp(prefix="frs-lease-rekeyed-")
        self.addCleanup(shutil.rmtree, tmp, True)
        keys = []
        for name in ("one.key", "other.key"):
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(os.urandom(16))
            os.chmod(path, 0o600)
            keys.append(path)
        extra = 'replica_mode="sync" replica_timeout_ms="2000" lease_key="%s"' % keys[0]
        p = test_replicas.Pair(tmp, extra_a=extra, extra_b=extra)
        self.addCleanup(p.close)
        self.assertEqual(p.a.get("/acquire?biz=t&key=" + p.keys[0])[0], 200)
        self.assertEqual(p.a.metric("frs_replica_link_up"), 1)
        srv = os.path.join(p.b.dir, "srv.xml")
        with open(srv) as f:
            text = f.read()

        def restart_b(key):
            p.b.stop()
            with open(srv, "w") as f:
                f.write(text.replace(keys[0], key))
            # Keyed otherwise, B waits for what A may hold of its routes
            # (refused: 503 on them, up to 60 s): not a start to wait for.
            p.b.start(wait=key == keys[0])

        restart_b(keys[1])
        # B's own link to A reads down from its start's first refused
        # question, not 5 s later at the link's own (found by an outside run).
        self.assertTrue(processes.wait_for(lambda: p.b.port and p.b.metric("frs_replica_link_up") == 0, 3), p.b.log())
        self.assertTrue(processes.wait_for(lambda: p.a.metric("frs_replica_link_up") == 0, 10), p.a.log())
        self.assertIn("is down (answered 409: /replicate: the sender's <cluster lease_key>", p.a.log())
        restart_b(keys[0])
        self.assertTrue(processes.wait_for(lambda: p.a.metric("frs_replica_link_up") == 1, 10), p.a.log())
        self.assertRegex(p.a.log(), r"replica link to \S+ is back after \d+\.\d s")


if __name__ == "__main__":
    test_replicas.FRSD = sys.argv.pop(1)
    FRSCTL = sys.argv.pop(1)
    unittest.main(verbosity=2)
