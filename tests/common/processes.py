"""tests/common/processes.py: what the Python tests share for the processes
they start (frsd, nginx, fcgiwrap, HAProxy, Caddy): wait for a condition,
stop a child by its pid, politely first, and ports for the programs that
cannot bind port 0 and say what they got (frsd can: it is never given one)."""
import os
import signal
import socket
import subprocess
import time


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


def stop(proc, sig=signal.SIGTERM):
    """Sends `sig` to the child `proc` (a subprocess.Popen), then SIGKILL if it
    has not exited within 5 s; a child already gone is left alone."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
