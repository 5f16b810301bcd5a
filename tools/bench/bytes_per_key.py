#!/usr/bin/env python3
"""tools/bench/bytes_per_key.py: bytes per key of the store, measured from outside.

The measure of issue 13: a live frsd with the default conf's store geometry
(conf/srv.xml's <store files keynodes chain>, today 2 x 65,536 x 8), filled
through the protocol (POST /frs batches of 64 acquires, one persistent
HTTP/1.1 connection) with distinct 14-byte keys of one biz until the first
live eviction; then the disk blocks of the whole store directory (st_blocks x
512 of every file in it and of the directory itself: what `du -s` counts, not
the apparent size) divided by the nodes resident at that moment (`frsctl stat
--json`'s nodes_used).

Each biz is measured in its own run on a fresh store. The built-in map has
one biz per algorithm and combination (fixed1, calendar1, bucket1,
fixed_borrow, sliding1, two_rules); every biz of the map is measured unless
`--biz NAME` (repeatable) chooses. A run of a one-slot biz fills ~970,000
keys in about 10 s; the six take about a minute.

    python3 tools/bench/bytes_per_key.py --out /tmp/bpk   # all six
    python3 tools/bench/bytes_per_key.py --biz fixed1     # issue 13's figure
    python3 tools/bench/bytes_per_key.py --biz fixed1 --biz leases8   # 8 leases held per key
    python3 tools/bench/bytes_per_key.py --biz reserve1 --biz reserve8  # 1 or 8 reservations held
    python3 tools/bench/bytes_per_key.py --map my.xml --biz login

Prints a table and writes OUT/bytes_per_key.json. Every run's directory
(srv.xml, map.xml, frsd.log, data/) is under OUT/<biz>/; data/ is removed
after the run unless --keep. frsd is started in the foreground and stopped
by its pid (SIGTERM, SIGKILL after 5 s), never by name. Stdlib only.
"""

import argparse
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
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

KEY_LEN = 14  # "k" + 13 digits
BATCH = 64  # acquires per POST /frs (the protocol's limit per batch)

# The map measured unless --map names another (the file says why these bizzes).
DEFAULT_MAP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bytes_per_key.map.xml")

# Units per acquire, by biz: goldsum adds rewards of 7 units; borrowing takes
# 3 of a max of 2, so every key owes (its state carries a debt).
DEFAULT_UNITS = {"goldsum": 7, "borrowing": 3}
# Acquires per key, by biz: each key of leases8 holds all 8 of its leases
# (a concurrency rule takes one lease per acquire whatever n is), sent as 8
# batches of the same 64 keys.
DEFAULT_REPEATS = {"leases8": 8, "reserve8": 8}
# Reservations held, by biz: each acquire of reserve1 and reserve8 takes one
# (reserve=S seconds), never settled while the store fills: reserve1's keys
# hold one each, reserve8's all eight of their bound.
DEFAULT_RESERVE = {"reserve1": 3600, "reserve8": 3600}

# The six shapes, the default selection; "mixed" fills one store with
# all of them at once, key i going to shape i mod 6.
SHAPES = ["fixed1", "adcap", "sliding10", "goldsum", "borrowing", "bucket"]
MIXED = "mixed"


class BenchError(Exception):
    pass


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- config


