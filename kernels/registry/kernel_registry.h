// ============================================================================
// kernels/registry/kernel_registry.h — GEMM kernel candidates per functional
// key (CPU-side descriptors; kernels/cuda/gemm_candidate.h runs them).
//
// The registry holds kernel families (FP32, TF32, BF16, FP8 E4M3 with and without
// fast accumulation, LoKA's FP8 emulation in FP32, FP8 E4M3 as a cuDNN graph, LoKA's
// small-M FP8 kernel, split-weight BF16 for a BF16 activation). Asked for a key and a
// shape it expands every family that accepts the key into candidates, one
// per cuBLASLt heuristic algorithm index (then the explicit split-K and tile
// configurations asked for), and keeps those whose static can_implement passes. Candidate order is fixed (family order, then
// algorithm), so plans built from it are deterministic.
// ============================================================================
#pragma once

#include <vector>

#include "kernels/registry/gemm_kernel_key.h"

namespace loka::kernels {

/// What to expand.
struct CandidateOptions {
  int algorithms = 1;       ///< heuristic algorithms per cuBLASLt family (the GPU knows how many exist)
  bool fast_accum = false;  ///< add FP8 FAST_ACCUM variants (their error must be measured)
  bool bf16 = true;         ///< add BF16 candidates
  bool tf32 = true;         ///< add TF32 candidates (FP32 operands on the TF32 tensor cores)
  std::vector<int> split_k = {};  ///< explicit split-K configurations of each cuBLASLt family's algorithm 0
  /// Explicit tile configurations of each cuBLASLt family's algorithm 0: this many of the menu's
  /// tiles, those kernels/registry/cublaslt_tiles.h ranks best for the shape (0: none).
  int tiles = 0;
  /// cuDNN FP8 graph candidates: engine configurations 0..N-1 of cuDNN's heuristic (0: none).
  int cudnn_engines = 0;
  /// For GELU nodes, each cuBLASLt heuristic algorithm again with cuBLASLt's tanh GELU in the GEMM
  /// (GemmCandidate::tanh_gelu): an approximation whose error must be measured.
  bool tanh_gelu = false;
  /// LoKA's small-M FP8 kernel (loka.fp8.e4m3.{tensor,row}.small_m) for QuantizedGemm problems of
  /// up to cuda::kSmallMMaxRows rows: the node's own FP8 arithmetic, so no error to measure first.
  bool small_m = true;
};

/// How many cuDNN engine configurations the autotuner times per FP8 problem when asked for cuDNN
/// (building a plan may compile kernels: a few, not every one the heuristic lists). Dispatch
/// asks for none unless `dispatch{cudnn=N}` (docs/dispatch.md says why).
inline constexpr int kOfferedCudnnEngines = 2;

/// Every candidate that can compute `key` at `shape`, in the registry's fixed order.
std::vector<GemmCandidate> gemm_candidates(const GemmKey& key, const GemmShape& shape, const CandidateOptions& options);

/// Whether any family takes `key` at `shape` by the static rules, computing it as the node says
/// (a tanh_gelu candidate, an approximation offered only to be measured, does not count). Where
/// none does, nothing is dispatched and the CUDA runtime runs the node's own op or its FP32 fallback:
/// a QuantizedGemm holding activations in BF16 after the exact GELU, with a residual after its
/// activation, or with K or N not multiples of 16 (gemm_kernel_key.cc's can_implement).
bool has_gemm_candidate(const GemmKey& key, const GemmShape& shape);

/// The precision a node computes in when nothing is dispatched (what the runtime
/// runs for a node without a kernel choice): FP32 for Gemm/MatMul, FP8 for QuantizedGemm.
GemmPrecision reference_precision(const GemmKey& key);

}  // namespace loka::kernels
