// ============================================================================
// kernels/cuda/gemm.cc — cuBLASLt FP32/BF16 GEMM planning and launch.
// ============================================================================
#include "kernels/cuda/gemm.h"

#include <string>
#include <vector>

#include "kernels/cuda/cublaslt_util.h"
#include "kernels/cuda/elementwise.h"

namespace loka::cuda {
namespace {

cudaDataType_t cuda_type(DType dtype) { return dtype == DType::kBFloat16 ? CUDA_R_16BF : CUDA_R_32F; }


std::string describe(const GemmProblem& p) {
  return std::string(dtype_name(p.input)) + " GEMM M=" + std::to_string(p.m) + " N=" + std::to_string(p.n) +
         " K=" + std::to_string(p.k) + (p.batch > 1 ? " batch=" + std::to_string(p.batch) : "");
}

/// A column-major rows×cols layout with leading dim `ld`, strided over `batch`
/// (stride 0 when `broadcast`: every batch reads the same matrix).
Status make_layout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                   int64_t batch, bool broadcast = false) {
  LOKA_LT_CHECK(cublasLtMatrixLayoutCreate(layout, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
                "MatrixLayoutCreate");
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    const int64_t stride = broadcast ? 0 : rows * cols;
    LOKA_LT_CHECK(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                  "BATCH_COUNT");
    LOKA_LT_CHECK(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                   sizeof stride),
                  "STRIDED_BATCH_OFFSET");
  }
  return Status::ok();
}

bool aligned_to(const void* pointer, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(pointer) % bytes == 0; }
bool aligned16(const void* pointer) { return aligned_to(pointer, 16); }

/// cuBLASLt's fallback algorithms still need 4-byte operands (measured on an H100: BF16 at
/// 2-byte alignment is "not supported" at run time although the heuristic offers an algorithm).
constexpr uint32_t kMinimumAlignment = 4;

}  // namespace

struct Gemm::Impl {
  CublasLtPlan plan;
  std::vector<cublasLtMatmulAlgo_t> algorithms;  ///< for 16-byte aligned operands, best first
  cublasLtMatmulAlgo_t unaligned{};               ///< for operands aligned to their element size only
  bool gelu_pass = false;                         ///< exact GELU applied after the GEMM (not in its epilogue)
};

Gemm::Gemm(GemmProblem problem, std::unique_ptr<Impl> impl, int selected)
    : problem_(problem), impl_(std::move(impl)), selected_(selected) {}
Gemm::~Gemm() = default;

Status Gemm::can_implement(const GemmProblem& p) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0 || p.batch <= 0)
    return Status::error("GEMM needs positive M, N, K and batch, got " + describe(p));
  if (p.input != DType::kFloat32 && p.input != DType::kBFloat16)
    return Status::error("GEMM inputs must be FLOAT or BFLOAT16, got " + std::string(dtype_name(p.input)));
  if (p.output != DType::kFloat32 && p.output != DType::kBFloat16)
    return Status::error("GEMM output must be FLOAT or BFLOAT16, got " + std::string(dtype_name(p.output)));
  if (p.input == DType::kFloat32 && p.output != DType::kFloat32)
    return Status::error("an FP32 GEMM writes FP32");
  if (p.batch > INT32_MAX) return Status::error("GEMM batch above 2^31: " + describe(p));
  if (p.has_addend && p.epilogue != GemmEpilogue::kNone)
    return Status::error("a GEMM addend is added before cuBLASLt's activation, not after: no addend with ReLU/GELU");
  if (p.has_addend && p.accumulate) return Status::error("a GEMM accumulates into Y or adds an addend, not both");
  if (p.y_row_pitch != 0 &&
      (p.y_row_pitch < p.n || p.batch != 1 || p.has_addend || p.accumulate || p.epilogue == GemmEpilogue::kGelu))
    return Status::error("a GEMM output row pitch needs pitch >= N, batch 1, no addend or accumulation and no GELU, got pitch " +
                         std::to_string(p.y_row_pitch) + " for " + describe(p));
  return Status::ok();
}

