#!/usr/bin/env bash
# `cmake --install` into a scratch root: every file an operator and a
# programmer expect is there, no internal header is, and two programs built
# against the installed tree (find_package(frs) and pkg-config) open one
# store from a srv.xml and share its counts.
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

DESTDIR=$tmp/root cmake --install "$build" --prefix /usr >/dev/null
r=$tmp/root
libdir=$(cd "$r/usr" && dirname "$(find . -name libfrs.a | head -1)")
[ -n "$libdir" ] || fail "libfrs.a not installed"
for f in usr/sbin/frsd usr/sbin/frsctl usr/bin/frsbench "usr/$libdir/libfrs.a" \
         usr/include/frs/store.h usr/include/frs/engine.h usr/include/frs/service.h usr/include/frs/ring.h \
         "usr/$libdir/cmake/frs/frsConfig.cmake" "usr/$libdir/cmake/frs/frsConfigVersion.cmake" \
         "usr/$libdir/pkgconfig/frs.pc" etc/frs/srv.xml etc/frs/map.xml etc/logrotate.d/frsd \
         usr/lib/systemd/system/frsd.service usr/share/man/man8/frsd.8.gz usr/share/man/man8/frsctl.8.gz \
         usr/share/frs/frs-alerts.yml usr/share/frs/frs-dashboard.json \
         usr/share/frs/proto/envoy/service/ratelimit/v3/rls.proto usr/share/frs/proto/grpc/health/v1/health.proto; do
  [ -e "$r/$f" ] || fail "cmake --install did not install /$f"
done
# The CGI pages run as installed (fcgiwrap refuses a script that is not executable).
for f in limit.py limit.sh; do
  [ -x "$r/usr/share/doc/frsd/examples/cgi/$f" ] || fail "/usr/share/doc/frsd/examples/cgi/$f is not executable"
done
# Only the public API: nothing of src/ under include/.
extra=$(find "$r/usr/include" -type f ! -path "*/include/frs/*.h")
[ -z "$extra" ] || fail "internal files installed: $extra"
# frs/envoy_map.h is tools' face of the Envoy modules, which libfrs.a leaves out.
[ ! -e "$r/usr/include/frs/envoy_map.h" ] || fail "frs/envoy_map.h installed: libfrs.a has none of its functions"
grep -q '/var/lib/frs' "$r/etc/frs/srv.xml" || fail "/etc/frs/srv.xml does not keep the store under /var/lib/frs"
grep -q '/run/frs/frsd.pid' "$r/etc/frs/srv.xml" || fail "/etc/frs/srv.xml does not put the pid file under /run/frs"

# A srv.xml for the consumers, in the scratch dir.
cat >"$tmp/srv.xml" <<XML
<frs><map>map.xml</map><store dir="data" files="1" keynodes="64" chain="8"/></frs>
XML
cat >"$tmp/map.xml" <<XML
<map><biz id="1" name="login"><rule interval="3600" max="5"/></biz></map>
XML

# find_package(frs): the shipped example, built against the installed tree only.
cmake -S "$src/examples/inprocess" -B "$tmp/ex" -DCMAKE_PREFIX_PATH="$r/usr" >"$tmp/ex.log" 2>&1 ||
  { cat "$tmp/ex.log"; fail "the example does not configure against the installed package"; }
cmake --build "$tmp/ex" >"$tmp/ex.log" 2>&1 || { cat "$tmp/ex.log"; fail "the example does not build"; }
set +e
FRS_CREATE=1 "$tmp/ex/inprocess" "$tmp/srv.xml" login user:42 6 >"$tmp/out" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || { cat "$tmp/out"; fail "the 6th acquire of a 5-per-hour rule should be denied (exit 1), got $rc"; }
[ "$(grep -c '^allowed' "$tmp/out")" = 5 ] || { cat "$tmp/out"; fail "expected 5 allowed"; }

# pkg-config: the same program, built by hand; it sees the counts above.
flags=$(PKG_CONFIG_PATH="$r/usr/$libdir/pkgconfig" pkg-config --cflags --libs frs)
read -ra flag_words <<<"$flags"  # pkg-config's words, each an argument
g++ -o "$tmp/pc" "$src/examples/inprocess/main.cc" "${flag_words[@]}" 2>"$tmp/pc.log" || { cat "$tmp/pc.log"; fail "pkg-config flags do not build"; }
set +e
"$tmp/pc" "$tmp/srv.xml" login user:42 >"$tmp/out" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || { cat "$tmp/out"; fail "the pkg-config build should see the 6 uses already counted (exit 1), got $rc"; }
grep -q 'denied count=5 limit=5' "$tmp/out" || { cat "$tmp/out"; fail "unexpected answer"; }
# Another prefix, installed where it says (no DESTDIR): the unit starts the
# frsd and reads the srv.xml of that prefix, and systemd accepts it; frsd and
# frsctl without -c read that srv.xml too.
p=$tmp/opt/frs
cmake --install "$build" --prefix "$p" >/dev/null
unit=$p/lib/systemd/system/frsd.service
grep -q "^ExecStart=$p/sbin/frsd -c $p/etc/frs/srv.xml --foreground\$" "$unit" ||
  { grep -n "Exec" "$unit"; fail "the unit of prefix $p does not start $p/sbin/frsd on $p/etc/frs/srv.xml"; }
grep -q '=/usr/sbin/frsd\|-c /etc/frs/srv.xml' "$unit" && { grep -n "Exec" "$unit"; fail "the unit of prefix $p names /usr/sbin or /etc"; }
[ -f "$p/etc/frs/srv.xml" ] || fail "no $p/etc/frs/srv.xml"
if command -v systemd-analyze >/dev/null; then
  # (Its Documentation= man pages are the prefix's: man finds them there.)
  MANPATH="$p/share/man:" systemd-analyze verify "$unit" >"$tmp/verify.log" 2>&1 ||
    { cat "$tmp/verify.log"; fail "systemd-analyze verify $unit"; }
fi
set +e
out=$(env -u FRS_CONF "$p/sbin/frsd" -t 2>&1)
set -e
grep -q "$p/etc/frs/srv.xml" <<<"$out" || fail "frsd -t without -c did not read $p/etc/frs/srv.xml: $out"
set +e
out=$(env -u FRS_CONF "$p/sbin/frsctl" stat 2>&1)
set -e
grep -q "$p/etc/frs/srv.xml\|/var/lib/frs" <<<"$out" || fail "frsctl without -c did not read $p/etc/frs/srv.xml: $out"
echo "install: ok"
