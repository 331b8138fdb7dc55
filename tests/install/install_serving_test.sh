#!/usr/bin/env bash
# ============================================================================
# tests/install/install_serving_test.sh — `cmake --install` + find_package(loka)
# + the serving example, end to end, as a user would do it (ctest: install_serving).
#
#   install_serving_test.sh BUILD_DIR SOURCE_DIR CXX_COMPILER [HAVE_CUDA]
#
# Installs BUILD_DIR into a temporary prefix; checks the layout (tools, public
# headers, package config, no compiler library) and that every installed header
# compiles on its own with only the prefix on the include path; configures and
# builds examples/serving against the prefix alone; optimizes a zoo model with
# the installed loka-opt and serves it from 4 threads (outputs checked bitwise
# against the single-thread run), also on random inputs; and checks that bad
# input fails with one line and the documented exit status. On the CPU; when
# HAVE_CUDA is ON and a GPU answers, the optimized model is served on it too
# (otherwise the reason it is not is printed).
# ============================================================================
set -euo pipefail
build=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
cxx=$3
have_cuda=${4:-OFF}
zoo=$source_dir/models/zoo/dlrm_dot

work=$(mktemp -d "${TMPDIR:-/tmp}/loka-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"  # so that no header can be found relative to the current directory
prefix=$work/prefix

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $* ($SECONDS s)"; }
# Runs a command quietly; on failure shows what it printed.
quiet() { "$@" > "$work/log.txt" 2>&1 || { cat "$work/log.txt" >&2; fail "$*"; }; }

step "cmake --install into $prefix"
quiet cmake --install "$build" --prefix "$prefix"

step "installed layout"
config_dir=$(dirname "$(find "$prefix" -name lokaConfig.cmake | head -1)")
[ -n "$config_dir" ] && [ "$config_dir" != . ] || fail "no lokaConfig.cmake under $prefix"
for file in "$config_dir"/lokaConfigVersion.cmake "$config_dir"/lokaTargets.cmake \
            "$prefix"/bin/loka-opt "$prefix"/bin/loka-run "$prefix"/bin/loka-inspect \
            "$prefix"/include/loka/{engine,session,observer,test_data,tensor,status,dtype}.h; do
  [ -e "$file" ] || fail "not installed: ${file#"$prefix"/}"
done
# A serving program links the runtime alone: the compiler libraries stay out of the prefix.
if find "$prefix" -name '*loka_passes*' -o -name '*loka_cli*' | grep -q .; then
  fail "compiler libraries installed: $(find "$prefix" -name '*loka_passes*' -o -name '*loka_cli*')"
fi

step "every installed header compiles alone against the prefix"
for header in "$prefix"/include/loka/*.h; do
  name=loka/$(basename "$header")
  echo "#include <$name>" | "$cxx" -std=c++20 -Wall -Wextra -Wpedantic -Werror -fsyntax-only \
      -I "$prefix/include" -x c++ - > "$work/log.txt" 2>&1 || { cat "$work/log.txt" >&2; fail "$name is not self-contained"; }
done

step "configure and build examples/serving with find_package(loka)"
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
quiet cmake -S "$source_dir/examples/serving" -B "$work/serving" "${generator[@]}" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix"
quiet cmake --build "$work/serving"
serve=$work/serving/loka-serve

step "installed tools run: loka-run reproduces the zoo's reference outputs"
quiet "$prefix/bin/loka-run" "$zoo/model.onnx" --inputs "$zoo/eval" --compare "$zoo/eval" --tol 1e-5

step "installed loka-opt optimizes the model"
quiet "$prefix/bin/loka-opt" "$zoo/model.onnx" -o "$work/model.loka.onnx" --calib "$zoo/calib"

step "serve the optimized model from 4 threads (data directory)"
"$serve" "$work/model.loka.onnx" --data "$zoo/eval" --threads 4 --runs 20 | tee "$work/serve.txt"
grep -q "every run equals the single-thread run bitwise" "$work/serve.txt" || fail "no output check reported"
grep -q "served: 4 threads x 20 runs = 80 runs, 81920 samples" "$work/serve.txt" || fail "wrong run count"
grep -Eq "latency ms: p50 [0-9.]+ +p90 [0-9.]+ +p99 [0-9.]+ +max [0-9.]+" "$work/serve.txt" || fail "no percentiles"

if [ "$have_cuda" != ON ]; then
  step "serving on CUDA not tested: this build has no CUDA"
elif ! nvidia-smi -L > /dev/null 2>&1; then
  step "serving on CUDA not tested: no GPU answers nvidia-smi"
else
  step "serve the optimized model on CUDA from 4 threads"
  "$serve" "$work/model.loka.onnx" --data "$zoo/eval" --device cuda --threads 4 --runs 50 | tee "$work/serve.txt"
  grep -q "every run equals the single-thread run bitwise" "$work/serve.txt" || fail "no output check reported (cuda)"
fi

step "serve random batches of the input shapes from 4 threads"
"$serve" "$work/model.loka.onnx" --threads 4 --runs 10 --batch 64 --int-range 3 | tee "$work/serve.txt"
grep -q "served: 4 threads x 10 runs = 40 runs, 2560 samples" "$work/serve.txt" || fail "wrong run count (random)"

step "bad input: one line and the documented exit status"
# expect_failure STATUS PATTERN ARGS...: loka-serve ARGS must exit STATUS with one stderr line matching PATTERN.
expect_failure() {
  local status=$1 pattern=$2
  shift 2
  local rc=0
  "$serve" "$@" > /dev/null 2> "$work/err.txt" || rc=$?
  [ "$rc" -eq "$status" ] || fail "loka-serve $*: exit $rc, expected $status ($(cat "$work/err.txt"))"
  [ "$(wc -l < "$work/err.txt")" -eq 1 ] || fail "loka-serve $*: not one line: $(cat "$work/err.txt")"
  grep -Eq "^loka-serve: .*$pattern" "$work/err.txt" || fail "loka-serve $*: '$(cat "$work/err.txt")' lacks '$pattern'"
  cat "$work/err.txt"
}
expect_failure 1 "missing.onnx" "$work/missing.onnx"
expect_failure 2 "--threads" "$work/model.loka.onnx" --threads 0
expect_failure 2 "unknown option '--thread'" "$work/model.loka.onnx" --thread 2
expect_failure 2 "no model" --runs 3
expect_failure 1 "no_such_dir" "$work/model.loka.onnx" --data "$work/no_such_dir"
# Ids past the tiny zoo's smallest table (3 rows): the runtime refuses them, naming the node.
expect_failure 1 "int-range" "$work/model.loka.onnx" --int-range 1000000
"$serve" --help | grep -q "^usage: loka-serve MODEL.onnx" || fail "--help"

step "passed"
