#!/usr/bin/env bash
# grpc_ab.sh - Envoy's ShouldRateLimit over gRPC against GET /acquire, paired in one run on one frsd whose
# one worker is pinned to CPU 0 (the load generator on CPU 1): decisions per server CPU-second (user+system
# of the master and its worker, from /proc, as cpu_probe.sh counts) and p99 at 64 concurrent requests.
# h2load (nghttp2-client) drives both: GET over HTTP/1.1 (--h1, 64 connections), gRPC over HTTP/2 (4
# connections x 16 streams = 64 concurrent streams), one descriptor per call, a fixed body (-d) with
# content-type application/grpc and te: trailers; both ask for one key of a limit they never reach.
#
#   tools/bench/grpc_ab.sh [ROUNDS (3)] [SECONDS (5)]
#
# Prints one line per side and round, then the ratio of decisions per CPU-second (gRPC / GET) per round.
# Run under the build lock on a quiet machine: flock /tmp/frs-build.lock tools/bench/grpc_ab.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FRSD="${FRSD:-$ROOT/build/src/server/frsd}"
ROUNDS=${1:-3} SECS=${2:-5}
command -v h2load >/dev/null || { echo "grpc_ab: h2load is missing (apt-get install nghttp2-client)" >&2; exit 2; }
W=$(mktemp -d /tmp/frs-grpc-ab-XXXXXX)
trap '[ -n "${PID:-}" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
mkdir -p "$W/envoy"
cat >"$W/map.xml" <<'X'
<map><biz id="1" name="bench"><rule algo="calendar" interval="1" max="2000000000" zone="UTC"/></biz></map>
X
cat >"$W/envoy/bench.yaml" <<'X'
domain: bench
descriptors:
  - key: key
    rate_limit: {unit: second, requests_per_unit: 2000000000}
X
cat >"$W/srv.xml" <<'X'
<frs><listen host="127.0.0.1" port="0"/><workers>1</workers><map>map.xml</map>
<store dir="data" files="1" keynodes="65536" chain="8"/><grpc listen="127.0.0.1:0" config="envoy"/></frs>
X
# RateLimitRequest{domain: "bench", descriptors: [{entries: [{key: "key", value: "value1"}]}]}, 24 bytes,
# behind gRPC's 5-byte prefix.
printf '\x00\x00\x00\x00\x18\x0a\x05bench\x12\x0f\x0a\x0d\x0a\x03key\x12\x06value1' >"$W/rls.bin"
taskset -c 0 "$FRSD" -c "$W/srv.xml" --foreground 2>"$W/frsd.log" &
PID=$!
for _ in $(seq 100); do [ -s "$W/data/frsd.listen" ] && break; sleep 0.05; done
PORT=$(sed 's/.*://' "$W/data/frsd.listen") GPORT=$(sed 's/.*://' "$W/data/frsd.grpc.listen")
cpu() { local t=0 p; for p in $PID $(ps -o pid= --ppid "$PID"); do
  t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}'))); done; echo "$t"; }
HZ=$(getconf CLK_TCK)
run() { # label, h2load args...
  local label=$1; shift
  local c0 c1 out n p99
  rm -f "$W/lat.log"
  c0=$(cpu)
  out=$(taskset -c 1 h2load -D "$SECS" --log-file="$W/lat.log" "$@" 2>&1)
  c1=$(cpu)
  n=$(awk '$2 == 200' "$W/lat.log" | wc -l)
  p99=$(awk '$2 == 200 {print $3}' "$W/lat.log" | sort -n | awk '{a[NR]=$1} END {print a[int(NR*0.99)]}')
  echo "$label: $((n / SECS)) decisions/s, p99 ${p99} us, server CPU $(((c1 - c0) * 1000 / HZ)) ms = \
$((n * HZ / (c1 - c0 > 0 ? c1 - c0 : 1))) decisions/server-CPU-s" >&2
  echo "$((n * HZ / (c1 - c0 > 0 ? c1 - c0 : 1)))"
  grep -q "succeeded" <<<"$out" || { echo "$out" >&2; exit 1; }
}
for r in $(seq "$ROUNDS"); do
  get=$(run "round $r GET /acquire (h1, 64 conns)" --h1 -c 64 -m 1 "http://127.0.0.1:$PORT/acquire?biz=bench&key=value1")
  grpc=$(run "round $r gRPC ShouldRateLimit (4 conns x 16 streams)" -c 4 -m 16 -d "$W/rls.bin" \
    -H 'content-type: application/grpc' -H 'te: trailers' \
    "http://127.0.0.1:$GPORT/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
  echo "round $r: gRPC / GET decisions per server CPU-second = $(awk -v a="$grpc" -v b="$get" 'BEGIN {printf "%.2f", a / b}')"
done
