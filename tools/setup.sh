#!/usr/bin/env bash
# Installs what FRS needs to build, test and fuzz on Debian 12, with apt-get only.
# Idempotent: packages already present are left alone, and apt-get update runs
# only when something is missing.
set -euo pipefail

pkgs=(
  build-essential cmake g++ pkg-config   # toolchain (C++20, GCC 12)
  libboost-dev                           # Boost.Interprocess (file mapping), Boost.Beast (HTTP parser)
  libxxhash-dev                          # XXH3 key hashing
  libpugixml-dev                         # srv.xml, map.xml and the XML protocol
  libcli11-dev                           # frsctl / frsbench command lines
  googletest libgtest-dev libgmock-dev   # unit and end-to-end tests
  tzdata                                 # IANA zones for calendar windows
  clang libclang-rt-14-dev               # libFuzzer target for the request path
  curl procps                            # end-to-end tests and the bench scripts
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
