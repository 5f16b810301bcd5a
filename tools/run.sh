#!/usr/bin/env bash
# Installs what is missing, builds, and starts frsd in the foreground on the
# defaults in conf/ (127.0.0.1:8300, store in conf/data). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
# Tests are not configured here: running needs no test framework.
cmake --preset release -DFRS_BUILD_TESTS=OFF >/dev/null
cmake --build --preset release -j"$(nproc)" --target frsd frsctl
exec build/src/server/frsd -c conf/srv.xml --foreground "$@"
