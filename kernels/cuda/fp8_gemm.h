// ============================================================================
// kernels/cuda/fp8_gemm.h — FP8 E4M3 GEMM through cuBLASLt ("TN", FP32 accumulation).
//
//   v[M,N] = act( (Σ_k X[m,k]·W[n,k]) · x_scale[m or 0] · w_scale[n or 0] + bias[n] )
//   Y      = v                          (BF16 or FP32 output)
//   Y      = E4M3(v · y_scale_inverse)  (FP8 output), *amax = max |v| (optional)
//   Y      = v + addend[M,N]            (has_addend: a residual, BF16/FP32 output, no activation)
//
// X is row-major [M,K] E4M3 codes (activations), W row-major [N,K] E4M3 codes
// (weights stored output-major, as ai.loka::QuantizedGemm keeps them). Scales
// multiply (ONNX convention) and live in device memory, so a CUDA graph
// captures their pointers.
//
// Scale vectors: per-output-channel w_scale [N] and per-row x_scale [M] are
// cuBLASLt's OUTER_VEC_32F mode. On sm_90 cuBLASLt runs it only with vectors on
// both operands (cuBLASLt 13.1, H100, 2026-11-26: W vector with a scalar X has
// no algorithm; both vectors run within 0-16% of the scalar kernel, far below
// the extra pass over the output the scales otherwise cost), so vector scales
// come in pairs: a per-tensor activation scale is passed as M copies. The
// heuristic also refuses vector modes while the scale pointers are null, which
// is why LoKA once concluded sm_90 had no such algorithm (2026-11-22): create()
// plans with a placeholder pointer. Where cuBLASLt still refuses, create()
// fails with its reason and callers apply the scales in their own epilogue
// (dequant_epilogue.h).
//
// FP8 output (cuBLASLt's D_SCALE / AMAX_D): per-tensor scales only (no
// algorithm with vectors); cuBLASLt multiplies by the inverse of the output
// scale, so a value within an ulp of a rounding midpoint may round to the
// other code than QuantizeLinear's division would.
//
// Bias: cuBLASLt's FP8 kernels read a BF16 bias whatever the output type.
// In column-major terms cuBLASLt computes Yᵀ = Wᵀᵀ·Xᵀ with A = W (transposed)
// and B = X — the "TN" layout FP8 requires on sm_90. The algorithm is chosen
// once per problem (heuristic, before any capture) and passed explicitly on
// every run. Host code only; see fp8_convert.cu for kernels.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "kernels/cuda/gemm_types.h"
#include "loka/dtype.h"
#include "loka/status.h"

namespace loka::cuda {

struct Fp8GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  bool per_row_x_scale = false;      ///< x_scale has M entries (OUTER_VEC; sm_90: with per_channel_w_scale)
  bool per_channel_w_scale = false;  ///< w_scale has N entries (OUTER_VEC; sm_90: with per_row_x_scale)
  DType output = DType::kBFloat16;   ///< kBFloat16, kFloat32, or kFloat8E4M3FN (scalar scales only)
  bool has_bias = false;             ///< BF16 bias [N] (FP8 kernels take no FP32 bias)
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  /// cuBLASLt's C with beta = 1: a residual [M,N] in the output type (BF16/FP32 output, no activation).
  bool has_addend = false;
  /// Elements between consecutive rows of Y (0: N). A wider pitch writes Y into columns of a
  /// wider matrix, such as its slice of a Concat's output; no addend (C shares D's layout).
  int64_t y_row_pitch = 0;
};

struct Fp8GemmArgs {
  const uint8_t* x = nullptr;  ///< [M,K] E4M3FN
  const uint8_t* w = nullptr;  ///< [N,K] E4M3FN
  const float* x_scale = nullptr;
  const float* w_scale = nullptr;
  const void* bias = nullptr;  ///< BF16 [N]
  void* y = nullptr;           ///< [M,N]
  const float* y_scale_inverse = nullptr;  ///< FP8 output: one float, 1 / the output's scale
  float* amax = nullptr;                   ///< FP8 output, optional: set to max |v| (cuBLASLt's AMAX_D)
  const void* addend = nullptr;            ///< [M,N] when has_addend (may be y itself)
};

class Fp8Gemm {
 public:
  /// Plans `problem` (descriptors and the heuristic's best algorithm); errors say why it cannot run.
  static Result<std::unique_ptr<Fp8Gemm>> create(const Fp8GemmProblem& problem, const GemmOptions& options = {});
  ~Fp8Gemm();
  /// Whether cuBLASLt's FP8 path can run this problem (K and leading dims multiples of 16, vector
  /// scales in pairs, FP8 output with scalar scales, ...); cuBLASLt itself may still refuse it.
  static Status can_implement(const Fp8GemmProblem& problem);
  /// Enqueues the GEMM on `stream`; `workspace` holds kGemmWorkspaceBytes (256-byte aligned).
  /// Not thread-safe (it sets the scale pointers on its descriptor): one Fp8Gemm per Session.
  Status run(const Fp8GemmArgs& args, void* workspace, cudaStream_t stream) const;
  /// As run, with heuristic candidate `index` (the autotuner's timing loop).
  Status run_algorithm(int index, const Fp8GemmArgs& args, void* workspace, cudaStream_t stream) const;
  /// How many heuristic candidates were kept (>= 1), and which one `run` uses.
  int algorithm_count() const;
  Status select_algorithm(int index);
  int selected_algorithm() const { return selected_; }
  const Fp8GemmProblem& problem() const { return problem_; }
  const GemmOptions& options() const { return options_; }

 private:
  struct Impl;
  Fp8Gemm(Fp8GemmProblem problem, GemmOptions options, std::unique_ptr<Impl> impl, int selected);
  Fp8GemmProblem problem_;
  GemmOptions options_;
  std::unique_ptr<Impl> impl_;
  int selected_ = 0;
};

}  // namespace loka::cuda
