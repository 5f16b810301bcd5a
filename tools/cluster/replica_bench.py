#!/usr/bin/env python3
"""What replicas cost: replicas="0" against replica_mode="sync" and "async" (stdlib only).

Runs the same cluster three ways in one invocation: three frsd shards (1
worker each, ephemeral loopback ports, the same ports, keys and client for
every configuration) behind one nginx running the shipped
conf/cluster/nginx-frs.conf (ports substituted, as failover_bench.py does),
with the shards' <cluster> either without replicas or with replicas="1"
replica_mode="sync" / "async". Every shard has enforce="1" in all three, so
only the replicas differ. Each run starts a fresh cluster on fresh stores
and measures two phases:

  saturated  tools/bench/loadgen, closed loop, --conns (64) keep-alive
             connections, GET /acquire?biz=bench&key=K over --keys (100,000)
             uniform keys with the same seed in every configuration, for
             --sat-seconds. Reported: requests/s, p50/p99 (queueing
             included: 64 in flight), and decisions per CPU-second of all
             shards together: 200s + 429s divided by the utime+stime that
             every frsd process (master and workers, from /proc/PID/stat)
             spent over the run.
  paced      h2load --h1 at a fixed --rate (4,000/s: --rps rate/conns per
             connection) over --conns connections, well below saturation,
             so that the latency is the path's own and not a queue. loadgen
             is closed loop (it has no pacing); h2load paces, and its
             --log-file gives every request's time, from which p50/p99 are
             computed over the part of the run where every connection was
             sending. h2load sends one URI list in the same order on every
             connection; its connections start 20 ms apart (-r 1
             --rate-period 20ms), so the requests in flight at any moment
             are of different keys (each key is asked once per connection,
             20 ms apart). Also reported: decisions per CPU-second of the
             shards at that rate.

The rule is "fixed, 1,000,000 per hour": every acquire is granted, so every
answer changes a count and (with replicas) is replicated. Answers must be
200 or 429 only, with no transport errors and no replica link going down
(frs_replica_link_down_total); a run that breaks that is flagged and the
script exits 1.

Configurations run interleaved, --reps times (0, sync, async, 0, sync, async,
...), and the table shows medians, with the targets: sync >= 0.5x and
async >= 0.7x of replicas="0" in decisions per CPU-second (saturated and
paced, each said), and sync's paced p99 within 1 ms of replicas="0"'s. Per
replicated configuration it also shows changes per POST /replicate batch
(frs_replica_changes_sent_total / frs_replica_batches_total of all shards),
batches and context switches per decision, and the shards' extra CPU per
batch (what one exchange costs sender and receiver together).

Every process is started by this script and stopped by its pid (never by
name); everything lives in one temp dir, removed at the end (--keep keeps
it).

  tools/cluster/replica_bench.py              # 2 reps x 3 configurations, about 90 s
  tools/cluster/replica_bench.py --reps 3 --json
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
sys.path.insert(0, HERE)
import processes  # noqa: E402  (frsd's workers by pid, stopping, ports)
from failover_bench import Nginx, SHIPPED_CONF  # noqa: E402  (the shipped nginx file, ports substituted)

CONFIGS = ("0", "sync", "async")
TOKEN = "replica-bench"
RAMP_PERIOD_MS = 20  # h2load starts one connection per period (spreads the keys in flight)
REPLICA_METRICS = (
    "frs_replica_changes_sent_total",
    "frs_replica_batches_total",
    "frs_replica_changes_acked_total",
    "frs_replica_changes_received_total",
    "frs_replica_link_down_total",
    "frs_replica_unprotected_total",
    "frs_replica_batches_resent_total",
)


class Failure(Exception):
    pass


def log(args, *msg):
    if not args.json:
        print(*msg, file=sys.stderr, flush=True)


def cpu_ticks(pid):
    """utime+stime of process `pid` (all its threads), in clock ticks; 0 when gone."""
    st = processes.read_text("/proc/%d/stat" % pid)
    if not st:
        return 0
    rest = st[st.rfind(")") + 2 :].split()
    return int(rest[11]) + int(rest[12])  # fields 14 and 15 of stat(5)


class Shard:
    def __init__(self, args, idx, dir_, port, names, map_path, config):
        self.args, self.idx, self.dir, self.port = args, idx, dir_, port
        self.proc = None
        os.makedirs(dir_, exist_ok=True)
        shards = "".join("    <shard>%s</shard>\n" % n for n in names)
        repl = (
            ' replicas="1" replica_mode="%s" replica_timeout_ms="%d"' % (config, args.replica_timeout_ms)
            if config != "0"
            else ""
        )
        with open(os.path.join(dir_, "srv.xml"), "w") as f:
            f.write(
                '<frs>\n  <listen host="127.0.0.1" port="%d"/>\n  <workers>%d</workers>\n'
                "  <map>%s</map>\n"
                '  <store dir="data" files="1" keynodes="%d" chain="8"/>\n'
                "  <pidfile>frsd.pid</pidfile>\n"
                '  <admin token="%s"/>\n'
                '  <cluster self="127.0.0.1:%d" enforce="1"%s>\n%s  </cluster>\n</frs>\n'
                % (port, args.workers, map_path, args.keynodes, TOKEN, port, repl, shards)
            )

    def start(self, timeout=10.0):
        err = open(os.path.join(self.dir, "frsd.stderr"), "ab")
        self.proc = subprocess.Popen(
            [self.args.frsd, "-c", os.path.join(self.dir, "srv.xml"), "--foreground"],
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            close_fds=True,
        )
        err.close()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise Failure("frsd shard %d exited at start:\n%s" % (self.idx + 1, self.stderr()))
            if self.get("/health")[0] == 200:
                return
            time.sleep(0.02)
        raise Failure("frsd shard %d did not become healthy:\n%s" % (self.idx + 1, self.stderr()))

    def get(self, path):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            c.request("GET", path)
            r = c.getresponse()
            body = r.read().decode(errors="replace")
            c.close()
            return r.status, body
        except OSError:
            return 0, ""

    def metrics(self):
        """The unlabelled frs_replica_* counters and frs_misrouted_total of /metrics."""
        out = {}
        for line in self.get("/metrics")[1].splitlines():
            parts = line.split()
            if len(parts) == 2 and (parts[0] in REPLICA_METRICS or parts[0] == "frs_misrouted_total"):
                out[parts[0]] = float(parts[1])
        return out

    def pids(self):
        """The master and its workers."""
        return [self.proc.pid] + processes.children(self.proc.pid)

    def stop(self):
        processes.stop(self.proc, timeout=6, with_workers=True)

    def stderr(self):
        return processes.read_text(os.path.join(self.dir, "frsd.stderr"))[-2000:]


def ctx_switches(pid):
    """Context switches (voluntary + not) of every thread of process `pid`."""
    n = 0
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return 0
    for t in tids:
        for line in processes.read_text("/proc/%d/task/%s/status" % (pid, t)).splitlines():
            if "ctxt_switches:" in line:
                n += int(line.split()[1])
    return n


class CpuMeter:
    """utime+stime, and context switches, of a fixed set of processes
    between start() and stop()."""

    def __init__(self, pids):
        self.pids = pids
        self.hz = os.sysconf("SC_CLK_TCK")

    def start(self):
        self.t0 = time.monotonic()
        self.c0 = [cpu_ticks(p) for p in self.pids]
        self.x0 = sum(ctx_switches(p) for p in self.pids)

    def stop(self):
        c1 = [cpu_ticks(p) for p in self.pids]
        self.switches = sum(ctx_switches(p) for p in self.pids) - self.x0
        self.seconds = time.monotonic() - self.t0
        self.cpu = sum(b - a for a, b in zip(self.c0, c1)) / float(self.hz)
        return self.cpu


def sum_metrics(shards):
    tot = {}
    for s in shards:
        for k, v in s.metrics().items():
            tot[k] = tot.get(k, 0.0) + v
    return tot


def delta(after, before):
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in set(after) | set(before)}


def run_loadgen(args, port, seconds, seed, conns):
    tmpl = r"GET /acquire?biz=bench&key=%KEY% HTTP/1.1\r\nHost: frs\r\n\r\n"
    cmd = [
        args.loadgen,
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "-c",
        str(conns),
        "-d",
        str(seconds),
        "-k",
        str(args.keys),
        "-P",
        args.prefix,
        "-s",
        str(seed),
        "-m",
        "http-get",
        "-r",
        tmpl,
        "-T",
        "2000",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        raise Failure("loadgen failed (rc %d): %s %s" % (p.returncode, p.stdout[-500:], p.stderr[-500:]))
    return json.loads(lines[-1])


def percentile(sorted_vals, q):
    if not sorted_vals:
        return None
    i = max(0, min(len(sorted_vals) - 1, int(q * len(sorted_vals) + 0.999999) - 1))
    return sorted_vals[i]


def run_paced(args, port, dir_, uris_path):
    """h2load --h1 at args.rate over args.conns connections; latency of the
    part of the run where every connection was sending."""
    per_conn = args.rate / float(args.conns)
    ramp_s = args.conns * RAMP_PERIOD_MS / 1000.0
    n_per_conn = int(per_conn * (ramp_s + args.paced_seconds + 0.5)) + 1
    log_path = os.path.join(dir_, "h2load.tsv")
    cmd = [
        args.h2load,
        "--h1",
        "-c",
        str(args.conns),
        "-r",
        "1",
        "--rate-period",
        "%dms" % RAMP_PERIOD_MS,
        "-n",
        str(n_per_conn * args.conns),
        "--rps",
        "%g" % per_conn,
        "-T",
        "5",
        "-i",
        uris_path,
        "--log-file",
        log_path,
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=ramp_s + n_per_conn / per_conn + 30)
    if p.returncode != 0:
        raise Failure("h2load failed (rc %d): %s %s" % (p.returncode, p.stdout[-800:], p.stderr[-500:]))
    rows = []
    with open(log_path) as f:
        for line in f:
            cols = line.split("\t")
            if len(cols) >= 3:
                rows.append((int(cols[0]), cols[1], int(cols[2])))
    if not rows:
        raise Failure("h2load wrote no requests:\n" + p.stdout[-800:])
    status = {}
    for _, st, _ in rows:
        status[st] = status.get(st, 0) + 1
    m = [ln for ln in p.stdout.splitlines() if ln.startswith("requests:")]
    failed = 0
    if m:  # "requests: N total, N started, N done, N succeeded, F failed, E errored, T timeout"
        words = m[0].replace(",", "").split()
        failed = sum(int(words[i - 1]) for i, w in enumerate(words) if w in ("failed", "errored", "timeout"))
    # Every connection sends from ramp_s after the first start until the
    # first of them ends; keep the middle, 0.2 s clear of both edges.
    t_first = min(r[0] for r in rows)
    lo = t_first + int((ramp_s + 0.2) * 1e6)
    hi = t_first + int((n_per_conn / per_conn - 0.3) * 1e6)
    steady = sorted(r[2] for r in rows if lo <= r[0] <= hi)
    span = (hi - lo) / 1e6
    return {
        "requests": len(rows),
        "status": status,
        "h2load_failed": failed,
        "steady_requests": len(steady),
        "steady_rps": round(len(steady) / span, 1) if span > 0 else None,
        "p50_us": percentile(steady, 0.50),
        "p90_us": percentile(steady, 0.90),
        "p99_us": percentile(steady, 0.99),
        "p999_us": percentile(steady, 0.999),
        "max_us": steady[-1] if steady else None,
    }


def one_run(args, config, rep, ports, nport, map_path, uris_path):
    tmp = tempfile.mkdtemp(prefix="frs-replica-bench-%s-" % config, dir=args.tmp_root)
    names = ["127.0.0.1:%d" % p for p in ports]
    shards, nginx = [], None
    try:
        for i in range(3):
            shards.append(Shard(args, i, os.path.join(tmp, "shard%d" % (i + 1)), ports[i], names, map_path, config))
        for s in shards:
            s.start()
        ns = argparse.Namespace(conf=args.conf, mode="open", nginx=args.nginx)
        nginx = Nginx(ns, os.path.join(tmp, "nginx"), nport, names)
        nginx.start()
        pids = [p for s in shards for p in s.pids()]
        meter = CpuMeter(pids)
        nginx_meter = CpuMeter([nginx.proc.pid])

        # Warm-up (discarded): connections through nginx, the pages of the stores.
        run_loadgen(args, nport, args.warmup, 1000 + rep, args.conns)

        m0 = sum_metrics(shards)
        meter.start()
        nginx_meter.start()
        lg = run_loadgen(args, nport, args.sat_seconds, 1 + rep, args.conns)
        shard_cpu = meter.stop()
        nginx_cpu = nginx_meter.stop()
        m1 = sum_metrics(shards)
        st = {str(k): v for k, v in lg.get("status", {}).items()}
        decisions = st.get("200", 0) + st.get("429", 0)
        dm = delta(m1, m0)
        sat = {
            "rps": lg["rps"],
            "requests": lg["requests"],
            "errors": lg["errors"],
            "status": st,
            "p50_us": lg["p50_us"],
            "p99_us": lg["p99_us"],
            "seconds": round(meter.seconds, 3),
            "shard_cpu_s": round(shard_cpu, 3),
            "nginx_cpu_s": round(nginx_cpu, 3),
            "loadgen_cpu_s": round(lg.get("cpu_user_s", 0) + lg.get("cpu_sys_s", 0), 3),
            "decisions": decisions,
            "decisions_per_cpu_s": round(decisions / shard_cpu, 1) if shard_cpu else None,
            "ctx_switches_per_decision": round(meter.switches / decisions, 3) if decisions else None,
            "replica": {k: int(v) for k, v in sorted(dm.items()) if k.startswith("frs_replica")},
        }
        b = dm.get("frs_replica_batches_total", 0)
        sat["batches_per_decision"] = round(b / decisions, 3) if decisions else None
        sat["changes_per_batch"] = round(dm.get("frs_replica_changes_sent_total", 0) / b, 2) if b else None

        m2 = sum_metrics(shards)
        meter.start()
        pc = run_paced(args, nport, tmp, uris_path)
        paced_cpu = meter.stop()
        m3 = sum_metrics(shards)
        dm = delta(m3, m2)
        pdec = pc["status"].get("200", 0) + pc["status"].get("429", 0)
        pc["shard_cpu_s"] = round(paced_cpu, 3)
        pc["decisions_per_cpu_s"] = round(pdec / paced_cpu, 1) if paced_cpu else None
        pc["ctx_switches_per_decision"] = round(meter.switches / pdec, 3) if pdec else None
        pc["replica"] = {k: int(v) for k, v in sorted(dm.items()) if k.startswith("frs_replica")}
        b = dm.get("frs_replica_batches_total", 0)
        pc["batches_per_decision"] = round(b / pdec, 3) if pdec else None
        pc["changes_per_batch"] = round(dm.get("frs_replica_changes_sent_total", 0) / b, 2) if b else None

        problems = []
        for phase, stt, errs in (
            ("saturated", sat["status"], sat["errors"]),
            ("paced", pc["status"], pc["h2load_failed"]),
        ):
            other = {k: v for k, v in stt.items() if k not in ("200", "429")}
            if other:
                problems.append("%s: answers other than 200/429: %s" % (phase, other))
            if errs:
                problems.append("%s: %d transport error(s)" % (phase, errs))
        down = m3.get("frs_replica_link_down_total", 0)
        if down:
            problems.append("replica links went down %d time(s)" % down)
        if m3.get("frs_misrouted_total", 0):
            problems.append("%d misrouted request(s)" % m3["frs_misrouted_total"])
        for s in shards:
            if s.proc.poll() is not None:
                problems.append("shard %d died: %s" % (s.idx + 1, s.stderr()))
        return {
            "config": config,
            "rep": rep,
            "saturated": sat,
            "paced": pc,
            "problems": problems,
            "temp_dir": tmp if args.keep else None,
        }
    finally:
        if nginx:
            nginx.stop()
        for s in shards:
            s.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def summarize(runs):
    out = {}
    for c in CONFIGS:
        rs = [r for r in runs if r["config"] == c]
        if not rs:
            continue
        out[c] = {
            "runs": len(rs),
            "sat_decisions_per_cpu_s": med([r["saturated"]["decisions_per_cpu_s"] for r in rs]),
            "sat_rps": med([r["saturated"]["rps"] for r in rs]),
            "sat_p50_us": med([r["saturated"]["p50_us"] for r in rs]),
            "sat_p99_us": med([r["saturated"]["p99_us"] for r in rs]),
            "sat_shard_cpu_pct": med([100.0 * r["saturated"]["shard_cpu_s"] / r["saturated"]["seconds"] for r in rs]),
            "sat_changes_per_batch": med([r["saturated"]["changes_per_batch"] for r in rs]),
            "sat_batches_per_decision": med([r["saturated"]["batches_per_decision"] for r in rs]),
            "sat_ctx_switches_per_decision": med([r["saturated"]["ctx_switches_per_decision"] for r in rs]),
            "sat_nginx_cpu_pct": med([100.0 * r["saturated"]["nginx_cpu_s"] / r["saturated"]["seconds"] for r in rs]),
            "sat_loadgen_cpu_pct": med(
                [100.0 * r["saturated"]["loadgen_cpu_s"] / r["saturated"]["seconds"] for r in rs]
            ),
            "paced_rps": med([r["paced"]["steady_rps"] for r in rs]),
            "paced_p50_us": med([r["paced"]["p50_us"] for r in rs]),
            "paced_p99_us": med([r["paced"]["p99_us"] for r in rs]),
            "paced_decisions_per_cpu_s": med([r["paced"]["decisions_per_cpu_s"] for r in rs]),
            "paced_changes_per_batch": med([r["paced"]["changes_per_batch"] for r in rs]),
            "paced_batches_per_decision": med([r["paced"]["batches_per_decision"] for r in rs]),
            "paced_ctx_switches_per_decision": med([r["paced"]["ctx_switches_per_decision"] for r in rs]),
            "valid": all(not r["problems"] for r in rs),
        }
    base = out.get("0")
    targets = {}
    if base:
        for ph in ("sat", "paced"):
            d0 = base[ph + "_decisions_per_cpu_s"]
            base[ph + "_cpu_us_per_decision"] = round(1e6 / d0, 1) if d0 else None
        # Ratios of medians, and the median of the per-rep paired ratios
        # (each rep's configurations ran minutes apart at most).
        for c, want in (("sync", 0.5), ("async", 0.7)):
            if c not in out:
                continue
            o = out[c]
            o["dps_ratio"] = round(o["sat_decisions_per_cpu_s"] / base["sat_decisions_per_cpu_s"], 3)
            paired = []
            for r in runs:
                if r["config"] != c:
                    continue
                b = [x for x in runs if x["config"] == "0" and x["rep"] == r["rep"]]
                if b:
                    paired.append(r["saturated"]["decisions_per_cpu_s"] / b[0]["saturated"]["decisions_per_cpu_s"])
            o["dps_ratio_paired_median"] = round(med(paired), 3) if paired else None
            o["paced_p99_delta_us"] = o["paced_p99_us"] - base["paced_p99_us"]
            o["paced_p50_delta_us"] = o["paced_p50_us"] - base["paced_p50_us"]
            # What one POST /replicate exchange costs the shards (sender and
            # receiver together): the extra CPU per decision over replicas=0,
            # divided by the batches per decision.
            for ph in ("sat", "paced"):
                bpd = o.get(ph + "_batches_per_decision")
                d0, d1 = base[ph + "_decisions_per_cpu_s"], o[ph + "_decisions_per_cpu_s"]
                o[ph + "_cpu_us_per_decision"] = round(1e6 / d1, 1) if d1 else None
                o[ph + "_extra_cpu_us_per_batch"] = round((1e6 / d1 - 1e6 / d0) / bpd, 1) if bpd and d0 and d1 else None
            o["paced_dps_ratio"] = round(o["paced_decisions_per_cpu_s"] / base["paced_decisions_per_cpu_s"], 3)
            name = "%s decisions per CPU-second >= %.1fx replicas=0" % (c, want)
            targets[name + " (saturated)"] = o["dps_ratio"] >= want
            targets[name + " (paced)"] = o["paced_dps_ratio"] >= want
        if "sync" in out:
            targets["sync paced p99 within 1 ms of replicas=0"] = out["sync"]["paced_p99_delta_us"] <= 1000
    return out, targets


def fmt(v, nd=0):
    if v is None:
        return "-"
    if isinstance(v, float) and nd:
        return "%.*f" % (nd, v)
    return "{:,}".format(int(round(v)))


def print_table(result):
    a = result["settings"]
    print("replica bench, %s" % result["date"])
    print("  %s" % result["command"])
    print(
        "  3 shards x %d worker, nginx (shipped conf), %d keys, rule fixed %d per %d s; %d reps interleaved; "
        "saturated: loadgen c=%d, %g s; paced: h2load --h1 c=%d at %d/s, %g s steady"
        % (
            a["workers"],
            a["keys"],
            a["max"],
            a["window"],
            a["reps"],
            a["conns"],
            a["sat_seconds"],
            a["conns"],
            a["rate"],
            a["paced_seconds"],
        )
    )
    print()
    s = result["summary"]
    rows = [
        ("decisions per shard CPU-second (saturated)", "sat_decisions_per_cpu_s", 0),
        ("  ratio to replicas=0 (of medians)", "dps_ratio", 3),
        ("  ratio to replicas=0 (median of paired reps)", "dps_ratio_paired_median", 3),
        ("requests/s (saturated, through nginx)", "sat_rps", 0),
        ("shards' CPU % (saturated; 200 = both cores)", "sat_shard_cpu_pct", 0),
        ("nginx's / loadgen's CPU % (saturated)", ("sat_nginx_cpu_pct", "sat_loadgen_cpu_pct"), 0),
        ("p50 us (saturated, c=64, queueing included)", "sat_p50_us", 0),
        ("p99 us (saturated, c=64, queueing included)", "sat_p99_us", 0),
        ("changes per /replicate batch (saturated)", "sat_changes_per_batch", 1),
        ("/replicate batches per decision (saturated)", "sat_batches_per_decision", 2),
        ("shards' context switches per decision (saturated)", "sat_ctx_switches_per_decision", 2),
        ("shards' CPU us per decision (saturated)", "sat_cpu_us_per_decision", 1),
        ("  extra CPU us per /replicate batch (saturated)", "sat_extra_cpu_us_per_batch", 1),
        ("paced rate achieved, /s", "paced_rps", 0),
        ("p50 us (paced)", "paced_p50_us", 0),
        ("  p50 minus replicas=0's, us", "paced_p50_delta_us", 0),
        ("p99 us (paced)", "paced_p99_us", 0),
        ("  p99 minus replicas=0's, us", "paced_p99_delta_us", 0),
        ("decisions per shard CPU-second (paced)", "paced_decisions_per_cpu_s", 0),
        ("  ratio to replicas=0 (of medians)", "paced_dps_ratio", 3),
        ("changes per /replicate batch (paced)", "paced_changes_per_batch", 1),
        ("/replicate batches per decision (paced)", "paced_batches_per_decision", 2),
        ("shards' context switches per decision (paced)", "paced_ctx_switches_per_decision", 2),
        ("shards' CPU us per decision (paced)", "paced_cpu_us_per_decision", 1),
        ("  extra CPU us per /replicate batch (paced)", "paced_extra_cpu_us_per_batch", 1),
        ("answers 200/429 only, no errors, no link down", "valid", None),
    ]
    cols = [c for c in CONFIGS if c in s]
    head = ["replicas=0" if c == "0" else c for c in cols]
    w = max(len(r[0]) for r in rows)
    print("  %-*s  %s" % (w, "", "  ".join("%12s" % h for h in head)))
    for label, key, nd in rows:
        vals = []
        for c in cols:
            v = s[c].get(key) if isinstance(key, str) else None
            if not isinstance(key, str):
                vals.append(" / ".join(fmt(s[c].get(k)) for k in key))
            elif nd is None:
                vals.append("yes" if v else "NO")
            else:
                vals.append(fmt(v, nd))
        print("  %-*s  %s" % (w, label, "  ".join("%12s" % v for v in vals)))
    print()
    for t, ok in result["targets"].items():
        print("  target: %-66s %s" % (t, "met" if ok else "MISSED"))
    print()
    print("  runs (in order): config rep: saturated decisions/CPU-s, rps, paced p50/p99 us, changes/batch sat/paced")
    for r in result["runs"]:
        sat, pc = r["saturated"], r["paced"]
        print(
            "    %-5s %d: %9s %9s %6s/%-6s %5s/%-5s %s"
            % (
                r["config"],
                r["rep"],
                fmt(sat["decisions_per_cpu_s"]),
                fmt(sat["rps"]),
                fmt(pc["p50_us"]),
                fmt(pc["p99_us"]),
                fmt(sat["changes_per_batch"], 1),
                fmt(pc["changes_per_batch"], 1),
                "; ".join(r["problems"]),
            )
        )


def ensure_loadgen(args):
    src = os.path.join(ROOT, "tools", "bench", "loadgen.c")
    if args.loadgen:
        return
    args.loadgen = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(args.frsd))), "loadgen")
    if not os.access(args.loadgen, os.X_OK) or os.path.getmtime(src) > os.path.getmtime(args.loadgen):
        subprocess.run(["cc", "-O2", "-o", args.loadgen, src], check=True)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--frsd", default=os.path.join(ROOT, "build", "src", "server", "frsd"))
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--h2load", default=shutil.which("h2load") or "/usr/bin/h2load")
    ap.add_argument(
        "--loadgen", default=None, help="tools/bench/loadgen binary (default: built with cc -O2 next to the build dir)"
    )
    ap.add_argument("--conf", default=SHIPPED_CONF, help="the nginx http-context file to run (ports substituted)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="which of 0,sync,async (default all three)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--prefix", default="user:")
    ap.add_argument("--max", type=int, default=1000000, help="uses per window per key (large: every acquire granted)")
    ap.add_argument("--window", type=int, default=3600)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--rate", type=int, default=4000, help="paced phase: requests per second, all connections")
    ap.add_argument("--sat-seconds", type=float, default=5)
    ap.add_argument("--paced-seconds", type=float, default=4, help="paced phase: seconds with every connection on")
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--workers", type=int, default=1, help="frsd workers per shard")
    ap.add_argument("--keynodes", type=int, default=65536, help="store: 1 file x KEYNODES x 8 slots per shard")
    ap.add_argument("--replica-timeout-ms", type=int, default=200)
    ap.add_argument("--tmp-root", default=None, help="where the temp dirs go (default: the system's)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ap.add_argument("--json-file", default=None, help="also write that JSON object to this file")
    ap.add_argument("--keep", action="store_true", help="keep the temp dirs (configs, logs, stores)")
    args = ap.parse_args()
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    if not configs or any(c not in CONFIGS for c in configs):
        ap.error("--configs: a comma list of 0, sync, async")
    if args.reps < 1 or args.conns < 1 or args.rate < args.conns:
        ap.error("need --reps >= 1, --conns >= 1 and --rate >= --conns")
    for p, what in ((args.frsd, "frsd (build it, or pass --frsd)"), (args.nginx, "nginx"), (args.h2load, "h2load")):
        if not os.access(p, os.X_OK):
            sys.exit("replica_bench: %s is not executable: %s" % (p, what))
    ensure_loadgen(args)

    def on_term(signum, frame):
        raise Failure("stopped by signal %d" % signum)

    signal.signal(signal.SIGTERM, on_term)
    shared = tempfile.mkdtemp(prefix="frs-replica-bench-", dir=args.tmp_root)
    runs = []
    try:
        map_path = os.path.join(shared, "map.xml")
        with open(map_path, "w") as f:
            f.write(
                '<map>\n  <biz id="1" name="bench">\n    <rule algo="fixed" interval="%d" max="%d"/>\n'
                "  </biz>\n</map>\n" % (args.window, args.max)
            )
        # The paced phase's URIs: keys of the same key space, a fixed order.
        per_conn = args.rate / float(args.conns)
        n = int(per_conn * (args.conns * RAMP_PERIOD_MS / 1000.0 + args.paced_seconds + 0.5)) + 1
        order = random.Random(7).sample(range(args.keys), min(n, args.keys))
        uris_path = os.path.join(shared, "uris.txt")
        with open(uris_path, "w") as f:
            for k in order:
                f.write("http://127.0.0.1:{port}/acquire?biz=bench&key=%s%d\n" % (args.prefix, k))
        # The same ports for every run: the same ring, so the same keys on
        # the same shards in every configuration.
        ports = [processes.candidate_port() for _ in range(3)]
        nport = processes.candidate_port()
        with open(uris_path) as f:
            text = f.read().replace("{port}", str(nport))
        with open(uris_path, "w") as f:
            f.write(text)
        log(
            args,
            "shards 127.0.0.1:%s, nginx 127.0.0.1:%d; %s x %d reps"
            % (",".join(map(str, ports)), nport, "/".join(configs), args.reps),
        )
        for rep in range(args.reps):
            for c in configs:
                r = one_run(args, c, rep, ports, nport, map_path, uris_path)
                runs.append(r)
                log(
                    args,
                    "  %-5s rep %d: saturated %s decisions/CPU-s, %s rps; paced p50 %s us p99 %s us%s"
                    % (
                        c,
                        rep,
                        fmt(r["saturated"]["decisions_per_cpu_s"]),
                        fmt(r["saturated"]["rps"]),
                        fmt(r["paced"]["p50_us"]),
                        fmt(r["paced"]["p99_us"]),
                        ("; " + "; ".join(r["problems"])) if r["problems"] else "",
                    ),
                )
    except (Failure, OSError, subprocess.SubprocessError) as e:
        sys.exit("replica_bench: %s" % e)
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    summary, targets = summarize(runs)
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "command": " ".join([os.path.relpath(sys.argv[0], os.getcwd())] + sys.argv[1:]),
        "settings": {
            "workers": args.workers,
            "keys": args.keys,
            "max": args.max,
            "window": args.window,
            "reps": args.reps,
            "conns": args.conns,
            "rate": args.rate,
            "sat_seconds": args.sat_seconds,
            "paced_seconds": args.paced_seconds,
            "cpus": os.cpu_count(),
        },
        "summary": summary,
        "targets": targets,
        "runs": runs,
    }
    if args.json_file:
        with open(args.json_file, "w") as f:
            f.write(json.dumps(result, sort_keys=True) + "\n")
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print_table(result)
    sys.exit(0 if all(s["valid"] for s in summary.values()) else 1)


if __name__ == "__main__":
    main()
