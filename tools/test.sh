#!/usr/bin/env bash
# Installs what is missing, checks the format, builds, and runs every test
# with ctest, each once, in stages that run side by side (FRS_TEST_SERIAL=1:
# one after another):
#   outside  the programs and the library built by gcc without sanitizers,
#            and the tests that put them behind other programs (nginx,
#            HAProxy, Caddy, the Python and CGI clients) or package them
#            (.deb, install tree); at -Og without debug info (preset
#            outside): the cheapest optimization that still defines
#            __OPTIMIZE__, so that _FORTIFY_SOURCE, and with it the
#            packages' hardening check, works (-O0 would not); it compiles
#            in half the time of the release preset's -O2 -g1, which
#            FRS_TEST_PRESETS="release asan tsan" builds in its place;
#   asan     every GoogleTest suite, end-to-end ones included, and the fuzz
#            corpus replayed, under AddressSanitizer+UBSan, built by clang
#            with its thread-safety analysis as an error: every
#            FRS_GUARDED_BY field touched without its lock, every FRS_REQUIRES
#            function called without it, fails the build of everything;
#            the scripts that run only frsd and frsctl (label programs)
#            start as soon as those two are built, beside the rest;
#   tsan     the TESTs whose threads share mapped memory (the store's, the
#            statistics' and the lock word's) under ThreadSanitizer, built
#            by clang, their programs the only ones built.
# FRS_TEST_PRESETS chooses stages: "fuzz" adds 20 s of libFuzzer exploration
# each (FRS_FUZZ_SECONDS) of the request path, the XML scanner against
# pugixml, a gRPC connection, and ShouldRateLimit's direct decoder against
# protobuf, and FRS_RELEASE_TESTS=all runs every
# test in the unsanitized stage too. CI runs the default (docs/development.md
# has its times).
# A test that ctest reports skipped fails its stage unless tests/skips.txt
# lists it with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."
run_start=$(date +%s)
tools/setup.sh --test
jobs=$(nproc)
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
# ctest, then a failure for each test it skipped that tests/skips.txt does
# not list with its reason: a skip must never pass unnoticed.
# A ctest test runs a whole GoogleTest suite; the skipped TESTs inside one
# are in the suites' XML reports, in the build directory ($1).
# With GTEST_REPORTS=0 (a selection that runs no GoogleTest program, beside
# another of the same tree) it neither clears nor reads those reports.
run_ctest() {
  local build="$1" junit rc=0 reports
  shift
  junit=$(mktemp --suffix=.xml)
  if [ "${GTEST_REPORTS:-1}" = 1 ]; then
    reports=$build/gtest-xml
    rm -rf "$reports"
  else
    reports=$(mktemp -d)
  fi
  ctest "$@" --output-junit "$junit" || rc=$?
  tools/check_skips.py tests/skips.txt "$junit" "$reports" || rc=1
  rm -f "$junit"
  [ "${GTEST_REPORTS:-1}" = 1 ] || rm -rf "$reports"
  return "$rc"
}
# The CPU seconds (user+sys) of every program this script has waited for, in
# $cpu: a stage's line gives both its wall time and its CPU time, which on a
# shared machine says what the stage costs where wall time cannot.
cpu_seconds() {
  local f
  f=$(mktemp)
  times >"$f"
  cpu=$(awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] } printf "%d", s }' "$f")
  rm -f "$f"
}
# Waits for the ASan stage's early selection (run_stage's $early_pid), prints
# its output and returns its status.
wait_early() {
  local early_rc=0
  wait "$early_pid" || early_rc=$?
  echo "-- the programs' tests, started before the build ended:"
  cat "$early_log"
  rm -f "$early_log"
  return "$early_rc"
}
# One stage: configure, build, test; its last line its wall and CPU time.
# A build that only fills the CPU others leave (nice) says so in $2.
run_stage() {
  local preset=$1 build_nice=$2 build stage_start stage_cpu built corpus artifacts rc target a
  stage_start=$(date +%s)
  cpu_seconds
  stage_cpu=$cpu
  build="build$([ "$preset" = release ] || echo "-$preset")"
  reset_other_generator "$build"
  # The asan and tsan presets were gcc's before they were clang's: a tree
  # configured with another compiler cannot change it in place.
  if [ -f "$build/CMakeCache.txt" ] && { [ "$preset" = asan ] || [ "$preset" = tsan ]; } &&
    ! grep -q '^CMAKE_CXX_COMPILER:.*clang++$' "$build/CMakeCache.txt"; then
    echo "setup: $build was configured with another compiler; reconfiguring it with clang"
    rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
  fi
  cmake --preset "$preset" >/dev/null
  # What each stage builds: the unsanitized stage the programs and the library
  # only (the GoogleTest programs are the ASan stage's), the TSan stage the
  # programs frs_tsan_tests() names, the others everything.
  local targets=()
  case "$preset" in
    release | outside) [ "${FRS_RELEASE_TESTS:-}" = all ] || targets=(frsd frsctl frsbench frs_archive frs_compressed_docs) ;;
    tsan) targets=(frs_tsan_programs) ;;
    fuzz) targets=(frs_fuzz_request frs_fuzz_xml_decode frs_fuzz_grpc_session frs_fuzz_rls_request) ;;
  esac
  # The ASan stage builds frsd and frsctl first and starts the tests that run
  # only them (label programs: the cluster's, Envoy's HTTP/2 and the docs'
  # Python scripts) while it builds its test programs. Those tests spend
  # most of their time waiting on the servers they start: after the build,
  # they left a core idle; beside it, the compiles fill it.
  # clang and lld (the asan, tsan and fuzz trees) allocate their heaps
  # through glibc's malloc: in transparent huge pages (glibc.malloc.hugetlb,
  # glibc 2.35 on; the kernel's default mode "madvise" gives them only to
  # who asks) a unit takes a tenth of its page faults, and a clean ASan tree
  # builds in 158 CPU-s instead of 188-203 (docs/development.md). gcc's own
  # allocator does not go through malloc: the gcc tree gains nothing.
  local build_env=()
  case "$preset" in
    asan | tsan | fuzz) build_env=(env "GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1") ;;
  esac
  local early_pid="" early_log="" rc=0
  if [ "$preset" = asan ]; then
    nice -n "$build_nice" ${build_env[@]+"${build_env[@]}"} cmake --build --preset "$preset" -j"$jobs" --target frsd frsctl
    echo "== ${preset}: frsd and frsctl built in $(($(date +%s) - stage_start)) s; the programs' tests started"
    early_log=$(mktemp)
    GTEST_REPORTS=0 run_ctest "$build" --preset "$preset" -j"$jobs" --no-tests=error -L '^programs$' \
      >"$early_log" 2>&1 &
    early_pid=$!
  fi
  nice -n "$build_nice" ${build_env[@]+"${build_env[@]}"} cmake --build --preset "$preset" -j"$jobs" \
    ${targets[@]+--target "${targets[@]}"} || rc=$?
  if [ "$rc" != 0 ]; then
    [ -z "$early_pid" ] || wait_early || true
    return "$rc"
  fi
  built=$(date +%s)
  echo "== ${preset}: built in $((built - stage_start)) s"
  if [ "$preset" = fuzz ]; then
    # libFuzzer (with ASan+UBSan), 20 s each: the whole request path, the
    # fast XML scanner against pugixml's path, a gRPC connection's bytes, and
    # ShouldRateLimit's direct decoder against protobuf; from scratch copies
    # of their corpora, so a run adds nothing to the tree.
    for target in request:corpus xml_decode:xml_corpus grpc_session:grpc_corpus rls_request:rls_corpus; do
      dict=()
      case "$target" in request:* | xml_decode:*) dict=(-dict=tests/fuzz/xml.dict) ;; esac
      # Crash inputs (-artifact_prefix) go to a scratch directory too, and are
      # printed, so a failure leaves nothing in the working tree.
      corpus=$(mktemp -d)
      artifacts=$(mktemp -d)
      cp "tests/fuzz/${target#*:}"/* "$corpus"/
      rc=0
      echo "-- frs_fuzz_${target%%:*}"
      "build-fuzz/src/server/frs_fuzz_${target%%:*}" -max_total_time="${FRS_FUZZ_SECONDS:-20}" -timeout=10 \
        -rss_limit_mb=4096 "${dict[@]}" -print_final_stats=1 -artifact_prefix="$artifacts/" \
        "$corpus" >"$artifacts/log" 2>&1 || rc=$?
      tail -n 12 "$artifacts/log"
      if [ "$rc" != 0 ]; then
        { grep -E "ERROR|runtime error|SUMMARY|disagree" "$artifacts/log" || true; } | head -20
        for a in "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-*; do
          [ -e "$a" ] && { echo "== $a (base64):"; base64 "$a"; }
        done
      fi
      rm -rf "$corpus" "$artifacts"
      [ "$rc" = 0 ] || { echo "fuzz: frs_fuzz_${target%%:*} found a failure (exit $rc)"; return "$rc"; }
    done
  else
    # Stages select by ctest label (tests/CMakeLists.txt), never by name, and
    # a selection that finds no test fails (--no-tests=error): the outside
    # stage the tests that run our programs inside others (label outside),
    # the TSan stage the TESTs whose threads share mapped memory (label
    # tsan), the ASan stage every other test (those labelled programs
    # started above). Under ASan the outside tests
    # would cost a third of that stage and test no more of our memory safety
    # than the e2e suites do; the tsan-labelled TESTs run there with the rest
    # of their programs.
    # The ASan tests run two per core: one after another they took 526 s
    # for 306 CPU-s, most of them waiting on the frsd and frsctl they start.
    local select=() test_jobs=$jobs
    case "$preset" in
      release | outside) [ "${FRS_RELEASE_TESTS:-}" = all ] || select=(-L '^outside$') ;;
      tsan) select=(-L '^tsan$') ;;
      asan)
        select=(-LE '^(outside|tsan|programs)$')
        test_jobs=$((jobs * 2))
        ;;
    esac
    run_ctest "$build" --preset "$preset" -j"$test_jobs" --no-tests=error ${select[@]+"${select[@]}"} || rc=$?
    [ -z "$early_pid" ] || wait_early || rc=$?
    [ "$rc" = 0 ] || return "$rc"
  fi
  cpu_seconds
  echo "== ${preset}: done in $(($(date +%s) - stage_start)) s ($((cpu - stage_cpu)) CPU-s; tests $(($(date +%s) - built)) s)"
}

# The stages run side by side, each into its own log, printed whole when it
# ends: on two cores a stage's tests leave a core idle as often as not
# (servers started, waited for, stopped, packages unpacked), and another
# stage's build fills it. The outside and ASan builds share the CPU, so the
# outside stage's tests (the slowest to wait, the quickest to build) run
# while the ASan build goes on; the TSan build is niced: it takes only what
# those leave, and is done long before the ASan tests are. Tests all run at
# the same priority. FRS_TEST_SERIAL=1 runs the stages one after another
# (a machine shared with other builds, or a stage's output as it comes).
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A pid_of=()
failed=()
# Waits for the stages started, printing each one's log as it ends.
collect() {
  local rc ended preset
  while ((${#pid_of[@]})); do
    rc=0
    wait -n -p ended "${pid_of[@]}" || rc=$?
    for preset in "${!pid_of[@]}"; do
      [ "${pid_of[$preset]}" = "$ended" ] || continue
      cat "$logs/$preset"
      [ "$rc" = 0 ] || { failed+=("$preset"); echo "== ${preset}: FAILED (exit $rc)"; }
      unset "pid_of[$preset]"
    done
  done
}
# The tree as .clang-format (and black, flake8, shellcheck) says: a file
# that does not agree is named and fails the run. Beside the builds, as a
# stage of its own: its 4 s on both cores need not wait for them.
tools/check_format.sh >"$logs/format" 2>&1 &
pid_of[format]=$!
[ "${FRS_TEST_SERIAL:-0}" != 1 ] || collect
for preset in ${FRS_TEST_PRESETS:-outside asan tsan}; do
  build_nice=0
  case "$preset" in tsan | fuzz) [ "${FRS_TEST_SERIAL:-0}" = 1 ] || build_nice=10 ;; esac
  run_stage "$preset" "$build_nice" >"$logs/$preset" 2>&1 &
  pid_of[$preset]=$!
  [ "${FRS_TEST_SERIAL:-0}" != 1 ] || collect
done
collect
cpu_seconds
echo "== all stages: done in $(($(date +%s) - run_start)) s ($cpu CPU-s)"
if ((${#failed[@]})); then
  echo "== failed: ${failed[*]}"
  exit 1
fi
