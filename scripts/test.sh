#!/usr/bin/env bash
# Quick start, step 2 (and CI): install dependencies, build, and run every test.
# GPU tests skip with a printed reason on machines without a CUDA device (listed at the end of
# the ctest step). The GoogleTest suites run as whole-binary shards (LOKA_CTEST_SHARDS per
# suite, default 2 per core; 0 runs one process per test case as plain `ctest` does: see
# tests/CMakeLists.txt).
# Then fuzzes the input parsers for LOKA_FUZZ_SECONDS (35) per harness (scripts/fuzz.sh, its
# own build folder; LOKA_SKIP_FUZZ=1 skips that step), and runs the tests under ASan+UBSan
# and the threaded ones under TSan (scripts/sanitize.sh, two build folders of its own;
# LOKA_SKIP_SANITIZE=1 skips that step). Prints each step's time.
#
# On 2 cores from a fresh clone (CI; 2026-11-27 at 7489c2d, nothing else running), the steps in
# order: build (Release, CUDA on) 6.1 min, ctest 2.6, fuzz 6.9, sanitize 12.6 (ASan+UBSan build 5.2
# and tests 3.8, TSan build 3.0 and runs 0.6): 28.1 min, 55 CPU-min, for all of .ci/run. The same
# machine ran 1.6-1.75x slower later that day (the build alone 631-642 s), and CI took 2753 s at
# 8f9b676; on such a day, at fecbc51 (the fuzzers linking loka_ir alone, three more tests out of
# ASan), it took 39.9 min, 78 CPU-min: build 10.7, ctest 4.3, fuzz 5.5 (was 9.0), sanitize 19.3
# (ASan+UBSan build 8.1 and tests 5.5, TSan build 4.7 and runs 1.1). On
# 2026-11-26 (310cc6b, other builds beside it) it took 26.8 min and 52 CPU-min, and before that
# 9.5, 3.8, 7.0 and 17.5 min, 38.0 min and 75 CPU-min before whole-binary shards,
# the precompiled header, -O1/-O0 test sources and the ASan exclusions of scripts/sanitize.sh
# dated 2026-11-26 (at 84e004b; the day's new tests run too). Other builds on the machine changed
# the same compile's time by up to 12% between runs.
# Every step keeps both cores busy, so running steps side by side would save nothing: the time
# went down by compiling and starting less (see scripts/sanitize.sh, tests/CMakeLists.txt).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${LOKA_BUILD_DIR:-$top/build}
shards=${LOKA_CTEST_SHARDS:-$((2 * $(nproc)))}

# Wall time and CPU seconds of each step (on a shared machine the wall time alone says little).
step_prefix=test.sh
source "$top/scripts/step_timing.sh"

step "install dependencies, configure and build into $build"
"$top/scripts/install-deps.sh"
# The suites' own sources at -O1 rather than Release's -O3 (the code they test keeps -O3) and with
# a precompiled header: a quarter less compile time for the test sources.
"$top/scripts/build.sh" -DLOKA_TESTS_PCH=ON -DLOKA_TESTS_COMPILE_OPTIONS=-O1
done_step

step "ctest ($shards shards per GoogleTest suite)"
if ((shards > 0)); then
  LOKA_CTEST_SHARDS=$shards ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 900 \
    -LE '^gtest$'
  # One line per skipped case (its reason is in the log), as ctest lists them when run per case.
  log=$build/Testing/Temporary/LastTest.log
  skipped=$( { [ ! -f "$log" ] || sed -n 's/^\[  SKIPPED \] \([^ ]*\) (.*/\1/p' "$log"; } | sort -u)
  if [ -n "$skipped" ]; then
    echo "test.sh: $(echo "$skipped" | wc -l) test cases skipped (reasons in $log):"
    echo "$skipped" | sed 's/^/  /'
  fi
else
  ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 900
fi
done_step

if [ "${LOKA_SKIP_FUZZ:-0}" = 1 ]; then
  echo "fuzz: skipped (LOKA_SKIP_FUZZ=1)"
else
  # 35 s per harness, two at a time (scripts/fuzz.sh): 105 s of fuzzing in CI. At 60 s the whole
  # of .ci/run took 29.2-30.4 min on 2 cores (2026-11-27), over its 30-minute target, and at 45 s
  # it took 30.5 min on a clone here (2026-12-07, 1654 s in CI at stop 33); longer campaigns are
  # for scripts/fuzz.sh on its own, whose corpora grow across runs.
  step "fuzz, ${LOKA_FUZZ_SECONDS:-35} s per harness"
  "$top/scripts/fuzz.sh" "${LOKA_FUZZ_SECONDS:-35}"
  done_step
fi
if [ "${LOKA_SKIP_SANITIZE:-0}" = 1 ]; then
  echo "sanitize: skipped (LOKA_SKIP_SANITIZE=1)"
else
  step "sanitize (ASan+UBSan, TSan)"
  "$top/scripts/sanitize.sh"
  done_step
fi
all_passed
