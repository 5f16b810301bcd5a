#!/usr/bin/env python3
"""An attack on one frsd under load: does every acknowledged count survive, and
does nothing grant more than its rule, while processes die and rules change?

Starts one frsd (ephemeral loopback ports, a temp dir) with the decision log
(record="all"), the gRPC listener (an Envoy domain) and statistics by key
field on, then for --duration seconds:

  load     HTTP threads acquire on four bizzes over --keys keys each:
             soak   fixed 3600 s, max M (the run fits in one window)
             cal    calendar, switched between "M a day" and "M an hour" by
                    the reload storm (F6: never more than M in a calendar hour)
             app    fields app,user with a <stats by="app"> table
             env    ShouldRateLimit over raw HTTP/2 (domain soak, M an hour)
  faults   every --every seconds one of, in turn: kill -9 of a worker; SIGHUP
           with the other map; SIGUSR1; a hostile Envoy YAML (an alias bomb,
           then a duplicate key) put beside the good one and a SIGHUP (must
           be refused, the old rules kept); 200 HTTP/2 streams naming a 4 KB
           :path from the HPACK table; kill -9 of the master and every worker
           and a restart on the same store (every --restart-every seconds).

Then it checks, and exits 1 when any fails:
  - no key of soak/app/env was granted more than M, none of cal more than M
    in one calendar hour (granted = answers the client received);
  - no acknowledged count was lost: each soak key's count in the store, read
    after the run, is at least what its clients were granted;
  - no worker died of anything but our SIGKILL (the master's log);
  - every decision log line is one JSON object, except at most one cut line
    per kill of the process that wrote it;
  - frsctl verify finds the store clean (after a graceful stop);
  - every hostile reload was refused and frsd kept answering.

  tools/soak/soak.py --frsd build/src/server/frsd --duration 60
  tools/soak/soak.py --json     # the figures as one JSON object

Everything it starts is stopped by pid; the temp dir is removed (--keep keeps it).
Standard library only.
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import processes  # noqa: E402

TOKEN = "soak-token"
GRPC_PATH = b"/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"


def map_xml(m, cal_interval):
    return """<map>
  <biz id="1" name="soak"><rule interval="3600" max="%d"/></biz>
  <biz id="2" name="cal"><rule algo="calendar" interval="%d" max="%d"/></biz>
  <biz id="3" name="app" fields="app,user">
    <rule interval="3600" max="%d"/>
    <stats by="app" distinct="user"/>
  </biz>
</map>
""" % (
        m,
        cal_interval,
        m,
        m,
    )


def envoy_yaml(m):
    return "domain: soak\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: %d}\n" % m


# A "billion laughs" inside the descriptor tree: level i holds 9 descriptors
# whose children are all of level i-1 (an alias each), 9^7 paths in ~1.5 KB.
ALIAS_BOMB = (
    "domain: bomb\ndescriptors:\n  - key: l0\n    descriptors: &l0\n"
    "      - {key: a, rate_limit: {unit: hour, requests_per_unit: 1}}\n"
    + "".join(
        "  - key: l%d\n    descriptors: &l%d [%s]\n"
        % (i, i, ", ".join("{key: k%d, descriptors: *l%d}" % (j, i - 1) for j in range(9)))
        for i in range(1, 8)
    )
)
DUPLICATE_KEY = "domain: dup\ndomain: dup2\ndescriptors: []\n"


class Frsd:
    def __init__(self, args, d):
        self.args, self.dir, self.proc = args, d, None
        self.port = self.grpc_port = 0
        os.makedirs(os.path.join(d, "envoy"))
        self.write("map.xml", map_xml(args.max, 86400))
        self.write("envoy/soak.yaml", envoy_yaml(args.max))
        self.write(
            "srv.xml",
            '<frs>\n  <listen host="127.0.0.1" port="0"/>\n  <workers>%d</workers>\n  <map>map.xml</map>\n'
            '  <store dir="data" files="2" keynodes="16384" chain="8"/>\n  <admin token="%s"/>\n'
            '  <decisions file="decisions.log" record="all"/>\n'
            '  <grpc listen="127.0.0.1:0" config="envoy"/>\n</frs>\n' % (args.workers, TOKEN),
        )

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def write(self, name, text):
        with open(self.path(name) + ".tmp", "w") as f:
            f.write(text)
        os.rename(self.path(name) + ".tmp", self.path(name))

    def log(self):
        return processes.read_text(self.path("frsd.stderr"))

    def start(self, timeout=15.0):
        for name in ("frsd.listen", "frsd.grpc.listen"):
            try:
                os.unlink(self.path("data", name))
            except OSError:
                pass
        with open(self.path("frsd.stderr"), "ab") as err:
            self.proc = subprocess.Popen(
                [self.args.frsd, "-c", self.path("srv.xml"), "--foreground"],
                stdout=err,
                stderr=err,
                stdin=subprocess.DEVNULL,
                close_fds=True,
            )
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("frsd exited at start:\n" + self.log()[-2000:])
            self.port = processes.listen_port(self.path("data", "frsd.listen"))
            self.grpc_port = processes.listen_port(self.path("data", "frsd.grpc.listen"))
            if self.port and self.grpc_port and get(self.port, "/health")[0] == 200:
                return
            time.sleep(0.02)
        raise RuntimeError("frsd did not become healthy:\n" + self.log()[-2000:])

    def workers(self):
        return processes.children(self.proc.pid)


def get(port, path, timeout=3.0):
    """(status, body) of one GET; (0, error) when the connection failed."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("GET", path, headers={"X-FRS-Token": TOKEN})
        r = c.getresponse()
        body = r.read().decode(errors="replace")
        c.close()
        return r.status, body
    except (OSError, http.client.HTTPException) as e:
        return 0, str(e)


