// ============================================================================
// kernels/cuda/cublaslt_util.cc — shared cuBLASLt plumbing.
// ============================================================================
#include "kernels/cuda/cublaslt_util.h"

namespace loka::cuda {

std::string cublaslt_error(cublasStatus_t status, const char* what) {
  return std::string("cuBLASLt ") + what + " failed: " + cublasLtGetStatusString(status);
}

cublasLtHandle_t cublaslt_thread_handle() {
  thread_local struct Holder {
    cublasLtHandle_t handle = nullptr;
    Holder() { cublasLtCreate(&handle); }
    ~Holder() {
      if (handle) cublasLtDestroy(handle);
    }
  } holder;
  return holder.handle;
}

Status set_cublaslt_epilogue(cublasLtMatmulDesc_t operation, GemmEpilogue epilogue, bool has_bias) {
  cublasLtEpilogue_t value = CUBLASLT_EPILOGUE_DEFAULT;
  switch (epilogue) {
    case GemmEpilogue::kNone: value = has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; break;
    case GemmEpilogue::kRelu: value = has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU; break;
    case GemmEpilogue::kGelu:  // CUBLASLT_EPILOGUE_GELU is the tanh approximation; LoKA's gelu is exact (erf)
      return Status::error("cuBLASLt has no exact GELU epilogue: apply GELU after the GEMM");
  }
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &value, sizeof value), "EPILOGUE");
  return Status::ok();
}

Result<std::vector<cublasLtMatmulAlgo_t>> cublaslt_algorithms(const CublasLtPlan& plan, int max_count,
                                                              uint32_t min_alignment_bytes, const std::string& what) {
  cublasLtMatmulPreference_t preference = nullptr;
  LOKA_LT_CHECK(cublasLtMatmulPreferenceCreate(&preference), "PreferenceCreate");
  const size_t workspace = kGemmWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  for (const auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                               CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublasLtMatmulPreferenceSetAttribute(preference, attribute, &min_alignment_bytes, sizeof min_alignment_bytes);
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(max_count < 1 ? 1 : max_count));
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(cublaslt_thread_handle(), plan.operation, plan.a, plan.b,
                                                               plan.c_layout(), plan.d, preference,
                                                               static_cast<int>(results.size()), results.data(), &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0)
    return Status::error("cuBLASLt has no algorithm for " + what +
                         (status != CUBLAS_STATUS_SUCCESS ? std::string(": ") + cublasLtGetStatusString(status) : ""));
  std::vector<cublasLtMatmulAlgo_t> algorithms;
  for (int i = 0; i < found; ++i)
    if (results[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS) algorithms.push_back(results[static_cast<size_t>(i)].algo);
  if (algorithms.empty()) return Status::error("cuBLASLt has no usable algorithm for " + what);
  return algorithms;
}

Result<cublasLtMatmulAlgo_t> configure_split_k(const CublasLtPlan& plan, cublasLtMatmulAlgo_t algorithm, int split_k,
                                               const std::string& what) {
  const std::string refused = what + ": cuBLASLt refuses split-K " + std::to_string(split_k);
  int32_t supported = 0;
  uint32_t schemes = 0;
  size_t written = 0;
  LOKA_LT_CHECK(cublasLtMatmulAlgoCapGetAttribute(&algorithm, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &supported,
                                                  sizeof supported, &written), "ALGO_CAP_SPLITK_SUPPORT");
  if (supported == 0) return Status::error(refused + " (the heuristic's algorithm has no split-K)");
  LOKA_LT_CHECK(cublasLtMatmulAlgoCapGetAttribute(&algorithm, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes,
                                                  sizeof schemes, &written), "ALGO_CAP_REDUCTION_SCHEME_MASK");
  const int32_t splits = split_k;
  for (const uint32_t scheme : {static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_INPLACE),
                                static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE),
                                static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE)}) {
    if ((schemes & scheme) == 0) continue;
    cublasLtMatmulAlgo_t configured = algorithm;
    LOKA_LT_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&configured, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits),
                  "ALGO_CONFIG_SPLITK_NUM");
    LOKA_LT_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&configured, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                       sizeof scheme), "ALGO_CONFIG_REDUCTION_SCHEME");
    cublasLtMatmulHeuristicResult_t result{};
    if (cublasLtMatmulAlgoCheck(cublaslt_thread_handle(), plan.operation, plan.a, plan.b, plan.c_layout(), plan.d,
                                &configured, &result) == CUBLAS_STATUS_SUCCESS &&
        result.state == CUBLAS_STATUS_SUCCESS && result.workspaceSize <= kGemmWorkspaceBytes)
      return configured;
  }
  return Status::error(refused + " (no reduction scheme passes cublasLtMatmulAlgoCheck)");
}

Result<int> choose_algorithm(const CublasLtPlan& plan, std::vector<cublasLtMatmulAlgo_t>& algorithms,
                             const GemmOptions& options, const std::string& what) {
  const int count = static_cast<int>(algorithms.size());
  const int selected = options.algorithm < 0 ? 0 : (options.algorithm >= count ? count - 1 : options.algorithm);
  if (options.split_k <= 0) return selected;
  LOKA_ASSIGN_OR_RETURN(const cublasLtMatmulAlgo_t configured,
                        configure_split_k(plan, algorithms[static_cast<size_t>(selected)], options.split_k, what));
  algorithms = {configured};
  return 0;
}

CublasLtPlan::~CublasLtPlan() {
  if (d) cublasLtMatrixLayoutDestroy(d);
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (operation) cublasLtMatmulDescDestroy(operation);
}

}  // namespace loka::cuda
