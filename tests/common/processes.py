"""tests/common/processes.py: what the Python tests share for the processes
they start (frsd, nginx, fcgiwrap, HAProxy, Caddy): wait for a condition, and
stop a child by its pid, politely first."""
import signal
import subprocess
import time


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