# --- HTTP/2 by hand: enough of it to call ShouldRateLimit and read overall_code.
def h2_frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def h2_literal(name_index, value):
    # Literal without indexing, indexed name, value length < 127 (7-bit prefix).
    return bytes([name_index]) + bytes([len(value)]) + value


def rls_request(value):
    entry = b"\x0a\x04user\x12" + bytes([len(value)]) + value
    desc = b"\x0a" + bytes([len(entry)]) + entry
    return b"\x0a\x04soak\x12" + bytes([len(desc)]) + desc


class H2:
    """One HTTP/2 connection, one stream at a time."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=3)
        self.s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0, b""))
        self.next_stream = 1
        self.buf = b""

    def close(self):
        self.s.close()

    def read_frame(self):
        while len(self.buf) < 9 or len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            b = self.s.recv(65536)
            if not b:
                raise ConnectionError("closed")
            self.buf += b
        n = int.from_bytes(self.buf[:3], "big")
        f = (self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF, self.buf[9 : 9 + n])
        self.buf = self.buf[9 + n :]
        return f

    def call(self, value):
        """overall_code of one ShouldRateLimit (1 OK, 2 OVER_LIMIT), 0 when none came."""
        sid = self.next_stream
        self.next_stream += 2
        block = b"\x83\x86" + h2_literal(1, b"x") + bytes([0x04, len(GRPC_PATH)]) + GRPC_PATH
        block += b"\x0f\x10" + bytes([16]) + b"application/grpc"
        msg = rls_request(value)
        body = b"\x00" + struct.pack(">I", len(msg)) + msg
        self.s.sendall(h2_frame(1, 0x4, sid, block) + h2_frame(0, 0x1, sid, body))
        data = b""
        while True:
            ftype, flags, stream, payload = self.read_frame()
            if ftype == 4 and not flags & 1:
                self.s.sendall(h2_frame(4, 1, 0, b""))
            elif ftype == 6 and not flags & 1:
                self.s.sendall(h2_frame(6, 1, 0, payload))
            elif ftype == 7:
                raise ConnectionError("GOAWAY")
            elif stream == sid and ftype == 3:
                return 0
            elif stream == sid and ftype == 0:
                data += payload
            if stream == sid and ftype in (0, 1) and flags & 1:
                break
        # gRPC message: 5-byte prefix, then RateLimitResponse; field 1 (varint) first.
        if len(data) >= 7 and data[5] == 0x08:
            return data[6]
        return 0


def hostile_h2(port, streams=200):
    """Streams that name one 4 KB :path from the HPACK table (F3). Returns
    whether the server answered or closed within 5 s (it must not hang)."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        return True
    try:
        big = b"/" + b"p" * 4095
        # Literal with incremental indexing, :path name (static 4): entry 62.
        first = b"\x83\x86" + h2_literal(1, b"x") + b"\x44" + b"\x7f" + encode_int(len(big) - 127) + big
        frames = [h2_frame(1, 0x5, 1, first)]
        for i in range(1, streams):
            frames.append(h2_frame(1, 0x5, 1 + 2 * i, b"\x83\x86" + h2_literal(1, b"x") + b"\xbe"))
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0, b"") + b"".join(frames))
        end = time.monotonic() + 5
        while time.monotonic() < end:
            if not s.recv(65536):
                return True
        return True
    except (socket.timeout, OSError):
        return True
    finally:
        s.close()


