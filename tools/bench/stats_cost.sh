#!/usr/bin/env bash
# stats_cost.sh - what statistics by key field and the decision log cost GET /acquire (issue 24): one
# frsd binary, side A the benchmarks' plain biz, side B the same biz with a feature, measured in
# alternating runs by ab.sh (1 worker pinned to CPU 0, loadgen on CPU 1, 1,000,000 keys, fixed 5 per
# 60 s so about one request in five is denied). Keys carry fields (loadgen -G 100: 100 apps, 7
# interfaces, a user per key).
#
#   tools/bench/stats_cost.sh [FRSD] [ROUNDS]
#
# Cases, each its own ab.sh run: "stats+log" (the issue's: <stats by="app">, by="app,iface" and
# by="app" distinct="user", plus the decision log of denials), "stats" alone, "log" (denials)
# alone, "log-all" (every decision logged). Prints each case's ab.sh summary.
set -uo pipefail
BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FRSD=$(readlink -f "${1:-$BENCH/../../build/src/server/frsd}")
ROUNDS=${2:-8}
PLAIN="$BENCH/stats-map-plain.xml"
sed -e 's/ fields="app,user,iface" separator=":"//' -e '/<stats /d' "$BENCH/stats-map.xml" > "$PLAIN.tmp.$$"
trap 'rm -f "$PLAIN.tmp.$$"' EXIT
LOAD=(-c 64 -G 100 -r 'GET /acquire?biz=bench&key=%KEY% HTTP/1.1\r\nHost: x\r\n\r\n')
run() { # NAME MAP_B SRV_B
  echo "== $1"
  MAP_A="$PLAIN.tmp.$$" MAP_B="$2" SRV_B="$3" "$BENCH/ab.sh" "$FRSD" "$FRSD" "$ROUNDS" -- "${LOAD[@]}" | tail -4
}
run stats+log "$BENCH/stats-map.xml" '<decisions file="%DIR%/decisions.log" record="denied"/>'
run stats "$BENCH/stats-map.xml" ''
run log "$PLAIN.tmp.$$" '<decisions file="%DIR%/decisions.log" record="denied"/>'
run log-all "$PLAIN.tmp.$$" '<decisions file="%DIR%/decisions.log" record="all"/>'
