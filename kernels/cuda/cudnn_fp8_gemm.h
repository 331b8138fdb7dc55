// ============================================================================
// kernels/cuda/cudnn_fp8_gemm.h — FP8 E4M3 GEMM as a cuDNN 9 graph, with the
// de-quantization scales, bias, ReLU and residual fused:
//
//     X [M,K] E4M3 ──┐
//                    ├─ matmul (FP32) ─ ×x_scale ─ ×w_scale[n] ─ +bias[n] ─ relu ─ +R[m,n] ─▶ Y [M,N] FP32
//     W [N,K] E4M3 ──┘        (per tensor)   (per channel)   (optional: each of the last three)
//
// the same values ai.loka::QuantizedGemm defines (scales multiply). The graph
// is built with the backend API (no cudnn-frontend), the execution plan is the
// `engine`-th configuration of heuristic mode A, built once in create(); run()
// enqueues it on the given stream with a workspace of at most
// kGemmWorkspaceBytes, allocating nothing, so CUDA graphs capture it.
//
// Where this build has no cuDNN (CMake found none, or CUDA is off), or the
// graph does not build on the cuDNN found at run time (no FP8 engine before
// Hopper, a configuration the heuristic does not offer, more workspace than
// the kernel has), create() fails with one line saying why: callers simply
// do not offer the candidate.
//
// Threads: create() leases a cuDNN handle of the current device for the
// kernel's lifetime (kernels/cuda/cudnn_util.h says why a pool); the plan is
// built with it and every run executes with it, whichever thread plans or
// runs. So a kernel may be planned on one thread and run on another, and its
// first run may be inside stream capture: run() only sets the handle's
// stream, binds the operands and enqueues. run() is not reentrant (the
// handle takes the run's stream): one thread at a time per kernel, as a
// GemmKernel belongs to one runtime Session. Kernels do not share handles, so
// sessions run theirs concurrently without a lock.
// Host code only.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/cuda/gemm_types.h"
#include "loka/status.h"

namespace loka::cuda {

struct CudnnFp8GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  bool has_bias = false;                         ///< FP32 bias [N]
  GemmEpilogue epilogue = GemmEpilogue::kNone;   ///< kNone or kRelu (cuDNN's GELU is not LoKA's exact one here: refused)
  bool has_residual = false;                     ///< FP32 R [M,N] added after the activation
};

struct CudnnFp8GemmArgs {
  const uint8_t* x = nullptr;        ///< [M,K] E4M3 codes
  const uint8_t* w = nullptr;        ///< [N,K] E4M3 codes
  const float* x_scale = nullptr;    ///< one float
  const float* w_scale = nullptr;    ///< [N]
  const float* bias = nullptr;       ///< [N] when has_bias
  const float* residual = nullptr;   ///< [M,N] when has_residual
  float* y = nullptr;                ///< [M,N]
};

/// Empty when this build has cuDNN and it opens a handle here; else why not (one line).
std::string cudnn_unavailable_reason();

/// cudnnGetVersion() of the library loaded (e.g. 91400), 0 in a build without cuDNN.
int cudnn_runtime_version();

/// The cuDNN handles of this process (each live kernel holds one of its own; given-back ones are
/// kept for the next plan), for tests and diagnostics. All zero without cuDNN.
struct CudnnHandleCounts {
  int created = 0;             ///< cudnnCreate calls that succeeded
  int leased = 0;              ///< held by live kernels now
  double first_create_ms = 0;  ///< the first cudnnCreate (it also loads the library's parts)
  double create_ms = 0;        ///< all cudnnCreate calls, summed
};
CudnnHandleCounts cudnn_handle_counts();

class CudnnFp8Gemm {
 public:
  /// Static rules: E4M3 operands in the TN layout, K and N multiples of 16 (16-byte rows), no GELU.
  static Status can_implement(const CudnnFp8GemmProblem& problem);
  /// Builds the graph and the plan of heuristic configuration `engine` (0: cuDNN's best estimate).
  static Result<std::unique_ptr<CudnnFp8Gemm>> create(const CudnnFp8GemmProblem& problem, int engine);
  ~CudnnFp8Gemm();
  /// Enqueues the plan on `stream` (no allocation, no synchronization: capturable);
  /// `workspace` holds kGemmWorkspaceBytes (256-byte aligned); every operand 16-byte aligned.
  /// One thread at a time (see the banner); the operands' variant pack is rebuilt only when
  /// the pointers differ from the previous run's.
  Status run(const CudnnFp8GemmArgs& args, void* workspace, cudaStream_t stream) const;
  /// How many engine configurations cuDNN's heuristic offered for this problem.
  int engine_count() const;
  const CudnnFp8GemmProblem& problem() const { return problem_; }

 private:
  struct Impl;
  CudnnFp8Gemm(CudnnFp8GemmProblem problem, std::unique_ptr<Impl> impl);
  CudnnFp8GemmProblem problem_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loka::cuda
