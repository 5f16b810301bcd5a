"""tests/common/processes.py: what the Python tests (and tools/cluster) share
for the processes they start (frsd, nginx, fcgiwrap, HAProxy, Caddy,
rsyslogd): the program itself, or a failure naming its package; wait for a
condition; stop a child by its pid, politely first, or kill frsd's master
and its workers; and ports for the programs that cannot bind port 0 and say
what they got (frsd can: it is never given one)."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time


def require(what, *paths):
    """The first executable of `paths` (or `what` on PATH), or exit 1 naming
    it: tools/setup.sh --test installs every program a test starts, so a
    missing one is a failure, never a skip."""
    for p in paths + (shutil.which(what) or "",):
        if p and os.access(p, os.X_OK):
            return p
    sys.exit("FAIL: %s is not installed (tools/setup.sh --test installs it)" % what)


def read_text(path):
    """The text of `path` (undecodable bytes replaced), "" when it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def children(pid):
    """The live children of `pid`, from /proc (an frsd master's workers)."""
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        st = read_text("/proc/%s/stat" % e)
        rest = st[st.rfind(")") + 2 :].split()
        if len(rest) > 1 and int(rest[1]) == pid and rest[0] != "Z":
            out.append(int(e))
    return out


def alive(pid):
    """True while `pid` exists and is not a zombie."""
    st = read_text("/proc/%d/stat" % pid)
    return bool(st) and st[st.rfind(")") + 2 :].split()[0] != "Z"


def kill9(proc):
    """SIGKILL to the child `proc` (an frsd master) and to each of its workers,
    each by pid, and waits until all are gone; returns the pids killed."""
    workers = children(proc.pid)
    proc.kill()
    for w in workers:
        try:
            os.kill(w, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(5)
    # Reparented once the master died: not our children to wait for.
    wait_for(lambda: not any(alive(w) for w in workers), 5)
    return [proc.pid] + workers


def candidate_port():
    """A loopback port free a moment ago, for nginx, HAProxy or Caddy: it may
    be taken again before they bind it, so whoever uses it checks with
    listening() and tries another when the program could not bind it."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def listening(pid, port):
    """True when process `pid` itself holds the socket listening on
    127.0.0.1:port. A bare "the port accepts" would also be true when another
    test's process holds that port (tests run in parallel)."""
    want = "0100007F:%04X" % port
    inodes = set()
    try:
        with open("/proc/net/tcp") as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[1] == want and cols[3] == "0A":  # LISTEN
                    inodes.add("socket:[%s]" % cols[9])
        if not inodes:
            return False
        fds = "/proc/%d/fd" % pid
        for fd in os.listdir(fds):
            try:
                if os.readlink(os.path.join(fds, fd)) in inodes:
                    return True
            except OSError:
                pass
    except OSError:
        pass
    return False


def wait_for(pred, timeout=5.0):
    """True once pred() is true, polling every 20 ms; False after `timeout` s."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False


def held_metric(scrape, series, since=None, timeout=5.0):
    """The value of frs_leases_held or frs_reservations_held `series` (name
    and labels as /metrics writes them) as the store was at `since`
    (time.monotonic(); default: now) or later, from `scrape()`, which returns
    a /metrics body: the master walks the store for the scrapes about once a
    second, and each answer says how old its figures are
    (frs_held_age_seconds). Both clocks are CLOCK_MONOTONIC. None when the
    series is absent or no walk that recent came within `timeout` s."""
    asked = max(since or 0.0, time.monotonic())
    end = asked + timeout
    while True:
        sent = time.monotonic()
        body = scrape()
        if isinstance(body, bytes):
            body = body.decode()
        values = {}
        for line in body.splitlines():
            name, _, value = line.rpartition(" ")
            values[name] = value
        if series not in values or "frs_held_age_seconds" not in values:
            return None
        if sent - float(values["frs_held_age_seconds"]) - 0.001 >= asked:
            return float(values[series])
        if time.monotonic() >= end:
            return None
        time.sleep(0.05)


def stop(proc, sig=signal.SIGTERM, timeout=5, with_workers=False):
    """Sends `sig` to the child `proc` (a subprocess.Popen), then SIGKILL if it
    has not exited within `timeout` s (with_workers: to frsd's workers too,
    kill9()); a child already gone is left alone."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        if with_workers:
            kill9(proc)
            return
        proc.kill()
        proc.wait(5)


def listen_port(path):
    """The port in frsd's listen file `path` (data/frsd.listen: "host:port\n",
    written once frsd has bound it); 0 while it is missing or half written."""
    line = read_text(path)
    return int(line.rsplit(":", 1)[1]) if line.endswith("\n") and ":" in line else 0


def start_frsd(frsd, config, store_dir, stderr_path, log, timeout=10.0):
    """frsd -c `config` --foreground, its output appended to `stderr_path`, on
    the port it binds itself: (proc, port), the port read from `store_dir`'s
    frsd.listen, which frsd writes whole last before it serves (a file left
    by an earlier run is removed first). Raises AssertionError with log()
    when frsd exits or writes none within `timeout` s."""
    listen = os.path.join(store_dir, "frsd.listen")
    if os.path.exists(listen):
        os.unlink(listen)  # the last run's port, not this one's
    with open(stderr_path, "ab") as err:
        proc = subprocess.Popen([frsd, "-c", config, "--foreground"], stdout=err, stderr=err, stdin=subprocess.DEVNULL)
    if not wait_for(lambda: proc.poll() is not None or os.path.exists(listen), timeout):
        raise AssertionError("frsd wrote no frsd.listen:\n" + log())
    if proc.poll() is not None:
        raise AssertionError("frsd exited:\n" + log())
    return proc, int(read_text(listen).strip().rsplit(":", 1)[1])


def reload_frsd(proc, log, workers, timeout=10.0):
    """SIGHUP to frsd's master `proc`: True once each of its `workers` logged
    the new map in log() (frsd's stderr so far), False when the master
    refused the reload; raises RuntimeError after `timeout` s."""
    done = log().count("(map generation")
    refused = log().count("reload refused")
    proc.send_signal(signal.SIGHUP)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        text = log()
        if text.count("reload refused") > refused:
            return False
        if text.count("(map generation") >= done + workers:
            return True
        time.sleep(0.02)
    raise RuntimeError("frsd did not reload: " + log())
