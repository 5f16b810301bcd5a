#!/usr/bin/env bash
# compare_peers.sh - frsd side by side with nginx limit_req and Redis+Lua: the same load generator,
# the same measurement protocol (tools/bench), the same machine, one run.
#
#   tools/compare_peers.sh                       # full comparison (~10 min with the defaults)
#   DUR=2 REPS=1 SKIP_PEERS=1 tools/compare_peers.sh   # a quick smoke test of frsd only
#
# What runs:
#   frsd  GET /acquire  and  POST /frs <request cmd="acquire"/>, KEYSPACE keys (default 1,000,000),
#         CONCS connections (default "16 64"), 1 worker pinned (server on CPU 0, loadgen on CPU 1)
#         and 2 workers unpinned, exactly as run_peers.sh runs nginx with 1 and 2 workers.
#         Biz "bench": fixed window, at most 5 per 60 s per key (the peers' logical job).
#   peers run_peers.sh with ONLY=$PEERS_ONLY (nginx limit_req w1/w2, Redis+Lua), same DUR/REPS/CONCS.
#   floor tools/bench/floor.sh (issue 14; SKIP_FLOOR=1 skips it, about 4 min): per server CPU-second, all
#         pinned (server on CPU 0, 1 worker; loadgen on CPU 1): nginx `return 200 "ok"` (the floor of HTTP),
#         frsd GET /acquire, and POST /frs batches of 64 and 256 `query` members, every member its own key
#         (loadgen -U), compact and full answers; srv.xml sets <limits batch="1024"/> (a frsd that refuses
#         more than 64 members shows n/a on the 256 rows). Columns: rps, p99, server CPU seconds
#         (utime+stime of master and workers from /proc/PID/stat, before/after each run), requests and
#         decisions (requests x members) per server CPU-second. Its own header documents the protocol.
# Then prints (and writes to $OUT/compare-<date>.md) one table: rps, p99, rps per server core, and
# frsd's ratio to each peer at the same pinning and connection count; then floor.sh's table (also in
# $OUT/floor/floor-<date>.md).
#
# Knobs (environment): DUR REPS CONCS KEYSPACE WARM (as in the bench scripts), FRSD (the binary,
# default build/src/server/frsd), OUT (default /tmp/frs-compare; results, loadgen and run state go
# there, never into the source tree), PORT (default 17090), SKIP_PEERS=1, SKIP_FRSD=1,
# PEERS_ONLY (default '^(nginx-limitreq-w[0-9]+|redis-lua)$'), SKIP_INSTALL (passed to run_peers.sh),
# SKIP_FLOOR=1, FLOOR_ROWS (floor.sh's ROWS, default all of them).
# Every process is started by the bench scripts, recorded and stopped by its PID.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH="${BENCH:-$ROOT/tools/bench}"
[ -x "$BENCH/run_target.sh" ] || { echo "compare_peers: $BENCH/run_target.sh not found (set BENCH=)" >&2; exit 1; }
# shellcheck source=tools/bench/frsd_conf.sh
. "$BENCH/frsd_conf.sh"
FRSD="${FRSD:-$ROOT/build/src/server/frsd}"
OUT="${OUT:-/tmp/frs-compare}"
PORT="${PORT:-17090}"
export DUR="${DUR:-4}" REPS="${REPS:-3}" CONCS="${CONCS:-16 64}" KEYSPACE="${KEYSPACE:-1000000}" WARM="${WARM:-1}"
export RESULTS="$OUT/results" LG="$OUT/loadgen"
PEERS_ONLY="${PEERS_ONLY:-^(nginx-limitreq-w[0-9]+|redis-lua)\$}"
SKIP_PEERS="${SKIP_PEERS:-0}" SKIP_FRSD="${SKIP_FRSD:-0}" SKIP_FLOOR="${SKIP_FLOOR:-0}"
DATE="$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$OUT" "$RESULTS"
log() { printf '[compare %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

if [ "$SKIP_FRSD" != 1 ]; then
  [ -x "$FRSD" ] || { echo "compare_peers: no frsd at $FRSD (build it, or set FRSD=)" >&2; exit 1; }
fi

# A fresh server directory per configuration: srv.xml, map.xml, an empty store sized for the keys
# (4 x 262144 x 8 = 8 M slots of 64 B: 1 M keys leave it mostly empty, so nothing live is evicted).
make_conf() { # name workers -> prints the srv.xml path
  local dir="$OUT/frsd-$1"
  rm -rf "$dir"; mkdir -p "$dir"
  write_frsd_conf "$dir" "$PORT" "$2" 4 262144
  echo "$dir/srv.xml"
}

GET_TMPL='GET /acquire?biz=bench&key=%KEY% HTTP/1.1\r\nHost: x\r\n\r\n'
POST_TMPL='POST /frs HTTP/1.1\r\nHost: x\r\nContent-Length: %LEN%\r\n\r\n<request cmd="acquire" biz="bench" key="%KEY%"/>'

run_frsd() { # name workers pin(1|0) mode template
  local name=$1 w=$2 pin=$3 mode=$4 tmpl=$5 conf pinarg=()
  conf=$(make_conf "$name" "$w")
  [ "$pin" = 1 ] && pinarg=(--pin)
  log "$name: $w worker(s), $([ "$pin" = 1 ] && echo pinned || echo unpinned), $mode"
  RUNDIR="$OUT/run-target" "$BENCH/run_target.sh" "$name" "$PORT" "${pinarg[@]}" \
      --cmd "$FRSD -c $conf --foreground" -- -m "$mode" -r "$tmpl" > /dev/null ||
    log "$name: run_target.sh failed (see above)"
}

if [ "$SKIP_FRSD" != 1 ]; then
  run_frsd frsd-get-w1  1 1 http-get      "$GET_TMPL"
  run_frsd frsd-post-w1 1 1 http-post-xml "$POST_TMPL"
  run_frsd frsd-get-w2  2 0 http-get      "$GET_TMPL"
  run_frsd frsd-post-w2 2 0 http-post-xml "$POST_TMPL"
fi
if [ "$SKIP_PEERS" != 1 ]; then
  log "peers: ONLY='$PEERS_ONLY'"
  RUNDIR="$OUT/run-peers" ONLY="$PEERS_ONLY" "$BENCH/run_peers.sh" > /dev/null || log "run_peers.sh failed (see above)"
fi
FLOOR_MD=""
if [ "$SKIP_FLOOR" != 1 ]; then
  log "floor: $BENCH/floor.sh"
  mkdir -p "$OUT/floor"
  FRSD="$FRSD" OUT="$OUT/floor" ROWS="${FLOOR_ROWS:-}" "$BENCH/floor.sh" > /dev/null || log "floor.sh failed (see above)"
  # shellcheck disable=SC2012 # the newest by time; the names are floor.sh's own (floor-DATE.md)
  FLOOR_MD=$(ls -t "$OUT"/floor/floor-2*.md 2>/dev/null | head -1)
  [[ -n "$FLOOR_MD" && "$(basename "$FLOOR_MD")" > "floor-$DATE" ]] || FLOOR_MD=""   # only this run's table
fi

# ------------------------------------------------------------------ the table
python3 - "$RESULTS" "$OUT/compare-$DATE.md" "$DATE" <<'PY'
import glob, json, os, sys
results, out_md, date = sys.argv[1], sys.argv[2], sys.argv[3]

def newest(pattern):
    files = sorted(glob.glob(os.path.join(results, pattern)), key=os.path.getmtime)
    return files[-1] if files else None

rows = {}      # (peer, pin, conns) -> result
meta = {}
for name in ("frsd-get-w1", "frsd-post-w1", "frsd-get-w2", "frsd-post-w2"):
    f = newest("target-%s-2*.json" % name)
    if f:
        d = json.load(open(f))
        meta = meta or d.get("meta", {})
        for r in d["results"]:
            rows[(r["peer"], r["pin"], r["conns"])] = r
f = newest("peers-2*.json")
if f:
    d = json.load(open(f))
    meta = meta or d.get("meta", {})
    for r in d["results"]:
        rows[(r["peer"], r["pin"], r["conns"])] = r

def peer_row(prefix, pin, conns):
    for (p, pi, c), r in rows.items():
        if pi == pin and c == conns and (p == prefix or (prefix == "nginx-limitreq" and p.startswith("nginx-limitreq-w"))):
            return r
    return None

def fmt(v, nd=0):
    return "-" if v is None else ("%.*f" % (nd, v))

lines = []
lines.append("# frsd vs peers (%s UTC)" % date)
lines.append("")
lines.append("Machine: %s x%s, kernel %s; DUR=%s s, REPS=%s, keyspace %s; loadgen.c %s. "
             "pinned = server on CPU 0 (1 worker), loadgen on CPU 1; unpinned = 2 workers, no affinity."
             % (meta.get("cpu", "?"), meta.get("ncpu", "?"), meta.get("kernel", "?"), meta.get("duration_s", "?"),
                meta.get("reps", "?"), meta.get("keyspace", "?"), meta.get("loadgen_c_sha256", "?")))
lines.append("")
lines.append("| server | pin | c | rps | p50 us | p99 us | srv CPU % | rps/srv core | lg CPU % | valid | x nginx limit_req | x redis+lua | p99 < both |")
lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|")
order = sorted(rows.keys(), key=lambda k: (k[1], k[0].startswith("frsd") is False, k[0], k[2]))
for k in order:
    r = rows[k]
    peer, pin, conns = k
    ng = peer_row("nginx-limitreq", pin, conns)
    rl = peer_row("redis-lua", pin, conns)
    xn = xr = p99 = "-"
    if peer.startswith("frsd"):
        if ng and ng["rps"]: xn = "%.2f" % (r["rps"] / ng["rps"])
        if rl and rl["rps"]: xr = "%.2f" % (r["rps"] / rl["rps"])
        if ng and rl: p99 = "yes" if r["p99_us"] < min(ng["p99_us"], rl["p99_us"]) else "no"
    lines.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        peer, pin, conns, fmt(r["rps"]), fmt(r["p50_us"]), fmt(r["p99_us"]), fmt(r.get("server_cpu_pct"), 1),
        fmt(r.get("rps_per_server_core")), fmt(r.get("loadgen_cpu_pct"), 1), "yes" if r.get("valid") else "NO", xn, xr, p99))
lines.append("")
lines.append("Targets (issue 4): GET /acquire >= 1.1x nginx limit_req and >= 1.2x Redis+Lua; POST /frs acquire >= 1.0x "
             "nginx limit_req; p99 at 64 connections below both peers'. Differences under ~15 % are within this VM's noise.")
text = "\n".join(lines) + "\n"
open(out_md, "w").write(text)
print(text)
PY
if [ -n "$FLOOR_MD" ]; then
  { echo; cat "$FLOOR_MD"; } | tee -a "$OUT/compare-$DATE.md"
fi
log "table: $OUT/compare-$DATE.md; raw results: $RESULTS"
