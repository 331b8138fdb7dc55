#!/usr/bin/env bash
# Fuzzes LoKA's input parsers (tests/fuzz): builds the libFuzzer harnesses with clang,
# ASan and UBSan into ${LOKA_FUZZ_BUILD_DIR:-build-fuzz}, seeds each from the repository,
# runs each for SECONDS (default 60; as many at once as there are cores) and prints one
# line per harness. Any crash, leak, timeout or out-of-memory input is saved under
# BUILD/fuzz/artifacts/<harness>/ and makes the script exit non-zero; reproduce with
# `BUILD/tests/fuzz/<harness> FILE`. Corpora grow across runs in BUILD/fuzz/corpus/.
# The harnesses link the runtime and loka_ir (passes/CMakeLists.txt), so only those compile:
# 66 build steps and 273 compile-seconds on 2 cores, where linking the whole compiler took 118
# and 694 (2026-11-27; the 694 on a slower day).
#   usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=${LOKA_FUZZ_BUILD_DIR:-$top/build-fuzz}
work=$build/fuzz
node_data=/usr/share/libonnx-testdata/data/node  # Debian's libonnx-testdata: small models and tensors

# Asserts stay on (-O1 without -DNDEBUG): an assert reachable from input is a bug too.
cmake -S "$top" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DLOKA_FUZZ=ON -DLOKA_ENABLE_CUDA=OFF \
      -DLOKA_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" >/dev/null
cmake --build "$build" --target loka_fuzzers -j"$(nproc)"

# Copies the files that `find ARGS...` lists into seed folder $1 (a missing root is skipped).
add_seeds() {
  local into=$1; shift
  find "$@" -type f -print0 2>/dev/null | while IFS= read -r -d '' file; do
    cp "$file" "$into/$(echo "$file" | md5sum | cut -c1-16)-$(basename "$file")"
  done || true
}

# Seeds are rebuilt from the repository on every run; nothing large is committed.
rm -rf "$work/seeds" "$work/artifacts" "$work/logs"
mkdir -p "$work/seeds" "$work/artifacts" "$work/logs"
harnesses=(fuzz_onnx_engine fuzz_onnx_import fuzz_tensor_proto fuzz_npz fuzz_ir_text fuzz_einsum)
for harness in "${harnesses[@]}"; do
  mkdir -p "$work/seeds/$harness" "$work/corpus/$harness" "$work/artifacts/$harness"
done
for harness in fuzz_onnx_engine fuzz_onnx_import; do
  add_seeds "$work/seeds/$harness" "$top/models/zoo" "$top/tests/data" -name '*.onnx'
  add_seeds "$work/seeds/$harness" "$node_data" -name model.onnx -size -4k
done
add_seeds "$work/seeds/fuzz_tensor_proto" "$top/models/zoo" "$top/tests/data" -name '*.pb' -size -16k
add_seeds "$work/seeds/fuzz_tensor_proto" "$node_data" -name '*.pb' -size -2k
python3 "$top/tests/fuzz/make_npz_seeds.py" "$work/seeds/fuzz_npz"
add_seeds "$work/seeds/fuzz_ir_text" "$top/tests/data" -name '*.ir'
python3 "$top/tests/fuzz/extract_ir_seeds.py" "$work/seeds/fuzz_ir_text" "$top/tests" >/dev/null
# fuzz_einsum: operand count, each operand's rank and dims (0 = symbolic), then the equation.
einsum_seed() { printf "$2" > "$work/seeds/fuzz_einsum/$1"; }
einsum_seed batched '\x01\x03\x00\x03\x04\x03\x00\x04\x05bij,bjk->bik'
einsum_seed mixing '\x01\x02\x06\x04\x03\x00\x04\x08nm,bmd->bnd'
einsum_seed projection '\x01\x03\x00\x07\x08\x02\x08\x05bnd,dk->bnk'
einsum_seed summed '\x00\x03\x02\x03\x04bij->b'
einsum_seed implicit '\x01\x02\x03\x04\x02\x04\x02ij,jk'

# Longest input per harness: whole zoo models (<= ~200 KiB) must fit unclipped.
max_len() {
  case $1 in
    fuzz_onnx_engine|fuzz_onnx_import) echo 262144 ;;
    fuzz_tensor_proto) echo 16384 ;;
    fuzz_npz) echo 8192 ;;
    fuzz_ir_text) echo 16384 ;;
    fuzz_einsum) echo 256 ;;
  esac
}

run_harness() {
  local harness=$1 dict=()
  [ -f "$top/tests/fuzz/${harness#fuzz_}.dict" ] && dict=(-dict="$top/tests/fuzz/${harness#fuzz_}.dict")
  "$build/tests/fuzz/$harness" -max_total_time="$seconds" -max_len="$(max_len "$harness")" \
    -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 "${dict[@]}" \
    -artifact_prefix="$work/artifacts/$harness/" "$work/corpus/$harness" "$work/seeds/$harness" \
    >"$work/logs/$harness.log" 2>&1 && echo 0 >"$work/logs/$harness.rc" || echo $? >"$work/logs/$harness.rc"
}

# As many harnesses at once as there are cores; each leaves its exit status in logs/.
running=0
for harness in "${harnesses[@]}"; do
  if ((running >= $(nproc))); then wait -n; running=$((running - 1)); fi
  run_harness "$harness" &
  running=$((running + 1))
done
wait

failed=0
for harness in "${harnesses[@]}"; do
  rc=$(cat "$work/logs/$harness.rc")
  log=$work/logs/$harness.log
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  crashes=$(find "$work/artifacts/$harness" -type f | wc -l)
  printf 'fuzz: %-18s %10s execs  cov %6s  crashes %s  (%ss, rc %s)\n' \
    "$harness" "${execs:-?}" "${cov:-?}" "$crashes" "$seconds" "$rc"
  if ((rc != 0 || crashes != 0)); then
    failed=1
    echo "fuzz: $harness failed; log $log, inputs in $work/artifacts/$harness/:" >&2
    grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|fuzz check failed' "$log" >&2 || tail -5 "$log" >&2
  fi
done
exit "$failed"
