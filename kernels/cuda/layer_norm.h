// ============================================================================
// kernels/cuda/layer_norm.h — LayerNormalization over the last axis, writing
// FP32 (ONNX LayerNormalization) or FP8 E4M3 codes with their static scale
// (ai.loka LayerNormQuant: the norm that feeds FP8 GEMMs emits FP8 itself, so
// no separate quantize kernel reads the activation again).
//
//   mean, inv_std : double accumulation, rounded to float once (population variance + epsilon)
//   v[r, j]       = (x[r, j] - mean) · inv_std · scale[j] (+ bias[j])     in float, no FMA
//   y[r, j]       = v                      (FP32 output)
//   codes[r, j]   = E4M3(v / y_scale)      (FP8 output; saturating, nearest even; the kernels
//                                           multiply by 1/y_scale where that gives the same code)
//   *amax         = max(*amax, max |v| over finite v)   (optional, for delayed scaling)
//
// The same operations in the same order as kernels/cpu/layer_norm.h, so the
// GPU matches the CPU reference to the last bit except where the double
// statistics' rounding (the sums' order; 1/cols and rsqrt for the divisions)
// changes the float rounding of mean or inv_std. Two rows a warp in registers
// up to 128 columns (float4 rows), one warp per row up to 1024 columns, a block per row
// beyond; rows up to 8192 wide are read from memory once. Enqueue only:
// graph-capturable.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "loka/status.h"

namespace loka::cuda {

struct LayerNormArgs {
  const float* x = nullptr;      ///< [rows, cols]
  const float* residual = nullptr;  ///< [rows, cols] or null: normalizes x + residual (FP32 output only)
  const float* scale = nullptr;  ///< [cols]
  const float* bias = nullptr;   ///< [cols] or null
  int64_t rows = 0, cols = 0;
  float epsilon = 1e-5f;
  float* y = nullptr;            ///< FP32 output [rows, cols], or null when writing codes
  uint8_t* y_codes = nullptr;    ///< E4M3 output [rows, cols], or null when writing y
  float y_scale = 1.0f;          ///< FP8 output: values are divided by it (finite, > 0)
  float* amax = nullptr;         ///< optional device float, raised to the largest finite |v| (start it at 0)
};

Status launch_layer_norm(const LayerNormArgs& args, cudaStream_t stream);

}  // namespace loka::cuda
