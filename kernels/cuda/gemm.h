// ============================================================================
// kernels/cuda/gemm.h — FP32 and BF16 GEMMs through cuBLASLt (FP32 accumulation).
//
//   Y[b][M,N] = act( X[b][M,K] · op(W[b]) + bias[N] ),  b < batch
//   Y[b][M,N] = X[b][M,K] · op(W[b]) + bias[N] + addend[b][M,N]   (has_addend: no activation)
//   Y[b][M,N] = act( X[b][M,K] · op(W[b]) + Y[b][M,N] + bias[N] )  (accumulate: a second term)
//
// All operands row-major. op(W) = W with W stored [K,N], or Wᵀ with W stored
// [N,K] (`transpose_w`, how ONNX Gemm transB=1 and LoKA's FP8 weights keep
// them). FP32 may run on the TF32 tensor cores instead (GemmOptions::tf32). Batched problems are strided (every operand has `batch` matrices back
// to back), as MatMul over equal leading dims needs; X may instead be one
// matrix read by every batch (stride 0), as `W [M,K] · X [B,K,N]` needs. FP32 inputs use
// CUBLAS_COMPUTE_32F without TF32, so results match the CPU reference up to
// summation order; BF16 inputs accumulate in FP32 and write BF16 or FP32.
//
// In column-major terms cuBLASLt computes Yᵀ = op(W)ᵀ · Xᵀ, so A = W and B = X.
// Planning asks the heuristic for up to GemmOptions::max_algorithms
// candidates (before any CUDA graph capture), and `run` passes the selected
// one explicitly. Operands 16-byte aligned get the fast algorithms; a second,
// element-aligned algorithm serves views that start mid-buffer.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "kernels/cuda/gemm_types.h"
#include "loka/dtype.h"
#include "loka/status.h"

namespace loka::cuda {

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;                  ///< strided batch count (W and Y batched; X too unless broadcast_x)
  bool broadcast_x = false;           ///< X is one [M,K] matrix shared by every batch (MatMul of a weight on the left)
  DType input = DType::kFloat32;      ///< X and W: kFloat32 or kBFloat16
  DType output = DType::kFloat32;     ///< Y: kFloat32 or kBFloat16 (FP32 input needs FP32 output)
  bool transpose_w = false;           ///< W stored [N,K] instead of [K,N]
  bool has_bias = false;              ///< bias [N] in the output type
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  /// cuBLASLt's C with beta = 1: a residual [batch,M,N] in the output type added in the same
  /// pass. cuBLASLt would add it before an activation, so only with epilogue kNone.
  bool has_addend = false;
  /// Y's own values are cuBLASLt's C (beta = 1): Y = act(X · op(W) + Y + bias), the sum added
  /// *before* the bias and activation. The second term of a product split in two (W = W_hi +
  /// W_lo, kernels/cuda/gemm_candidate.h's bf16x2); not with has_addend.
  bool accumulate = false;
  /// Elements between consecutive rows of Y (0: N, rows packed). A wider pitch writes Y into
  /// columns of a wider matrix, such as its slice of a Concat's output; batch 1, no addend and
  /// no GELU epilogue (the exact GELU's pass reads Y packed; the tanh one is not told apart here).
  int64_t y_row_pitch = 0;
};

struct GemmArgs {
  const void* x = nullptr;     ///< [batch, M, K], or [M, K] when broadcast_x
  const void* w = nullptr;     ///< [batch, K, N], or [batch, N, K] when transpose_w
  const void* bias = nullptr;  ///< [N] or null
  void* y = nullptr;           ///< [batch, M, N]
  const void* addend = nullptr;  ///< [batch, M, N] when has_addend (may be y itself)
};

class Gemm {
 public:
  /// Plans `problem`; errors say why it cannot run.
  static Result<std::unique_ptr<Gemm>> create(const GemmProblem& problem, const GemmOptions& options = {});
  ~Gemm();
  /// Whether this planner accepts `problem` (shapes and dtypes; cuBLASLt may still find no algorithm).
  static Status can_implement(const GemmProblem& problem);

  /// How many heuristic candidates were kept (>= 1).
  int algorithm_count() const;
  /// Makes `run` use candidate `index` (0 = the heuristic's best); out of range is an error.
  Status select_algorithm(int index);
  int selected_algorithm() const { return selected_; }

  /// Enqueues the GEMM on `stream` with the selected algorithm; `workspace` holds
  /// kGemmWorkspaceBytes, 256-byte aligned. Not thread-safe with a bias (its pointer is a
  /// descriptor attribute set per call): one Gemm per Session, as device ops are.
  Status run(const GemmArgs& args, void* workspace, cudaStream_t stream) const;
  /// As run, with candidate `index` (the autotuner's timing loop).
  Status run_algorithm(int index, const GemmArgs& args, void* workspace, cudaStream_t stream) const;
  const GemmProblem& problem() const { return problem_; }

 private:
  struct Impl;
  Gemm(GemmProblem problem, std::unique_ptr<Impl> impl, int selected);
  GemmProblem problem_;
  std::unique_ptr<Impl> impl_;
  int selected_ = 0;
};

}  // namespace loka::cuda
