// ============================================================================
// kernels/cuda/cudnn_layer_norm.h — LayerNormalization of rows x cols (the
// normalized dims flattened, as kernels/cuda/layer_norm.h takes them) as
// a cuDNN 9 graph, with ResidualLayerNorm's add fused where cuDNN builds it:
//
//     X [rows,cols] ─ (+ R [rows,cols]) ─ LayerNorm ──▶ Y [rows,cols] FP32
//                       (has_residual)        ▲
//                        scale [cols], bias [cols], epsilon
//
// the values kernels/cuda/layer_norm.h defines: population variance,
// (x - mean) / sqrt(var + epsilon) · scale + bias. An E4M3 output
// (LayerNormQuant's) is refused: the norm followed by a division into an E4M3
// tensor built, then faulted on its first run (H100, cuDNN 9.14, 2026-11-26).
// Measured there: the plain graph builds at every width tried (1 to 4099
// columns); the residual add only at some (none below 128 columns).
// cuDNN accumulates the statistics in float in its own order (LoKA's kernels
// in double), so the outputs agree to the statistics' rounding, not bitwise.
//
// The norm runs in inference phase: cuDNN computes each row's mean and
// variance itself and writes no statistics, so the kernel needs no scratch
// for them. cuDNN's LayerNorm always takes a bias; without one the kernel
// passes a row of zeros it allocates when created (v + 0 is v). Epsilon is a
// scalar passed by value, the problem's, fixed when planned.
//
// As kernels/cuda/cudnn_fp8_gemm.h: the graph is built with the backend API,
// the plan is the `engine`-th configuration of heuristic mode A, built once
// in create() with a cuDNN handle the kernel leases for its lifetime; run()
// enqueues it on the given stream, allocating nothing, so CUDA graphs capture
// it; one thread at a time runs a kernel. Where this build has no cuDNN, or
// cuDNN does not build the graph here (an unsupported width, a fusion its
// norm engines do not offer, an older GPU), create() fails with one line
// saying why and callers simply do not offer the candidate.
// Host code only.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/cuda/layer_norm.h"
#include "loka/status.h"

namespace loka::cuda {

struct CudnnLayerNormProblem {
  int64_t rows = 0, cols = 0;   ///< normalized over cols (the last axis)
  bool has_bias = false;        ///< FP32 bias [cols]
  bool has_residual = false;    ///< normalizes X + Residual (a pointwise add before the norm, in the graph)
  bool fp8_output = false;      ///< E4M3 codes (ai.loka LayerNormQuant): refused, see the banner
  float epsilon = 1e-5f;        ///< added to the variance; part of the plan (finite, >= 0)
};

class CudnnLayerNorm {
 public:
  /// Static rules: rows and cols positive, epsilon finite and not negative, an FP32 output.
  static Status can_implement(const CudnnLayerNormProblem& problem);
  /// Builds the graph and the plan of heuristic configuration `engine` (0: cuDNN's best estimate).
  static Result<std::unique_ptr<CudnnLayerNorm>> create(const CudnnLayerNormProblem& problem, int engine);
  ~CudnnLayerNorm();
  /// Enqueues the plan on `stream` (no allocation, no synchronization: capturable). `args` as for
  /// launch_layer_norm, with rows, cols and epsilon those of the problem, bias and residual given
  /// exactly when the problem has them, y (FP32), no amax (the graph computes none); every
  /// pointer 16-byte aligned. `workspace` holds workspace_bytes() (256-byte aligned; may be null
  /// when that is 0). One thread at a time; the variant pack is rebuilt only when the pointers
  /// differ from the last run's.
  Status run(const LayerNormArgs& args, void* workspace, cudaStream_t stream) const;
  /// How many engine configurations cuDNN's heuristic offered for this problem.
  int engine_count() const;
  /// The plan's own need, at most kGemmWorkspaceBytes: plans needing more are refused when
  /// created, so the workspace a runtime lends every kernel step (kGemmWorkspaceBytes) always
  /// suffices, and a caller with a smaller one can check.
  size_t workspace_bytes() const;
  const CudnnLayerNormProblem& problem() const { return problem_; }

 private:
  struct Impl;
  CudnnLayerNorm(CudnnLayerNormProblem problem, std::unique_ptr<Impl> impl);
  CudnnLayerNormProblem problem_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loka::cuda
