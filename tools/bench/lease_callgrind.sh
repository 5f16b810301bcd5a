#!/usr/bin/env bash
# lease_callgrind.sh - a lease's and a reservation's two requests against one plain acquire, in instructions of
# the frsd worker (callgrind), the sides of lease_ab.sh: where a use's cost beyond two plain requests goes.
#
#   tools/bench/lease_callgrind.sh FRSD_BIN OUT_DIR     # about a minute
#
# The sides, 16 connections over 100,000 keys: plain GET /auth (fixed), plain GET /acquire (fixed), GET /auth
# of a concurrency rule + GET /release (loadgen -R), GET /acquire n=100 reserve=60 + GET /settle n=70 (loadgen
# -R -I reservation), lease_ab.sh's map (store: STORE_KEYNODES, default 262144, x 8 slots). The steady state
# is measured, not the making of nodes: the plain binary first runs each side FILL_S (3) seconds with the
# seed its measured run has (the same seed draws the same keys), so that every key those runs ask for has
# its node. Then frsd runs under valgrind (callgrind, --cache-sim=yes); per side WARM_S (2) seconds
# unmeasured, the worker's counters zeroed, RUN_S (4) seconds dumped. Prints per side the requests (calls of
# Handler::Handle), instructions, D1 and LL misses per request and per use (a use: one plain request, or the
# two of a lease or reservation), and a use's instructions over a plain /auth's. The dumps stay in OUT_DIR
# (cg.PID.out.N, N in the order above) for cg_groups.py or callgrind_annotate. Then, per use, where the
# instructions go by part (the id, the rule, the store, the request, the answer: self cost grouped by
# function name): the lease's against two plain /auth, the reservation's against two plain /acquire.
# Instructions and simulated misses, not time: the kernel's part of each request is not in them.
set -euo pipefail
BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -eq 2 ] || { sed -n '2,15p' "$0" >&2; exit 2; }
BIN=$(readlink -f "$1") OUT=$2 WARM_S=${WARM_S:-2} RUN_S=${RUN_S:-4} FILL_S=${FILL_S:-3}
for t in valgrind callgrind_control; do
  command -v "$t" > /dev/null || { echo "lease_callgrind: needs valgrind ($t)" >&2; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")
cc -O2 -o "$OUT/loadgen" "$BENCH/loadgen.c" -lpthread
cp "$BENCH/lease_map.xml" "$OUT/map.xml"
cat > "$OUT/srv.xml" << X
<frs><listen host="127.0.0.1" port="0"/><workers>1</workers><map>map.xml</map>
<store dir="data" files="1" keynodes="${STORE_KEYNODES:-262144}" chain="8"/><admin token=""/>
<limits connections="4096"/></frs>
X
cd "$OUT"
M=
trap '[ -n "$M" ] && kill $M 2> /dev/null; wait 2> /dev/null || true' EXIT
start() { # [valgrind args...]: frsd (under them), $PORT, $W its worker
  rm -f data/frsd.listen
  "$@" "$BIN" -c srv.xml --foreground > "frsd$#.log" 2>&1 &
  M=$!
  for _ in $(seq 600); do [ -s data/frsd.listen ] && break; sleep 0.1; done
  [ -s data/frsd.listen ] || { echo "lease_callgrind: frsd does not listen" >&2; tail "frsd$#.log" >&2; exit 1; }
  PORT=$(sed 's/.*://' data/frsd.listen)
  for _ in $(seq 100); do W=$(pgrep -P $M | head -1) && break; sleep 0.1; done
}
stop() { kill $M; wait $M || true; M=; }
H=' HTTP/1.1\r\nHost: x\r\n\r\n'
SIDES=("plain GET /auth" "plain GET /acquire" "acquire + release" "acquire reserve + settle")
ARGS=(
  "-r|GET /auth?biz=plain&key=%KEY%$H"
  "-r|GET /acquire?biz=plain&key=%KEY%$H"
  "-r|GET /auth?biz=inflight&key=%KEY%$H|-R|GET /release?biz=inflight&key=%KEY%&lease=%LEASE%$H"
  "-r|GET /acquire?biz=tokens&key=%KEY%&n=100&reserve=60$H|-I|reservation|-R|GET /settle?biz=tokens&key=%KEY%&reservation=%LEASE%&n=70$H"
)
start
for i in "${!SIDES[@]}"; do
  IFS='|' read -r -a a <<< "${ARGS[i]}"
  ./loadgen -p "$PORT" -c 16 -d "$FILL_S" -k 100000 -s $((i + 11)) "${a[@]}" > "fill$i.json"
done
stop
start valgrind --tool=callgrind --cache-sim=yes --trace-children=yes --callgrind-out-file="$OUT/cg.%p.out"
for i in "${!SIDES[@]}"; do
  IFS='|' read -r -a a <<< "${ARGS[i]}"
  ./loadgen -p "$PORT" -c 16 -d "$WARM_S" -T 20000 -k 100000 -s $((i + 11)) "${a[@]}" > "warm$i.json"
  callgrind_control -z "$W" > /dev/null 2>&1
  ./loadgen -p "$PORT" -c 16 -d "$RUN_S" -T 20000 -k 100000 -s $((i + 11)) "${a[@]}" > "run$i.json"
  callgrind_control -d "side$i" "$W" > /dev/null 2>&1
done
curl -s -X POST --data '<request cmd="stats"/>' "http://127.0.0.1:$PORT/frs" | grep -o '<store [^>]*>' | head -1
stop
python3 - "$BENCH" "$OUT" "$W" "${SIDES[@]}" << 'PY'
import json, sys
bench, out, w, sides = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
sys.path.insert(0, bench)
import re  # noqa: E402
from collections import defaultdict  # noqa: E402

from cg_groups import annotate, count_calls, fname  # noqa: E402

base = None
print("| side | requests | Ir per request | D1 misses | LL misses | Ir per use | use / plain /auth |")
print("|---|---:|---:|---:|---:|---:|---:|")
for i, side in enumerate(sides):
    path = "%s/cg.%s.out.%d" % (out, w, i + 1)
    lines = open(path, errors="replace").read().splitlines()
    events = next(line.split()[1:] for line in lines if line.startswith("events:"))
    summary = dict(zip(events, map(int, next(line.split()[1:] for line in lines if line.startswith("summary:")))))
    calls = max(count_calls(path, r"Handler::Handle\("), 1)
    d1 = summary.get("D1mr", 0) + summary.get("D1mw", 0)
    ll = summary.get("DLmr", 0) + summary.get("DLmw", 0)
    per_use = summary["Ir"] / calls * (2 if i >= 2 else 1)
    base = base or per_use
    run = json.load(open("%s/run%d.json" % (out, i)))
    extra = " (%d pairs, status %s)" % (run.get("releases", 0), json.dumps(run.get("status", {}))) if i >= 2 else ""
    print(
        "| %s%s | %d | %.0f | %.1f | %.2f | %.0f | %.3f |"
        % (side, extra, calls, summary["Ir"] / calls, d1 / calls, ll / calls, per_use, per_use / base)
    )

# Per use, by part (self cost grouped by function name): a lease's use against two plain /auth, a
# reservation's against two plain /acquire.
PARTS = [
    ("the id: parse and hash", r"ParseLeaseId|SipHash24|LeaseMac|Reservations::Mac|HexWord"),
    (
        "the rule and the table",
        r"frs::limit::(Concurrency|FixedWindow|Reservations|NodeOp|\{anon\}::(Rebase|Grant|CountHeld|KeepLatest|"
        r"TableOf|DropTail)|Evaluate|Record|ExpireS|NodeExpireS|Summarize|RecordRules|EvaluateRules|SweepLeases|"
        r"SweepReservations|LeaseGranted|GrantReservation|HasReservationRoom|ReservationsInPlace|AdoptLayout|"
        r"NextLeaseSerial|ReadRules|NameRule|SettleReservation)",
    ),
    ("the store: find, journal, write", r"frs::store::"),
    ("the request: HTTP and query string", r"beast|NextParam|DecodeQuery|PercentDecode|ParseCount|HttpRequestParser|CheckKey"),
    ("the answer", r"Respond|WriteDecision|BufWriter|to_chars|AppendDecision|ServerAndDate|RateLimit"),
]


def parts(i, per):
    path = "%s/cg.%s.out.%d" % (out, w, i + 1)
    calls = max(count_calls(path, r"Handler::Handle\("), 1)
    d = defaultdict(float)
    for ir, _, fn, _ in annotate(path, False):
        name = next((p for p, rx in PARTS if re.search(rx, fname(fn))), None)
        if name:
            d[name] += ir / calls * per
    lines = open(path, errors="replace").read().splitlines()
    total = int(next(line.split()[1] for line in lines if line.startswith("summary:")))
    d["the rest"] = total / calls * per - sum(d.values())
    d["all"] = total / calls * per
    return d


for plain, paired in ((0, 2), (1, 3)):
    a, b = parts(plain, 2), parts(paired, 2)
    print("\n| part | two of %s | %s |\n|---|---:|---:|" % (sides[plain], sides[paired]))
    for name in [p for p, _ in PARTS] + ["the rest", "all"]:
        print("| %s | %.0f | %.0f (%+.0f) |" % (name, a[name], b[name], b[name] - a[name]))
PY
