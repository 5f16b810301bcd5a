#!/usr/bin/env python3
"""What a replica snapshot costs the shard that answers it (docs/cluster.md,
"Replicas"): while it reads its store for a shard on a new store, every
request of the answering shard waits.

    python3 tools/bench/snapshot_hold.py FRSD [FRSD2] [--keys N] [--rounds R]

Two shards with replicas (each the other's successor, the shipped store
geometry: 2 files x 65,536 key-nodes x 8), built by the harness of
tests/cluster/test_replicas.py: N keys (300,000 by default) counted on B
through POST /frs batches of 1,024 keys of one hash tag, A's routes all;
then A killed (-9), its store removed, A started again. Prints, per run,
what B logged of the snapshot (nodes, bytes, the milliseconds its requests
waited) and A's catch-up (nodes taken, milliseconds). With two binaries they
take turns, R rounds each, on the same keys: a change is judged against the
build before in the same minutes, not against a figure of another hour.
Everything is started here on ports the servers bind themselves, in one
temp dir, and stopped by pid.
"""
import argparse
import http.client
import os
import re
import shutil
import statistics
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
import test_replicas as harness  # noqa: E402

BATCH = 1024


def keys_of_b(ring, n):
    """n keys whose owner is the second shard (B), in groups of one hash tag."""
    groups, total, g = [], 0, 0
    while total < n:
        tag = "{g%d}" % g
        g += 1
        if ring.owner_index(tag + "x") != 1:
            continue
        grp = [tag + "k%d" % i for i in range(min(BATCH, n - total))]
        groups.append(grp)
        total += len(grp)
    return groups


def fill(shard, groups):
    c = http.client.HTTPConnection("127.0.0.1", shard.port, timeout=120)
    try:
        for grp in groups:
            body = "<batch>" + "".join('<request cmd="update" biz="b" key="%s"/>' % k for k in grp) + "</batch>"
            c.request("POST", "/frs", body=body, headers={"Content-Type": "application/xml"})
            r = c.getresponse()
            text = r.read()
            if r.status != 200:
                raise SystemExit("snapshot_hold: filling B answered %d: %s" % (r.status, text[:300]))
    finally:
        c.close()


def one_run(frsd, n, work):
    harness.FRSD = frsd
    shutil.rmtree(work, ignore_errors=True)
    ra, rb = harness.Relay(), harness.Relay()
    names = ["127.0.0.1:%d" % ra.port, "127.0.0.1:%d" % rb.port]
    a = harness.Shard(os.path.join(work, "a"), ra, names, 'replica_timeout_ms="5000"', 1, 'batch="1024"')
    b = harness.Shard(os.path.join(work, "b"), rb, names, 'replica_timeout_ms="5000"', 1, 'batch="1024"')
    for s in (a, b):
        path = os.path.join(s.dir, "srv.xml")
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace('keynodes="1024"', 'keynodes="65536"').replace('files="1"', 'files="2"'))
    try:
        b.start()
        a.start()
        fill(b, keys_of_b(harness.ring_of(names), n))
        a.kill9()
        shutil.rmtree(os.path.join(a.dir, "data"))
        a.start()
        sent = [
            ln
            for ln in harness.processes.read_text(os.path.join(b.dir, "stderr")).splitlines()
            if "a snapshot for" in ln and " 0 node(s)" not in ln
        ]
        took = [
            ln for ln in harness.processes.read_text(os.path.join(a.dir, "stderr")).splitlines() if "caught up in" in ln
        ]
        m = re.search(r"(\d+) node\(s\), (\d+) bytes; this shard's requests waited (\d+) ms", sent[-1] if sent else "")
        t = re.search(r"caught up in (\d+) ms \(a new store; (\d+) node", took[-1] if took else "")
        if not m or not t:
            raise SystemExit("snapshot_hold: no snapshot logged:\n%s\n%s" % (b.log(), a.log()))
        return int(m.group(1)), int(m.group(2)), int(m.group(3)), int(t.group(2)), int(t.group(1))
    finally:
        for s in (a, b):
            if s.proc is not None and s.proc.poll() is None:
                s.stop()
        ra.close()
        rb.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("frsd", nargs="+", help="one frsd binary, or two to take turns")
    ap.add_argument("--keys", type=int, default=300000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    bins = [os.path.abspath(b) for b in args.frsd]
    work = tempfile.mkdtemp(prefix="frs-snapshot-hold-")
    waits = {b: [] for b in bins}
    try:
        for r in range(args.rounds):
            for b in bins:
                sent, size, waited, taken, caught = one_run(b, args.keys, os.path.join(work, "run"))
                waits[b].append(waited)
                print(
                    "round %d %s: B sent %d node(s), %d bytes, its requests waited %d ms; A took %d in %d ms"
                    % (r + 1, b, sent, size, waited, taken, caught),
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for b in bins:
        print("%s: median wait %d ms over %d run(s)" % (b, statistics.median(waits[b]), len(waits[b])))


if __name__ == "__main__":
    main()
