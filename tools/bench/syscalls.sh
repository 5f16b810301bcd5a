#!/usr/bin/env bash
# syscalls.sh - system calls per request of a running server's worker, counted with `strace -c` (issue 14).
#
#   tools/bench/syscalls.sh NAME WORKER_PID PORT [SECONDS] -- loadgen args (-m MODE -r TEMPLATE | -f FILE, -c, -U ...)
#
# Attaches `strace -c -f -p WORKER_PID` (strace's own output to $OUT/NAME.strace), runs loadgen (LG, default
# /tmp/frs-floor/loadgen, built from loadgen.c when missing) on CPU 1 for SECONDS (default 3) against PORT,
# detaches strace (SIGINT, by its PID), and prints each syscall's count per request (requests = loadgen's
# count over the same interval; the few connection set-up calls are included). strace stops the worker at
# every syscall, so the worker serves far fewer requests meanwhile and each epoll_wait returns more events
# than at full speed: epoll_wait per request is a lower bound; recv/send/epoll_ctl per request are not
# affected. OUT defaults to /tmp/frs-syscalls. Needs strace (apt-get install -y strace).
set -uo pipefail
BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 4 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
NAME=$1 WPID=$2 PORT=$3; shift 3
SECS=3
[ "$1" != -- ] && { SECS=$1; shift; }
[ "${1:-}" = -- ] && shift
OUT="${OUT:-/tmp/frs-syscalls}"
LG="${LG:-/tmp/frs-floor/loadgen}"
mkdir -p "$OUT"
command -v strace >/dev/null || { echo "syscalls: strace is not installed" >&2; exit 1; }
if ! { [ -x "$LG" ] && [ "$LG" -nt "$BENCH/loadgen.c" ]; }; then mkdir -p "$(dirname "$LG")"; cc -O2 -o "$LG" "$BENCH/loadgen.c" || exit 1; fi
[ -r "/proc/$WPID/stat" ] || { echo "syscalls: no process $WPID" >&2; exit 1; }

strace -c -f -p "$WPID" -o "$OUT/$NAME.strace" 2> "$OUT/$NAME.strace.err" &
SPID=$!
sleep 0.5   # attached
out=$(timeout $((SECS + 30)) taskset -c 1 "$LG" -p "$PORT" -d "$SECS" -T 20000 -l "$NAME" "$@")
kill -INT "$SPID" 2>/dev/null
wait "$SPID" 2>/dev/null
echo "$out" > "$OUT/$NAME.loadgen.json"
python3 - "$OUT/$NAME.strace" "$OUT/$NAME.loadgen.json" "$NAME" <<'PY'
import json, re, sys
strace_file, lg_file, name = sys.argv[1:]
lg = json.load(open(lg_file))
reqs = lg["requests"]
rows = []
for line in open(strace_file):
    m = re.match(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:(\d+)\s+)?(\w+)\s*$", line)
    if m and m.group(3) != "total":
        rows.append((m.group(3), int(m.group(1)), int(m.group(2) or 0)))
print("### %s: %d requests (loadgen, %s), %s" % (name, reqs, lg.get("label"), strace_file))
print()
print("| syscall | calls | errors | per request |")
print("|---|---:|---:|---:|")
tot = 0
for n, c, e in sorted(rows, key=lambda r: -r[1]):
    tot += c
    print("| %s | %d | %d | %.3f |" % (n, c, e, c / reqs if reqs else 0))
print("| **total** | %d | | **%.3f** |" % (tot, tot / reqs if reqs else 0))
print()
PY
