// ============================================================================
// kernels/cuda/dequant_value.cuh — one output of an FP8 GEMM de-quantized and
// activated: act(acc · x_scale · w_scale + bias), as ai.loka QuantizedGemm
// defines it (docs/loka_ops.md).
//
// Every LoKA kernel that finishes an FP8 GEMM's output (the scale epilogue
// after cuBLASLt, the fused small-M GEMM) applies it with this one function,
// so they round alike: two multiplies then the bias add, each rounded on its
// own (explicit intrinsics: nvcc cannot contract them into an FMA), then the
// activation. Included by .cu files only.
// ============================================================================
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/gemm_types.h"  // GemmEpilogue

namespace loka::cuda {

/// act(acc · xs · ws + b): ReLU keeps NaN (as ONNX Relu); GELU is the exact (erf) form.
__device__ __forceinline__ float dequant_value(float acc, float xs, float ws, bool has_bias, float b,
                                               GemmEpilogue activation) {
  float v = __fmul_rn(__fmul_rn(acc, xs), ws);
  if (has_bias) v = __fadd_rn(v, b);
  if (activation == GemmEpilogue::kRelu) {
    v = v > 0.0f ? v : (v != v ? v : 0.0f);  // NaN stays NaN, as ONNX Relu
  } else if (activation == GemmEpilogue::kGelu) {
    v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
  return v;
}

}  // namespace loka::cuda