Result<std::unique_ptr<Gemm>> Gemm::create(const GemmProblem& p, const GemmOptions& options) {
  LOKA_RETURN_IF_ERROR(can_implement(p));
  auto impl = std::make_unique<Impl>();
  CublasLtPlan& plan = impl->plan;
  const cublasComputeType_t compute =
      options.tf32 && p.input == DType::kFloat32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  LOKA_LT_CHECK(cublasLtMatmulDescCreate(&plan.operation, compute, CUDA_R_32F), "MatmulDescCreate");
  const cublasOperation_t op_a = p.transpose_w ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a), "TRANSA");
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b), "TRANSB");
  // cuBLASLt's GELU epilogue is the tanh approximation (measured on an H100: 4.7e-4 from
  // 0.5·x·(1 + erf(x/√2)) on [-4, 4]); LoKA's gelu is exact, so it runs as a pass of its own
  // unless the candidate asks for the approximation (options.tanh_gelu).
  impl->gelu_pass = p.epilogue == GemmEpilogue::kGelu && !options.tanh_gelu;
  const GemmEpilogue fused = impl->gelu_pass ? GemmEpilogue::kNone : p.epilogue;
  LOKA_RETURN_IF_ERROR(set_cublaslt_epilogue(plan.operation, fused, p.has_bias, options.tanh_gelu));
  if (p.has_bias) {
    const cudaDataType_t bias_type = cuda_type(p.output);
    LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                 sizeof bias_type),
                  "BIAS_DATA_TYPE");
  }
  // Column-major views of row-major storage: W [K,N] is N×K (ld N); W [N,K] is K×N (ld K), read transposed;
  // X [M,K] is K×M (ld K); Y [M,N] is N×M (ld N, or the row pitch).
  const cudaDataType_t in_type = cuda_type(p.input);
  if (p.transpose_w)
    LOKA_RETURN_IF_ERROR(make_layout(&plan.a, in_type, p.k, p.n, p.k, p.batch));
  else
    LOKA_RETURN_IF_ERROR(make_layout(&plan.a, in_type, p.n, p.k, p.n, p.batch));
  LOKA_RETURN_IF_ERROR(make_layout(&plan.b, in_type, p.k, p.m, p.k, p.batch, p.broadcast_x));
  LOKA_RETURN_IF_ERROR(make_layout(&plan.d, cuda_type(p.output), p.n, p.m, p.y_row_pitch ? p.y_row_pitch : p.n, p.batch));

  LOKA_ASSIGN_OR_RETURN(impl->algorithms, cublaslt_algorithms(plan, options.max_algorithms, 16, describe(p)));
  LOKA_ASSIGN_OR_RETURN(const std::vector<cublasLtMatmulAlgo_t> unaligned,
                        cublaslt_algorithms(plan, 1, kMinimumAlignment, describe(p) + " (unaligned)"));
  impl->unaligned = unaligned.front();
  LOKA_ASSIGN_OR_RETURN(const int selected, choose_algorithm(plan, impl->algorithms, options, describe(p)));
  return std::unique_ptr<Gemm>(new Gemm(p, std::move(impl), selected));
}

int Gemm::algorithm_count() const { return static_cast<int>(impl_->algorithms.size()); }

Status Gemm::select_algorithm(int index) {
  if (index < 0 || index >= algorithm_count())
    return Status::error("GEMM algorithm " + std::to_string(index) + " out of range [0, " +
                         std::to_string(algorithm_count()) + ")");
  selected_ = index;
  return Status::ok();
}

Status Gemm::run(const GemmArgs& args, void* workspace, cudaStream_t stream) const {
  return run_algorithm(selected_, args, workspace, stream);
}

Status Gemm::run_algorithm(int index, const GemmArgs& args, void* workspace, cudaStream_t stream) const {
  if (index < 0 || index >= algorithm_count())
    return Status::error("GEMM algorithm " + std::to_string(index) + " out of range");
  const CublasLtPlan& plan = impl_->plan;
  if (problem_.has_bias) {
    // The bias pointer is a descriptor attribute; Sessions own their ops, so no other thread reads it meanwhile.
    LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &args.bias,
                                                 sizeof args.bias),
                  "BIAS_POINTER");
  }
  // An accumulating GEMM reads Y as C (cuBLASLt computes in place when C and D are the same matrix).
  const void* addend = problem_.has_addend ? args.addend : problem_.accumulate ? args.y : nullptr;
  if (problem_.has_addend && addend == nullptr) return Status::error(describe(problem_) + ": the addend is missing");
  for (const void* pointer : {args.x, args.w, static_cast<const void*>(args.y), problem_.has_bias ? args.bias : nullptr, addend})
    if (pointer != nullptr && !aligned_to(pointer, kMinimumAlignment))
      return Status::error(describe(problem_) + ": operands must be 4-byte aligned, got an address ending in " +
                           std::to_string(reinterpret_cast<uintptr_t>(pointer) % 16) + " mod 16");
  const bool aligned = aligned16(args.x) && aligned16(args.w) && aligned16(args.y) &&
                       (!problem_.has_bias || aligned16(args.bias)) && (addend == nullptr || aligned16(addend));
  const cublasLtMatmulAlgo_t* algorithm = aligned ? &impl_->algorithms[static_cast<size_t>(index)] : &impl_->unaligned;
  const float alpha = 1.0f, beta = addend ? 1.0f : 0.0f;
  LOKA_LT_CHECK(cublasLtMatmul(cublaslt_thread_handle(), plan.operation, &alpha, args.w, plan.a, args.x, plan.b, &beta,
                               addend ? addend : args.y, plan.d, args.y, plan.d, algorithm, workspace,
                               kGemmWorkspaceBytes, stream),
                "Matmul");
  if (!impl_->gelu_pass) return Status::ok();
  return launch_unary(UnaryOp::kGelu, args.y, problem_.output, args.y, problem_.output,
                      problem_.m * problem_.n * problem_.batch, stream);
}

}  // namespace loka::cuda
