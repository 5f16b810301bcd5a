#!/usr/bin/env python3
"""Both holders of a route serving one key at once (docs/cluster.md, "Both
holders serving one key"), checked from the clients' answers alone.

    python3 tools/bench/holders_race.py FRSD [--seconds S] [--clients C]

Two shards with replicas (sync, replica_timeout_ms 200, on_replica_down
"serve", one <cluster lease_key>), built by the harness of
tests/cluster/test_replicas.py, 2 workers each. C clients (4) on each
holder of one key of shard A's, for S seconds (8) each part:

  leases:        acquire on a concurrency rule of max 3, hold 0-50 ms,
                 release. Prints the most leases the answers held at once
                 (the documented bound with both holders serving: 2 x max),
                 ids granted twice, and releases not answered 200;
  reservations:  acquire n=100 reserve=120 on a fixed rule of 8
                 reservations per key, settle it at 50-100 on the same holder.
                 Prints settles not answered 200, ids granted twice, and both
                 holders' counts after: the sum the clients settled when the
                 clients of both sides hold no more than 8 at once (C <= 4),
                 at least that sum past it.

Everything is started here on ports the servers bind themselves, in one temp
dir, and stopped by pid. Exit status 1 when a check fails.
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
import test_replicas as harness  # noqa: E402

MAX = 3
RESERVATIONS = 8
harness.MAP = (
    '<map>\n  <biz id="1" name="b"><rule algo="fixed" interval="3600" max="1000"/></biz>\n'
    '  <biz id="3" name="l"><rule algo="concurrency" lease="60" max="%d"/></biz>\n'
    '  <biz id="5" name="t" reservations="%d"><rule algo="fixed" interval="3600" max="100000000"/></biz>\n</map>\n'
    % (MAX, RESERVATIONS)
)


def run_clients(ports, clients, seconds, one_round):
    stop = time.time() + seconds

    def loop(port):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            while time.time() < stop:
                one_round(c)
        finally:
            c.close()

    threads = [threading.Thread(target=loop, args=(p,)) for p in ports for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def get(c, path):
    c.request("GET", path)
    r = c.getresponse()
    return r.status, r.read().decode()


def leases(pair, key, clients, seconds):
    lock = threading.Lock()
    held, ids, st = [], [], {"granted": 0, "releases_not_200": 0}

    def one(c):
        status, body = get(c, "/acquire?biz=l&key=" + key)
        if status != 200:
            return
        got = time.time()
        lease = re.search(r' lease="([0-9a-f]{24})"', body).group(1)
        time.sleep(random.uniform(0, 0.05))
        let_go = time.time()
        status, _ = get(c, "/release?biz=l&key=%s&lease=%s" % (key, lease))
        with lock:
            st["granted"] += 1
            held.append((got, let_go))
            ids.append(lease)
            st["releases_not_200"] += status != 200

    run_clients([pair.a.port, pair.b.port], clients, seconds, one)
    # From the answers: a lease is held from its grant's answer until its release is sent.
    edges = sorted([(t, 1) for t, _ in held] + [(t, -1) for _, t in held], key=lambda e: (e[0], e[1]))
    now = most = 0
    for _, d in edges:
        now += d
        most = max(most, now)
    st["most_held_at_once"] = most
    st["ids_granted_twice"] = len(ids) - len(set(ids))
    ok = most <= 2 * MAX and st["ids_granted_twice"] == 0 and st["releases_not_200"] == 0
    return st, ok


def reservations(pair, key, clients, seconds):
    lock = threading.Lock()
    ids, st = [], {"taken": 0, "settles_not_200": 0, "settled_sum": 0}

    def one(c):
        status, body = get(c, "/acquire?biz=t&key=%s&n=100&reserve=120" % key)
        if status != 200:
            return
        res = re.search(r' reservation="([0-9a-f]{24})"', body).group(1)
        real = random.randint(50, 100)
        status, _ = get(c, "/settle?biz=t&key=%s&reservation=%s&n=%d" % (key, res, real))
        with lock:
            st["taken"] += 1
            ids.append(res)
            if status == 200:
                st["settled_sum"] += real
            else:
                st["settles_not_200"] += 1
                st.setdefault("settle_answers", {}).setdefault(str(status), 0)
                st["settle_answers"][str(status)] += 1

    run_clients([pair.a.port, pair.b.port], clients, seconds, one)
    st["ids_granted_twice"] = len(ids) - len(set(ids))
    # Sync links: each settle was on the other holder before its answer.
    st["count_a"], st["count_b"] = pair.a.count_of("t", key), pair.b.count_of("t", key)
    # Within the biz's bound (8 per key: at most 2 x clients held at once)
    # both count exactly what was settled. Past it, takes made at once on
    # both holders overflow the copies' tables, which leave out the other
    # holder's reservation: its estimate stays counted there, more than
    # settled, never less (docs/cluster.md).
    counts = (st["count_a"], st["count_b"])
    exact = 2 * clients <= RESERVATIONS
    good_counts = counts == (st["settled_sum"],) * 2 if exact else min(counts) >= st["settled_sum"]
    ok = st["ids_granted_twice"] == 0 and st["settles_not_200"] == 0 and good_counts
    return st, ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("frsd")
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--clients", type=int, default=4)
    args = ap.parse_args()
    harness.FRSD = os.path.abspath(args.frsd)
    tmp = tempfile.mkdtemp(prefix="frs-holders-race-")
    key_file = os.path.join(tmp, "lease.key")
    with open(key_file, "wb") as f:
        f.write(os.urandom(16))
    os.chmod(key_file, 0o600)
    extra = 'replica_mode="sync" replica_timeout_ms="200" on_replica_down="serve" lease_key="%s"' % key_file
    pair = harness.Pair(tmp, extra_a=extra, extra_b=extra, a_workers=2, b_workers=2)
    try:
        ring = harness.ring_of([pair.a.name, pair.b.name])
        key = next("race%d" % i for i in range(1000) if ring.owner_index("race%d" % i) == 0)
        lst, lok = leases(pair, key, args.clients, args.seconds)
        print("leases:", json.dumps(lst), "ok" if lok else "FAILED", flush=True)
        rst, rok = reservations(pair, key, args.clients, args.seconds)
        print("reservations:", json.dumps(rst), "ok" if rok else "FAILED", flush=True)
    finally:
        pair.close()
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(0 if lok and rok else 1)


if __name__ == "__main__":
    main()
