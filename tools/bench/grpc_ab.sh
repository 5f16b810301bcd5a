#!/usr/bin/env bash
# grpc_ab.sh - Envoy's ShouldRateLimit over gRPC against GET /acquire, paired in one run on one frsd whose
# one worker is pinned to CPU 0 (the load generator on CPU 1): decisions per server CPU-second (user+system
# of the master and its worker, from /proc, as cpu_probe.sh counts) and p99 at 64 concurrent requests.
# h2load (nghttp2-client) drives both: GET over HTTP/1.1 (--h1, 64 connections), gRPC over HTTP/2 (4
# connections x 16 streams = 64 concurrent streams), one descriptor per call, a fixed body (-d) with
# content-type application/grpc and te: trailers; both ask for one key of a limit they never reach.
#
#   tools/bench/grpc_ab.sh [ROUNDS (3)] [SECONDS (5)]
#   GET_CONNS=16 GRPC_CONNS=16 GRPC_STREAMS=1 tools/bench/grpc_ab.sh   # one stream per connection
#   GRPC_TLS=1 tools/bench/grpc_ab.sh      # gRPC over TLS (a throwaway self-signed certificate), GET in clear
#   RPS=6000 GET_CONNS=16 GRPC_CONNS=16 GRPC_STREAMS=1 tools/bench/grpc_ab.sh   # both sides at one offered rate
#   GET_CLIENT=loadgen GET_CONNS=16 GRPC_CONNS=16 GRPC_STREAMS=1 tools/bench/grpc_ab.sh   # GET by tools/bench/loadgen.c
#   GET_CLIENT=loadgen GRPC_CLIENT=loadgen GET_CONNS=16 GRPC_CONNS=16 GRPC_STREAMS=1 tools/bench/grpc_ab.sh
#       # both sides by loadgen (its `-m grpc`: one call in flight per connection, so GRPC_STREAMS=1)
#
# Without RPS each side runs as fast as h2load drives it, and h2load's HTTP/2 client is slower than its
# HTTP/1.1 one: the server then idles and wakes more often per gRPC call, which the kernel charges to it.
# RPS=N offers N calls a second per connection to both sides (h2load --rps), a rate both clients keep up
# with, so that the ratio compares the server's work at one load.
#
# Prints one line per side and round, then the ratio of decisions per CPU-second (gRPC / GET) per round.
# A failed gRPC call is :status 200 too, so h2load's count alone proves nothing: before the timed runs the
# body is sent once with nghttp and must come back grpc-status 0 with overall_code OK; after each run the
# 200s h2load logged must match frsd's own count of decisions over that run (frs_requests_total of
# acquire/200 for GET, frs_envoy_descriptor_hits_total{result="total"} for gRPC: one hit per call) within
# 1 %, or no ratio is printed (exit 1).
# Run under the build lock on a quiet machine: flock /tmp/frs-build.lock tools/bench/grpc_ab.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FRSD="${FRSD:-$ROOT/build/src/server/frsd}"
ROUNDS=${1:-3} SECS=${2:-5}
GET_CONNS=${GET_CONNS:-64} GRPC_CONNS=${GRPC_CONNS:-4} GRPC_STREAMS=${GRPC_STREAMS:-16} GRPC_TLS=${GRPC_TLS:-0}
RATE=()
[ -n "${RPS:-}" ] && RATE=(--rps="$RPS")
# GET_CLIENT=loadgen: the GET side driven by the project's own load generator (a faster client than
# h2load's HTTP/1.1 one), built into the work directory; it has no fixed rate.
GET_CLIENT=${GET_CLIENT:-h2load} GRPC_CLIENT=${GRPC_CLIENT:-h2load}
for c in "$GET_CLIENT" "$GRPC_CLIENT"; do
  case "$c" in
    h2load) ;;
    loadgen) [ -z "${RPS:-}" ] || { echo "grpc_ab: RPS= needs h2load on both sides" >&2; exit 2; } ;;
    *) echo "grpc_ab: GET_CLIENT and GRPC_CLIENT are h2load or loadgen, not $c" >&2; exit 2 ;;
  esac
