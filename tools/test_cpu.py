#!/usr/bin/env python3
"""The CPU each ctest test costs: runs the tests of a build directory one at a
time, as ctest would (its command, environment and working directory), and
prints each one's wall time and the CPU seconds (user + system) of every
process it waited for, then the sums. The arguments after the build
directory select tests as ctest's do (-L, -LE, -R, -E).

    tools/test_cpu.py build-asan -LE '^(outside|tsan)$'

A process a test leaves behind (a daemon it did not stop) is not counted, nor
is the machine's other work: one run at a time, beside nothing else, is the
figure to compare (docs/development.md). Each test is judged as ctest
judges it (exit code, WILL_FAIL, the PASS/FAIL/SKIP regular expressions,
SKIP_RETURN_CODE, TIMEOUT); exits 1 when one did not pass (a skip
included: tools/test.sh fails a skip tests/skips.txt does not list).
"""

import json
import os
import re
import resource
import subprocess
import sys
import time


def run_one(build, test):
    """Runs one ctest test; returns (wall seconds, CPU seconds, verdict), the
    verdict as ctest gives it: "passed", "failed", "skipped" or "not run"
    (no program to run, or DISABLED)."""
    props = {p["name"]: p["value"] for p in test.get("properties", [])}
    if "command" not in test or props.get("DISABLED"):
        return 0.0, 0.0, "not run"
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in props.get("ENVIRONMENT", []))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    try:
        p = subprocess.run(
            test["command"],
            cwd=props.get("WORKING_DIRECTORY", build),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=float(props.get("TIMEOUT", 1500)),
        )
        rc, output = p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired:
        rc, output = None, ""
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, verdict(props, rc, output)


def verdict(props, rc, output):
    """ctest's judgement of a run that exited with `rc` (None: timed out;
    negative: killed by a signal) and printed `output`."""
    if rc is None or rc < 0:
        return "failed"
    if str(rc) == str(props.get("SKIP_RETURN_CODE")) or any(
        re.search(x, output) for x in props.get("SKIP_REGULAR_EXPRESSION", [])
    ):
        return "skipped"
    if any(re.search(x, output) for x in props.get("FAIL_REGULAR_EXPRESSION", [])):
        passed = False
    elif props.get("PASS_REGULAR_EXPRESSION"):
        passed = any(re.search(x, output) for x in props["PASS_REGULAR_EXPRESSION"])
    else:
        passed = rc == 0
    return "passed" if passed != bool(props.get("WILL_FAIL")) else "failed"


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    build = sys.argv[1]
    listing = subprocess.check_output(["ctest", "--test-dir", build, "--show-only=json-v1", *sys.argv[2:]])
    tests = json.loads(listing)["tests"]
    total_wall = total_cpu = 0.0
    bad = []
    for test in tests:
        wall, cpu, said = run_one(build, test)
        total_wall += wall
        total_cpu += cpu
        if said != "passed":
            bad.append("%s (%s)" % (test["name"], said))
        print("%-56s %7.1f s %7.1f CPU-s  %s" % (test["name"], wall, cpu, said), flush=True)
    print("%-56s %7.1f s %7.1f CPU-s" % ("all %d" % len(tests), total_wall, total_cpu))
    if bad:
        sys.exit("not passed: " + ", ".join(bad))


if __name__ == "__main__":
    main()
