#!/usr/bin/env bash
# `cpack -G DEB`: the packages' metadata, contents and maintainer scripts
# (frsd, libfrs-dev and python3-frs-client, as Debian splits a daemon),
# exercised by dpkg in a copy-on-write view of this system (an overlay
# mount in a private mount namespace, entered with chroot), so that
# installing, upgrading, removing and purging change nothing outside it.
# usage: deb_test.sh BUILD_DIR
set -euo pipefail
build=$1
# Skips (77) only for what the machine allows (root, an overlay mount), as
# tests/skips.txt says; a missing program tools/setup.sh --test installs fails.
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root for the overlay chroot (CI runs as root)"
command -v dpkg-deb >/dev/null || fail "dpkg-deb is missing (tools/setup.sh --test installs dpkg-dev)"
command -v lintian >/dev/null || fail "lintian is missing (tools/setup.sh --test installs it)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$build" && cpack -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; fail "cpack -G DEB failed"; }
deb=$(ls "$tmp"/pkg/frsd_*.deb) || fail "no frsd package"
dev=$(ls "$tmp"/pkg/libfrs-dev_*.deb) || fail "no libfrs-dev package"
py=$(ls "$tmp"/pkg/python3-frs-client_*_all.deb) || fail "no python3-frs-client package (Architecture: all)"
debs=("$tmp"/pkg/*.deb)
[ "${#debs[@]}" = 3 ] || fail "expected 3 packages: $(ls "$tmp"/pkg)"
[ "$(dpkg-deb -f "$deb" Package)" = frsd ] || fail "Package is not frsd"
depends=$(dpkg-deb -f "$deb" Depends)
for d in libc6 libstdc++6 libpugixml1v5 libcctz2 adduser init-system-helpers; do
  echo "$depends" | grep -q "$d" || fail "Depends lacks $d: $depends"
done
dpkg-deb -f "$dev" Depends | grep -q libcctz-dev || fail "libfrs-dev does not depend on libcctz-dev (libfrs.a needs -lcctz)"
dpkg-deb -f "$py" Depends | grep -q python3 || fail "python3-frs-client does not depend on python3"
# As Debian checks a package: no error; the warnings left are listed, with
# their reasons, in docs/install.md (and only those may appear).
lintian --allow-root "$deb" "$dev" "$py" >"$tmp/lintian" 2>&1 || true
grep -q '^E: ' "$tmp/lintian" && { cat "$tmp/lintian"; fail "lintian finds errors in the packages"; }
while read -r tag; do
  grep -q "\`$tag\`" "$(dirname "$0")/../../docs/install.md" ||
    { cat "$tmp/lintian"; fail "lintian warns $tag, which docs/install.md does not list"; }
done < <(sed -n 's/^W: [^ ]* \([a-z0-9-]*\).*/\1/p' "$tmp/lintian" | sort -u)
echo "lintian: no errors, $(grep -c '^W: ' "$tmp/lintian" || true) listed warning(s)"
contents() { dpkg-deb -c "$1" | awk '{print $6}'; }
for f in ./usr/sbin/frsd ./usr/sbin/frsctl ./etc/frs/srv.xml ./etc/frs/map.xml ./etc/logrotate.d/frsd \
         ./usr/lib/systemd/system/frsd.service ./usr/share/man/man8/frsd.8.gz ./usr/share/doc/frsd/copyright \
         ./usr/share/doc/frsd/changelog.gz ./usr/share/doc/frsd/examples/frontdoor/nginx-auth-request.conf \
         ./usr/share/doc/frsd/examples/cluster/nginx-frs.conf ./usr/share/doc/frsd/examples/inprocess/main.cc \
         ./usr/share/doc/frsd/examples/envoy/srv.xml ./usr/share/doc/frsd/examples/envoy/ratelimit/config.yaml \
         ./usr/share/frs/proto/envoy/service/ratelimit/v3/rls.proto ./usr/share/frs/proto/grpc/health/v1/health.proto; do
  contents "$deb" | grep -qx "$f" || fail "frsd lacks $f"
done
for f in ./usr/include/frs/service.h ./usr/lib/libfrs.a ./usr/lib/pkgconfig/frs.pc ./usr/share/doc/libfrs-dev/copyright; do
  contents "$dev" | grep -qx "$f" || fail "libfrs-dev lacks $f"
done
for f in ./usr/lib/python3/dist-packages/frs_client.py ./usr/share/doc/python3-frs-client/copyright; do
  contents "$py" | grep -qx "$f" || fail "python3-frs-client lacks $f"
done
contents "$deb" | grep -q "/include/\|libfrs.a\|frs_client.py" && fail "frsd carries what libfrs-dev or python3-frs-client do"
# The documents the man pages cite are in the package, and docs/install.md
# names every package frsd depends on.
src=$(dirname "$0")/../..
while read -r doc; do
  contents "$deb" | grep -qx "./usr/share/doc/frsd/$(basename "$doc").gz" ||
    fail "a man page cites $doc, which frsd does not ship as /usr/share/doc/frsd/$(basename "$doc").gz"
done < <(grep -ohE 'docs/[a-z_]+\.md' "$src"/docs/man/*.8 | sort -u)
for d in $(echo "$depends" | tr ',' '\n' | sed 's/(.*//; s/|.*//' | tr -d ' '); do
  grep -q "\b$d\b" "$src/docs/install.md" || fail "frsd depends on $d, which docs/install.md does not name"
done
# ... and names no library it does not depend on (its list of dpkg-shlibdeps'
# findings named zlib1g, which only libprotobuf needs).
# shellcheck disable=SC2016 # the backquotes are the document's, not a command
listed=$(sed -n '/^- `Depends` comes from/,/init-system-helpers/p' "$src/docs/install.md" | tr '\n' ' ' |
  sed 's/.*dpkg-shlibdeps: *//; s/).*//' | tr ',' ' ')
[ -n "$listed" ] || fail "docs/install.md no longer lists frsd's Depends after \"dpkg-shlibdeps:\""
for d in $listed; do
  echo "$depends" | grep -q "\b$d\b" || fail "docs/install.md lists $d in frsd's Depends, which has none: $depends"
done
file "$(dpkg-deb -x "$deb" "$tmp/x" && echo "$tmp/x/usr/sbin/frsd")" | grep -q ', stripped' || fail "frsd is not stripped"
# Debian's hardening, as hardening-check (devscripts) judges it: PIE, stack
# protector, fortified functions, read-only relocations, immediate binding,
# stack clash protection. Not its control-flow line: our objects are built
# with -fcf-protection, but Debian 12's C runtime start files (Scrt1.o,
# crti.o) carry no IBT/SHSTK property, so no program linked on it has one
# (Debian's own /usr/sbin/nginx fails that line alike).
command -v hardening-check >/dev/null || fail "hardening-check is missing (tools/setup.sh --test installs devscripts)"
for prog in usr/sbin/frsd usr/sbin/frsctl; do
  hardening-check --nocfprotection "$tmp/x/$prog" >"$tmp/hardening" 2>&1 ||
    { cat "$tmp/hardening"; fail "$prog lacks Debian's hardening"; }
done
dpkg-deb -e "$deb" "$tmp/control"
for f in /etc/frs/srv.xml /etc/frs/map.xml /etc/logrotate.d/frsd; do
  grep -qx "$f" "$tmp/control/conffiles" || fail "$f is not a conffile"
done

mkdir -p "$tmp/ovl/up" "$tmp/ovl/work" "$tmp/ovl/root"
cp "$deb" "$tmp/frsd.deb"
cp "$dev" "$tmp/libfrs-dev.deb"
cp "$py" "$tmp/python3-frs-client.deb"
cat >"$tmp/inside.sh" <<'SH'
set -eu
fail() { echo "FAIL (inside): $*" >&2; exit 1; }
deb=$1 dev=$2 py=$3
dpkg -i "$deb" "$dev" "$py" >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "dpkg -i"; }
/usr/bin/python3 -c "import frs_client; assert frs_client.__file__ == '/usr/lib/python3/dist-packages/frs_client.py'" ||
  fail "python3 does not import frs_client from python3-frs-client"
getent passwd frs >/dev/null || fail "no frs user"
[ "$(stat -c %U:%a /var/lib/frs)" = frs:750 ] || fail "/var/lib/frs is $(stat -c %U:%a /var/lib/frs)"
[ "$(stat -c %G /etc/frs/srv.xml)" = frs ] || fail "frs cannot read /etc/frs/srv.xml"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify /usr/lib/systemd/system/frsd.service >/tmp/verify.log 2>&1 ||
    { cat /tmp/verify.log; fail "systemd-analyze verify frsd.service"; }
  echo "systemd-analyze verify frsd.service: ok"
  # The unit's exposure score, as systemd rates its hardening (docs/install.md).
  score=$(systemd-analyze security --offline=true /usr/lib/systemd/system/frsd.service 2>&1 |
          sed -n 's/.*Overall exposure level for frsd.service: \([0-9.]*\).*/\1/p')
  [ -n "$score" ] || fail "systemd-analyze security gave no score"
  awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }' || fail "frsd.service's exposure is $score, above 3.0"
  echo "systemd-analyze security frsd.service: $score"
