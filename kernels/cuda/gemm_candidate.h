// ============================================================================
// kernels/cuda/gemm_candidate.h — one registry GEMM candidate, planned and
// runnable (the object behind a name like cublaslt.fp8.e4m3.row.algo2).
//
// `can_implement(problem)` and `run(args, workspace, stream)` both return a
// Status, as CUTLASS's library operations do. A planned kernel enqueues the
// whole sequence its candidate stands for, the same one the cost model counts
// (kernels/registry/cost_model.h) and the autotuner times:
//   fp32          one cuBLASLt FP32 GEMM (bias and activation fused); a BF16 X (BF16
//                 activation storage) widened to FP32 first, exactly, into the run scratch
//   tf32          the same GEMM with CUBLAS_COMPUTE_32F_FAST_TF32 (no cast: the tensor
//                 cores round FP32 operands to TF32 themselves; a BF16 X widened as for fp32)
//   bf16x2        a BF16 X read as it is, constant weights split once, when planned, into
//                 W_hi = bf16(W) and W_lo = bf16(W - W_hi); cuBLASLt BF16 GEMM X · W_hi into
//                 FP32 Y (with the residual as C when no activation follows), then X · W_lo
//                 with C = Y, the bias and activation fused: no FP32 copy of X, W to 2^-17
//   bf16          cast X to BF16 (a BF16 X is read as it is), cuBLASLt BF16 GEMM into
//                 FP32 (bias/activation fused); constant weights converted to BF16 once,
//                 when planned, from the host copy; a computed W (activation x
//                 activation) cast on the device per run
//   fp8_e4m3      quantize X (per tensor, or per row; from FP32 or BF16) unless it is E4M3 already,
//                 E4M3 GEMM (heuristic algorithm N, optional FAST_ACCUM) with the
//                 per-channel weight and per-row (or M copies of the per-tensor)
//                 activation scales, BF16 bias and ReLU applied by cuBLASLt
//                 (fp8_gemm.h), written straight to Y (FP32, or BF16 where key.output
//                 says: cuBLASLt's D in BF16, the residual as C in BF16). With GELU (cuBLASLt's is
//                 tanh), or a cuBLASLt without vector scales: unit scales into an
//                 FP32 accumulator (Y itself, or the run scratch when Y is BF16), then
//                 LoKA's scale epilogue (dequant_epilogue.h) writing Y
//   fp8_emulated  quantize + dequantize X, FP32 GEMM on decoded weights (any K)
//   cudnn fp8     the same quantize, then one cuDNN graph (cudnn_fp8_gemm.h) applying the
//                 scales, FP32 bias, ReLU and the residual; engine N of cuDNN's heuristic
//   loka small_m  one LoKA kernel (small_m_gemm.h): X quantized on the fly (or its E4M3
//                 codes read), SIMT FP32 sums of E4M3 products, then the scales, FP32
//                 bias, activation and residual; up to kSmallMMaxRows rows, any K and N
// Explicit configurations (.splitkN, .tileT[.stagesS]) run the same sequence with
// the GEMM's algorithm configured (cublaslt_util.h); one cuBLASLt refuses is an
// error from create() saying why, and no candidate.
// A tanh_gelu candidate of a GELU node runs cuBLASLt's GELU epilogue (the tanh form) in the
// GEMM instead of the exact GELU pass (or, for FP8, instead of the scale epilogue pass).
// A residual (key.residual) rides in cuBLASLt's C (beta = 1) when there is no
// activation (cuBLASLt adds C before it), in LoKA's scale epilogue on that
// path, and otherwise in an elementwise add after the GEMM.
// Memory is allocated when planned, so runs allocate nothing and CUDA graphs can
// capture them. What lives across runs (converted weights, the unit and copied
// activation scales, a BF16 bias) is the kernel's own. What one run writes and
// reads only within itself (the codes, BF16 copy or FP32 widening of X, per-row
// scales, a computed W cast to BF16: run_scratch_bytes()) is the kernel's own too, unless
// the planner lends it (GemmCandidatePlanInputs::lent_run_scratch): then every
// run gets it in GemmCandidateArgs::run_scratch, and a runtime that runs its
// nodes one after another can let all of them share the same bytes (the CUDA
// runtime puts it in the bucket's arena for the node's step alone).
// Host logic only; the kernels it launches live in the .cu files.
// ============================================================================
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "kernels/registry/gemm_kernel_key.h"
#include "loka/status.h"
#include "loka/tensor.h"

