#!/usr/bin/env bash
# lease_ab.sh - an in-flight limit's two requests (acquire, then release with the lease it got) against one
# plain acquire of a fixed rule, paired in one run on one frsd whose one worker is pinned to CPU 0 (loadgen
# on CPU 1): uses per server CPU-second (user+system of the master and its worker, from /proc, as
# cpu_probe.sh counts) and p99 per request, on 64 connections over 100,000 keys. The lease side asks GET
# /auth of biz "inflight" (concurrency, max 8; a 204 carrying FRS-Lease) and then, on the same connection,
# GET /release?...&lease=ID (a 200 with the XML answer; loadgen -R). Two plain sides of biz "plain" (fixed,
# never reached): GET /auth (a 204, no body, as the lease's acquire) and GET /acquire (a 200 with the XML
# answer, as the release). A use is one plain acquire, or one acquire and its release.
# MODE settle: the paired side is a reservation's two requests instead: GET /acquire of biz "tokens"
# (fixed, never reached, 8 reservations a key) with n=EST (100) and reserve=S (60), a 200 whose XML answer
# carries reservation="ID", then on the same connection GET /settle?...&reservation=ID&n=REAL (70: 30
# given back; loadgen -R -I reservation), a 200 with the XML answer.
#
#   tools/bench/lease_ab.sh [ROUNDS (3)] [SECONDS (5)] [MODE: release (default) | settle]
#
# Prints one line per side and round, then per round the ratios (paired uses / plain uses per server
# CPU-second, against each plain side). After each paired run frsd's own frs_leases_released_total (settle:
# frs_reservations_settled_total) must have grown by the releases (settles) loadgen counted (1 % slack for
# the last requests of a run), or no ratio is printed (exit 1). Ends with the medians of each column.
# Run under the build lock on a quiet machine: flock /tmp/frs-build.lock tools/bench/lease_ab.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH="$ROOT/tools/bench"
FRSD="${FRSD:-$ROOT/build/src/server/frsd}"
ROUNDS=${1:-3} SECS=${2:-5} MODE=${3:-release}
case "$MODE" in
release | settle) ;;
*) echo "lease_ab: MODE is release or settle, not '$MODE'" >&2; exit 2 ;;
esac
for t in curl jq taskset; do
  command -v "$t" >/dev/null || { echo "lease_ab: $t is missing" >&2; exit 2; }
done
W=$(mktemp -d /tmp/frs-lease-ab-XXXXXX)
trap '[ -n "${PID:-}" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
LG="$W/loadgen"
cc -O2 -o "$LG" "$BENCH/loadgen.c" -lpthread
cp "$BENCH/lease_map.xml" "$W/map.xml"
# The store: 65,536 x 8 slots for leases (400,000 of 524,288 slots in use: a plain key takes one, a key
# of the concurrency rule three); 262,144 x 8 for reservations (a key whose node holds a table of 8 takes
# six: 28 bytes of header, 16 of the rule, 144 of the table; 700,000 of 2,097,152), so that no live node
# is evicted and made again. STORE_KEYNODES overrides it. The store's counters are printed at the end.
KEYNODES=${STORE_KEYNODES:-$([ "$MODE" = settle ] && echo 262144 || echo 65536)}
cat >"$W/srv.xml" <<X
<frs><listen host="127.0.0.1" port="0"/><workers>1</workers><map>map.xml</map>
<store dir="data" files="1" keynodes="$KEYNODES" chain="8"/><admin token=""/><limits connections="4096"/></frs>
X
taskset -c 0 "$FRSD" -c "$W/srv.xml" --foreground 2>"$W/frsd.log" &
PID=$!
for _ in $(seq 200); do [ -s "$W/data/frsd.listen" ] && break; sleep 0.05; done
PORT=$(sed 's/.*://' "$W/data/frsd.listen")
if [ "$MODE" = settle ]; then
  METRIC='frs_reservations_settled_total{biz="tokens"' WHAT=settles
  ACQ='GET /acquire?biz=tokens&key=%KEY%&n=100&reserve=60 HTTP/1.1\r\nHost: x\r\n\r\n'
  END_ARGS=(-I reservation -R 'GET /settle?biz=tokens&key=%KEY%&reservation=%LEASE%&n=70 HTTP/1.1\r\nHost: x\r\n\r\n')
  SIDE="acquire n=100 reserve=60 + settle n=70 (fixed)"
