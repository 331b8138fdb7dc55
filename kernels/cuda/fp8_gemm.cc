// ============================================================================
// kernels/cuda/fp8_gemm.cc — cuBLASLt FP8 GEMM planning and launch.
// ============================================================================
#include "kernels/cuda/fp8_gemm.h"

#include <string>
#include <vector>

#include "kernels/cuda/cublaslt_util.h"
#include "kernels/cuda/device_memory.h"

namespace loka::cuda {
namespace {

std::string describe(const Fp8GemmProblem& p) {
  return "FP8 GEMM M=" + std::to_string(p.m) + " N=" + std::to_string(p.n) + " K=" + std::to_string(p.k);
}

/// A device address for planning: cuBLASLt's heuristic answers "unsupported value" for
/// OUTER_VEC scale modes while the scale pointers are null (cuBLASLt 13.1, H100, 2026-11-26;
/// with any pointer set it offers its kernel). run() sets the real pointers before each call;
/// this one is never read. One small allocation per process.
const float* planning_scale_pointer() {
  static const float* const pointer = [] {
    void* memory = nullptr;
    return device_malloc(&memory, 256) == cudaSuccess ? static_cast<const float*>(memory) : nullptr;
  }();
  return pointer;
}

}  // namespace

struct Fp8Gemm::Impl {
  CublasLtPlan plan;
  std::vector<cublasLtMatmulAlgo_t> algorithms;  ///< best estimate first
};

Fp8Gemm::Fp8Gemm(Fp8GemmProblem problem, GemmOptions options, std::unique_ptr<Impl> impl, int selected)
    : problem_(problem), options_(options), impl_(std::move(impl)), selected_(selected) {}
Fp8Gemm::~Fp8Gemm() = default;

Status Fp8Gemm::can_implement(const Fp8GemmProblem& p) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0) return Status::error("FP8 GEMM needs positive M, N, K");
  if (p.k % 16 != 0) return Status::error("FP8 GEMM needs K a multiple of 16 (K=" + std::to_string(p.k) + ")");
  if (p.n % 16 != 0) return Status::error("FP8 GEMM needs N a multiple of 16 for the output's leading dim (N=" + std::to_string(p.n) + ")");
  if (p.output != DType::kBFloat16 && p.output != DType::kFloat32 && p.output != DType::kFloat8E4M3FN)
    return Status::error("FP8 GEMM output must be BF16, FP32 or E4M3");
  if (p.per_row_x_scale != p.per_channel_w_scale)
    return Status::error("FP8 GEMM vector scales come in pairs on sm_90 (per-row x_scale with per-channel w_scale): "
                         "pass a per-tensor scale as a vector");
  if (p.output == DType::kFloat8E4M3FN && p.per_row_x_scale)
    return Status::error("FP8 GEMM with E4M3 output takes per-tensor scales only");
  if (p.has_addend && (p.output == DType::kFloat8E4M3FN || p.epilogue != GemmEpilogue::kNone))
    return Status::error("FP8 GEMM addend: BF16 or FP32 output without an activation (cuBLASLt adds it before one)");
  if (p.y_row_pitch != 0 && (p.y_row_pitch < p.n || p.y_row_pitch % 16 != 0 || p.has_addend))
    return Status::error("FP8 GEMM output row pitch must be >= N and a multiple of 16 elements, without an addend; got " +
                         std::to_string(p.y_row_pitch) + " for N=" + std::to_string(p.n));
  return Status::ok();
}

