// ============================================================================
// kernels/cuda/dequant_epilogue.h — the scale epilogue of an FP8 GEMM whose
// scales cuBLASLt cannot apply (ai.loka QuantizedGemm on sm_90).
//
//   v[r, n] = act( acc[r, n] · x_scale[r or 0] · w_scale[n] + bias[n] )
//   y[r, n] = v · multiplier[r, n] + residual[r, n]     (each optional; FP32)
//   codes[r, n] = Q(y[r, n] / code_scale)                (optional)
//
// The two optional terms are the fused epilogues cuBLASLt lacks: a residual
// add (Wukong, DHEN and attention blocks: x + Linear(x)) and the DCN cross
// layer x₀ ⊙ (x W + b) + x (multiplier x₀, residual x), so the GEMM output
// is not written and read again by separate elementwise kernels. The codes
// are the next FP8 GEMM's input (ai.loka QuantizedGemm's Yq output, made by
// fuse-epilogue-quantize): written here, y is not read again by a quantize
// kernel (4 bytes an element read, 1 written, and a launch, per DCN layer).
//
// acc is the result of the FP8 GEMM run with unit scales: FP32, or rounded to
// BF16 by the GEMM (QuantizedGemm's own op on the GPU: its GEMM writes 2 bytes
// an element instead of 4 and this pass reads 2; the rounding, 2^-8 of each
// sum, is far below the FP8 operands' own error). The multiplier, the residual
// and y are each FP32 or BF16 (QuantizedGemm's BF16 activation storage): the
// terms are widened exactly, y is the FP32 result rounded to nearest even, and
// the codes are those of the FP32 result, before that rounding. The pass is
// memory-bound, so bytes an element are its time: DLRM-DCNv2's cross layer
// (BF16 sums, x₀ and x in, y and codes out) moves 2 + 4 + 4 + 4 + 1 = 15 with
// FP32 terms and y, about 60 us a layer at batch 4096 on an H200, and
// 2 + 2 + 2 + 2 + 1 = 9 with BF16 ones. The registry's
// FP8 kernel (gemm_candidate.h) lets cuBLASLt apply scales, bias and ReLU where
// it can (paired OUTER_VEC scales, fp8_gemm.h); this pass remains for what
// cuBLASLt cannot fuse: exact GELU, the Multiplier/Residual terms, and
// cuBLASLt versions without vector scales. The order of
// the two multiplies and the add follows the CPU reference (the scaled operands
// there are multiplied before summing, so results differ by FP32 rounding).
// Enqueue only: graph-capturable.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/gemm_types.h"  // GemmEpilogue
#include "loka/dtype.h"
#include "loka/status.h"

namespace loka::cuda {

struct DequantEpilogueArgs {
  const void* acc = nullptr;       ///< [rows, cols] of acc_type
  DType acc_type = DType::kFloat32;  ///< kFloat32 or kBFloat16
  const float* x_scale = nullptr;  ///< rows entries, or one when !per_row_x_scale
  bool per_row_x_scale = false;
  const float* w_scale = nullptr;  ///< cols entries
  const float* bias = nullptr;     ///< cols entries, or null
  GemmEpilogue activation = GemmEpilogue::kNone;
  const void* multiplier = nullptr;  ///< [rows, cols] of multiplier_type or null (DCN cross: x₀)
  DType multiplier_type = DType::kFloat32;  ///< kFloat32 or kBFloat16
  const void* residual = nullptr;    ///< [rows, cols] of residual_type or null, added last
  DType residual_type = DType::kFloat32;  ///< kFloat32 or kBFloat16
  /// [rows, cols] of y_type; null: only the codes are written. It may be the very buffer of acc,
  /// the multiplier or the residual when that has y's type (each element is read before it is
  /// written, by the same thread), and must not overlap them otherwise.
  void* y = nullptr;
  DType y_type = DType::kFloat32;  ///< kFloat32, or kBFloat16 (the FP32 result rounded to nearest even)
  uint8_t* codes = nullptr;        ///< [rows, cols] E4M3FN codes of y / code_scale (y in FP32), or null
  float code_scale = 1.0f;         ///< divides y before encoding (finite, > 0)
  int64_t rows = 0, cols = 0;
};

Status launch_dequant_epilogue(const DequantEpilogueArgs& args, cudaStream_t stream);

}  // namespace loka::cuda