def encode_int(v):
    out = b""
    while v >= 128:
        out += bytes([(v & 0x7F) | 0x80])
        v >>= 7
    return out + bytes([v])


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.granted = {}  # (biz, key, window) -> granted answers
        self.answers = {}  # status -> count

    def add(self, biz, key, window, status):
        with self.lock:
            self.answers[status] = self.answers.get(status, 0) + 1
            if status == 200:
                k = (biz, key, window)
                self.granted[k] = self.granted.get(k, 0) + 1


def http_load(args, frsd, tally, stop, seed):
    rnd = random.Random(seed)
    while not stop.is_set():
        biz = rnd.choice(("soak", "cal", "app"))
        i = rnd.randrange(args.keys)
        key = "a%d:u%d" % (i % 7, i) if biz == "app" else "k%d" % i
        hour = int(time.time()) // 3600
        status, _ = get(frsd.port, "/acquire?biz=%s&key=%s" % (biz, key), timeout=2)
        # A granted answer after the hour turned belongs to the next hour;
        # count it in the later one, which only makes the check stricter.
        tally.add(biz, key, max(hour, int(time.time()) // 3600) if biz == "cal" else 0, status)


def grpc_load(args, frsd, tally, stop, seed):
    rnd = random.Random(seed)
    conn = None
    while not stop.is_set():
        try:
            if conn is None:
                conn = H2(frsd.grpc_port)
            value = b"v%d" % rnd.randrange(args.keys)
            hour = int(time.time()) // 3600
            code = conn.call(value)
            tally.add("env", value.decode(), hour, 200 if code == 1 else 429 if code == 2 else -1)
        except (OSError, ConnectionError):
            tally.add("env", "", 0, 0)
            if conn:
                conn.close()
            conn = None
            time.sleep(0.01)
    if conn:
        conn.close()


def wait_healthy(frsd, timeout=10.0):
    return processes.wait_for(lambda: get(frsd.port, "/health", timeout=1)[0] == 200, timeout)


def faults(args, frsd, stop, report):
    """One fault every args.every seconds, in turn; a full restart every args.restart_every."""
    cal_hour = False
    turn = 0
    last_restart = time.monotonic()
    while not stop.wait(args.every):
        if time.monotonic() - last_restart >= args.restart_every:
            processes.kill9(frsd.proc)
            report["master_kills"] += 1
            frsd.start()
            last_restart = time.monotonic()
            continue
        action = turn % 6
        turn += 1
        if action == 0:
            ws = frsd.workers()
            if ws:
                os.kill(random.choice(ws), signal.SIGKILL)
                report["worker_kills"] += 1
        elif action == 1:
            cal_hour = not cal_hour
            frsd.write("map.xml", map_xml(args.max, 3600 if cal_hour else 86400))
            frsd.proc.send_signal(signal.SIGHUP)
            report["reloads"] += 1
        elif action == 2:
            frsd.proc.send_signal(signal.SIGUSR1)
            report["reopens"] += 1
        elif action == 3:
            bad = ALIAS_BOMB if report["hostile_yaml"] % 2 == 0 else DUPLICATE_KEY
            before = frsd.log().count("reload refused")
            frsd.write("envoy/zz-hostile.yaml", bad)
            t0 = time.monotonic()
            frsd.proc.send_signal(signal.SIGHUP)
            refused = processes.wait_for(lambda: frsd.log().count("reload refused") > before, 10)
            report["hostile_yaml"] += 1
            report["hostile_yaml_refused"] += int(refused)
            report["hostile_yaml_max_s"] = max(report["hostile_yaml_max_s"], round(time.monotonic() - t0, 3))
            os.unlink(frsd.path("envoy", "zz-hostile.yaml"))
        elif action == 4:
            hostile_h2(frsd.grpc_port)
            report["hostile_h2"] += 1
        else:
            report["health_misses"] += int(not wait_healthy(frsd, 5))


def store_count(frsd, biz, key):
    status, body = get(frsd.port, "/query?biz=%s&key=%s" % (biz, key))
    if status not in (200, 429):
        return None
    i = body.find(' count="')
    return int(body[i + 8 : body.index('"', i + 8)]) if i >= 0 else None


def check_decision_log(path, kills):
    bad = 0
    lines = 0
    try:
        with open(path, errors="replace") as f:
            for line in f:
                lines += 1
                try:
                    json.loads(line)
                except ValueError:
                    bad += 1
    except OSError:
        pass
    return lines, bad, bad <= kills


def run(args):
    d = tempfile.mkdtemp(prefix="frs-soak-")
    frsd = Frsd(args, d)
    report = dict.fromkeys(
        ("worker_kills", "master_kills", "reloads", "reopens", "hostile_yaml", "hostile_yaml_refused", "hostile_h2"), 0
    )
    report.update(health_misses=0, hostile_yaml_max_s=0.0)
    tally = Tally()
    stop = threading.Event()
    failures = []
    try:
        frsd.start()
        threads = [threading.Thread(target=http_load, args=(args, frsd, tally, stop, i)) for i in range(args.clients)]
        threads += [threading.Thread(target=grpc_load, args=(args, frsd, tally, stop, 100 + i)) for i in range(2)]
        threads.append(threading.Thread(target=faults, args=(args, frsd, stop, report)))
        for t in threads:
            t.start()
        time.sleep(args.duration)
        stop.set()
        for t in threads:
            t.join(30)
        if not wait_healthy(frsd):
            failures.append("frsd does not answer /health after the run")
        over = {k: v for k, v in tally.granted.items() if v > args.max}
        if over:
            failures.append("granted more than max=%d: %s" % (args.max, sorted(over.items())[:10]))
        lost = []
        for (biz, key, _), n in tally.granted.items():
            if biz == "soak":
                c = store_count(frsd, biz, key)
                if c is None or c < n:
                    lost.append((key, n, c))
        if lost:
            failures.append("acknowledged counts lost (key, granted, in store): %s" % lost[:10])
        log = frsd.log()
        crashes = [ln for ln in log.splitlines() if "was killed by signal" in ln and "signal 9 " not in ln]
        crashes += [ln for ln in log.splitlines() if "exited with status" in ln and "status 0" not in ln]
        if crashes:
            failures.append("workers died on their own: %s" % crashes[:5])
        if report["hostile_yaml_refused"] != report["hostile_yaml"]:
            failures.append("a hostile Envoy YAML was not refused")
        processes.stop(frsd.proc, timeout=10, with_workers=True)
        kills = report["worker_kills"] + report["master_kills"] * (args.workers + 1)
        lines, bad, ok = check_decision_log(frsd.path("decisions.log"), kills)
        if not ok:
            failures.append("decision log: %d of %d lines are not JSON (%d kills)" % (bad, lines, kills))
        frsctl = os.path.join(os.path.dirname(args.frsd), "..", "..", "tools", "frsctl", "frsctl")
        if os.path.exists(frsctl):
            v = subprocess.run([frsctl, "-c", frsd.path("srv.xml"), "verify"], capture_output=True, text=True)
            report["verify_exit"] = v.returncode
            if v.returncode != 0:
                failures.append("frsctl verify: exit %d: %s" % (v.returncode, (v.stdout + v.stderr)[-800:]))
        report.update(
            answers={str(k): v for k, v in sorted(tally.answers.items())},
            keys_granted=len(tally.granted),
            max_granted=max(tally.granted.values(), default=0),
            decision_log_lines=lines,
            decision_log_cut=bad,
            failures=failures,
        )
        return report
    finally:
        stop.set()
        if frsd.proc:
            processes.stop(frsd.proc, timeout=5, with_workers=True)
        if args.keep:
            print("kept " + d, file=sys.stderr)
        else:
            shutil.rmtree(d, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--frsd", default=os.path.join(ROOT, "build", "src", "server", "frsd"))
    p.add_argument("--duration", type=float, default=60)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--keys", type=int, default=50)
    p.add_argument("--max", type=int, default=20)
    p.add_argument("--every", type=float, default=0.5)
    p.add_argument("--restart-every", type=float, default=15)
    p.add_argument("--json", action="store_true")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    r = run(args)
    if args.json:
        print(json.dumps(r, sort_keys=True))
    else:
        for k, v in sorted(r.items()):
            print("%-22s %s" % (k, v))
    return 1 if r["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
