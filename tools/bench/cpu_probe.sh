#!/usr/bin/env bash
# cpu_probe.sh - one pinned loadgen run against a running server, and what it cost the server (issue 14):
# user and kernel CPU per request and minor page faults per request, from /proc/PID/stat of PID and its
# children (master + workers), read before and after the run.
#
#   tools/bench/cpu_probe.sh PID PORT LABEL -- loadgen args (-c 64 -r 'GET / HTTP/1.1\r\nHost: x\r\n\r\n' ...)
#
# loadgen (LG, default /tmp/frs-floor/loadgen, built from loadgen.c when missing) runs on CPU 1 for DUR s
# (default 4); start the server under `taskset -c 0` yourself. Prints one line: rps, p99, server user and
# system seconds, requests per server CPU-second, user and system microseconds per request, minor faults per
# request, loadgen's CPU %. Use it to compare configurations minute by minute on a noisy machine (e.g. the
# store on ext4 against tmpfs huge=always, see docs/performance.md "The floor of HTTP").
set -uo pipefail
BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -lt 4 ] || [ "$4" != -- ]; then sed -n '2,12p' "$0" >&2; exit 2; fi
PID=$1 PORT=$2 LABEL=$3; shift 4
LG="${LG:-/tmp/frs-floor/loadgen}"
if ! { [ -x "$LG" ] && [ "$LG" -nt "$BENCH/loadgen.c" ]; }; then mkdir -p "$(dirname "$LG")"; cc -O2 -o "$LG" "$BENCH/loadgen.c" || exit 1; fi
HZ=$(getconf CLK_TCK)
PIDS="$PID $(ps -o pid= --ppid "$PID")"
sample() { # utime stime minflt, summed
  local u=0 s=0 f=0 p a b c
  for p in $PIDS; do
    read -r a b c < <(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12, $13, $8}')
    u=$((u + ${a:-0})); s=$((s + ${b:-0})); f=$((f + ${c:-0}))
  done
  echo "$u $s $f"
}
read -r u0 s0 f0 < <(sample)
out=$(taskset -c 1 "$LG" -p "$PORT" -d "${DUR:-4}" -l "$LABEL" "$@")
read -r u1 s1 f1 < <(sample)
echo "$out" | jq -r --arg l "$LABEL" --argjson u $((u1 - u0)) --argjson s $((s1 - s0)) --argjson f $((f1 - f0)) \
    --argjson hz "$HZ" \
  '"\($l): \(.rps | floor) rps, p99 \(.p99_us) us; server user \($u / $hz) s, sys \($s / $hz) s = \(.requests / (($u + $s) / $hz) | floor) req/srv-s; user \($u / $hz * 1e6 / .requests * 100 | floor / 100) us/req, sys \($s / $hz * 1e6 / .requests * 100 | floor / 100) us/req; minflt/req \($f / .requests * 1000 | floor / 1000); status \(.status | tostring); lg CPU \(.cpu_pct) %"'
