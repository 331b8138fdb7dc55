#!/usr/bin/env bash
# One call on the GPU machine for BF16 activation storage (store-activations-bf16, issue 8): builds
# the GPU targets, runs the CUDA tests of every path that reads or writes BF16 activations
# (QuantizedGemm's own op and cuBLASLt's FP8 kernels with a BF16 X or Y, FusedGemm reading a BF16 X
# and the split-weight bf16x2 candidate, EmbeddingBags writing BF16, the scale epilogue, the
# conversions) with the zoo's GPU tests, then every zoo model through loka-opt with storage forced
# on (every set measured, a 1% budget so the sets are chosen) and `loka-run --device cuda` against
# the CPU runtime's outputs of the same optimized model. About 300 s on a warm H100 (most of it the
# build). Logs go to LOGDIR; a short table is printed last.
#   usage: scripts/storage-gpu-check.sh LOGDIR   (after `source .carry/gpu-env.sh`)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
logs=${1:?usage: storage-gpu-check.sh LOGDIR}
mkdir -p "$logs"
build=${LOKA_BUILD_DIR:-$top/build-gpu}
declare -a rows

step() {  # step NAME COMMAND...: runs with its output in LOGDIR/NAME.log, records status and seconds
  local name=$1; shift
  local start=$(date +%s%N)
  "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  local millis=$(( ($(date +%s%N) - start) / 1000000 ))
  rows+=("$(printf '%-34s %-8s %6d.%03d s' "$name" "$([ $rc = 0 ] && echo ok || echo FAIL:$rc)" $((millis / 1000)) $((millis % 1000)))")
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/device.txt"
step configure cmake -S "$top" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOKA_BUILD_TESTS=ON
step build cmake --build "$build" -j"$(nproc)" --target loka-opt loka-run loka_cuda_tests
step cuda-tests timeout 200 "$build/tests/loka_cuda_tests" \
     --gtest_filter='*FusedGemm*:*GemmCandidate*:*DispatchGpu*:*Bf16*:*DequantEpilogue*:*Fp8Convert*:*Quantize*:*LokaOps*:*ConcatInPlace*:*CudaProbe*:*EmbeddingBag*:*PitchedRow*:Zoo/*'
# The default pipeline with pin-precision's storage switches on for every set (storage_min_elements=0).
pipeline=$("$build/tools/loka-opt" --help | grep -o 'default: canonicalize[^)]*' | sed 's/default: //')
pipeline=${pipeline/pin-precision,/pin-precision\{bf16_storage=true,storage_min_elements=0\},}
opt_dir="$logs/optimized"
mkdir -p "$opt_dir"
for model in dlrm_dcnv2 wukong dhen attention_ranker; do
  zoo="$top/models/zoo/$model"
  # --device cuda also checks that the output plans and runs on the GPU and matches the CPU.
  if step "opt-$model" env LOKA_PASS_CACHE=off timeout 120 "$build/tools/loka-opt" "$zoo/model.onnx" \
          -o "$opt_dir/$model.onnx" --calib "$zoo/calib" --budget logloss=0.01 --pipeline "$pipeline" --device cuda \
          --report "$logs/$model.report.json"; then
    step "cpu-ref-$model" "$build/tools/loka-run" "$opt_dir/$model.onnx" --inputs "$zoo/calib" --outputs "$opt_dir/$model.cpu"
    # 2e-3: BF16 storage rounds the same values on both runtimes; Dispatch's TF32/BF16 kernels do not.
    step "run-cuda-$model" timeout 60 "$build/tools/loka-run" "$opt_dir/$model.onnx" --inputs "$zoo/calib" \
         --device cuda --compare "$opt_dir/$model.cpu" --tol 2e-3
  fi
done

echo
echo "== storage-gpu-check summary ($(cat "$logs/device.txt"), $(date -u +%F))"
printf '%s\n' "${rows[@]}" | tee "$logs/summary.txt"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$logs/cuda-tests.log" | head -30
grep -h "BF16 " "$logs"/opt-*.log 2>/dev/null | head -8
rm -rf "$opt_dir"
