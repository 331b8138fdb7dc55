// ============================================================================
// kernels/cuda/fp8_gemm.h — FP8 E4M3 GEMM through cuBLASLt ("TN", FP32 accumulation).
//
//   Y[M,N] = act( (Σ_k X[m,k]·W[n,k]) · x_scale[m or 0] · w_scale[n or 0] + bias[n] )
//
// X is row-major [M,K] E4M3 codes (activations), W row-major [N,K] E4M3 codes
// (weights stored output-major, as ai.loka::QuantizedGemm keeps them), Y
// row-major [M,N] in BF16 or FP32. Scales multiply (ONNX convention) and live
// in device memory, so a CUDA graph captures their pointers. Per-tensor scales
// work on sm_90; per-row / per-output-channel vectors (cuBLASLt's OUTER_VEC_32F
// mode) are requested when asked for, but cuBLASLt 13 on an H100 has no FP8
// algorithm for them (measured 2026-11-22), so create() refuses them there;
// nor for a per-channel alpha vector (POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO,
// measured 2026-11-24), so QuantizedGemm applies those scales in its epilogue. In column-major terms cuBLASLt computes Yᵀ = Wᵀᵀ·Xᵀ with A = W
// (transposed) and B = X — the "TN" layout FP8 requires on sm_90.
// The algorithm is chosen once per problem (heuristic, before any capture) and
// passed explicitly on every run. Host code only; see fp8_convert.cu for kernels.
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
  bool per_row_x_scale = false;      ///< x_scale has M entries (dynamic per-row recipe)
  bool per_channel_w_scale = false;  ///< w_scale has N entries (per output channel), as an OUTER_VEC scale
  DType output = DType::kBFloat16;   ///< kBFloat16 or kFloat32
  bool has_bias = false;             ///< BF16 bias [N] (FP8 kernels take no FP32 bias)
  GemmEpilogue epilogue = GemmEpilogue::kNone;
};

struct Fp8GemmArgs {
  const uint8_t* x = nullptr;  ///< [M,K] E4M3FN
  const uint8_t* w = nullptr;  ///< [N,K] E4M3FN
  const float* x_scale = nullptr;
  const float* w_scale = nullptr;
  const void* bias = nullptr;
  void* y = nullptr;           ///< [M,N]
};

class Fp8Gemm {
 public:
  /// Plans `problem` (descriptors and the heuristic's best algorithm); errors say why it cannot run.
  static Result<std::unique_ptr<Fp8Gemm>> create(const Fp8GemmProblem& problem, const GemmOptions& options = {});
  ~Fp8Gemm();
  /// Whether cuBLASLt's FP8 path can run this problem (K and leading dims multiples of 16, ...).
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
