// ============================================================================
// kernels/cuda/gemm_types.h — what every GEMM planner (cuBLASLt FP32/BF16,
// FP8, LoKA's epilogue kernels) and the Dispatch autotuner share: the fused
// activation, the planning options and the workspace size.
// ============================================================================
#pragma once

#include <cstddef>

namespace loka::cuda {

/// The activation applied after bias: exact (erf) GELU by default. cuBLASLt's
/// GELU epilogue is the tanh approximation, so the cuBLASLt GEMMs (gemm.h) fuse
/// only RELU_BIAS and apply GELU in a pass of their own, and LoKA's FP8 scale
/// epilogue (dequant_epilogue.h) fuses both; GemmOptions::tanh_gelu puts cuBLASLt's
/// approximation in the GEMM instead, a Dispatch candidate whose error is measured.
enum class GemmEpilogue { kNone, kRelu, kGelu };

/// How a GEMM is planned. Algorithms come from cuBLASLt's heuristic, best
/// first; Dispatch times them all and pins one (`algorithm`), and everything
/// else runs the heuristic's first.
struct GemmOptions {
  int max_algorithms = 8;   ///< how many heuristic candidates to keep (>= 1)
  int algorithm = 0;        ///< the one `run` uses; clamped to what exists
  bool fast_accum = false;  ///< FP8 only: CUBLASLT_MATMUL_DESC_FAST_ACCUM (faster, less accurate)
  /// FP32 inputs only: TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32; 10-bit mantissa products,
  /// FP32 sums): several times the FP32 rate, more precise than BF16. A Dispatch candidate.
  bool tf32 = false;
  /// Split-K forced on the selected algorithm (0: the heuristic's own): an explicit cuBLASLt
  /// configuration, a Dispatch candidate (cublaslt.*.algo0.splitkN). The plan then holds only it.
  int split_k = 0;
  /// A tile (cublasLtMatmulTile_t value) forced on the selected algorithm (0: the heuristic's),
  /// with `stages` (cublasLtMatmulStages_t, 0: the heuristic's or the first accepted): an explicit
  /// configuration, a Dispatch candidate (cublaslt.*.algo0.tileT[.stagesS]). Not with split_k.
  int tile = 0;
  int stages = 0;
  /// GELU as cuBLASLt's epilogue (CUBLASLT_EPILOGUE_GELU[_BIAS], the tanh approximation: within
  /// 4.7e-4 of the exact GELU on [-4, 4], measured on an H100) instead of an exact pass over the
  /// output afterwards: a Dispatch candidate (cublaslt.*.tanh_gelu.algoN) chosen only where its
  /// measured error fits the budget. Ignored without a GELU epilogue.
  bool tanh_gelu = false;
};

/// 32 MiB: what cuBLASLt's large FP8 and split-K kernels may ask for.
inline constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

}  // namespace loka::cuda
