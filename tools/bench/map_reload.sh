#!/usr/bin/env bash
# map_reload.sh - what a map of N bizzes costs a start and a reload: seconds from frsd's start until every
# worker serves, from SIGHUP until every worker has reloaded, and the longest a request waited while it
# did (a connection opened every 5 ms, GET /acquire, answer read whole). A worker reloads between requests,
# so the longest wait is about one worker's reload; <limits worker_stall_ms> (30 s) must stay well above it.
#
#   tools/bench/map_reload.sh [FRSD_BIN] [N ...]     # default build/src/server/frsd 8000 32000 65535
#
# Each N: a map of N one-rule bizzes (ids 1..N, fixed 60 s max 5), frsd with 2 workers on a fresh store in a
# temporary directory, port 0; one reload to the same map with one limit changed (every rule is looked at).
# HISTORY=K: first K reloads that change every rule's interval (rules.history then holds K + 1 lines a
# biz), and the timed reload is of the last 7 bizzes alone: what a large history costs a small map's reload.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN=$(readlink -f "${1:-$ROOT/build/src/server/frsd}")
shift || true
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(8000 32000 65535)
W=$(mktemp -d /tmp/frs-map-reload-XXXXXX)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
cat >"$W/probe.py" <<'PY'
import socket, sys, time
port, stop = int(sys.argv[1]), sys.argv[2]
worst, n = 0.0, 0
while True:
    t = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /acquire?biz=b1&key=probe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    while s.recv(4096):
        pass
    s.close()
    worst, n = max(worst, time.monotonic() - t), n + 1
    try:
        open(stop).close()
        break
    except FileNotFoundError:
        time.sleep(0.005)
print("%d %.3f" % (n, worst))
PY
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}'; }
count() { grep -c "$1" "$W/frsd.log" || true; }
# Until frsd has logged $2 lines with $1, at most WAIT_S (120) seconds: a binary whose reload never
# ends (its workers killed by the stall watch) is reported, not waited on for ever.
wait_lines() {
  local end=$((SECONDS + ${WAIT_S:-120}))
  until [ "$(count "$1")" -ge "$2" ]; do
    kill -0 "$PID" 2>/dev/null || { echo "map_reload: frsd exited" >&2; tail "$W/frsd.log" >&2; exit 1; }
    [ "$SECONDS" -lt "$end" ] || { echo "map_reload: no '$1' x$2 within ${WAIT_S:-120} s" >&2; return 1; }
    sleep 0.02
  done
}
echo "| bizzes | map bytes | start s | reload s | longest request wait during the reload | requests |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in "${SIZES[@]}"; do
  rm -rf "$W/data" "$W/frsd.log" "$W/stop"
  python3 -c "import sys
n = int(sys.argv[1]); m = int(sys.argv[2])
sys.stdout.write('<map>\n' + ''.join('<biz id=\"%d\" name=\"b%d\"><rule interval=\"60\" max=\"%d\"/></biz>\n'
                 % (i, i, m if i == n else 5) for i in range(1, n + 1)) + '</map>\n')" "$n" 5 >"$W/map.xml"
  cat >"$W/srv.xml" <<X
<frs><listen host="127.0.0.1" port="0"/><workers>2</workers><map>map.xml</map>
<store dir="data" files="1" keynodes="4096" chain="8"/><admin token=""/></frs>
X
  t0=$(now)
  "$BIN" -c "$W/srv.xml" --foreground 2>"$W/frsd.log" &
  PID=$!
  wait_lines ': serving' 2 || exit 1
  start=$(since "$t0")
  port=$(sed 's/.*://' "$W/data/frsd.listen")
  python3 "$W/probe.py" "$port" "$W/stop" >"$W/probe.out" &
  probe=$!
  sleep 0.3
  iv=60
  for _ in $(seq 1 "${HISTORY:-0}"); do
    sed -i "s/interval=\"$iv\"/interval=\"$((iv + 1))\"/" "$W/map.xml"
    iv=$((iv + 1))
    kill -HUP "$PID"
    wait_lines '(map generation' $((2 * (iv - 60))) || exit 1
  done
  [ "${HISTORY:-0}" = 0 ] || { head -1 "$W/map.xml" && tail -8 "$W/map.xml"; } >"$W/small.xml"
  [ "${HISTORY:-0}" = 0 ] || mv "$W/small.xml" "$W/map.xml"
  sed -i "s/name=\"b$n\"><rule interval=\"$iv\" max=\"5\"/name=\"b$n\"><rule interval=\"$iv\" max=\"4\"/" "$W/map.xml"
  t0=$(now)
  kill -HUP "$PID"
  if wait_lines '(map generation' $((2 * (iv - 59))); then reload=$(since "$t0"); else reload="over ${WAIT_S:-120}"; fi
  sleep 0.3
  touch "$W/stop"
  wait "$probe"
  read -r requests worst <"$W/probe.out"
  killed=$(count 'killing it')
  echo "| $n | $(stat -c %s "$W/map.xml") | $start | $reload | $worst s$([ "$killed" = 0 ] || echo " ($killed worker(s) killed)") | $requests |"
  kill "$PID"
  wait "$PID" || true
  PID=
done
