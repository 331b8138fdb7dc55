#!/usr/bin/env bash
# Runs LoKA's tests under the sanitizers, each in a build folder of its own (CPU only: CUDA off):
#   1. AddressSanitizer + UndefinedBehaviorSanitizer (${LOKA_ASAN_BUILD_DIR:-build-asan},
#      CMake option LOKA_SANITIZE, clang): every CPU test ctest knows except ASAN_EXCLUDE below
#      (each with its reason);
#   2. ThreadSanitizer (${LOKA_TSAN_BUILD_DIR:-build-tsan}, CMake option LOKA_TSAN, gcc): what runs
#      threads on the CPU runtime: Sessions on 8 threads sharing one Engine (the concurrency test
#      and a soak) and the Probe's worker threads (loka-opt).
# Both builds are -O1 (-O3 where the libraries ask for it) with line tables and asserts on (an
# assert reachable from a test is a bug too), the test suites' own sources -O0 with a precompiled
# header (LOKA_TESTS_COMPILE_OPTIONS, LOKA_TESTS_PCH: the ASan build's test sources took 166
# instead of 604 compile-seconds, 2026-11-26; the code under test keeps its -O1/-O3); the first
# report of any kind fails the test and the script. Compilers: clang compiles ASan+UBSan about 1.5x faster than gcc 12, gcc compiles
# TSan a little faster than clang (measured on this code, 2026-11-25). ccache is used when it is
# installed. Prints each step and its time.
#   usage: scripts/sanitize.sh [asan|tsan]...   (default: both)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
asan_build=${LOKA_ASAN_BUILD_DIR:-$top/build-asan}
tsan_build=${LOKA_TSAN_BUILD_DIR:-$top/build-tsan}
jobs=$(nproc)
steps=("$@")
((${#steps[@]})) || steps=(asan tsan)

# Without ccache (CI), the test suites share a precompiled header (LOKA_TESTS_PCH); ccache would
# cache nothing with one.
launcher=(-DLOKA_TESTS_PCH=ON)
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DLOKA_TESTS_PCH=OFF)
fi
configure() {  # configure BUILD_DIR COMPILER LINE_TABLES_FLAG EXTRA_CMAKE_ARGS...
  local build=$1 compiler=$2 line_tables=$3; shift 3
  cmake -S "$top" -B "$build" -G Ninja -DLOKA_ENABLE_CUDA=OFF -DCMAKE_CXX_COMPILER="$compiler" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 $line_tables" \
        -DLOKA_TESTS_COMPILE_OPTIONS=-O0 "${launcher[@]}" "$@" >/dev/null
}

# Each step's wall time and CPU seconds.
step_prefix=sanitize
source "$top/scripts/step_timing.sh"

# halt_on_error: the first report fails the test (UBSan is built with -fno-sanitize-recover too);
# print_stacktrace: UBSan reports say where. detect_stack_use_after_return costs little at -O1.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

# Left out of the ASan run, with the reason:
#   install_serving: installs the libraries and builds examples/serving against them; it checks
#     packaging, and the serving code it runs is what the concurrency test and the soak run;
#   soak.short: TSan runs the soak; under ASan its 20 000 runs take minutes for nothing new;
#   the zoo-wide Probe tests on the two largest zoo models (ProbeZoo, SwitchedProbeZoo, ZooFp8,
#     and since 2026-11-26 MeasuredZoo and ProbeCalibrationZoo, on attention_ranker and dhen) and
#     FuseEmbeddingBags.EveryZooModel..., which probes every zoo model: in a first ASan run (gcc)
#     they took 660 of 1 430 test-seconds; MeasuredZoo on dhen took 91 s and ProbeCalibrationZoo
#     on attention_ranker 61 s of 597 (clang, 2026-11-26). The same tests still run on dlrm_dot,
#     dlrm_dcnv2 and wukong (those of them each suite has), every other test on every zoo model;
#   FuseGemmEpilogue's two tests that probe the largest zoo models before fusing
#     (AttentionRanker..., FloatSitesOfTheZoo... on dhen and wukong): 95 of those 597 s, nearly all
#     of it the Probe; the fusions and the QDQ lowering they check run under ASan in the suite's
#     graph-level tests and on a zoo model in DcnV2CrossLayersFuseAndTheModelComputesTheSame;
#   since 2026-11-27, three more that probe mid-size zoo models again under ASan, 205 of 671
#     test-seconds (clang, 2 cores): LokaOpt.TheSummarySays...TooFew... (89 s: the attention
#     ranker's Probe, as above), MeasuredZoo on dlrm_dcnv2 and wukong (55 s: their ops run under
#     ZooFp8, the measured choice under MeasuredZoo on dlrm_dot and PinPrecisionMeasured), and
#     SwitchedProbeZoo on dlrm_dcnv2 and wukong (61 s: the switched model runs on dlrm_dot, the
#     hooks on those two models under ProbeZoo); since 2026-12-06, StoreTablesBf16Zoo on dhen
#     (10.5 s in the normal build, its Probe and measured trials on the largest zoo model; it runs
#     under ASan on dlrm_dcnv2), and StoreActivationsBf16's two tests that run the measured
#     selection on DLRM four times each (AGenerousBudget..., AFloatGemm...: 14.5 s in the normal
#     build; the candidate sets, and the lowering on a small graph, run under ASan in the suite's
#     other tests). All of them run in the normal build's ctest.
ASAN_EXCLUDE='^(install_serving|soak\.short|FuseEmbeddingBags\.EveryZooModelFusesItsTablesAndComputesTheSame|FuseGemmEpilogue\.(AttentionRankerBiasesGelusAndResidualsFuseAndTheModelComputesTheSame|FloatSitesOfTheZooFuseComputeTheSameAndLowerToQdq)|LokaOpt\.TheSummarySaysWhenCalibrationSamplesAreTooFewForTheBudget|StoreActivationsBf16\.(AGenerousBudgetStoresTheCrossStreamInBf16AndTheModelStillRuns|AFloatGemmReadingTheSetReadsItInBf16AsAFusedGemm)|.*(ProbeZoo|ZooFp8|MeasuredZoo|ProbeCalibrationZoo|StoreTablesBf16Zoo)\..*(attention_ranker|dhen).*|.*(SwitchedProbeZoo|MeasuredZoo)\..*(dlrm_dcnv2|wukong).*)$'
# The GoogleTest cases run as whole-binary shards (tests/CMakeLists.txt: LOKA_CTEST_SHARDS,
# 2 per core), so the cases ASAN_EXCLUDE names are left out by GoogleTest's filter: their
# GoogleTest names are read from the per-case entries ctest lists (a value-parameterized case is
# Zoo/ProbeZoo.X/4 to GoogleTest, Zoo/ProbeZoo.X/"attention_ranker" to ctest).
ASAN_SHARDS=$((2 * jobs))
gtest_names() {  # gtest_names BUILD_DIR REGEX: the GoogleTest names of the per-case tests matching REGEX, ':'-joined
  ctest --test-dir "$1" --show-only=json-v1 -L '^gtest$' -R "$2" | python3 -c '
import json, sys
print(":".join(arg[len("--gtest_filter="):] for test in json.load(sys.stdin)["tests"]
               for arg in test["command"] if arg.startswith("--gtest_filter=")))'
}

# TSan: the multi-threaded runtime tests, the soak's size, and the Probe with 4 workers on 2
# cores (a site per worker at a time; threads=0 would take one per core, maybe just one).
TSAN_RUNTIME_FILTER='Concurrency.*:Session.*'
TSAN_SOAK_RUNS=${LOKA_TSAN_SOAK_RUNS:-1000}
zoo=$top/models/zoo

for what in "${steps[@]}"; do
  case $what in
    asan)
      step "ASan+UBSan: configure and build into $asan_build"
      configure "$asan_build" clang++ -gline-tables-only -DLOKA_SANITIZE=ON
      cmake --build "$asan_build" -j"$jobs"
      done_step
      excluded=$(gtest_names "$asan_build" "$ASAN_EXCLUDE")
      step "ASan+UBSan: ctest -j$jobs, $ASAN_SHARDS shards per suite, -E '$ASAN_EXCLUDE' (GTEST_FILTER=-$excluded)"
      LOKA_CTEST_SHARDS=$ASAN_SHARDS GTEST_FILTER="-$excluded" \
        ctest --test-dir "$asan_build" --output-on-failure -j"$jobs" --timeout 900 -LE '^gtest$' -E "$ASAN_EXCLUDE"
      done_step
      ;;
    tsan)
      step "TSan: configure and build loka_runtime_tests, loka_soak and loka-opt into $tsan_build"
      configure "$tsan_build" g++ -g1 -DLOKA_TSAN=ON
      cmake --build "$tsan_build" -j"$jobs" --target loka_runtime_tests loka_soak loka-opt
      done_step
      step "TSan: loka_runtime_tests --gtest_filter='$TSAN_RUNTIME_FILTER'"
      "$tsan_build/tests/loka_runtime_tests" --gtest_filter="$TSAN_RUNTIME_FILTER" --gtest_brief=1
      done_step
      # TSan's shadow memory grows with the threads' history: the resident-set check is the
      # normal build's (soak.short); here only races count, so the slack is wide.
      for model in dlrm_dot attention_ranker; do
        step "TSan: loka_soak $model, $TSAN_SOAK_RUNS runs on 8 threads"
        "$tsan_build/tests/loka_soak" "$zoo/$model/model.onnx" --data "$zoo/$model/calib" --threads 8 \
          --batches 1,5,16 --runs "$TSAN_SOAK_RUNS" --warmup-runs $((TSAN_SOAK_RUNS / 4)) --rss-slack-mb 4096
        done_step
      done
      step "TSan: loka-opt dlrm_dcnv2 --pipeline 'canonicalize,probe{threads=4}' (Probe worker threads)"
      # LOKA_PASS_CACHE=off: a stored Probe result of an earlier run of this build would be restored
      # instead of probed, and no worker thread would run.
      LOKA_PASS_CACHE=off "$tsan_build/tools/loka-opt" "$zoo/dlrm_dcnv2/model.onnx" -o "$tsan_build/probe_tsan.onnx" \
        --calib "$zoo/dlrm_dcnv2/calib" --pipeline 'canonicalize,probe{threads=4}' >/dev/null
      done_step
      ;;
    *) echo "sanitize: unknown step '$what' (asan or tsan)" >&2; exit 2 ;;
  esac
done
all_passed
