#!/usr/bin/env bash
# Session 16, GPU call 1: branch early-concat-quant-encode rebased on 89e1a72. Builds everything,
# runs the CUDA tests 6417aa9/89e1a72 changed but never ran on a GPU (LayerNorm, scale epilogue,
# arena report) and those the branch touches (concat in place, zoo, LoKA ops, runtime), then
# re-times the scale epilogues and LayerNorm on kernel_rate_bench's random inputs.
source .carry/gpu-env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)
B=build-gpu
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOKA_BUILD_TESTS=ON > /dev/null 2>&1 && \
  cmake --build $B -j16 > $OUT/build.log 2>&1
echo "build rc=$? $(( $(date +%s) - t0 )) s"; grep -m5 -B2 -A3 " error" $OUT/build.log
timeout 300 $B/tests/loka_cuda_tests --gtest_filter='CudaLayerNorm*:CudaDequantEpilogue*:CudaRuntime.*:Zoo/*:CudaConcatInPlace*:CudaLokaOps.*' > $OUT/tests.log 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|tests ran" $OUT/tests.log | head -30
timeout 90 $B/kernel_rate_bench dequant-epi layernorm-fp8 2>&1 | grep -E "dequant|layernorm"
echo "done $(( $(date +%s) - t0 )) s"
