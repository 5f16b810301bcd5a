#!/usr/bin/env python3
"""What a dead shard costs: over-grant through nginx's fail-over (stdlib only).

Starts three frsd shards (small stores, ephemeral loopback ports) and one
nginx in front of them running the shipped conf/cluster/nginx-frs.conf (its
ports substituted): `hash $frs_route consistent;`, `proxy_next_upstream
error timeout`, max_fails=1 fail_timeout=10s. Client threads send GET
/acquire through nginx at a steady rate over K keys under one rule "at most
M per W s, fixed window". At --kill-at seconds one shard (its master, and
the workers that are the master's children in /proc) is killed with
SIGKILL; at --restart-at it is started again on the same store. Every
answer is counted per key, with the shard nginx used (X-FRS-Shard:
$upstream_addr).

--mode (what a dead shard's routes get):
  open      the shipped config, shards enforce="0": the next shard of the
            ring serves them (fail open; the default)
  enforce   the shipped nginx, shards enforce="1": the next shard answers
            421 and counts nothing (fail closed at the shards)
  closed    `proxy_next_upstream off;` and max_fails=0, shards enforce="0":
            nginx answers 502 (fail closed in nginx alone; a leak would show
            as over-grant)
  next-off  `proxy_next_upstream off;` with max_fails=1, shards
            enforce="0": a pitfall, not closed: nginx's hash still skips a
            failed shard for fail_timeout and sends its routes to the next

--replicas sync|async (with the shipped nginx): the shards run <cluster
replicas="1" replica_mode=...> and enforce="1": the successor nginx falls
over to already holds every count of the dead shard's keys, and the shard
takes them back when it returns. Bound: 0 in sync mode. --lose-store also
deletes the killed shard's store directory before its restart (a lost
machine): it starts on a new store and takes its nodes back from the others.
--hang stops the shard (SIGSTOP to the master and its workers) instead of
killing it, and lets it go on (SIGCONT) at --restart-at: a hung shard, which
nginx sees only by proxy_read_timeout, not by a refused connection. With
replicas, a request that reached it must be retried on the successor, not
answered 504: the answers other than 200 and 429 must be none.

Over-grant = sum over keys of max(0, granted - M) while the whole run fits
in one window of every key (W >= the run). The bound: a dead shard's routes
are counted from zero by the next shard of the ring, and again by the owner
once nginx returns to it, which still holds its counts from before the kill
(they live in the store files, which kill -9 does not lose): so at most one
extra window's limit M per affected key per failover. Other keys: 0. Fail
closed (enforce, closed): 0. Exit 1 when the bound is broken.

Every process is started by this script and stopped by its pid (never by
name); everything lives in one temp dir, removed at the end (--keep keeps
it). Bounded: --duration + about 5 s, and a hard stop at 60 s.

  tools/cluster/failover_bench.py                 # 3000 keys, M=5, 20 s, kill at 5, restart at 10
  tools/cluster/failover_bench.py --json          # one JSON object
  tools/cluster/failover_bench.py --mode closed   # and enforce, next-off
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
import nginx_conf  # noqa: E402
import processes  # noqa: E402  (frsd's workers by pid, stopping, ports)
from frs_client import Ring  # noqa: E402

SHIPPED_CONF = os.path.join(ROOT, "conf", "cluster", "nginx-frs.conf")
SHIPPED_SHARDS = ["127.0.0.1:8301", "127.0.0.1:8302", "127.0.0.1:8303"]
TOKEN = "failover-bench"


class Deadline(Exception):
    pass


def log(args, *msg):
    if not args.json:
        print(*msg, file=sys.stderr, flush=True)


def can_connect(port, timeout=0.2):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=timeout).close()
        return True
    except OSError:
        return False


# --- nginx's `hash KEY consistent;` ring: the Python client's (clients/python),
# the one Python copy of src/cluster/ring.cc ---------------------------------
def ring_of(names):
    """frs_client.Ring over shard names of weight 1."""
    return Ring([(n, 1) for n in names])


class Shard:
    def __init__(self, args, idx, dir_, port, names, map_path):
        self.args, self.idx, self.dir, self.port = args, idx, dir_, port
        self.name = "127.0.0.1:%d" % port
        self.proc = None
        os.makedirs(dir_, exist_ok=True)
        shards = "".join("    <shard>%s</shard>\n" % n for n in names)
        with open(os.path.join(dir_, "srv.xml"), "w") as f:
            f.write(
                '<frs>\n  <listen host="127.0.0.1" port="%d"/>\n  <workers>%d</workers>\n'
                "  <map>%s</map>\n"
                '  <store dir="data" files="1" keynodes="%d" chain="8"/>\n'
                "  <pidfile>frsd.pid</pidfile>\n"
                '  <admin token="%s"/>\n  <flush interval_ms="200"/>\n'
                '  <cluster self="%s" enforce="%d"%s>\n%s  </cluster>\n</frs>\n'
                % (
                    port,
                    args.workers,
                    map_path,
                    args.keynodes,
                    TOKEN,
                    self.name,
                    1 if args.mode == "enforce" or args.replicas != "0" else 0,
                    (' replicas="1" replica_mode="%s"' % args.replicas if args.replicas != "0" else "")
                    + (' replica_timeout_ms="%d"' % args.replica_timeout_ms if args.replica_timeout_ms else ""),
                    shards,
                )
            )

    def start(self, timeout=5.0):
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
                raise RuntimeError("frsd shard %d exited at start:\n%s" % (self.idx + 1, self.stderr()))
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                c.request("GET", "/health")
                r = c.getresponse()
                r.read()
                c.close()
                if r.status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError("frsd shard %d did not become healthy:\n%s" % (self.idx + 1, self.stderr()))

    def kill9(self):
        """SIGKILL to the master and to each of its workers (its children)."""
        return processes.kill9(self.proc)

    def stop(self):
        processes.stop(self.proc, timeout=6, with_workers=True)

    def signal_all(self, sig):
        """`sig` to the master and to each of its workers; returns their pids."""
        pids = [self.proc.pid] + processes.children(self.proc.pid)
        for pid in pids:
            os.kill(pid, sig)
        return pids

    def metric(self, name):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            c.request("GET", "/metrics")
            body = c.getresponse().read().decode()
            c.close()
        except OSError:
            return None
        for line in body.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def stderr(self):
        return processes.read_text(os.path.join(self.dir, "frsd.stderr"))[-2000:]


class Nginx:
    def __init__(self, args, dir_, port, shard_names):
        self.args, self.dir, self.port, self.proc = args, dir_, port, None
        os.makedirs(os.path.join(dir_, "tmp"), exist_ok=True)
        with open(args.conf) as f:
            conf = f.read()

        # The shipped file, with its ports: exactly 3 server lines and 1 listen.
        def sub(pattern, repl, count):
            # Directives only: a line's first word, never inside a comment.
            out, n = re.subn(r"(?m)^(\s*)" + pattern, lambda m: m.group(1) + repl(m), conf)
            if n != count:
                raise RuntimeError("%s: expected %d line(s) matching %r, found %d" % (args.conf, count, pattern, n))
            return out

        for shipped, ours in zip(SHIPPED_SHARDS, shard_names):
            conf = sub(r"server %s(?=[\s;])" % re.escape(shipped), lambda m, o=ours: "server " + o, 1)
        conf = sub(r"listen 127\.0\.0\.1:8300(?=[\s;])", lambda m: "listen 127.0.0.1:%d" % port, 1)
        if args.mode in ("closed", "next-off"):
            conf = sub(r"proxy_next_upstream error timeout http_503;", lambda m: "proxy_next_upstream off;", 1)
        if args.mode == "closed":
            # Without it nginx's hash skips a failed shard for fail_timeout
            # and picks the next one for new requests, whatever
            # proxy_next_upstream says.
            conf = sub(r"(server \S+ .*)max_fails=1(?=[\s;])", lambda m: m.group(2) + "max_fails=0", 3)
        with open(os.path.join(dir_, "frs-shards.conf"), "w") as f:
            f.write(conf)
        nginx_conf.write(
            dir_,
            "  keepalive_requests 1000000;\n"
            # Which shard served each answer (a comma list after a fail-over).
            "  add_header X-FRS-Shard $upstream_addr always;\n" "  include %s/frs-shards.conf;\n" % dir_,
            worker_connections=4096,
        )

    def start(self, timeout=5.0):
        conf = os.path.join(self.dir, "nginx.conf")
        chk = subprocess.run([self.args.nginx, "-t", "-p", self.dir, "-c", conf], capture_output=True, text=True)
        if chk.returncode != 0:
            raise RuntimeError("nginx -t failed:\n" + chk.stderr)
        out = open(os.path.join(self.dir, "nginx.stderr"), "ab")
        self.proc = subprocess.Popen(
            [self.args.nginx, "-p", self.dir, "-c", conf],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            close_fds=True,
        )
        out.close()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("nginx exited at start:\n" + self.log())
            if can_connect(self.port):
                return
            time.sleep(0.02)
        raise RuntimeError("nginx did not listen:\n" + self.log())

    def stop(self):
        processes.stop(self.proc, signal.SIGQUIT, timeout=3)

    def log(self):
        return processes.read_text(os.path.join(self.dir, "error.log"))[-2000:]


# --- load -----------------------------------------------------------------------
class Worker(threading.Thread):
    """One keep-alive connection to nginx; its share of the keys, round robin,
    paced to rate/threads requests per second."""

    def __init__(self, args, port, keys, key_ids, t0, stop, port_to_shard, owner):
        super().__init__(daemon=True)
        self.args, self.port, self.keys, self.key_ids, self.owner = args, port, keys, key_ids, owner
        self.t0, self.stop, self.port_to_shard = t0, stop, port_to_shard
        n = len(keys)
        self.granted = [0] * n  # 200s per key (index into keys)
        self.denied = [0] * n  # 429s
        self.granted_by = [0] * n  # bit i: shard i granted this key at least once
        self.status = {}  # status -> count
        self.errors = 0  # transport errors seen by the client
        self.failover_answers = 0  # answers after nginx tried more than one shard
        self.seconds = {}  # whole second -> {status: count}
        self.victim_back_at = None  # first 200 from the victim after its restart
        self.sent = 0
        self.ring_checked = 0  # answers before the kill, nginx's shard compared with ring_of().owner_index()
        self.ring_mismatches = 0

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=3)

    def run(self):
        args = self.args
        interval = args.threads / float(args.rate)
        c = self.conn()
        nxt = time.monotonic()
        i = 0
        while not self.stop.is_set():
            now = time.monotonic()
            if now < nxt:
                time.sleep(nxt - now)
            elif now - nxt > 0.5:
                nxt = now  # fell behind: do not burst to catch up
            nxt += interval
            j = self.key_ids[i % len(self.key_ids)]
            i += 1
            path = "/acquire?biz=bench&key=" + self.keys[j]
            sec = int(time.monotonic() - self.t0)
            try:
                c.request("GET", path, headers={"Host": "frs"})
                r = c.getresponse()
                r.read()
                st = r.status
                up = r.getheader("X-FRS-Shard", "")
            except (OSError, http.client.HTTPException):
                self.errors += 1
                c.close()
                c = self.conn()
                st, up = "error", ""
            self.sent += 1
            self.status[st] = self.status.get(st, 0) + 1
            per = self.seconds.setdefault(sec, {})
            per[st] = per.get(st, 0) + 1
            if "," in up:
                self.failover_answers += 1
            elif up and time.monotonic() - self.t0 < args.kill_at:
                self.ring_checked += 1
                self.ring_mismatches += self.port_to_shard.get(up) != self.owner[j]
            if st == 200:
                self.granted[j] += 1
                last = up.rsplit(",", 1)[-1].strip()
                shard = self.port_to_shard.get(last)
                if shard is not None:
                    self.granted_by[j] |= 1 << shard
                    if (
                        shard == args.victim - 1
                        and self.victim_back_at is None
                        and time.monotonic() - self.t0 > args.restart_at
                    ):
                        self.victim_back_at = time.monotonic() - self.t0
            elif st == 429:
                self.denied[j] += 1
        c.close()


def run(args):
    tmp = tempfile.mkdtemp(prefix="frs-failover-")
    shards, nginx = [], None
    result = {}
    try:
        map_path = os.path.join(tmp, "map.xml")
        with open(map_path, "w") as f:
            f.write(
                '<map>\n  <biz id="1" name="bench">\n    <rule algo="fixed" interval="%d" max="%d"/>\n'
                "  </biz>\n</map>\n" % (args.window, args.max)
            )
        # Fixed ports: a shard restarts on its own (its name in every list
        # and in nginx's upstream). Picked free a moment before: one another
        # program took in between makes its shard exit at start, or another
        # shard wait on what answers there; all three are then picked again,
        # three times at most.
        for attempt in range(3):
            ports = [processes.candidate_port() for _ in range(3)]
            names = ["127.0.0.1:%d" % p for p in ports]
            shards = [
                Shard(args, i, os.path.join(tmp, "try%d" % attempt, "shard%d" % (i + 1)), ports[i], names, map_path)
                for i in range(3)
            ]
            try:
                for s in shards:
                    s.start()
                break
            except RuntimeError as e:
                for s in shards:
                    s.stop()
                if attempt == 2:
                    raise
                log(args, "a shard could not start on its port; picking three others: %s" % str(e)[:200])
        nport = processes.candidate_port()
        nginx = Nginx(args, os.path.join(tmp, "nginx"), nport, names)
        nginx.start()
        log(args, "shards %s, nginx 127.0.0.1:%d, temp dir %s" % (", ".join(names), nport, tmp))

        keys = ["%s%d" % (args.prefix, i) for i in range(args.keys)]
        ring = ring_of(names)
        owner = [ring.owner_index(k) for k in keys]
        victim = args.victim - 1
        victim_keys = [k for k in range(args.keys) if owner[k] == victim]

        order = list(range(args.keys))
        random.Random(args.seed).shuffle(order)
        port_to_shard = {n: i for i, n in enumerate(names)}
        stop = threading.Event()
        t0 = time.monotonic()
        workers = [
            Worker(args, nport, keys, order[t :: args.threads], t0, stop, port_to_shard, owner)
            for t in range(args.threads)
        ]
        for w in workers:
            w.start()

        def at(t):
            d = t0 + t - time.monotonic()
            if d > 0:
                time.sleep(d)

        at(args.kill_at)
        misrouted_before = [s.metric("frs_misrouted_total") for s in shards]
        # The sync bound's premise: no shard has answered alone yet (a link
        # timed out under load). What one answered alone and then lost with
        # its machine, its successor grants again.
        alone_before = [s.metric("frs_replica_unprotected_total") for s in shards] if args.replicas != "0" else None
        kill_t = time.monotonic() - t0
        if args.hang:
            killed = shards[victim].signal_all(signal.SIGSTOP)
            log(args, "t=%.2f s: SIGSTOP shard %d (%s): pids %s" % (kill_t, args.victim, names[victim], killed))
        else:
            killed = shards[victim].kill9()
            log(args, "t=%.2f s: kill -9 shard %d (%s): pids %s" % (kill_t, args.victim, names[victim], killed))
        if args.lose_store:
            shutil.rmtree(os.path.join(shards[victim].dir, "data"), ignore_errors=True)
            log(args, "t=%.2f s: its store directory deleted" % (time.monotonic() - t0))
        at(args.restart_at)
        restart_t = time.monotonic() - t0
        if args.hang:
            shards[victim].signal_all(signal.SIGCONT)
            log(args, "t=%.2f s: SIGCONT shard %d" % (restart_t, args.victim))
        else:
            shards[victim].start()
            healthy_t = time.monotonic() - t0
            log(
                args,
                "t=%.2f s: shard %d restarted on its store, healthy at t=%.2f s" % (restart_t, args.victim, healthy_t),
            )
        at(args.duration)
        stop.set()
        for w in workers:
            w.join(10)
        end_t = time.monotonic() - t0
        misrouted_after = [s.metric("frs_misrouted_total") for s in shards]

        # --- merge the threads' counts ---
        granted = [0] * args.keys
        denied = [0] * args.keys
        by = [0] * args.keys
        status, seconds = {}, {}
        errors = failover_answers = sent = ring_checked = ring_mismatches = 0
        back = [w.victim_back_at for w in workers if w.victim_back_at is not None]
        for w in workers:
            for j in range(args.keys):
                granted[j] += w.granted[j]
                denied[j] += w.denied[j]
                by[j] |= w.granted_by[j]
            for k, v in w.status.items():
                status[str(k)] = status.get(str(k), 0) + v
            for s_, per in w.seconds.items():
                d = seconds.setdefault(s_, {})
                for k, v in per.items():
                    d[str(k)] = d.get(str(k), 0) + v
            errors += w.errors
            failover_answers += w.failover_answers
            sent += w.sent
            ring_checked += w.ring_checked
            ring_mismatches += w.ring_mismatches

        M = args.max
        # Fail closed: nobody else counts the owner's routes. Sync replicas:
        # the successor counts on from the owner's count.
        bound = M if args.mode in ("open", "next-off") and args.replicas != "sync" else 0
        over = [max(0, g - M) for g in granted]
        over_victim = sum(over[k] for k in victim_keys)
        over_other = sum(over) - over_victim
        hist = {}
        for k in victim_keys:
            hist[over[k]] = hist.get(over[k], 0) + 1
        two_shards = sum(1 for b in by if bin(b).count("1") > 1)
        reqs_per_key = sent / float(args.keys)
        result = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "command": " ".join([os.path.relpath(sys.argv[0], os.getcwd())] + sys.argv[1:]),
            "keys": args.keys,
            "max": M,
            "window_s": args.window,
            "threads": args.threads,
            "target_rate": args.rate,
            "achieved_rate": round(sent / end_t, 1),
            "requests": sent,
            "requests_per_key": round(reqs_per_key, 2),
            "duration_s": round(end_t, 2),
            "kill_at_s": round(kill_t, 2),
            "restart_at_s": round(restart_t, 2),
            "victim": names[victim],
            "victim_pids_killed": killed,
            "victim_back_in_nginx_at_s": round(min(back), 2) if back else None,
            "status": status,
            "client_errors": errors,
            "failover_answers": failover_answers,
            "keys_owned_by_victim": len(victim_keys),
            "keys_granted_by_two_shards": two_shards,
            "over_grant_total": sum(over),
            "over_grant_victim_keys": over_victim,
            "over_grant_other_keys": over_other,
            "keys_over_granted": sum(1 for o in over if o > 0),
            "over_grant_max_per_key": max(over) if over else 0,
            "over_grant_per_victim_key": {str(k): v for k, v in sorted(hist.items())},
            "mode": args.mode,
            "replicas": args.replicas,
            "lose_store": args.lose_store,
            "hang": args.hang,
            "bound_per_key": bound,
            "bound_total": bound * len(victim_keys),
            # With replicas the answers other than 200 and 429 are nginx's
            # detection only: under 1 % of all requests.
            "other_answers": sent - status.get("200", 0) - status.get("429", 0),
            "within_bound": ((max(over) <= bound and over_other == 0) if args.replicas != "async" else True)
            and ring_mismatches == 0
            and (
                args.replicas == "0"
                or sent - status.get("200", 0) - status.get("429", 0) < (1 if args.hang else 0.01 * sent)
            ),
            "ring_checked": ring_checked,
            "ring_mismatches": ring_mismatches,
            "granted_per_victim_key_min_max": [
                min(granted[k] for k in victim_keys),
                max(granted[k] for k in victim_keys),
            ]
            if victim_keys
            else None,
            "granted_max_per_key": max(granted),
            "granted_total": sum(granted),
            "misrouted_before_kill": misrouted_before,
            "served_alone_before_kill": alone_before,
            "misrouted_at_end": misrouted_after,
            "per_second": {str(k): seconds[k] for k in sorted(seconds)},
            "temp_dir": tmp if args.keep else None,
        }
        if not result["within_bound"]:
            result["logs"] = notable_log_lines(tmp, shards)
        return result
    finally:
        if nginx:
            nginx.stop()
        for s in shards:
            s.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def notable_log_lines(tmp, shards):
    """What a run out of its bound needs read (a CI run keeps no temp dir):
    each shard's replica, 503 and worker lines, and nginx's last errors."""
    out = []
    for s in shards:
        try:
            with open(os.path.join(s.dir, "frsd.stderr"), errors="replace") as f:
                lines = [ln.rstrip() for ln in f if re.search(r"replica|behind|503|worker .*(exit|signal)|catch", ln)]
        except OSError as e:
            lines = ["(no log: %s)" % e]
        out.append("%s:" % s.dir)
        out.extend("  " + ln[:300] for ln in lines[-20:])
    try:
        with open(os.path.join(tmp, "nginx", "error.log"), errors="replace") as f:
            out.append("nginx error.log:")
            out.extend("  " + ln.rstrip()[:300] for ln in f.readlines()[-10:])
    except OSError:
        pass
    return out


def print_table(r):
    st = r["status"]
    other = {k: v for k, v in st.items() if k not in ("200", "429")}
    print(
        "failover bench, mode %s, replicas %s%s, %s"
        % (r["mode"], r["replicas"], ", store lost" if r["lose_store"] else "", r["date"])
    )
    print("  %s" % r["command"])
    print()
    rows = [
        ("keys (rule: fixed, max %d per %d s)" % (r["max"], r["window_s"]), r["keys"]),
        (
            "requests (GET /acquire through nginx)",
            "%d in %.1f s, %.0f/s, %.1f per key"
            % (r["requests"], r["duration_s"], r["achieved_rate"], r["requests_per_key"]),
        ),
        (
            "answers 200 / 429 / other",
            "%d / %d / %s"
            % (st.get("200", 0), st.get("429", 0), ", ".join("%s: %d" % kv for kv in sorted(other.items())) or "0"),
        ),
        ("answers after nginx failed over", r["failover_answers"]),
        (
            "shard killed (kill -9, master + workers)",
            "%s at t=%.1f s, restarted at t=%.1f s" % (r["victim"], r["kill_at_s"], r["restart_at_s"]),
        ),
        ("nginx back on it (first 200 from it)", "t=%s s" % r["victim_back_in_nginx_at_s"]),
        ("keys owned by the killed shard", r["keys_owned_by_victim"]),
        ("keys granted by two shards", r["keys_granted_by_two_shards"]),
        ("granted per affected key, min / max", "%s / %s" % tuple(r["granted_per_victim_key_min_max"] or ("-", "-"))),
        ("over-grant total (sum of max(0, granted - M))", r["over_grant_total"]),
        (
            "  of which on the killed shard's keys / others",
            "%d / %d" % (r["over_grant_victim_keys"], r["over_grant_other_keys"]),
        ),
        ("keys over-granted", r["keys_over_granted"]),
        ("over-grant max per key", r["over_grant_max_per_key"]),
        (
            "over-grant per affected key: value x keys",
            ", ".join("%s x %d" % kv for kv in r["over_grant_per_victim_key"].items()),
        ),
        (
            "bound (open: M per affected key per failover; sync replicas: 0)",
            "%d per key, %d in all" % (r["bound_per_key"], r["bound_total"]),
        ),
        ("within the bound", "yes" if r["within_bound"] else "NO"),
        (
            "answers before the kill: nginx's shard != ring owner",
            "%d of %d" % (r["ring_mismatches"], r["ring_checked"]),
        ),
        ("frs_misrouted_total before the kill", r["misrouted_before_kill"]),
        ("frs_misrouted_total at the end", r["misrouted_at_end"]),
    ]
    if r["served_alone_before_kill"] is not None:
        rows.append(("frs_replica_unprotected_total before the kill", r["served_alone_before_kill"]))
    w = max(len(a) for a, _ in rows)
    for a, b in rows:
        print("  %-*s  %s" % (w, a, b))
    print()
    print("  second  200s  429s  other")
    for sec, per in r["per_second"].items():
        oth = sum(v for k, v in per.items() if k not in ("200", "429"))
        print("  %6s %5d %5d %6d" % (sec, per.get("200", 0), per.get("429", 0), oth))


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--frsd", default=os.path.join(ROOT, "build", "src", "server", "frsd"))
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--conf", default=SHIPPED_CONF, help="the nginx http-context file to run (ports substituted)")
    ap.add_argument("--keys", type=int, default=3000)
    ap.add_argument("--max", type=int, default=5, help="M: uses per window per key")
    ap.add_argument("--window", type=int, default=60, help="fixed window, seconds (keep it above --duration)")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--rate", type=float, default=2000, help="requests per second, all threads together")
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--kill-at", type=float, default=5)
    ap.add_argument("--restart-at", type=float, default=10)
    ap.add_argument("--victim", type=int, default=1, choices=(1, 2, 3), help="which shard to kill")
    ap.add_argument("--workers", type=int, default=1, help="frsd workers per shard")
    ap.add_argument("--keynodes", type=int, default=1024, help="store: 1 file x KEYNODES x 8 slots per shard")
    ap.add_argument("--prefix", default="user:")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--mode",
        choices=("open", "closed", "enforce", "next-off"),
        default="open",
        help='open: the shipped config, shards enforce="0" (fail open); closed: '
        'proxy_next_upstream off and max_fails=0, shards enforce="0" (nginx alone fails '
        'closed: 502); enforce: the shipped nginx, shards enforce="1" (the neighbour '
        "answers 421); next-off: proxy_next_upstream off but max_fails=1 (the pitfall: "
        "not closed)",
    )
    ap.add_argument(
        "--replicas",
        choices=("0", "sync", "async"),
        default="0",
        help='shards with <cluster replicas="1" replica_mode=...> and enforce="1" (the shipped '
        "nginx): the successor holds the dead shard's counts",
    )
    ap.add_argument(
        "--lose-store", action="store_true", help="delete the killed shard's store before its restart (a lost machine)"
    )
    ap.add_argument(
        "--hang",
        action="store_true",
        help="SIGSTOP the shard at --kill-at and SIGCONT it at --restart-at (a hung shard)",
    )
    ap.add_argument(
        "--replica-timeout-ms",
        type=int,
        default=0,
        help="the shards' <cluster replica_timeout_ms> (default: frsd's, 200); keep it under nginx's "
        "proxy_read_timeout (1 s)",
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (configs, logs, stores)")
    args = ap.parse_args()
    if not (0 < args.kill_at < args.restart_at < args.duration <= 40):
        ap.error("need 0 < --kill-at < --restart-at < --duration <= 40")
    if args.window < args.duration:
        ap.error("--window must be at least --duration: the over-grant count assumes one window per key")
    for p, what in ((args.frsd, "frsd (build it, or pass --frsd)"), (args.nginx, "nginx")):
        if not os.access(p, os.X_OK):
            sys.exit("failover_bench: %s is not executable: %s" % (p, what))

    def on_alarm(signum, frame):
        raise Deadline("failover_bench: over 60 s, stopping")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(60)
    try:
        r = run(args)
    except (Deadline, RuntimeError, OSError) as e:
        sys.exit("failover_bench: %s" % e)
    finally:
        signal.alarm(0)
    if args.json:
        print(json.dumps(r, sort_keys=True))
    else:
        print_table(r)
    for line in r.get("logs", []):
        print(line)
    sys.exit(0 if r["within_bound"] else 1)


if __name__ == "__main__":
    main()
