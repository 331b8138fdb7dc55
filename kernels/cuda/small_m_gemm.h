// ============================================================================
// kernels/cuda/small_m_gemm.h — LoKA's own FP8 GEMM for a few rows: quantize
// the activation and run the E4M3 GEMM with its scales, bias, activation and
// residual in one launch (Dispatch's loka.fp8.e4m3.{tensor,row}.small_m).
//
//   xq[m,k] = the E4M3 code of X[m,k] · (1 / X_scale)      tensor recipe (as fp8_convert.h's
//                                                          quantize: the reciprocal, rounded once)
//           = the E4M3 code of X[m,k] / s_m                 row recipe, s_m = amax_m / 448 over the
//                                                          row's finite values (as quantize_rows.h)
//           = X[m,k]                                        an E4M3 activation (its codes)
//   y[m,n]  = act( (Σ_k D(xq[m,k]) · D(W[n,k])) · xs(m) · W_scale[n] + B[n] ) + R[m,n]
//
// with xs(m) = s_m or X_scale and act none, ReLU or the exact GELU, applied as
// the scale epilogue does (dequant_value.cuh): what the fp8_e4m3 candidate
// computes, up to the order of the FP32 sums (the bias is read as FP32, not
// rounded to BF16 as cuBLASLt's).
//
// Why: at serving batches (1-256 rows) the cuBLASLt path is two launch-bound
// kernels (quantize, then a GEMM whose tensor-core tiles are mostly empty);
// here the weights are the bytes that matter and one launch reads them once.
// Products of two E4M3 values are exact in FP32, so SIMT FP32 sums compute
// what the tensor cores do; and any K and N run (cuBLASLt's FP8 kernels need
// multiples of 16), so FP8 reaches layers it refuses.
//
// Work split (small_m_tiling.h): a CTA of 8 warps covers 32 output columns and
// 1-16 output rows. It quantizes its rows of X once into shared memory (as
// decoded FP32 values, a K-tile at a time); each warp streams 4 weight rows,
// 16 codes a lane per load where K % 16 == 0 and W is 16-byte aligned (4 or 1
// otherwise), each code feeding every row of the tile, and sums across lanes
// at the end. Enqueue only: allocates nothing, graph-capturable; the scales
// are read on the device at run time, as cuBLASLt's scale pointers are.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/gemm_types.h"  // GemmEpilogue
#include "kernels/cuda/small_m_tiling.h"
#include "loka/status.h"

namespace loka::cuda {

/// What X holds and how its codes are made.
enum class SmallMInput {
  kE4M3Codes,         ///< E4M3 codes already (LayerNormQuant, QuantizeLinear), with the scale x_scale
  kFloatTensorScale,  ///< FP32, quantized with the static scale x_scale (the tensor recipe)
  kFloatRowScale,     ///< FP32, quantized per row with the row's own dynamic scale (the row recipe)
};

/// Device operands and sizes of one small-M GEMM (row-major, W stored [N,K]: "nt").
struct SmallMGemmArgs {
  const void* x = nullptr;  ///< [m, k]: FP32, or E4M3 codes (kE4M3Codes)
  SmallMInput input = SmallMInput::kFloatTensorScale;
  const uint8_t* w = nullptr;       ///< [n, k] E4M3 codes
  const float* w_scale = nullptr;   ///< [n] per-output-channel weight scales
  const float* x_scale = nullptr;   ///< one float (kE4M3Codes, kFloatTensorScale); unread by kFloatRowScale
  const float* bias = nullptr;      ///< [n] FP32, or null
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  const float* residual = nullptr;  ///< [m, n] FP32 added after the activation, or null
  float* y = nullptr;               ///< [m, n] FP32
  int64_t m = 0, n = 0, k = 0;      ///< m <= kSmallMMaxRows; any k >= 1 and n
};

/// Enqueues the GEMM on `stream`. Errors (nothing enqueued) for more than kSmallMMaxRows rows,
/// k < 1, or a missing operand; nothing to do for m = 0 or n = 0.
Status launch_small_m_gemm(const SmallMGemmArgs& args, cudaStream_t stream);

}  // namespace loka::cuda