done
[ "$GRPC_CLIENT" = h2load ] || [ "$GRPC_STREAMS" = 1 ] ||
  { echo "grpc_ab: loadgen keeps one call in flight per connection: GRPC_STREAMS=1" >&2; exit 2; }
for t in h2load nghttp curl; do
  command -v "$t" >/dev/null || { echo "grpc_ab: $t is missing (apt-get install nghttp2-client curl)" >&2; exit 2; }
done
W=$(mktemp -d /tmp/frs-grpc-ab-XXXXXX)
trap '[ -n "${PID:-}" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
if [ "$GET_CLIENT" = loadgen ] || [ "$GRPC_CLIENT" = loadgen ]; then
  cc -O2 -o "$W/loadgen" "$ROOT/tools/bench/loadgen.c" || { echo "grpc_ab: cannot build loadgen (cc)" >&2; exit 2; }
fi
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
TLS_ATTRS="" SCHEME=http
if [ "$GRPC_TLS" = 1 ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
    -keyout "$W/key.pem" -out "$W/cert.pem" 2>/dev/null
  TLS_ATTRS=' cert="cert.pem" key="key.pem"' SCHEME=https
fi
cat >"$W/srv.xml" <<X
<frs><listen host="127.0.0.1" port="0"/><workers>1</workers><map>map.xml</map>
<store dir="data" files="1" keynodes="65536" chain="8"/><grpc listen="127.0.0.1:0" config="envoy"$TLS_ATTRS/></frs>
X
# RateLimitRequest{domain: "bench", descriptors: [{entries: [{key: "key", value: "value1"}]}]}, 24 bytes,
# behind gRPC's 5-byte prefix.
printf '\x00\x00\x00\x00\x18\x0a\x05bench\x12\x0f\x0a\x0d\x0a\x03key\x12\x06value1' >"$W/rls.bin"
taskset -c 0 "$FRSD" -c "$W/srv.xml" --foreground 2>"$W/frsd.log" &
PID=$!
for _ in $(seq 100); do [ -s "$W/data/frsd.listen" ] && break; sleep 0.05; done
PORT=$(sed 's/.*://' "$W/data/frsd.listen") GPORT=$(sed 's/.*://' "$W/data/frsd.grpc.listen")
URL="$SCHEME://127.0.0.1:$GPORT/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
# One call first, checked whole: trailers grpc-status 0, and a RateLimitResponse whose first field is
# overall_code OK (08 01) behind the 5-byte prefix.
nghttp -v -d "$W/rls.bin" -H 'content-type: application/grpc' -H 'te: trailers' "$URL" >"$W/check.txt" 2>&1 || true
grep -q 'grpc-status: 0$' "$W/check.txt" || { echo "grpc_ab: the gRPC call failed:" >&2; cat "$W/check.txt" >&2; exit 1; }
nghttp -d "$W/rls.bin" -H 'content-type: application/grpc' -H 'te: trailers' "$URL" >"$W/answer.bin"
[ "$(od -An -tx1 -j5 -N2 "$W/answer.bin" | tr -d ' ')" = 0801 ] || {
  echo "grpc_ab: ShouldRateLimit did not answer OK:" >&2; od -An -tx1 "$W/answer.bin" >&2; exit 1; }
# frsd's count of decisions: GET /acquire answered 200, or the bench descriptor's hits over gRPC.
decided() { curl -fsS "http://127.0.0.1:$PORT/metrics" | awk -v side="$1" '
  side == "get" && /^frs_requests_total\{/ && /cmd="acquire"/ && /status="200"/ {n += $NF}
  side == "grpc" && /^frs_envoy_descriptor_hits_total\{/ && /domain="bench"/ && /result="total"/ {n += $NF}
  END {printf "%d\n", n}'; }
cpu() { local t=0 p; for p in $PID $(ps -o pid= --ppid "$PID"); do
  t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}'))); done; echo "$t"; }
HZ=$(getconf CLK_TCK)
run() { # label, side (get|grpc), h2load args...
  local label=$1 side=$2; shift 2
  local c0 c1 out n p99 d0 d1
  rm -f "$W/lat.log"
  d0=$(decided "$side")
  c0=$(cpu)
  if { [ "$side" = get ] && [ "$GET_CLIENT" = loadgen ]; } || { [ "$side" = grpc ] && [ "$GRPC_CLIENT" = loadgen ]; }; then
    if [ "$side" = get ]; then
      out=$(taskset -c 1 "$W/loadgen" -h 127.0.0.1 -p "$PORT" -c "$GET_CONNS" -t 1 -d "$SECS" -m http-get \
        -r 'GET /acquire?biz=bench&key=value1 HTTP/1.1\r\nHost: x\r\n\r\n' 2>&1)
    else
      # rls.bin without its 5-byte prefix, as \xHH escapes (loadgen adds the prefix).
      out=$(taskset -c 1 "$W/loadgen" -h 127.0.0.1 -p "$GPORT" -c "$GRPC_CONNS" -t 1 -d "$SECS" -m grpc \
        -r "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit $(tail -c +6 "$W/rls.bin" | od -An -v -tx1 |
          tr -d ' \n' | sed 's/../\\x&/g')" 2>&1)
    fi
    c1=$(cpu)
    d1=$(decided "$side")
    # Its JSON line: the answers by status, and its own p99.
    # grpc: an answer whose grpc-status loadgen cannot read (an HPACK-coded one: "0") counts too; frsd's
    # own count of decisions, checked below, stands behind it.
    n=$(python3 -c 'import json, sys; s = json.loads(sys.stdin.read())["status"]; print(s.get("200", 0) + s.get("0", 0))' <<<"$out")
    p99=$(python3 -c 'import json, sys; print(round(json.loads(sys.stdin.read())["p99_us"]))' <<<"$out")
    out="succeeded"
  else
    out=$(taskset -c 1 h2load -D "$SECS" ${RATE[@]+"${RATE[@]}"} --log-file="$W/lat.log" "$@" 2>&1)
    c1=$(cpu)
    d1=$(decided "$side")
    n=$(awk '$2 == 200' "$W/lat.log" | wc -l)
    p99=$(awk '$2 == 200 {print $3}' "$W/lat.log" | sort -n | awk '{a[NR]=$1} END {print a[int(NR*0.99)]}')
  fi
  # Calls a client ended early (h2load's -D deadline; loadgen's call in flight on each connection) may be
  # decided without their answer counted: 1 % slack.
  if ! awk -v a="$n" -v b="$((d1 - d0))" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= b / 100)}'; then
    echo "grpc_ab: $label: h2load counted $n answers 200, frsd $((d1 - d0)) decisions: no ratio" >&2
    exit 1
  fi
  echo "$label: $((n / SECS)) decisions/s, p99 ${p99} us, server CPU $(((c1 - c0) * 1000 / HZ)) ms = \
$((n * HZ / (c1 - c0 > 0 ? c1 - c0 : 1))) decisions/server-CPU-s" >&2
  echo "$((n * HZ / (c1 - c0 > 0 ? c1 - c0 : 1)))"
  grep -q "succeeded" <<<"$out" || { echo "$out" >&2; exit 1; }
}
for r in $(seq "$ROUNDS"); do
  get=$(run "round $r GET /acquire ($GET_CLIENT h1, $GET_CONNS conns)" get --h1 -c "$GET_CONNS" -m 1 \
    "http://127.0.0.1:$PORT/acquire?biz=bench&key=value1")
  grpc=$(run "round $r gRPC ShouldRateLimit ($GRPC_CLIENT, $GRPC_CONNS conns x $GRPC_STREAMS streams)" grpc -c "$GRPC_CONNS" \
    -m "$GRPC_STREAMS" -d "$W/rls.bin" \
    -H 'content-type: application/grpc' -H 'te: trailers' "$URL")
  echo "round $r: gRPC / GET decisions per server CPU-second = $(awk -v a="$grpc" -v b="$get" 'BEGIN {printf "%.2f", a / b}')"
done