def conf_geometry(path):
    """(files, keynodes, chain, timezone) of a srv.xml's <store>."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        raise BenchError("cannot read %s: %s" % (path, e))
    st = root.find("store")
    if st is None:
        raise BenchError("%s has no <store>" % path)
    try:
        geo = tuple(int(st.get(a)) for a in ("files", "keynodes", "chain"))
    except (TypeError, ValueError):
        raise BenchError("%s: <store> needs integer files, keynodes and chain" % path)
    tz = root.findtext("timezone") or "UTC"
    return geo + (tz.strip(),)


def map_bizzes(text):
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise BenchError("map: %s" % e)
    return [b.get("name") for b in root.findall("biz") if b.get("name")]


# ---------------------------------------------------------------- frsd


class Frsd(object):
    """One frsd --foreground in `dir`, on a loopback port it binds itself (port 0)."""

    def __init__(self, exe, dir, geometry, map_text, start_timeout):
        self.exe = exe
        self.dir = dir
        self.geometry = geometry
        self.start_timeout = start_timeout
        self.proc = None
        self.port = 0
        self.conf = os.path.join(dir, "srv.xml")
        self.logfile = os.path.join(dir, "frsd.log")
        self.data = os.path.join(dir, "data")
        os.makedirs(dir, exist_ok=True)
        with open(os.path.join(dir, "map.xml"), "w") as f:
            f.write(map_text)

    def write_conf(self):
        files, keynodes, chain, tz = self.geometry
        with open(self.conf, "w") as f:
            f.write(
                "<frs>\n"
                '  <listen host="127.0.0.1" port="0"/>\n'
                "  <workers>1</workers>\n"
                "  <map>map.xml</map>\n"
                '  <store dir="data" files="%d" keynodes="%d" chain="%d"/>\n'
                "  <timezone>%s</timezone>\n"
                "  <pidfile>frsd.pid</pidfile>\n"
                '  <admin token=""/>\n'
                "</frs>\n" % (files, keynodes, chain, tz)
            )

    def log_text(self):
        try:
            with open(self.logfile, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def healthy(self):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
            try:
                c.request("GET", "/health")
                r = c.getresponse()
                r.read()
                return r.status == 200
            finally:
                c.close()
        except OSError:
            return False

    def listen_port(self):
        """The port frsd names in data/frsd.listen once it has bound it, or 0."""
        try:
            with open(os.path.join(self.data, "frsd.listen")) as f:
                line = f.read()
        except OSError:
            return 0
        return int(line.rsplit(":", 1)[1]) if line.endswith("\n") else 0

    def start(self):
        self.write_conf()
        try:
            os.unlink(os.path.join(self.data, "frsd.listen"))  # the last run's
        except OSError:
            pass
        self.port = 0
        with open(self.logfile, "ab") as err:
            self.proc = subprocess.Popen(
                [self.exe, "-c", self.conf, "--foreground"], stdin=subprocess.DEVNULL, stdout=err, stderr=err
            )
        end = time.monotonic() + self.start_timeout
        while time.monotonic() < end and self.proc.poll() is None:
            self.port = self.port or self.listen_port()
            if self.port and self.healthy():
                return
            time.sleep(0.05)
        rc = self.proc.poll()
        self.stop()
        if rc is None:
            raise BenchError(
                "frsd (pid %d) did not answer /health on 127.0.0.1:%d within %g s; its log (%s):\n%s"
                % (self.proc.pid, self.port, self.start_timeout, self.logfile, self.log_text())
            )
        raise BenchError("frsd exited with status %s at start; its log (%s):\n%s" % (rc, self.logfile, self.log_text()))

    def stop(self):
        """SIGTERM to frsd's pid (its workers follow), SIGKILL after 5 s."""
        p = self.proc
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            log("frsd (pid %d) still running 5 s after SIGTERM: SIGKILL" % p.pid)
            p.kill()
            p.wait(5)


# ---------------------------------------------------------------- protocol

STORE_RE = re.compile(r"<store\s([^>]*)/>")
ATTR_RE = re.compile(r'(\w+)="([^"]*)"')


class Client(object):
    """POST /frs over one persistent HTTP/1.1 connection."""

    def __init__(self, port, timeout):
        self.port = port
        self.timeout = timeout
        self.conn = None

    def post(self, body):
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            try:
                self.conn.request("POST", "/frs", body=body, headers={"Content-Type": "application/xml"})
                r = self.conn.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.close()
                return r.status, data.decode("utf-8", "replace")
            except (OSError, http.client.HTTPException) as e:
                self.close()
                if attempt == 2:
                    raise BenchError("POST /frs to 127.0.0.1:%d failed: %s" % (self.port, e))
        raise AssertionError("unreachable")

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def stats(self):
        status, text = self.post(b'<request cmd="stats"/>')
        m = STORE_RE.search(text)
        if status != 200 or not m:
            raise BenchError("stats answered %d: %s" % (status, text[:300]))
        return {k: v for k, v in ATTR_RE.findall(m.group(1))}


def key(i):
    k = "k%013d" % i
    assert len(k) == KEY_LEN
    return k


def batch_body(biz, first, n, units, reserve=None):
    """`n` acquires of keys first.. ; biz MIXED deals key i to SHAPES[i % 6]."""
    parts = ['<batch answer="compact">']
    for i in range(first, first + n):
        b = SHAPES[i % len(SHAPES)] if biz == MIXED else biz
        u = units.get(b, 1)
        r = (reserve or {}).get(b, 0)
        extra = (' n="%d"' % u if u != 1 else "") + (' reserve="%d"' % r if r else "")
        parts.append('<request cmd="acquire" biz="%s" key="%s"%s/>' % (b, key(i), extra))
    parts.append("</batch>")
    return "".join(parts).encode()


# ---------------------------------------------------------------- measure