namespace loka::cuda {

/// The revision of what the candidates enqueue. Perf DB timings are valid for one revision: the
/// tuning fingerprint (gemm_autotune.h) carries it next to the cuBLASLt version, so timings of
/// older kernels are not reused. Bump it when a candidate's kernel sequence changes.
/// A perf DB answers a problem from any record of it, so a revision also marks a change in which
/// candidates are measured.
/// 2: fp8_e4m3 applies its scales, bias and ReLU inside cuBLASLt's GEMM (paired OUTER_VEC).
/// 3: explicit tile configurations and tanh_gelu candidates are measured (a revision-2 DB would
///    answer every problem it holds without timing them).
/// 4: LoKA's small-M FP8 kernel (loka.fp8.e4m3.*.small_m) is measured for problems of up to
///    kSmallMMaxRows rows (a revision-3 DB would answer them without it).
/// 5: the revision covers the norm candidates too (kernels/cuda/norm_autotune.h records them in the
///    same DB under the same fingerprint): bump it when LoKA's LayerNorm kernel changes as well.
/// 6: close candidates (within 1.2x or 3 µs) are re-timed, and the families' fastest side by side
///    (autotune_timing.h): a revision-5 DB keeps choices made on one round each.
/// 7: a BF16 activation's split-weight BF16 GEMMs (cublaslt.bf16x2.*) are measured (a revision-6
///    DB would answer BF16-activation problems without them).
inline constexpr int kGemmKernelRevision = 7;

/// Device operands of one run. Which ones are read depends on the key.
struct GemmCandidateArgs {
  const void* x = nullptr;          ///< [M,K] (or [batch,M,K]) FP32, or key.input's BF16 values or E4M3 codes
  const void* w = nullptr;          ///< FP32 ([N,K] nt / [K,N] nn / [batch,K,N]), or E4M3 codes [N,K]
  const float* w_scale = nullptr;   ///< E4M3 weights: [N] per-channel scales
  const float* x_scale = nullptr;   ///< E4M3 input or the tensor recipe: the static scale (one float)
  const float* bias = nullptr;      ///< FP32 [N] or null (small_m reads it as it is)
  void* y = nullptr;                ///< [M,N] (or [batch,M,N]) of key.output: FP32, or a QuantizedGemm's BF16
  const void* residual = nullptr;   ///< [M,N] of key.output when key.residual: added after the activation
  /// run_scratch_bytes() bytes, 256-byte aligned, that this run may overwrite: required when the
  /// kernel was planned with lent_run_scratch (null: the kernel's own is used).
  void* run_scratch = nullptr;
};

/// What planning needs besides the key and shape.
struct GemmCandidatePlanInputs {
  const Tensor* host_w = nullptr;        ///< constant weights (needed by bf16 and fp8_emulated when key.constant_weight)
  const Tensor* host_w_scale = nullptr;  ///< E4M3 weights' per-channel scales (same)
  const Tensor* host_bias = nullptr;     ///< FP32 [N] bias as a constant: fp8_e4m3 converts it to BF16 once (else per run)
  float x_scale = 1.0f;                  ///< static activation scale (tensor recipe / E4M3 input)
  int max_algorithms = 8;                ///< how many heuristic algorithms to ask cuBLASLt for
  /// Elements between consecutive rows of Y (0: N): Y written into its slice of a wider matrix
  /// (a Concat's output, runtime/concat_placement.h). Only candidates whose last pass is one
  /// cuBLASLt GEMM writing Y take it (batch 1, no residual): create() refuses it for the others.
  int64_t y_row_pitch = 0;
  /// Runs bring the memory they write and read within themselves (GemmCandidateArgs::run_scratch)
  /// instead of the kernel keeping its own.
  bool lent_run_scratch = false;
};

class GemmKernel {
 public:
  /// Static rules (kernels/registry) — cuBLASLt may still offer no algorithm; create() says so.
  static Status can_implement(const kernels::GemmCandidate& candidate, const kernels::GemmKey& key,
                              const kernels::GemmShape& shape);
  /// Plans `candidate`; an algorithm index beyond what cuBLASLt offers here is an error saying how many exist.
  static Result<std::unique_ptr<GemmKernel>> create(const kernels::GemmCandidate& candidate,
                                                    const kernels::GemmKey& key, const kernels::GemmShape& shape,
                                                    const GemmCandidatePlanInputs& inputs);
  ~GemmKernel();
  /// Enqueues the candidate's kernels on `stream`; `workspace` holds kGemmWorkspaceBytes.
  Status run(const GemmCandidateArgs& args, void* workspace, cudaStream_t stream) const;
  /// How many heuristic algorithms cuBLASLt offered for this candidate's GEMM (1 for emulation).
  int algorithm_count() const;
  const kernels::GemmCandidate& candidate() const { return candidate_; }
  /// The row pitch Y is written with (0: packed rows of N).
  int64_t output_row_pitch() const;
  /// Bytes a run writes and reads within itself (GemmCandidateArgs::run_scratch); 0 for none.
  size_t run_scratch_bytes() const;

 private:
  struct Impl;
  GemmKernel(kernels::GemmCandidate candidate, std::unique_ptr<Impl> impl);
  /// create() for bf16x2: its two GEMMs and the split weights.
  static Result<std::unique_ptr<GemmKernel>> create_split_weights(const kernels::GemmCandidate& candidate,
                                                                  const kernels::GemmKey& key,
                                                                  const kernels::GemmShape& shape,
                                                                  const GemmCandidatePlanInputs& inputs,
                                                                  const GemmOptions& options, std::unique_ptr<Impl> impl);
  /// The candidate's GEMM sequence, with the residual where it rides in it.
  Status run_gemm(const GemmCandidateArgs& args, void* workspace, cudaStream_t stream) const;
  kernels::GemmCandidate candidate_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loka::cuda
