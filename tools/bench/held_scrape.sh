#!/usr/bin/env bash
# held_scrape.sh - what a /metrics scrape costs the requests beside it when a biz counts leases
# (frs_leases_held is a walk over the store): two frsd binaries, one after the other, on one store.
#
#   held_scrape.sh OLD_FRSD NEW_FRSD [ROUNDS] [SECS]
#
# The store is 4 x 262,144 x 8 slots (8.4 M), filled with 2 M keys of a plain fixed rule and 50,000 of
# a concurrency rule (tools/bench/lease_map.xml) by the first binary. Then, per round and binary: one
# worker, /metrics scraped twice 2 s apart (so that a master that walks for the scrapes has published),
# then GET /acquire at 16 connections for SECS s while /metrics is scraped once a second. Prints
# loadgen's rate and latencies (max: the longest request, which a stalled worker makes) and each
# scrape's time, and the new binary's frs_held_* series.
# Run under the build lock on a quiet machine: flock /tmp/frs-build.lock tools/bench/held_scrape.sh A B
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH="$ROOT/tools/bench"
[ $# -ge 2 ] || { sed -n '2,14p' "$0" >&2; exit 2; }
OLD=$1 NEW=$2 ROUNDS=${3:-3} SECS=${4:-10}
for t in curl jq; do
  command -v "$t" >/dev/null || { echo "held_scrape: $t is missing" >&2; exit 2; }
done
W=$(mktemp -d /tmp/frs-held-scrape-XXXXXX)
PID=""
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
LG="$W/loadgen"
cc -O2 -o "$LG" "$BENCH/loadgen.c" -lpthread
cp "$BENCH/lease_map.xml" "$W/map.xml"
cat >"$W/srv.xml" <<X
<frs><listen host="127.0.0.1" port="0"/><workers>1</workers><map>map.xml</map>
<store dir="data" files="4" keynodes="262144" chain="8"/><admin token=""/><limits connections="4096"/></frs>
X
start() {
  rm -f "$W/data/frsd.listen"
  "$1" -c "$W/srv.xml" --foreground 2>>"$W/frsd.log" &
  PID=$!
  for _ in $(seq 200); do [ -s "$W/data/frsd.listen" ] && break; sleep 0.05; done
  PORT=$(sed 's/.*://' "$W/data/frsd.listen")
}
stop() {
  kill "$PID"
  wait "$PID" 2>/dev/null || true
  PID=""
}
get() { printf 'GET /%s?biz=%s&key=%%KEY%% HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' "$1" "$2"; }
start "$OLD"
"$LG" -p "$PORT" -c 32 -d 20 -k 2000000 -s 1 -r "$(get acquire plain)" >/dev/null
"$LG" -p "$PORT" -c 16 -d 3 -k 50000 -s 2 -P L -r "$(get auth inflight)" >/dev/null
echo "store: $(curl -fsS "http://127.0.0.1:$PORT/metrics" | grep -E '^frs_store_(nodes|slots)_used' | tr '\n' ' ')"
stop
run() { # label frsd
  start "$2"
  curl -fsS -o /dev/null "http://127.0.0.1:$PORT/metrics"
  sleep 2
  curl -fsS -o /dev/null "http://127.0.0.1:$PORT/metrics"
  (for _ in $(seq "$SECS"); do
    curl -fsS -o /dev/null -w '%{time_total} ' "http://127.0.0.1:$PORT/metrics"
    sleep 1
  done) >"$W/scrapes" &
  local scraper=$!
  "$LG" -p "$PORT" -c 16 -d "$SECS" -k 2000000 -s 42 -r "$(get acquire plain)" |
    jq -r --arg l "$1" '"\($l): \(.rps | floor) req/s, p50 \(.p50_us) us, p99 \(.p99_us) us, p999 \(.p999_us) us, max \(.max_us) us"'
  wait "$scraper"
  echo "  scrapes (s): $(cat "$W/scrapes")"
  [ "$1" = new ] && echo "  $(curl -fsS "http://127.0.0.1:$PORT/metrics" | grep -E '^frs_held' | tr '\n' ' ')"
  stop
}
for r in $(seq "$ROUNDS"); do
  echo "round $r"
  run old "$OLD"
  run new "$NEW"
done
