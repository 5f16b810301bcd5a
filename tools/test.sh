#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test with ctest: the
# optimized build, then the same suite under AddressSanitizer+UBSan, then the
# store's suite (the one place threads share mapped memory) under
# ThreadSanitizer. FRS_TEST_PRESETS="release" limits it to one build.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
jobs=$(nproc)
for preset in ${FRS_TEST_PRESETS:-release asan tsan}; do
  echo "== ${preset}: configure, build, test"
  cmake --preset "$preset" >/dev/null
  if [ "$preset" = tsan ]; then
    cmake --build --preset tsan -j"$jobs" --target store_test
    ctest --preset tsan -j"$jobs" -R '^Store'
  else
    cmake --build --preset "$preset" -j"$jobs"
    ctest --preset "$preset" -j"$jobs"
  fi
done
