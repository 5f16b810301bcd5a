#!/usr/bin/env python3
"""The CPU each ctest test costs: runs the tests of a build directory one at a
time, as ctest would (its command, environment and working directory), and
prints each one's wall time and the CPU seconds (user + system) of every
process it waited for, then the sums. The arguments after the build
directory select tests as ctest's do (-L, -LE, -R, -E).

    tools/test_cpu.py build-asan -LE '^(outside|tsan)$'

A process a test leaves behind (a daemon it did not stop) is not counted, nor
is the machine's other work: one run at a time, beside nothing else, is the
figure to compare (docs/development.md). Exits 1 when a test failed (a
WILL_FAIL test that passed included).
"""

import json
import os
import re
import resource
import subprocess
import sys
import time


def run_one(build, test):
    """Runs one ctest test; returns (wall seconds, CPU seconds, passed), as
    ctest judges it: its exit code (WILL_FAIL, SKIP_RETURN_CODE a pass), or
    its output (PASS_REGULAR_EXPRESSION)."""
    env, cwd, will_fail, skip_rc, patterns = dict(os.environ), build, False, None, []
    for prop in test.get("properties", []):
        if prop["name"] == "ENVIRONMENT":
            env.update(kv.split("=", 1) for kv in prop["value"])
        elif prop["name"] == "WORKING_DIRECTORY":
            cwd = prop["value"]
        elif prop["name"] == "WILL_FAIL":
            will_fail = bool(prop["value"])
        elif prop["name"] == "SKIP_RETURN_CODE":
            skip_rc = int(prop["value"])
        elif prop["name"] == "PASS_REGULAR_EXPRESSION":
            patterns = prop["value"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    p = subprocess.run(test["command"], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if patterns:
        output = p.stdout.decode(errors="replace")
        passed = any(re.search(pattern, output) for pattern in patterns)
    else:
        passed = p.returncode == skip_rc or (p.returncode != 0) == will_fail
    return wall, cpu, passed


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    build = sys.argv[1]
    listing = subprocess.check_output(["ctest", "--test-dir", build, "--show-only=json-v1", *sys.argv[2:]])
    tests = json.loads(listing)["tests"]
    total_wall = total_cpu = 0.0
    failed = []
    for test in tests:
        wall, cpu, passed = run_one(build, test)
        total_wall += wall
        total_cpu += cpu
        if not passed:
            failed.append(test["name"])
        print("%-56s %7.1f s %7.1f CPU-s%s" % (test["name"], wall, cpu, "" if passed else "  FAILED"), flush=True)
    print("%-56s %7.1f s %7.1f CPU-s" % ("all %d" % len(tests), total_wall, total_cpu))
    if failed:
        sys.exit("failed: " + " ".join(failed))


if __name__ == "__main__":
    main()
