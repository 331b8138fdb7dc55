// ============================================================================
// kernels/cuda/fp8_gemm.cc — cuBLASLt FP8 GEMM planning and launch.
// ============================================================================
#include "kernels/cuda/fp8_gemm.h"

#include <cublasLt.h>

#include <string>

namespace loka::cuda {
namespace {

std::string lt_error(cublasStatus_t status, const char* what) {
  return std::string("cuBLASLt ") + what + " failed: " + cublasLtGetStatusString(status);
}

#define LOKA_LT_CHECK(call, what)                                               \
  do {                                                                          \
    const cublasStatus_t lt_status_ = (call);                                   \
    if (lt_status_ != CUBLAS_STATUS_SUCCESS) return Status::error(lt_error(lt_status_, what)); \
  } while (0)

/// One cuBLASLt handle per thread: handles are cheap to share within a thread and not across.
cublasLtHandle_t thread_handle() {
  thread_local struct Holder {
    cublasLtHandle_t handle = nullptr;
    Holder() { cublasLtCreate(&handle); }
    ~Holder() { if (handle) cublasLtDestroy(handle); }
  } holder;
  return holder.handle;
}

}  // namespace

struct Fp8Gemm::Impl {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algorithm{};
  ~Impl() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (operation) cublasLtMatmulDescDestroy(operation);
  }
};

Fp8Gemm::Fp8Gemm(Fp8GemmProblem problem, std::unique_ptr<Impl> impl)
    : problem_(problem), impl_(std::move(impl)) {}
Fp8Gemm::~Fp8Gemm() = default;

Status Fp8Gemm::can_implement(const Fp8GemmProblem& p) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0) return Status::error("FP8 GEMM needs positive M, N, K");
  if (p.k % 16 != 0) return Status::error("FP8 GEMM needs K a multiple of 16 (K=" + std::to_string(p.k) + ")");
  if (p.n % 16 != 0) return Status::error("FP8 GEMM needs N a multiple of 16 for the output's leading dim (N=" + std::to_string(p.n) + ")");
  if (p.output != DType::kBFloat16 && p.output != DType::kFloat32) return Status::error("FP8 GEMM output must be BF16 or FP32");
  return Status::ok();
}

Result<std::unique_ptr<Fp8Gemm>> Fp8Gemm::create(const Fp8GemmProblem& p) {
  LOKA_RETURN_IF_ERROR(can_implement(p));
  auto impl = std::make_unique<Impl>();
  const cudaDataType_t out_type = p.output == DType::kBFloat16 ? CUDA_R_16BF : CUDA_R_32F;
  LOKA_LT_CHECK(cublasLtMatmulDescCreate(&impl->operation, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(impl->operation, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose), "TRANSA");
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(impl->operation, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep), "TRANSB");
  // A = W (scale per output channel = per row of op(A)), B = X (per row of X = per column of op(B)).
  const int32_t a_mode = p.per_channel_w_scale ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  const int32_t b_mode = p.per_row_x_scale ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(impl->operation, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof a_mode), "A_SCALE_MODE");
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(impl->operation, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof b_mode), "B_SCALE_MODE");
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  switch (p.epilogue) {
    case GemmEpilogue::kNone: epilogue = p.has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; break;
    case GemmEpilogue::kRelu: epilogue = p.has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU; break;
    case GemmEpilogue::kGelu: epilogue = p.has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU; break;
  }
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(impl->operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue), "EPILOGUE");
  if (p.has_bias) {
    // cuBLASLt's FP8 kernels take a BF16/FP16 bias whatever the output type (sm_90).
    const cudaDataType_t bias_type = CUDA_R_16BF;
    LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(impl->operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type), "BIAS_DATA_TYPE");
  }
  // Column-major views: A is W stored [N,K] row-major = K×N column-major (ld K), op(A)=Aᵀ is N×K.
  LOKA_LT_CHECK(cublasLtMatrixLayoutCreate(&impl->a, CUDA_R_8F_E4M3, static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.n), p.k), "layout A");
  LOKA_LT_CHECK(cublasLtMatrixLayoutCreate(&impl->b, CUDA_R_8F_E4M3, static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.m), p.k), "layout B");
  LOKA_LT_CHECK(cublasLtMatrixLayoutCreate(&impl->d, out_type, static_cast<uint64_t>(p.n), static_cast<uint64_t>(p.m), p.n), "layout D");

  cublasLtMatmulPreference_t preference = nullptr;
  LOKA_LT_CHECK(cublasLtMatmulPreferenceCreate(&preference), "PreferenceCreate");
  const size_t workspace = kGemmWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(thread_handle(), impl->operation, impl->a, impl->b, impl->d,
                                                               impl->d, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0)
    return Status::error("cuBLASLt has no FP8 algorithm for M=" + std::to_string(p.m) + " N=" + std::to_string(p.n) +
                         " K=" + std::to_string(p.k) + (status != CUBLAS_STATUS_SUCCESS ? std::string(": ") + cublasLtGetStatusString(status) : ""));
  impl->algorithm = result.algo;
  return std::unique_ptr<Fp8Gemm>(new Fp8Gemm(p, std::move(impl)));
}

Status Fp8Gemm::run(const Fp8GemmArgs& args, void* workspace, cudaStream_t stream) const {
  cublasLtMatmulDesc_t operation = impl_->operation;
  // Scale and bias pointers are attributes of the descriptor; set per call (cheap, host-side).
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &args.w_scale, sizeof args.w_scale), "A_SCALE_POINTER");
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &args.x_scale, sizeof args.x_scale), "B_SCALE_POINTER");
  if (problem_.has_bias)
    LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &args.bias, sizeof args.bias), "BIAS_POINTER");
  const float alpha = 1.0f, beta = 0.0f;
  LOKA_LT_CHECK(cublasLtMatmul(thread_handle(), operation, &alpha, args.w, impl_->a, args.x, impl_->b, &beta, args.y, impl_->d,
                               args.y, impl_->d, &impl_->algorithm, workspace, kGemmWorkspaceBytes, stream),
                "Matmul");
  return Status::ok();
}

}  // namespace loka::cuda
