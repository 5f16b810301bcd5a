#!/usr/bin/env bash
# ab.sh - two frsd binaries compared in the same minutes (issue 14): runs alternate A, B, A, B, ...
# against two servers started side by side, so that the noise of a shared VM (figures here move by up to
# 30 % from one minute to the next) falls on both alike. A change is judged by the median of the paired
# ratios, not by two tables taken minutes apart.
#
#   tools/bench/ab.sh BIN_A BIN_B [ROUNDS] -- loadgen args
#   tools/bench/ab.sh /tmp/frsd-old build/src/server/frsd 8 -- -c 64 -r 'GET /acquire?biz=bench&key=%KEY% HTTP/1.1\r\nHost: x\r\n\r\n'
#   tools/bench/ab.sh /tmp/frsd-old build/src/server/frsd -- -c 16 -U -m http-post-xml -f /tmp/frs-floor/batch-64-compact-query.txt
#   tools/bench/ab.sh nginx build/src/server/frsd 8 -- -c 64 -r 'GET /acquire?biz=bench&key=%KEY% HTTP/1.1\r\nHost: x\r\n\r\n'
#   MAP_B=stats-map.xml SRV_B='<decisions file="%DIR%/decisions.log"/>' tools/bench/ab.sh frsd frsd -- -G 100 ...
#     (one binary, side B with a feature: MAP_A/MAP_B and SRV_A/SRV_B give a side its own map and srv.xml;
#     ADMIN_TOKEN sets both sides' <admin token>, which a <cluster replicas="1"> among them needs)
#
# BIN_A `nginx` is the floor of HTTP instead (issue 14): nginx answering `return 200` from
# peers/nginx-floor.conf, 1 worker on CPU 0, sent `GET / HTTP/1.1` (NGINX_TMPL) in place of the -r
# template; B/A is then floor.sh's "x floor", measured in alternating runs rather than one row after
# the other, so that the VM's drift within a run does not fall on one side. NGINX_ARGS replaces nginx's
# loadgen args (a -r template in them still becomes NGINX_TMPL): with `NGINX_ARGS='-c 16 -r x'` the floor
# runs in the same minutes as a batch load of frsd, which shows how fast the VM was meanwhile. Not a
# yardstick for the batch: the floor is 70 % kernel time and a batch 75 % user time, and this VM's swings
# move them apart (in one evening nginx 55-134 k requests per CPU-second, batches 1.28-2.06 M decisions,
# the slowest of each in different minutes).
#
# Each server: 1 worker pinned to CPU 0 (loadgen on CPU 1, as floor.sh), biz "bench" fixed 60 s max 5,
# <limits batch="1024"/>, a fresh store of STORE_FILES x STORE_KEYNODES x 8 slots (default 2 x 73530: sized
# for 1 M keys) under OUT (default /tmp/frs-ab). Both stores are filled first by FILL_S (3) seconds of
# the same workload (queries of absent keys find no node: FILL_FILE, a loadgen -f template of a <batch> of
# `update` members such as floor.sh's batch-64-compact-update.txt, fills first with FILL_S s of it). Then ROUNDS (default 8) pairs of DUR-second (default 2) runs through cpu_probe.sh,
# which reads each server's CPU from /proc. Prints every run, the medians per binary, and the medians
# of the paired ratios B/A of requests per server CPU-second and of user CPU per request.
# KEYSPACE (1000000) is passed as -k unless the loadgen args give one. Ports 17401 and 17402. Servers
# are stopped by the PIDs this script started.
set -uo pipefail
BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 3 ] || { sed -n '2,25p' "$0" >&2; exit 2; }
A=$1 B=$(readlink -f "$2"); shift 2
[ "$A" = nginx ] || A=$(readlink -f "$A")
ROUNDS=8
[ "$1" != -- ] && { ROUNDS=$1; shift; }
[ "${1:-}" = -- ] && shift
OUT="${OUT:-/tmp/frs-ab}" DUR="${DUR:-2}" FILL_S="${FILL_S:-3}"
export LG="${LG:-/tmp/frs-floor/loadgen}" DUR
if ! { [ -x "$LG" ] && [ "$LG" -nt "$BENCH/loadgen.c" ]; }; then mkdir -p "$(dirname "$LG")"; cc -O2 -o "$LG" "$BENCH/loadgen.c" || exit 1; fi
. "$BENCH/frsd_conf.sh"
ARGS=("$@")
[[ " ${ARGS[*]} " == *" -k "* ]] || ARGS+=(-k "${KEYSPACE:-1000000}")

