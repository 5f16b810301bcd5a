#!/usr/bin/env bash
# park_take.sh - what a take of a full replica-parked file costs (docs/store.md): a worker that applies the
# changes other shards sent of a biz its map lacked holds the file's lock and serves nothing meanwhile, and
# a batch to keep aside waits for it; <limits worker_stall_ms> (3000 at least) must stay well above it.
#
#   tools/bench/park_take.sh [FRSD_BIN] [KEYS]     # default build/src/server/frsd 100000
#
# A store directory whose replica-parked is filled to its 16 MiB bound with one-use records of biz 3 (a
# sync link's shape: one use a batch), over KEYS keys; frsd (1 worker, port 0, a <cluster> of itself and a
# shard that never answers) starts on a map without biz 3, which leaves the file alone, and is sent SIGHUP
# with a map that has it. Prints the records, the seconds from SIGHUP until the worker's log line saying
# they are applied, and that line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN=$(readlink -f "${1:-$ROOT/build/src/server/frsd}")
KEYS=${2:-100000}
W=$(mktemp -d /tmp/frs-park-take-XXXXXX)
M=
trap '[ -n "$M" ] && kill $M 2> /dev/null; wait 2> /dev/null || true; rm -rf "$W"' EXIT
cd "$W"
mkdir data
biz_b='<biz id="1" name="b"><rule algo="fixed" interval="3600" max="5"/></biz>'
biz_added='<biz id="3" name="added"><rule algo="fixed" interval="3600" max="1000000"/></biz>'
echo "<map>$biz_b</map>" > map.xml
cat > srv.xml << X
<frs><listen host="127.0.0.1" port="0"/><workers>1</workers><map>map.xml</map>
<store dir="data" files="1" keynodes="262144" chain="8"/><admin token="t"/>
<cluster self="127.0.0.1:1" replicas="1"><shard>127.0.0.1:1</shard><shard>127.0.0.1:2</shard></cluster></frs>
X
python3 - "$KEYS" << 'P'
import sys, time
keys, now = int(sys.argv[1]), int(time.time())
out, size, seq = ["frs-replica-parked 1\n"], 21, 0
while True:
    r = "batch 3 %d %d 1 127.0.0.1:2/77.1\nA 3 - 1 %d user:%d\nend\n" % (seq + 1, now, now * 1000, seq % keys)
    if size + len(r) >= 16 << 20:
        break
    out.append(r)
    size, seq = size + len(r), seq + 1
open("data/replica-parked", "w").write("".join(out))
print("records %d, %d bytes, %d keys" % (seq, size, min(seq, keys)))
P
"$BIN" -c srv.xml --foreground > log 2>&1 &
M=$!
for _ in $(seq 200); do [ -s data/frsd.listen ] && break; sleep 0.05; done
[ -s data/frsd.listen ] || { echo "park_take: frsd does not listen" >&2; cat log >&2; exit 1; }
[ -e data/replica-parked ] || { echo "park_take: the start took the file: its map has biz 3?" >&2; exit 1; }
echo "<map>$biz_b$biz_added</map>" > map.xml
t0=$(date +%s%N)
kill -HUP $M
for _ in $(seq 3000); do grep -q "applied now" log && break; sleep 0.01; done
t1=$(date +%s%N)
grep -q "applied now" log || { echo "park_take: no take in 30 s" >&2; cat log >&2; exit 1; }
echo "take: $(((t1 - t0) / 1000000)) ms from SIGHUP"
grep "applied now" log | sed 's/^[^ ]* [^ ]* //'
