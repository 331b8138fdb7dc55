#!/usr/bin/env bash
# One call on the GPU machine for BF16 activation storage (store-activations-bf16, issue 8): builds
# the GPU targets, runs the CUDA tests of every path that reads or writes BF16 activations
# (QuantizedGemm's own op and cuBLASLt's FP8 kernels with a BF16 X or Y, FusedGemm reading a BF16 X
# and the split-weight bf16x2 candidate, EmbeddingBags writing BF16, the scale epilogue, the
# conversions) with the zoo's GPU tests, then every zoo model through loka-opt with storage forced
# on (every set measured, a 1% budget so the sets are chosen) and off, each run by
# `loka-run --device cuda` against the CPU runtime's outputs of the same optimized model. At that
# budget nearly every GEMM is FP8 and the two runtimes' FP8 sums (exact products, other orders)
# flip codes at rounding midpoints: probabilities part by about 0.02 with storage off already
# (H100, 2026-12-07), so the table prints both gaps to compare, and only 0.05 fails a run. About
# 250 s on an H100 (most of it the tests). Logs go to LOGDIR; a short table is printed last.
#   usage: scripts/storage-gpu-check.sh LOGDIR   (after `source .carry/gpu-env.sh`)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
logs=${1:?usage: storage-gpu-check.sh LOGDIR}
mkdir -p "$logs"
build=${LOKA_BUILD_DIR:-$top/build-gpu}
source "$top/scripts/gpu_step_log.sh"

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
  for storage in true false; do
    name="$model-storage-$storage"
    # --device cuda also checks that the output plans and runs on the GPU and matches the CPU.
    if step "opt-$name" env LOKA_PASS_CACHE=off timeout 120 "$build/tools/loka-opt" "$zoo/model.onnx" \
            -o "$opt_dir/$name.onnx" --calib "$zoo/calib" --budget logloss=0.01 --device cuda \
            --pipeline "${pipeline/bf16_storage=true/bf16_storage=$storage}" --report "$logs/$name.report.json"; then
      step "cpu-ref-$name" "$build/tools/loka-run" "$opt_dir/$name.onnx" --inputs "$zoo/calib" --outputs "$opt_dir/$name.cpu"
      step "run-cuda-$name" timeout 60 "$build/tools/loka-run" "$opt_dir/$name.onnx" --inputs "$zoo/calib" \
           --device cuda --compare "$opt_dir/$name.cpu" --tol 0.05
    fi
  done
done

echo
echo "== storage-gpu-check summary ($(cat "$logs/device.txt"), $(date -u +%F))"
print_steps
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$logs/cuda-tests.log" | head -30
grep -h "BF16 " "$logs"/opt-*-storage-true.log 2>/dev/null | head -4
for log in "$logs"/run-cuda-*.log; do  # the largest GPU-CPU gap of each run, storage on beside off
  echo "$(basename "$log" .log): largest $(grep -o 'max_abs [0-9.e+-]*' "$log" | sort -k2 -g | tail -1)"
done
rm -rf "$opt_dir"
