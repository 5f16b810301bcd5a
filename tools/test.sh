#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test with ctest: the
# optimized build, then the same suite under AddressSanitizer+UBSan.
# FRS_TEST_PRESETS="release" limits it to one build.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
jobs=$(nproc)
for preset in ${FRS_TEST_PRESETS:-release asan}; do
  echo "== ${preset}: configure, build, test"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j"$jobs"
  ctest --preset "$preset" -j"$jobs"
done
