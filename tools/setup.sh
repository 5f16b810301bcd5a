#!/usr/bin/env bash
# Installs what FRS needs on Debian 12, with apt-get only.
#   tools/setup.sh          what building and running frsd needs (tools/run.sh)
#   tools/setup.sh --test   and what the tests need (tools/test.sh)
# Idempotent: packages already present are left alone, and apt-get update runs
# only when something is missing.
set -euo pipefail

pkgs=(
  build-essential cmake g++ pkg-config   # toolchain (C++20, GCC 12)
  ninja-build                            # the presets' generator: builds in fewer, better-scheduled steps than make
  libboost-dev                           # Boost.Interprocess (file mapping), Boost.Beast (HTTP parser), Boost.CRC (the ring)
  libxxhash-dev                          # XXH3 key hashing
  libpugixml-dev                         # srv.xml, map.xml and the XML protocol
  libcli11-dev                           # frsctl / frsbench command lines
  tzdata                                 # IANA zones for calendar windows
)
if [ "${1:-}" = --test ]; then
  pkgs+=(
    googletest libgtest-dev libgmock-dev # unit and end-to-end tests
    clang libclang-rt-14-dev             # the libFuzzer target of the request path
    curl procps                          # end-to-end tests and the bench scripts
    nginx                                # the cluster ring is checked against nginx's consistent hash
    prometheus                           # promtool checks the shipped alert rules
    systemd man-db                       # systemd-analyze verify of frsd.service (it resolves man: links)
    dpkg-dev adduser                     # cpack -G DEB (dpkg-shlibdeps) and the package's maintainer scripts
    lintian init-system-helpers          # the .deb checked as Debian checks packages; deb-systemd-helper
    python3 python3-venv fcgiwrap        # clients/python's tests and pip install; examples/cgi under nginx + fcgiwrap
    haproxy caddy                        # tests/frontdoor run the shipped conf/frontdoor configs in front of frsd
    rsyslog                              # tests/shipping: rsyslogd's imfile follows the decision log through a rotation
  )
elif [ -n "${1:-}" ]; then
  echo "usage: $0 [--test]" >&2
  exit 2
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  # Keep Debian from starting system-wide nginx, HAProxy, Caddy, rsyslog or prometheus services: the
  # tests start their own, on loopback and ephemeral ports.
  made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    made_policy=1
  fi
  rc=0
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" || rc=$?
  if [ "$made_policy" = 1 ]; then $SUDO rm -f /usr/sbin/policy-rc.d; fi
  if [ "$rc" != 0 ]; then echo "setup: apt-get install failed ($rc)"; exit "$rc"; fi
else
  echo "setup: all packages present"
fi
