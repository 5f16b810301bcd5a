#!/usr/bin/env bash
# grpc_callgrind.sh - instructions per decision of frsd's one worker (callgrind), for ShouldRateLimit with one
# stream per connection (h2load -c16 -m1), with 16 streams on each of 4 connections (-c4 -m16), and for
# GET /acquire over HTTP/1.1 (-c16): the deterministic side of tools/bench/grpc_ab.sh, whose CPU-second ratios
# move by 10-30 % on a shared VM. The same map, YAML and 24-byte request as grpc_ab.sh.
#
#   tools/bench/grpc_callgrind.sh [FRSD (build/src/server/frsd)] [CALLS (5000)]
#
# Prints one line per shape: instructions of the worker per answered call (user space only: the kernel's
# share is not seen). GRPC_TLS=1: the gRPC shapes over TLS (a throwaway self-signed certificate).
# CG_KEEP=DIR: each shape's callgrind dump is kept there (DIR/grpc--c16--m1.cg, ...), for
# `callgrind_annotate --inclusive=yes FILE` (where a call's instructions go).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FRSD=$(readlink -f "${1:-$ROOT/build/src/server/frsd}") N=${2:-5000} GRPC_TLS=${GRPC_TLS:-0} CG_KEEP=${CG_KEEP:+$(mkdir -p "$CG_KEEP" && cd "$CG_KEEP" && pwd)}
for t in h2load valgrind callgrind_control callgrind_annotate; do
  command -v "$t" >/dev/null || { echo "grpc_callgrind: $t is missing (nghttp2-client, valgrind)" >&2; exit 2; }
done
W=$(mktemp -d /tmp/frs-grpc-cg-XXXXXX)
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
TLS_ATTRS="" SCHEME=http
if [ "$GRPC_TLS" = 1 ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
    -keyout "$W/key.pem" -out "$W/cert.pem" 2>/dev/null
  TLS_ATTRS=' cert="cert.pem" key="key.pem"' SCHEME=https
fi
cat >"$W/srv.xml" <<X
<frs><listen host="127.0.0.1" port="0"/><workers>1</workers><map>map.xml</map>
<store dir="data" files="1" keynodes="65536" chain="8"/><grpc listen="127.0.0.1:0" config="envoy"$TLS_ATTRS/>
<limits request_timeout_ms="60000"/></frs>
X
printf '\x00\x00\x00\x00\x18\x0a\x05bench\x12\x0f\x0a\x0d\x0a\x03key\x12\x06value1' >"$W/rls.bin"
cd "$W"
valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$W/cg.%p" "$FRSD" -c srv.xml --foreground \
  2>"$W/vg.log" &
PID=$!
for _ in $(seq 300); do [ -s data/frsd.grpc.listen ] && [ -s data/frsd.listen ] && break; sleep 0.1; done
PORT=$(sed 's/.*://' data/frsd.listen) GPORT=$(sed 's/.*://' data/frsd.grpc.listen)
URL="$SCHEME://127.0.0.1:$GPORT/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
GRPC=(-d rls.bin -H 'content-type: application/grpc' -H 'te: trailers' "$URL")
h2load -n 500 -c 16 -m 1 "${GRPC[@]}" >/dev/null  # warm-up: connections, HPACK tables, the node
WPID=$(ps -o pid= --ppid "$PID" | head -1 | tr -d ' ')  # the one worker (valgrind runs frsd in place)
shape() { # label, h2load args...
  local label=$1; shift
  callgrind_control -z "$WPID" >/dev/null 2>&1
  local ok; ok=$(h2load -n "$N" "$@" | awk '/^requests:/ {print $8}')
  callgrind_control -d "$WPID" >/dev/null 2>&1
  local f
  # shellcheck disable=SC2012 # the newest dump by time; the names are callgrind's own (cg.PID.N)
  f=$(ls -t "$W/cg.$WPID".* | head -1)
  local ir; ir=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  echo "$label: $((ir / ok)) instructions per call ($ok calls)"
  if [ -n "$CG_KEEP" ]; then cp "$f" "$CG_KEEP/$(echo "$label" | tr -c 'A-Za-z0-9\n' - | tr '[:upper:]' '[:lower:]').cg"; fi
}
shape "gRPC -c16 -m1" -c 16 -m 1 "${GRPC[@]}"
shape "gRPC -c4 -m16" -c 4 -m 16 "${GRPC[@]}"
shape "GET /acquire --h1 -c16" --h1 -c 16 -m 1 "http://127.0.0.1:$PORT/acquire?biz=bench&key=value1"
