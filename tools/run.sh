#!/usr/bin/env bash
# Installs what is missing, builds, and starts frsd in the foreground on the
# defaults in conf/ (127.0.0.1:8300, store in conf/data). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
# Tests are not configured here: running needs no test framework.
# A build directory configured by an earlier preset with another generator
# (the presets used make before Ninja) cannot be reconfigured in place: its
# cache goes, its objects are rebuilt.
reset_other_generator() {
  local cache="$1/CMakeCache.txt"
  if [ -f "$cache" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$cache"; then
    echo "setup: $1 was configured with another generator; reconfiguring it with Ninja"
    rm -rf "$cache" "$1/CMakeFiles"
  fi
}
reset_other_generator build
cmake --preset release -DFRS_BUILD_TESTS=OFF >/dev/null
cmake --build --preset release -j"$(nproc)" --target frsd frsctl
exec build/src/server/frsd -c conf/srv.xml --foreground "$@"
