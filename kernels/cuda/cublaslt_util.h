// ============================================================================
// kernels/cuda/cublaslt_util.h — the cuBLASLt plumbing every GEMM planner
// shares: status-to-error conversion, one handle per thread, epilogue
// selection and the heuristic's candidate list.
//
// Host code only (.cc files); the planners own their descriptors.
// ============================================================================
#pragma once

#include <cublasLt.h>

#include <string>
#include <vector>

#include "kernels/cuda/gemm_types.h"
#include "loka/status.h"

namespace loka::cuda {

/// "cuBLASLt WHAT failed: REASON".
std::string cublaslt_error(cublasStatus_t status, const char* what);

#define LOKA_LT_CHECK(call, what)                                                                         \
  do {                                                                                                    \
    const cublasStatus_t lt_status_ = (call);                                                             \
    if (lt_status_ != CUBLAS_STATUS_SUCCESS) return ::loka::Status::error(::loka::cuda::cublaslt_error(lt_status_, what)); \
  } while (0)

/// This thread's cuBLASLt handle (handles are cheap within a thread, not shared across).
cublasLtHandle_t cublaslt_thread_handle();

/// Sets the epilogue (and nothing else) on `operation` for `epilogue` with or without a bias.
/// kGelu is an error: cuBLASLt's GELU is the tanh approximation, not LoKA's exact one.
Status set_cublaslt_epilogue(cublasLtMatmulDesc_t operation, GemmEpilogue epilogue, bool has_bias,
                             bool tanh_gelu = false);

/// RAII owner of a cuBLASLt operation descriptor and its A, B, C and D layouts.
/// C is the addend's layout: null means D's (C = D in place, as every LoKA GEMM with
/// beta = 0 runs); an FP8 D needs a 16-bit C layout of its own (and a null C pointer).
struct CublasLtPlan {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatrixLayout_t c_layout() const { return c ? c : d; }
  CublasLtPlan() = default;
  CublasLtPlan(const CublasLtPlan&) = delete;
  CublasLtPlan& operator=(const CublasLtPlan&) = delete;
  ~CublasLtPlan();
};

/// `algorithm` configured explicitly with split-K `split_k` (>= 2) and a reduction scheme cuBLASLt
/// accepts for it (in place first: no extra workspace), checked against `plan` with a
/// kGemmWorkspaceBytes workspace. An error names `what` and says why cuBLASLt refuses it.
Result<cublasLtMatmulAlgo_t> configure_split_k(const CublasLtPlan& plan, cublasLtMatmulAlgo_t algorithm, int split_k,
                                               const std::string& what);

/// `algorithm` configured explicitly with tile `tile` (a cublasLtMatmulTile_t value) and, when
/// `stages` > 0, that cublasLtMatmulStages_t; checked against `plan` with a kGemmWorkspaceBytes
/// workspace. The heuristic chose the rest of the configuration for its own tile, so where
/// cuBLASLt refuses it with the new tile, other values are tried, in a fixed order (the same
/// configuration for the same library): stages — the heuristic's, then each of the algorithm's
/// stage ids —, cluster shape — the heuristic's, then automatic — and custom option — the
/// heuristic's, then 0. The first that cublasLtMatmulAlgoCheck accepts is returned. An error
/// names `what` and says why (a tile or stage id the algorithm does not have, or no accepted
/// combination).
Result<cublasLtMatmulAlgo_t> configure_tile(const CublasLtPlan& plan, cublasLtMatmulAlgo_t algorithm, int tile,
                                            int stages, const std::string& what);

/// The index `options.algorithm` (clamped to the list) of `algorithms`, the heuristic's list for
/// `plan`; with options.split_k or options.tile, that algorithm configured explicitly
/// (configure_split_k, configure_tile) becomes the list's only entry and the index 0.
Result<int> choose_algorithm(const CublasLtPlan& plan, std::vector<cublasLtMatmulAlgo_t>& algorithms,
                             const GemmOptions& options, const std::string& what);

/// Up to `max_count` algorithms for `plan`'s matmul, best estimate first, each usable with
/// a kGemmWorkspaceBytes workspace and operands aligned to `min_alignment_bytes`.
/// An empty list is an error naming `what`.
Result<std::vector<cublasLtMatmulAlgo_t>> cublaslt_algorithms(const CublasLtPlan& plan, int max_count,
                                                              uint32_t min_alignment_bytes, const std::string& what);

}  // namespace loka::cuda
