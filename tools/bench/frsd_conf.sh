# shellcheck shell=bash
# frsd_conf.sh - the frsd configuration the benchmarks share (source it; bash only): biz "bench", a fixed
# window of at most 5 per 60 s per key, served on loopback with an empty admin token.
#
#   write_frsd_conf DIR PORT WORKERS FILES KEYNODES [STORE_DIR] [LIMITS] [RULE] [EXTRA]
#
# writes DIR/map.xml and DIR/srv.xml: PORT on 127.0.0.1, WORKERS workers, a store of FILES x KEYNODES x 8
# slots under STORE_DIR (default data, relative to DIR), LIMITS as the <limits> attributes (default
# connections="4096"), RULE as bench's <rule> attributes (default the one above) and EXTRA (elements)
# at the end of <frs>.
write_frsd_conf() {
  local dir=$1 port=$2 workers=$3 files=$4 keynodes=$5 store=${6:-data} limits=${7:-connections=\"4096\"}
  local rule=${8:-algo=\"fixed\" interval=\"60\" max=\"5\"} extra=${9:-}
  cat > "$dir/map.xml" <<MAP
<map>
  <biz id="1" name="bench"><rule $rule/></biz>
</map>
MAP
  cat > "$dir/srv.xml" <<SRV
<frs>
  <listen host="127.0.0.1" port="$port"/>
  <workers>$workers</workers>
  <map>map.xml</map>
  <store dir="$store" files="$files" keynodes="$keynodes" chain="8"/>
  <pidfile>frsd.pid</pidfile>
  <admin token=""/>
  <limits $limits/>
$extra</frs>
SRV
}