else
  METRIC='frs_leases_released_total{biz="inflight"' WHAT=releases
  ACQ='GET /auth?biz=inflight&key=%KEY% HTTP/1.1\r\nHost: x\r\n\r\n'
  END_ARGS=(-R 'GET /release?biz=inflight&key=%KEY%&lease=%LEASE% HTTP/1.1\r\nHost: x\r\n\r\n')
  SIDE="acquire + release (concurrency)"
fi
released() { curl -fsS "http://127.0.0.1:$PORT/metrics" |
  awk -v m="$METRIC" 'index($0, m) == 1 {n += $NF} END {printf "%d\n", n}'; }
cpu() { local t=0 p; for p in $PID $(ps -o pid= --ppid "$PID"); do
  t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}'))); done; echo "$t"; }
HZ=$(getconf CLK_TCK)
run() { # label, side (plain|paired), loadgen args...
  local label=$1 side=$2; shift 2
  local c0 c1 out uses r0 r1 p99
  r0=$(released)
  c0=$(cpu)
  out=$(taskset -c 1 "$LG" -p "$PORT" -c 64 -k 100000 -d "$SECS" -l "$label" "$@")
  c1=$(cpu)
  r1=$(released)
  if [ "$side" = paired ]; then
    uses=$(jq -r .releases <<<"$out")
    if ! awk -v a="$uses" -v b="$((r1 - r0))" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= b / 100)}'; then
      echo "lease_ab: $label: loadgen counted $uses $WHAT, frsd $((r1 - r0)): no ratio" >&2
      exit 1
    fi
  else
    uses=$(jq -r '(.status["204"] // 0) + (.status["200"] // 0)' <<<"$out")
  fi
  p99=$(jq -r .p99_us <<<"$out")
  echo "$label: $((uses / SECS)) uses/s ($(jq -c .status <<<"$out")), p99 ${p99} us per request, server CPU \
$(((c1 - c0) * 1000 / HZ)) ms = $((uses * HZ / (c1 - c0 > 0 ? c1 - c0 : 1))) uses/server-CPU-s" >&2
  echo "$((uses * HZ / (c1 - c0 > 0 ? c1 - c0 : 1)))"
}
# A warm-up of each side (discarded): the store's pages and the bizzes' nodes.
run warmup-plain plain -r 'GET /auth?biz=plain&key=%KEY% HTTP/1.1\r\nHost: x\r\n\r\n' >/dev/null
run warmup-paired paired -r "$ACQ" "${END_ARGS[@]}" >/dev/null
ratios=()
for r in $(seq "$ROUNDS"); do
  plain=$(run "round $r plain GET /auth (fixed)" plain -r 'GET /auth?biz=plain&key=%KEY% HTTP/1.1\r\nHost: x\r\n\r\n')
  xml=$(run "round $r plain GET /acquire (fixed)" plain -r 'GET /acquire?biz=plain&key=%KEY% HTTP/1.1\r\nHost: x\r\n\r\n')
  paired=$(run "round $r $SIDE" paired -r "$ACQ" "${END_ARGS[@]}")
  echo "round $r: $MODE uses per server CPU-second / plain /auth = \
$(awk -v a="$paired" -v b="$plain" 'BEGIN {printf "%.2f", a / b}'), / plain /acquire = \
$(awk -v a="$paired" -v b="$xml" 'BEGIN {printf "%.2f", a / b}')"
  ratios+=("$plain $xml $paired")
done
printf '%s\n' "${ratios[@]}" | awk -v mode="$MODE" '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { n++; p[n] = $1; x[n] = $2; u[n] = $3; ra[n] = $3 / $1; rx[n] = $3 / $2 }
  END {
    printf "medians of %d rounds: plain /auth %d, plain /acquire %d, %s %d uses per server CPU-second; ", n,
      median(p, n), median(x, n), mode, median(u, n)
    printf "ratio / plain /auth %.2f, / plain /acquire %.2f\n", median(ra, n), median(rx, n)
  }'
curl -fsS -X POST --data '<request cmd="stats"/>' "http://127.0.0.1:$PORT/frs" | grep -o '<store [^>]*>' | head -1
