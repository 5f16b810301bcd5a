#!/usr/bin/env bash
# dump_impact.sh: what `frsctl dump` walking a 1,000,000-key store costs the
# live server. Starts its own frsd on a private store, fills it with KEYS keys
# through frsd (GET /acquire), then measures loadgen's p99 (GET /query on
# those keys) three times: without a dump, with `frsctl dump > /dev/null`
# running in a loop for the whole run, and without again (to show the noise).
#
# Usage: tools/frsctl/dump_impact.sh [BUILD_DIR]     (default: build)
# Env:   KEYS=1000000 DUR=10 CONNS=16 PORT=18391 BENCH_DIR=tools/bench
#        PIN=1: frsd (1 worker) on CPU 0; loadgen and frsctl on CPU 1, so the
#        figure shows lock and memory interference rather than two programs
#        sharing one core. PIN=0: no affinity, 2 workers.
# Everything listens on 127.0.0.1 and is stopped by its PID at exit.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
[[ $build = /* ]] || build=$root/$build
KEYS=${KEYS:-1000000}
DUR=${DUR:-10}
CONNS=${CONNS:-16}
PORT=${PORT:-18391}
PIN=${PIN:-1}
BENCH_DIR=${BENCH_DIR:-$root/tools/bench}
frsd=$build/src/server/frsd
frsctl=$build/tools/frsctl/frsctl
for f in "$frsd" "$frsctl" "$BENCH_DIR/loadgen.c" "$BENCH_DIR/frsd_conf.sh"; do
  [[ -e $f ]] || { echo "dump_impact: $f is missing (build frsd and frsctl first)" >&2; exit 2; }
done

work=$(mktemp -d /tmp/frs-dump-impact-XXXXXX)
frsd_pid="" dump_pid=""
cleanup() {
  if [[ -n $dump_pid ]]; then kill "$dump_pid" 2>/dev/null || true; fi
  if [[ -n $frsd_pid ]] && kill -TERM "$frsd_pid" 2>/dev/null; then wait "$frsd_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cc -O2 -o "$work/loadgen" "$BENCH_DIR/loadgen.c"

# The benchmarks' frsd (tools/bench/frsd_conf.sh) on 2 x 262144 x 8 =
# 4,194,304 slots: 1,000,000 one-slot nodes fill a quarter.
workers=2 on_srv="" on_cli=""
if [[ $PIN = 1 ]]; then workers=1 on_srv="taskset -c 0" on_cli="taskset -c 1"; fi
# shellcheck source=tools/bench/frsd_conf.sh
. "$BENCH_DIR/frsd_conf.sh"
write_frsd_conf "$work" "$PORT" "$workers" 2 262144 data 'connections="4096"' 'interval="86400" max="1000000"' \
  '  <timezone>UTC</timezone>
'

$on_srv "$frsd" -c "$work/srv.xml" --foreground 2>"$work/frsd.log" &
frsd_pid=$!
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fs "http://127.0.0.1:$PORT/health" >/dev/null || { echo "dump_impact: frsd did not start:" >&2; cat "$work/frsd.log" >&2; exit 1; }

nodes() { "$frsctl" -c "$work/srv.xml" stat --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["nodes_used"])'; }
loadgen() {  # MODE DURATION KEYSPACE -> one JSON line
  $on_cli "$work/loadgen" -p "$PORT" -c "$CONNS" -t 1 -d "$2" -k "$3" -P k -s "$RANDOM" \
    -r "GET /$1?biz=bench&key=%KEY% HTTP/1.1\r\nHost: x\r\n\r\n"
}

# Fill: uniform keys over 2*KEYS names reach KEYS distinct ones in ~1.4*KEYS requests.
echo "filling the store with $KEYS keys through frsd ..."
start=$SECONDS
for _ in $(seq 60); do
  n=$(nodes)
  (( n >= KEYS )) && break
  loadgen acquire 5 $((KEYS * 2)) >/dev/null
done
n=$(nodes)
echo "store holds $n keys (filled in $((SECONDS - start)) s)"

t0=$(date +%s.%N)
"$frsctl" -c "$work/srv.xml" dump >/dev/null
t1=$(date +%s.%N)
dump_s=$(python3 -c "print(f'{$t1 - $t0:.2f}')")
echo "one frsctl dump of $n nodes takes ${dump_s} s (idle server)"

p99() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(d["p99_us"], d["rps"], d["p50_us"])'; }
measure() { loadgen query "$DUR" $((KEYS * 2)) | p99; }

read -r base_p99 base_rps base_p50 < <(measure)
( while :; do $on_cli nice -n 10 "$frsctl" -c "$work/srv.xml" dump >/dev/null; done ) &
dump_pid=$!
read -r dump_p99 dump_rps dump_p50 < <(measure)
kill "$dump_pid" 2>/dev/null || true
wait "$dump_pid" 2>/dev/null || true
dump_pid=""
read -r again_p99 again_rps again_p50 < <(measure)

printf '\n%-36s %10s %10s %10s\n' "run (c=$CONNS, ${DUR} s, pin=$PIN)" "p50 us" "p99 us" "rps"
printf '%-36s %10s %10s %10.0f\n' "without dump" "$base_p50" "$base_p99" "$base_rps"
printf '%-36s %10s %10s %10.0f\n' "with frsctl dump looping" "$dump_p50" "$dump_p99" "$dump_rps"
printf '%-36s %10s %10s %10.0f\n' "without dump (again)" "$again_p50" "$again_p99" "$again_rps"