PIDS=()
stop() { # by the PIDs started here, and wait until they are gone (the next run reuses the ports)
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; done
}
trap stop EXIT
start() { # NAME BIN PORT
  local dir="$OUT/$1"
  rm -rf "$dir" && mkdir -p "$dir"
  write_frsd_conf "$dir" "$3" 1 "${STORE_FILES:-2}" "${STORE_KEYNODES:-73530}" data 'connections="4096" batch="1024"'
  # One side's own map.xml and srv.xml elements (MAP_A/MAP_B: a file; SRV_A/SRV_B: XML put before
  # </frs>; %DIR% in it becomes the side's directory): one binary measured with and without a feature.
  local map_var="MAP_${1^^}" srv_var="SRV_${1^^}"
  [ -n "${!map_var:-}" ] && cp "${!map_var}" "$dir/map.xml"
  [ -n "${!srv_var:-}" ] && sed -i "s#</frs>#${!srv_var//%DIR%/$dir}\n</frs>#" "$dir/srv.xml"
  # ADMIN_TOKEN: both sides' admin token (a <cluster replicas="1"> in SRV_A/SRV_B needs one).
  [ -n "${ADMIN_TOKEN:-}" ] && sed -i "s#<admin token=\"\"/>#<admin token=\"$ADMIN_TOKEN\"/>#" "$dir/srv.xml"
  (echo > "/dev/tcp/127.0.0.1/$3") 2>/dev/null && { echo "ab: port $3 is taken" >&2; exit 1; }
  taskset -c 0 "$2" -c "$dir/srv.xml" --foreground > "$dir/frsd.log" 2>&1 &
  PIDS+=($!)
  echo $! > "$dir/pid"
  for _ in $(seq 1 100); do (echo > "/dev/tcp/127.0.0.1/$3") 2>/dev/null && return 0; sleep 0.1; done
  echo "ab: $1 does not listen on $3:" >&2; cat "$dir/frsd.log" >&2; exit 1
}
start_nginx() { # PORT
  local pre="$OUT/a"
  rm -rf "$pre" && mkdir -p "$pre/logs" "$pre/tmp"
  sed "s/127\.0\.0\.1:17083/127.0.0.1:$1/" "$BENCH/peers/nginx-floor.conf" > "$pre/nginx.conf"
  (echo > "/dev/tcp/127.0.0.1/$1") 2>/dev/null && { echo "ab: port $1 is taken" >&2; exit 1; }
  taskset -c 0 nginx -p "$pre/" -c "$pre/nginx.conf" -g 'worker_processes 1;' > "$pre/logs/stdout.log" 2>&1 &
  PIDS+=($!)
  echo $! > "$pre/pid"
  for _ in $(seq 1 100); do (echo > "/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "ab: nginx does not listen on $1" >&2; cat "$pre/logs/"* >&2; exit 1
}
ARGS_A=("${ARGS[@]}")
if [ "$A" = nginx ]; then
  command -v nginx > /dev/null || { echo "ab: nginx is not installed" >&2; exit 1; }
  if [ -n "${NGINX_ARGS:-}" ]; then
    # The floor's own load beside another one of frsd's (a batch): B/A is then batches per floor request.
    read -r -a ARGS_A <<< "$NGINX_ARGS"
    [[ " ${ARGS_A[*]} " == *" -k "* ]] || ARGS_A+=(-k "${KEYSPACE:-1000000}")
  fi
  for ((i = 0; i < ${#ARGS_A[@]}; i++)); do
    [ "${ARGS_A[i]}" = -r ] && ARGS_A[i + 1]="${NGINX_TMPL:-GET / HTTP/1.1\r\nHost: x\r\n\r\n}"
  done
  start_nginx 17401
else
  start a "$A" 17401
fi
start b "$B" 17402
if [ -n "${FILL_FILE:-}" ]; then
  # Stored nodes for the queries to find: FILL_S s of this template's batches of `update` members,
  # every member with its own key, over the same keyspace (frsd sides only).
  FILL_ARGS=(-c 16 -U -m http-post-xml -f "$FILL_FILE" -k "${KEYSPACE:-1000000}")
  [ "$A" = nginx ] || taskset -c 1 "$LG" -p 17401 -d "$FILL_S" "${FILL_ARGS[@]}" > /dev/null
  taskset -c 1 "$LG" -p 17402 -d "$FILL_S" "${FILL_ARGS[@]}" > /dev/null
  for side in a b; do
    [ "$side" = a ] && [ "$A" = nginx ] && continue
    port=$([ "$side" = a ] && echo 17401 || echo 17402)
    echo "$side: nodes_used after the fill: $(curl -s --max-time 5 -X POST --data '<request cmd="stats"/>' \
      "http://127.0.0.1:$port/frs" | sed -n 's/.*nodes_used="\([0-9]*\)".*/\1/p' | head -1)"
  done
fi
taskset -c 1 "$LG" -p 17401 -d "$FILL_S" "${ARGS_A[@]}" > /dev/null
taskset -c 1 "$LG" -p 17402 -d "$FILL_S" "${ARGS[@]}" > /dev/null
RES="$OUT/runs.txt"
: > "$RES"
for _ in $(seq 1 "$ROUNDS"); do
  "$BENCH/cpu_probe.sh" "$(cat "$OUT/a/pid")" 17401 A -- "${ARGS_A[@]}" | tee -a "$RES"
  "$BENCH/cpu_probe.sh" "$(cat "$OUT/b/pid")" 17402 B -- "${ARGS[@]}" | tee -a "$RES"
done
echo "A = $A"
echo "B = $B"
python3 - "$RES" <<'PY'
import re, statistics as st, sys
rows = {'A': [], 'B': []}
pat = re.compile(r'(\w): (\d+) rps, p99 ([\d.]+) us.*= (\d+) req/srv-s; user ([\d.]+) us/req, sys ([\d.]+)')
for line in open(sys.argv[1]):
    m = pat.match(line)
    if m:
        rows[m[1]].append(tuple(float(x) for x in m.groups()[1:]))
for k, v in rows.items():
    if not v:
        sys.exit("ab: no runs of " + k)
    print('%s: %d runs, medians: %d rps, p99 %.0f us, %d req/srv-s, user %.2f us/req, sys %.2f us/req' %
          (k, len(v), *(st.median(x[i] for x in v) for i in range(5))))
pairs = list(zip(rows['A'], rows['B']))
print('B/A, median of %d pairs: req/srv-s %.3f, user CPU per request %.3f, p99 %.3f' %
      (len(pairs), st.median(b[2] / a[2] for a, b in pairs), st.median(b[3] / a[3] for a, b in pairs),
       st.median(b[1] / a[1] for a, b in pairs)))
PY
