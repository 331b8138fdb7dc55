#!/usr/bin/env bash
# One call on the GPU machine for the CUDA runtime (issue 6): builds the GPU targets, runs the
# CUDA test suite (kernels vs the CPU reference, zoo models vs the CPU runtime, 8-thread
# serving), the kernel tests and the hostile run-time inputs again under compute-sanitizer
# memcheck, a 1 000 000-run 8-thread GPU soak, every zoo model through
# `loka-run --device cuda` (FP32 models and their loka-opt output) against the CPU runtime,
# and the kernel rate bench. Logs go to LOGDIR; a short table is printed last.
#   usage: scripts/gpu-kernels-check.sh LOGDIR   (after `source .carry/gpu-env.sh`)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
logs=${1:?usage: gpu-kernels-check.sh LOGDIR}
mkdir -p "$logs"
build=${LOKA_BUILD_DIR:-/tmp/build-gpu}
source "$top/scripts/gpu_step_log.sh"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/device.txt"
step configure cmake -S "$top" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
step build cmake --build "$build" -j"$(nproc)" --target loka_cuda_tests kernel_rate_bench loka_model_bench loka-run loka-opt loka_soak
step cuda-tests "$build/tests/loka_cuda_tests"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$sanitizer" ]; then
  # Kernel suites only (the zoo and serving tests take too long under memcheck); smaller shapes are
  # not needed: memcheck runs the same cases, just slower.
  step memcheck-kernels timeout 420 "$sanitizer" --tool memcheck --error-exitcode 3 --print-limit 20 \
       "$build/tests/loka_cuda_tests" --gtest_filter='CudaGemm*:CudaLayerNorm*:CudaQuantizeRows*:CudaFp8Gemm*:*Epilogue*:*Softmax*:*Embedding*:*Copy*:*Reduce*:*Fp8Convert*:*Elementwise*:*ProbeFakeQuant*:*SharedLeft*:CudaAttention*:Cuda/ZooInputs.*:CudaRuntime.OutOfRange*:CudaRuntime.ABatchAbove*:CudaLokaOps.*'
else
  step_skipped memcheck-kernels "no compute-sanitizer on this machine"
fi
opt_dir="$logs/optimized"
mkdir -p "$opt_dir"
for model in dlrm_dot dlrm_dcnv2 wukong dhen attention_ranker; do
  zoo="$top/models/zoo/$model"
  # The FP32 model on the GPU against onnxruntime's FP32 reference outputs stored with the data.
  step "run-cuda-$model" "$build/tools/loka-run" "$zoo/model.onnx" --inputs "$zoo/eval" --device cuda \
       --compare "$zoo/eval" --tol 1e-4
  # The optimized model (FP8 sites, ai.loka ops) on the GPU against the CPU runtime's outputs of it.
  # 5e-3: Dispatch gives FP32 nodes TF32/BF16 kernels within the budget's reserve, which the CPU
  # runtime computes in FP32 (tiny attention_ranker, H200, 2026-11-26: 1.8e-7 without dispatch,
  # 3.0e-3 with it; the eval drift, not this gap, is what the budget bounds).
  if step "opt-$model" "$build/tools/loka-opt" "$zoo/model.onnx" -o "$opt_dir/$model.onnx" --calib "$zoo/calib" \
          --quiet --report "$logs/$model.report.json"; then
    step "cpu-ref-$model" "$build/tools/loka-run" "$opt_dir/$model.onnx" --inputs "$zoo/eval" --outputs "$opt_dir/$model.cpu"
    step "run-cuda-opt-$model" "$build/tools/loka-run" "$opt_dir/$model.onnx" --inputs "$zoo/eval" --device cuda \
         --compare "$opt_dir/$model.cpu" --tol 5e-3 --bench 200
  fi
done
# The serving contract under load on the GPU: bit-identical outputs, no device allocation after warm-up.
step soak-cuda "$build/tests/loka_soak" "$top/models/zoo/wukong/model.onnx" --data "$top/models/zoo/wukong/eval" \
     --device cuda --runs 1000000 --threads 8 --batches 1,7,64,512
step kernel-rate-bench "$build/kernel_rate_bench"

echo
echo "== gpu-kernels-check summary ($(cat "$logs/device.txt"), $(date -u +%F))"
print_steps
grep -E "^\[  (PASSED|FAILED|SKIPPED)" "$logs/cuda-tests.log" | head -40
cat "$logs/kernel-rate-bench.log"
grep -h "median\|throughput" "$logs"/run-cuda-opt-*.log 2>/dev/null | head -20
rm -rf "$opt_dir"/*.cpu
