#!/usr/bin/env bash
# callgrind.sh - the instruction profile of one frsd worker per request (issue 14): GET /acquire, then a
# <batch answer="compact"> of 64 `query` members, each under callgrind, summarized by cg_groups.py.
#
#   tools/bench/callgrind.sh FRSD_BIN OUT_DIR [PORT]       # about 40 s; PORT defaults to 18611
#
# The store (2 x STORE_KEYNODES x 8, default 65536) is first filled by the plain binary (FILL_S, default 4,
# seconds of batches of 64 `update` members, then 2 s of GETs, over KEYS=200000 keys), so that the profiled
# requests find stored nodes; KEYS=1000000 STORE_KEYNODES=73530 FILL_S=8 profiles ab.sh's sized store. Then
# frsd runs under valgrind; after a 3-s warm-up the counters are zeroed, 8 s of GETs are dumped as part 1
# and 8 s of batch queries as part 2 (loadgen -T 20000 keeps the slowed server from timing out). Prints both
# cg_groups.py tables; the callgrind files stay in OUT_DIR for callgrind_annotate. Instructions, not time: a
# change that saves instructions may save no CPU (ab.sh says), and misses do not show.
set -euo pipefail
BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 2 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
BIN=$(readlink -f "$1") OUT=$2 PORT=${3:-18611} KEYS=${KEYS:-200000}
STORE_KEYNODES=${STORE_KEYNODES:-65536} FILL_S=${FILL_S:-4}
if ! command -v valgrind > /dev/null || ! command -v callgrind_control > /dev/null; then echo "callgrind.sh: needs valgrind" >&2; exit 1; fi
LG="${LG:-/tmp/frs-floor/loadgen}"
if ! { [ -x "$LG" ] && [ "$LG" -nt "$BENCH/loadgen.c" ]; }; then mkdir -p "$(dirname "$LG")"; cc -O2 -o "$LG" "$BENCH/loadgen.c"; fi
rm -rf "$OUT"; mkdir -p "$OUT"; cp "$BIN" "$OUT/frsd"; cd "$OUT"
cat > map.xml <<'MAP'
<map>
  <biz id="1" name="bench"><rule algo="fixed" interval="60" max="5"/></biz>
</map>
MAP
cat > srv.xml <<SRV
<frs>
  <listen host="127.0.0.1" port="$PORT"/>
  <workers>1</workers>
  <map>map.xml</map>
  <store dir="data" files="2" keynodes="$STORE_KEYNODES" chain="8"/>
  <pidfile>frsd.pid</pidfile>
  <admin token=""/>
  <limits connections="4096" batch="1024"/>
</frs>
SRV
batch() {  # batch N CMD: a loadgen -f template of N members
  { printf 'POST /frs HTTP/1.1\r\nHost: x\r\nContent-Type: application/xml\r\nContent-Length: %%LEN%%\r\n\r\n'
    printf '<batch answer="compact">'
    for ((i = 0; i < $1; i++)); do printf '<request cmd="%s" biz="bench" key="%%KEY%%"/>' "$2"; done
    printf '</batch>'; } > "batch-$1-compact-$2.txt"
}
batch 64 query; batch 64 update
GET='GET /acquire?biz=bench&key=%KEY% HTTP/1.1\r\nHost: x\r\n\r\n'
waitport() { for _ in $(seq 1 300); do (echo > "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
./frsd -c srv.xml --foreground > fill.log 2>&1 & M=$!
trap 'kill $M 2>/dev/null || true' EXIT
waitport || { echo "callgrind.sh: frsd does not listen" >&2; cat fill.log >&2; exit 1; }
"$LG" -p "$PORT" -c 16 -d "$FILL_S" -k "$KEYS" -s 7 -U -m http-post-xml -f batch-64-compact-update.txt > fill1.json
"$LG" -p "$PORT" -c 16 -d 2 -k "$KEYS" -s 8 -r "$GET" > fill2.json
kill $M; wait $M || true
valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$OUT/cg.%p.out" ./frsd -c srv.xml --foreground \
  > vg.log 2>&1 & M=$!
waitport || { echo "callgrind.sh: frsd under valgrind does not listen" >&2; tail vg.log >&2; exit 1; }
sleep 1
W=$(pgrep -P $M | head -1)
"$LG" -p "$PORT" -c 16 -d 3 -k "$KEYS" -s 9 -r "$GET" > warm.json
callgrind_control -z "$W" > /dev/null
"$LG" -p "$PORT" -c 16 -d 8 -T 20000 -k "$KEYS" -s 10 -r "$GET" > get.json
callgrind_control -d get "$W" > /dev/null
callgrind_control -z "$W" > /dev/null
"$LG" -p "$PORT" -c 16 -d 8 -T 20000 -k "$KEYS" -s 11 -U -m http-post-xml -f batch-64-compact-query.txt > b64c.json
callgrind_control -d b64c "$W" > /dev/null
kill $M; wait $M || true
trap - EXIT
python3 "$BENCH/cg_groups.py" "cg.$W.out.1" --members 1 > get.md
python3 "$BENCH/cg_groups.py" "cg.$W.out.2" --members 64 > b64c.md
head -30 get.md; head -30 b64c.md