else
  echo "systemd-analyze is missing: the unit was not verified"
fi
# Counts a running frsd would have kept, and an operator's edit of a conffile.
echo counts >/var/lib/frs/marker
echo "<!-- edited -->" >>/etc/frs/map.xml
dpkg -i "$deb" >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "upgrade (reinstall)"; }
[ -f /var/lib/frs/marker ] || fail "an upgrade lost /var/lib/frs"
grep -q edited /etc/frs/map.xml || fail "an upgrade overwrote an edited conffile"
dpkg -r frsd libfrs-dev python3-frs-client >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "dpkg -r"; }
[ -f /var/lib/frs/marker ] || fail "remove deleted the counts"
[ ! -e /usr/sbin/frsd ] || fail "remove left /usr/sbin/frsd"
dpkg -P frsd libfrs-dev python3-frs-client >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "dpkg -P"; }
[ ! -e /var/lib/frs ] || fail "purge left /var/lib/frs"
[ ! -e /etc/frs ] || fail "purge left /etc/frs"
echo inside-ok
SH
unshare -m --propagation private sh -c "
  mount -t overlay overlay -o lowerdir=/,upperdir='$tmp/ovl/up',workdir='$tmp/ovl/work' '$tmp/ovl/root' || exit 77
  mount --bind /proc '$tmp/ovl/root/proc'
  mount --bind /dev '$tmp/ovl/root/dev'
  mount -t tmpfs tmpfs '$tmp/ovl/root/tmp'
  cp '$tmp/frsd.deb' '$tmp/libfrs-dev.deb' '$tmp/python3-frs-client.deb' '$tmp/inside.sh' '$tmp/ovl/root/tmp/'
  chroot '$tmp/ovl/root' sh /tmp/inside.sh /tmp/frsd.deb /tmp/libfrs-dev.deb /tmp/python3-frs-client.deb
" >"$tmp/inside.log" 2>&1 || { rc=$?; cat "$tmp/inside.log"; [ $rc = 77 ] && skip "overlay mounts are not allowed here"; fail "in the overlay"; }
grep -q inside-ok "$tmp/inside.log" || { cat "$tmp/inside.log"; fail "the overlay run did not finish"; }
grep -v inside-ok "$tmp/inside.log" || true
echo "deb: ok ($(basename "$deb") $(basename "$dev") $(basename "$py"); Depends: $depends)"