Result<std::unique_ptr<Fp8Gemm>> Fp8Gemm::create(const Fp8GemmProblem& p, const GemmOptions& options) {
  LOKA_RETURN_IF_ERROR(can_implement(p));
  auto impl = std::make_unique<Impl>();
  CublasLtPlan& plan = impl->plan;
  const cudaDataType_t out_type = p.output == DType::kBFloat16 ? CUDA_R_16BF
                                   : p.output == DType::kFloat32 ? CUDA_R_32F
                                                                 : CUDA_R_8F_E4M3;
  LOKA_LT_CHECK(cublasLtMatmulDescCreate(&plan.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose), "TRANSA");
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep), "TRANSB");
  // A = W (scale per output channel = per row of op(A)), B = X (per row of X = per column of op(B)).
  const int32_t a_mode = p.per_channel_w_scale ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  const int32_t b_mode = p.per_row_x_scale ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof a_mode), "A_SCALE_MODE");
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof b_mode), "B_SCALE_MODE");
  if (p.per_channel_w_scale) {
    const float* placeholder = planning_scale_pointer();
    if (placeholder == nullptr) return Status::error(describe(p) + ": cannot allocate the planning scale pointer");
    LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder, sizeof placeholder), "A_SCALE_POINTER");
    LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder, sizeof placeholder), "B_SCALE_POINTER");
  }
  const int8_t fast_accum = options.fast_accum ? 1 : 0;
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum, sizeof fast_accum), "FAST_ACCUM");
  LOKA_RETURN_IF_ERROR(set_cublaslt_epilogue(plan.operation, p.epilogue, p.has_bias, options.tanh_gelu));
  if (p.has_bias) {
    // cuBLASLt's FP8 kernels take a BF16/FP16 bias whatever the output type (sm_90).
    const cudaDataType_t bias_type = CUDA_R_16BF;
    LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type), "BIAS_DATA_TYPE");
  }
  // Column-major views: A is W stored [N,K] row-major = K×N column-major (ld K), op(A)=Aᵀ is N×K.
  LOKA_LT_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_8F_E4M3, static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.n), p.k), "layout A");
  LOKA_LT_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_8F_E4M3, static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.m), p.k), "layout B");
  const int64_t ldy = p.y_row_pitch ? p.y_row_pitch : p.n;
  LOKA_LT_CHECK(cublasLtMatrixLayoutCreate(&plan.d, out_type, static_cast<uint64_t>(p.n), static_cast<uint64_t>(p.m), ldy), "layout D");
  if (p.output == DType::kFloat8E4M3FN)  // C may not be FP8 (and is not read: beta = 0, C = null)
    LOKA_LT_CHECK(cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_16BF, static_cast<uint64_t>(p.n), static_cast<uint64_t>(p.m), ldy), "layout C");
  // FP8 operands must be 16-byte aligned on sm_90 anyway: ask for exactly that.
  LOKA_ASSIGN_OR_RETURN(impl->algorithms, cublaslt_algorithms(plan, options.max_algorithms, 16, describe(p)));
  LOKA_ASSIGN_OR_RETURN(const int selected, choose_algorithm(plan, impl->algorithms, options, describe(p)));
  return std::unique_ptr<Fp8Gemm>(new Fp8Gemm(p, options, std::move(impl), selected));
}

int Fp8Gemm::algorithm_count() const { return static_cast<int>(impl_->algorithms.size()); }

Status Fp8Gemm::select_algorithm(int index) {
  if (index < 0 || index >= algorithm_count())
    return Status::error("FP8 GEMM algorithm " + std::to_string(index) + " out of range [0, " +
                         std::to_string(algorithm_count()) + ")");
  selected_ = index;
  return Status::ok();
}

Status Fp8Gemm::run(const Fp8GemmArgs& args, void* workspace, cudaStream_t stream) const {
  return run_algorithm(selected_, args, workspace, stream);
}

Status Fp8Gemm::run_algorithm(int index, const Fp8GemmArgs& args, void* workspace, cudaStream_t stream) const {
  if (index < 0 || index >= algorithm_count())
    return Status::error("FP8 GEMM algorithm " + std::to_string(index) + " out of range");
  cublasLtMatmulDesc_t operation = impl_->plan.operation;
  // Scale and bias pointers are attributes of the descriptor; set per call (cheap, host-side).
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &args.w_scale, sizeof args.w_scale), "A_SCALE_POINTER");
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &args.x_scale, sizeof args.x_scale), "B_SCALE_POINTER");
  if (problem_.has_bias)
    LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &args.bias, sizeof args.bias), "BIAS_POINTER");
  const bool fp8_output = problem_.output == DType::kFloat8E4M3FN;
  if (fp8_output) {
    if (args.y_scale_inverse == nullptr) return Status::error(describe(problem_) + ": E4M3 output needs y_scale_inverse");
    LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &args.y_scale_inverse,
                                                 sizeof args.y_scale_inverse), "D_SCALE_POINTER");
    LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &args.amax, sizeof args.amax),
                  "AMAX_D_POINTER");
  }
  const float alpha = 1.0f, beta = problem_.has_addend ? 1.0f : 0.0f;
  const CublasLtPlan& plan = impl_->plan;
  if (problem_.has_addend && args.addend == nullptr) return Status::error(describe(problem_) + ": the addend is missing");
  // C: the addend (beta = 1), else never read (beta = 0; an FP8 D may not alias a 16-bit C).
  const void* addend = problem_.has_addend ? args.addend : (fp8_output ? nullptr : args.y);
  LOKA_LT_CHECK(cublasLtMatmul(cublaslt_thread_handle(), operation, &alpha, args.w, plan.a, args.x, plan.b, &beta, addend,
                               plan.c_layout(), args.y, plan.d, &impl_->algorithms[static_cast<size_t>(index)], workspace,
                               kGemmWorkspaceBytes, stream),
                "Matmul");
  return Status::ok();
}

}  // namespace loka::cuda