def dir_blocks(path):
    """[(relative name, allocated bytes, apparent bytes)] of `path` and
    everything under it, the directory entries themselves included (du -s)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(path):
        st = os.lstat(dirpath)
        rel = os.path.relpath(dirpath, path)
        out.append((rel + "/" if rel != "." else "./", st.st_blocks * 512, st.st_size))
        for name in sorted(filenames):
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue  # gone meanwhile
            out.append((os.path.relpath(p, path), st.st_blocks * 512, st.st_size))
    return sorted(out)


def frsctl_stat(exe, conf):
    try:
        r = subprocess.run(
            [exe, "-c", conf, "stat", "--json"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BenchError("frsctl stat failed: %s" % e)
    if r.returncode != 0:
        raise BenchError(
            "frsctl -c %s stat --json exited %d: %s" % (conf, r.returncode, r.stderr.decode(errors="replace"))
        )
    try:
        return json.loads(r.stdout.decode())
    except ValueError as e:
        raise BenchError("frsctl stat --json printed no JSON (%s): %s" % (e, r.stdout[:300]))


def measure(args, biz, geometry, map_text, outdir):
    rundir = os.path.join(outdir, biz)
    if os.path.exists(rundir):
        shutil.rmtree(rundir)
    frsd = Frsd(args.frsd, rundir, geometry, map_text, args.start_timeout)
    files, keynodes, chain, _ = geometry
    slots = files * keynodes * chain
    log("[%s] starting frsd (%d x %d x %d = %d slots) in %s" % (biz, files, keynodes, chain, slots, rundir))
    frsd.start()
    client = Client(frsd.port, args.timeout)
    try:
        t0 = time.monotonic()
        deadline = t0 + args.timeout
        sent = 0
        batches = 0
        max_keys = slots * 2  # every key takes at least one slot: a store that never evicts is a bug
        st = None
        next_report = t0 + 10
        repeats = args.repeats.get(biz, 1)
        while True:
            for _ in range(repeats):
                status, text = client.post(batch_body(biz, sent, BATCH, args.units, args.reserve))
                if status != 200 or '<batch allowed="1"' not in text:
                    raise BenchError(
                        "batch of keys %s..%s answered %d: %s" % (key(sent), key(sent + BATCH - 1), status, text[:400])
                    )
            sent += BATCH
            batches += 1
            if batches % args.check_every == 0:
                st = client.stats()
                if int(st["evictions_live"]) > 0:
                    break
            now = time.monotonic()
            if now > deadline:
                raise BenchError("no live eviction after %d keys in %g s (--timeout)" % (sent, args.timeout))
            if sent >= max_keys:
                raise BenchError("no live eviction after %d keys (twice the store's slots)" % sent)
            if now >= next_report:
                log("[%s] %d keys sent, %.0f keys/s" % (biz, sent, sent / (now - t0)))
                next_report = now + 10
        fill_s = time.monotonic() - t0
        client.close()
        stat = frsctl_stat(args.frsctl, frsd.conf)
        blocks = dir_blocks(frsd.data)
        # A concurrent `stats` counter too: the HTTP one is the figure that stopped the fill.
        http_store = st
    finally:
        client.close()
        frsd.stop()
    total = sum(b for _, b, _ in blocks)
    apparent = sum(a for _, _, a in blocks)
    nodes = int(stat["nodes_used"])
    slots_used = int(stat["slots_used"])
    res = {
        "biz": biz,
        "geometry": {"files": files, "keynodes": keynodes, "chain": chain, "slots": slots},
        "key_bytes": KEY_LEN,
        "keys_sent": sent,
        "acquires_per_key": repeats,
        "batch": BATCH,
        "check_every_batches": args.check_every,
        "fill_seconds": round(fill_s, 2),
        "keys_per_second": round(sent / fill_s) if fill_s > 0 else None,
        "nodes": nodes,
        "slots_used": slots_used,
        "slots_per_node": round(slots_used / nodes, 4) if nodes else None,
        "occupancy": slots_used / slots,
        "evictions_live": int(stat["evictions_live"]),
        "evictions_stale": int(stat["evictions_stale"]),
        "cuckoo_moves": int(stat.get("cuckoo_moves", 0)),
        "dir_bytes": total,
        "dir_apparent_bytes": apparent,
        "bytes_per_key": total / nodes if nodes else None,
        "files": [{"name": n, "bytes": b, "apparent_bytes": a} for n, b, a in blocks],
        "http_stats_at_stop": http_store,
        "frsd_log": frsd.logfile,
    }
    if res["evictions_stale"]:
        log(
            "[%s] warning: %d stale reclaims during the fill (nodes expired: see the map's intervals)"
            % (biz, res["evictions_stale"])
        )
    if not args.keep:
        shutil.rmtree(frsd.data, ignore_errors=True)
    log(
        "[%s] %d keys in %.1f s: %.2f B/key, occupancy %.2f %%, %d nodes"
        % (biz, sent, fill_s, res["bytes_per_key"], 100 * res["occupancy"], nodes)
    )
    return res


def print_table(results):
    print(
        "%-14s %9s %10s %10s %10s %9s %12s"
        % ("biz", "B/key", "occupancy", "nodes", "slots_used", "slots/key", "dir bytes")
    )
    for r in results:
        print(
            "%-14s %9.2f %9.2f%% %10d %10d %9.2f %12d"
            % (
                r["biz"],
                r["bytes_per_key"],
                100 * r["occupancy"],
                r["nodes"],
                r["slots_used"],
                r["slots_per_node"],
                r["dir_bytes"],
            )
        )
    names = []
    for r in results:
        for f in r["files"]:
            if f["name"] not in names:
                names.append(f["name"])
    print("\nstore directory, allocated bytes per file (st_blocks x 512; ./ is the directory itself):")
    width = max(12, max(len(n) for n in names) + 1)
    print("%-14s" % "biz" + "".join("%*s" % (width, n) for n in names))
    for r in results:
        by = {f["name"]: f["bytes"] for f in r["files"]}
        print("%-14s" % r["biz"] + "".join("%*s" % (width, by.get(n, "-")) for n in names))


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--frsd", default=os.path.join(ROOT, "build", "src", "server", "frsd"))
    ap.add_argument("--frsctl", default=os.path.join(ROOT, "build", "tools", "frsctl", "frsctl"))
    ap.add_argument(
        "--conf",
        default=os.path.join(ROOT, "conf", "srv.xml"),
        help="srv.xml whose <store> geometry (and <timezone>) the runs use (default: conf/srv.xml)",
    )
    ap.add_argument("--map", help="map.xml to use instead of bytes_per_key.map.xml (one biz per algorithm)")
    ap.add_argument(
        "--biz",
        action="append",
        help='biz to measure (repeatable; default: the six shapes and "mixed", or every biz of --map)',
    )
    ap.add_argument("--all", action="store_true", help="every biz of the map, each on a fresh store (the default)")
    ap.add_argument("--out", help="directory for the runs and bytes_per_key.json (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep each run's store directory (data/)")
    ap.add_argument(
        "--check-every",
        type=int,
        default=1,
        metavar="N",
        help="ask frsd's stats for evictions_live every N batches of %d (default 1)" % BATCH,
    )
    ap.add_argument("--timeout", type=float, default=900, help="seconds a run's fill may take (default 900)")
    ap.add_argument("--start-timeout", type=float, default=30, help="seconds frsd may take to serve (default 30)")
    args = ap.parse_args()

    for what, p in (("frsd", args.frsd), ("frsctl", args.frsctl)):
        if not os.access(p, os.X_OK):
            sys.exit(
                "bytes_per_key: no %s at %s (build it: cmake --build build --target frsd frsctl, or pass --%s)"
                % (what, p, what)
            )
    args.frsd = os.path.abspath(args.frsd)
    args.frsctl = os.path.abspath(args.frsctl)
    if args.check_every < 1:
        sys.exit("bytes_per_key: --check-every must be at least 1")
    try:
        geometry = conf_geometry(args.conf)
        with open(args.map or DEFAULT_MAP) as f:
            map_text = f.read()
        names = map_bizzes(map_text)
        if args.biz and args.all:
            raise BenchError("--biz and --all exclude each other")
        args.units = {} if args.map else DEFAULT_UNITS
        args.repeats = {} if args.map else DEFAULT_REPEATS
        args.reserve = {} if args.map else DEFAULT_RESERVE
        if args.biz:
            bizzes = args.biz
        elif args.map:
            bizzes = names
        else:
            bizzes = SHAPES + [MIXED]
        if not bizzes:
            raise BenchError("the map has no biz with a name")
        for b in bizzes:
            if b not in names and not (b == MIXED and not args.map):
                raise BenchError("biz %r is not in the map (%s)" % (b, ", ".join(names)))
        outdir = os.path.abspath(args.out) if args.out else tempfile.mkdtemp(prefix="frs-bpk-")
        os.makedirs(outdir, exist_ok=True)
        results = []
        for b in bizzes:
            results.append(measure(args, b, geometry, map_text, outdir))
        doc = {
            "tool": "tools/bench/bytes_per_key.py",
            "when_unix": int(time.time()),
            "frsd": args.frsd,
            "conf": os.path.abspath(args.conf),
            "map": map_text,
            "results": results,
        }
        path = os.path.join(outdir, "bytes_per_key.json")
        with open(path + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(path + ".tmp", path)
    except BenchError as e:
        sys.exit("bytes_per_key: %s" % e)
    except KeyboardInterrupt:
        sys.exit("bytes_per_key: interrupted")
    print_table(results)
    print("\nresult: %s" % path)


if __name__ == "__main__":
    main()
